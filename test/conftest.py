"""Shared test set-up: loopback-only networking, offscreen rendering, isolated memory and state directories."""

import os

# MuJoCo renders offscreen; no display exists on CI machines.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
# DDS (if a ROS test runs at all) stays on this machine: Jazzy's discovery range, Humble's older switch.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
if os.environ.get("ROS_DISTRO") == "humble":
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")

import signal

import pytest

from rpent.record.values import utf8_text

# A test run started as a script's background job (`bash .ci/run &`) inherits SIGINT ignored, and so would
# every process a test starts: a Ctrl-C a test sends would then do nothing. A handler here (exec resets it to
# the default in each child) makes every test's processes start as from a terminal, however pytest started.
# Tests of the other start say so themselves (test/cli/cli_support.py: sigint_ignored).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # pytest-xdist sends each report to the controller as UTF-8: a captured log line with a lone surrogate
    # (the fuzz tests' tool errors and tracebacks; run.log and consoles escape them too) would end its worker.
    report = (yield).get_result()
    report.sections = [(title, utf8_text(text)) for title, text in report.sections]


# The ToolkitAPI cases live in a helper module: their failures show the values compared, as a test's do.
pytest.register_assert_rewrite("toolkit_conformance")


@pytest.fixture(scope="session", autouse=True)
def _isolated_state_of_shared_fixtures(tmp_path_factory):
    # Module-scoped fixtures (a launch shared by a module's tests) start before any function-scoped one:
    # they too must never touch the developer's robot memory or latched stops.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RPENT_MEMORY_DIR", str(tmp_path_factory.mktemp("session-memory")))
        patch.setenv("RPENT_STATE_DIR", str(tmp_path_factory.mktemp("session-state")))
        yield


@pytest.fixture(autouse=True)
def _isolated_memory(tmp_path_factory, monkeypatch):
    # A test must never read or write the developer's real robot memory.
    monkeypatch.setenv("RPENT_MEMORY_DIR", str(tmp_path_factory.mktemp("memory")))
    # Nor the robots' latched stops (rpent.tools.stop_latch): each test's processes keep their own.
    monkeypatch.setenv("RPENT_STATE_DIR", str(tmp_path_factory.mktemp("state")))
