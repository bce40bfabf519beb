import sys
from pathlib import Path

# test/ holds shared helper packages (fakes); the stdlib owns the name `test`, so put test/ itself on
# the path instead of importing `test.fakes`.
_TEST_DIR = str(Path(__file__).resolve().parents[1])
if _TEST_DIR not in sys.path:
    sys.path.insert(0, _TEST_DIR)
