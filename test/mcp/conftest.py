import sys
from pathlib import Path

# test/ holds shared helper packages (fakes); the stdlib owns the name `test`, so put test/
# itself on the path instead of importing `test.fakes`. (This folder has no __init__.py on
# purpose: as a package named `mcp` it would shadow the MCP SDK.)
_TEST_DIR = str(Path(__file__).resolve().parents[1])
if _TEST_DIR not in sys.path:
    sys.path.insert(0, _TEST_DIR)

from fakes.fixtures import *  # noqa: E402,F403  (model_server and what it needs)
