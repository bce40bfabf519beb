import sys
from pathlib import Path

# test/ holds shared helper packages (fakes); the stdlib owns the name `test`, so put test/
# itself on the path instead of importing `test.fakes`.
_TEST_DIR = str(Path(__file__).resolve().parents[1])
if _TEST_DIR not in sys.path:
    sys.path.insert(0, _TEST_DIR)

import pytest  # noqa: E402
from agent_cli_cases import make_toolkit  # noqa: E402
from fakes.fixtures import model_server, model_server_process  # noqa: E402,F401


@pytest.fixture
def toolkit(tmp_path: Path):
    """The watched toy robot the agent-CLI planner tests drive (other test files define their own)."""
    kit = make_toolkit(tmp_path)
    yield kit
    kit.close()
