"""A robot package written only against the Core interfaces runs under the dashboard unchanged.

The package (written to a temporary folder, as a third party would ship it) imports nothing but the
interface names: rpent.robot (RobotSpec, PromptBundle, Dashboard, RuntimeComponent), rpent.tools
(tool, readonly, ToolContext, Toolkit), rpent.tools.finish (the finish tool) and rpent.tools.common_tools;
it has the files the interface lists (robot_spec.py, tools.py, toolkit.py, prompt_bundle.py).
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from rpent.cli.main import build_parser
from rpent.dashboard.forms import TaskFormError
from rpent.dashboard.session import DashboardSession

pytestmark = pytest.mark.timeout(60)

PACKAGE = {
    "__init__.py": "from acme_counter.robot_spec import get_robot_spec, get_toolkit\n",
    "prompt_bundle.py": """
        from rpent.robot import PromptBundle, template

        PROMPT_BUNDLE = PromptBundle(template("You drive the $robot."), template("$task"))
    """,
    "tools.py": """
        from typing import Any

        from rpent.tools import ToolContext, readonly, tool
        from rpent.tools.finish import make_finish_tool


        @tool
        def bump(*, ctx: ToolContext[Any]) -> dict[str, Any]:
            \"\"\"Add one to the counter.\"\"\"
            ctx.robot["counter"].append(ctx.robot["sensor"])
            return {"count": len(ctx.robot["counter"])}


        @tool
        @readonly
        def read_count(*, ctx: ToolContext[Any]) -> dict[str, Any]:
            \"\"\"Read the counter.\"\"\"
            return {"count": len(ctx.robot["counter"])}


        finish = make_finish_tool()
        ACME_TOOLS = [bump, read_count, finish]
    """,
    "toolkit.py": """
        from acme_counter.tools import ACME_TOOLS
        from rpent.tools import Toolkit


        class AcmeToolkit(Toolkit):
            tools = ACME_TOOLS

            def solved(self):
                return len(self.robot["counter"]) >= 2
    """,
    "robot_spec.py": """
        import itertools

        from acme_counter.prompt_bundle import PROMPT_BUNDLE
        from acme_counter.toolkit import AcmeToolkit
        from rpent.robot import Dashboard, RobotSpec, RuntimeComponent, TaskField

        STARTED = []  # (component, number): what init_runtime really started
        _numbers = itertools.count(1)


        class AcmeSpec(RobotSpec):
            name = "acme_counter"
            prompts = PROMPT_BUNDLE
            default_task = "Count to two."
            toolkit_class = AcmeToolkit
            dashboard = Dashboard(
                task_fields=(TaskField("task", "Task", "text", default="Count to two."),),
                components=(RuntimeComponent("counter", "Counter", shared=True),
                            RuntimeComponent("sensor", "Sensor", shared=False)),
            )

            def init_runtime(self, config, *, selection=None, events):
                runtime = {}
                if self.selects(selection, "counter"):
                    runtime["counter"] = []
                    STARTED.append(("counter", next(_numbers)))
                if self.selects(selection, "sensor"):
                    runtime["sensor"] = next(_numbers)
                    STARTED.append(("sensor", runtime["sensor"]))
                return runtime


        def get_robot_spec():
            return AcmeSpec()


        def get_toolkit(*, runtime_kwargs, dashboard_events, config):
            return AcmeToolkit(robot=runtime_kwargs, output_dir=config.output_dir, dashboard_events=dashboard_events)
    """,
}


@pytest.fixture
def acme(tmp_path: Path) -> Iterator[ModuleType]:
    package = tmp_path / "site" / "acme_counter"
    package.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    sys.path.insert(0, str(package.parent))
    try:
        yield importlib.import_module("acme_counter")
    finally:
        sys.path.remove(str(package.parent))
        for name in [m for m in sys.modules if m == "acme_counter" or m.startswith("acme_counter.")]:
            del sys.modules[name]


def ended(state: dict) -> bool:
    return bool(state["task"]) and state["task"]["status"] not in ("running", "aborting")


def test_a_package_written_to_the_interface_runs_two_dashboard_tasks(acme: ModuleType, tmp_path: Path) -> None:
    spec = acme.get_robot_spec()
    recipe = tmp_path / "count.jsonl"
    recipe.write_text("\n".join(json.dumps(step) for step in [
        {"tool": "bump", "arguments": {}}, {"tool": "bump", "arguments": {}}, {"tool": "read_count", "arguments": {}},
        {"tool": "finish", "arguments": {"status": "success", "summary": "counted"}}]) + "\n")
    args = build_parser(spec).parse_args(["run", "--robot", "acme_counter", "--output-dir", str(tmp_path / "runs"),
                                          "--planner", "replay", "--recipe", str(recipe),
                                          "--memory-dir", str(tmp_path / "memory")])
    session = DashboardSession(args=args, spec=spec, robot=acme, output_root=tmp_path / "runs")
    session.start()
    try:
        with pytest.raises(TaskFormError, match=r"^reset: robot acme_counter offers no scene reset$"):
            session.start_task({}, reset=True)  # it declares none: nothing to tick on its form
        for n in (1, 2):
            session.start_task({"task": f"Count, round {n}."})
            state = session.sink.wait_for(lambda s, n=n: ended(s) and s["task"]["id"] == f"task-00{n}", 30)
            assert state is not None, session.snapshot()
            result = json.loads((tmp_path / "runs" / f"task-00{n}" / "result.json").read_text())
            assert result["finish_result"] == {"status": "success", "summary": "counted",
                                               "operator_aborted": False, "operator_notes": []}
    finally:
        session.stop()
    started = importlib.import_module("acme_counter.robot_spec").STARTED
    assert [name for name, _ in started] == ["counter", "sensor", "sensor"]  # shared once, unique per task
    assert result["solved"] is True
    tool_names = [t.name for t in spec.list_tools()]
    from rpent.tools.common_tools import COMMON_TOOLS

    assert tool_names == ["bump", "read_count", "finish", *(t.name for t in COMMON_TOOLS)]
