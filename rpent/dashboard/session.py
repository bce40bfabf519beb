"""A dashboard session: shared runtime started once, then many tasks, one at a time.

Each task is a `rpent.runner.task.TaskRun` built from the CLI flags with the task form's values laid
over them, so its record (run.log, steps.jsonl, episode.mp4, result.json, recipe) is the same as
`rpent run` writes. Components marked `shared` in the robot's Dashboard spec start with the
session; the others start before each task and stop after it.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from rpent.dashboard.bus import EventBus
from rpent.dashboard.forms import TaskFormError, validate_fields
from rpent.dashboard.frames import FRAME_SOURCES_KEY, FrameHub
from rpent.dashboard.interaction import OperatorInteraction
from rpent.dashboard.planners import PlannerChoice, default_choice, planner_choices, short_path
from rpent.dashboard.state import DashboardSink, DashboardState, artifact_url
from rpent.record.run_record import RunRecord
from rpent.record.segments import RecordError
from rpent.robot import ConfigError, RobotSpec
from rpent.robot.scene_reset import SCENE_RESET_KEY, SceneReset
from rpent.robot.spec import Dashboard
from rpent.runner.logs import FanOutSink, ProgressSink
from rpent.runner.run import make_planner
from rpent.runner.task import TaskRun
from rpent.tools.stop_latch import robot_latch

log = logging.getLogger("rpent.dashboard")

ARTIFACT_NAMES = ("episode.mp4", "steps.jsonl", "result.json", "transcript.json", "run.log")
_TASK_DIR = re.compile(r"task-(\d{3,})")


class SessionBusy(RuntimeError):
    """A task is already running (one task at a time per session)."""


class SessionEvents(FanOutSink):
    """The event sink robots get from the dashboard: progress log + dashboard, and the operator.

    `interaction` (see rpent.dashboard.interaction.interaction_from) and `approval_channel` (the same
    object, as a `rpent.runtime.arm.ApprovalChannel`) reach the operator through the page.
    """

    def __init__(self, *sinks: Any, interaction: OperatorInteraction) -> None:
        super().__init__(*sinks)
        self.interaction = interaction
        self.approval_channel = interaction


def dashboard_of(spec: RobotSpec) -> Dashboard:
    """The robot's Dashboard spec; ConfigError for a robot that disables dashboard control."""
    if spec.dashboard is None:
        raise ConfigError(f"dashboard: robot {spec.name} declares dashboard=None in its RobotSpec, so it "
                          "offers no dashboard control; run it with `rpent run` instead")
    return spec.dashboard


class DashboardSession:
    """What the web dashboard drives: one robot's shared runtime, started once, and its tasks, one at a time.

    The app (rpent/dashboard/app.py) only translates HTTP into these calls. `start()` starts the
    components the robot's Dashboard spec marks `shared` (an arm that stays up between tasks);
    `start_task(fields, planner=, recipe=, reset=)` checks the task form against the spec's fields
    and the offered planners and recipes (`run_options()`), claims a fresh record under
    `output_root/task-NNN`, and runs a `TaskRun` in a thread of its own, exactly as `rpent run` would
    with those values laid over the command line's flags. While it runs the operator reaches it
    through `send_message`, `add_note`, `abort` (the robot stops, the task ends aborted) and the
    approvals in `interaction`; everything the page shows goes out through `sink` onto `bus`, and
    `snapshot()` is the state a newly opened page starts from. `stop()` ends a running task and the
    shared runtime, once, whatever asked (Ctrl-C, SIGTERM, the server shutting down).
    """

    def __init__(self, *, args: argparse.Namespace, spec: RobotSpec, robot: ModuleType, output_root: Path,
                 bus_capacity: int = 4096) -> None:
        self.args = args
        self.spec = spec
        self.robot = robot
        self.output_root = Path(output_root)
        self.dashboard = dashboard_of(spec)
        self.bus = EventBus(bus_capacity)
        components = [{"name": c.name, "label": c.label, "shared": c.shared} for c in self.dashboard.components]
        self.sink = DashboardSink(self.bus, DashboardState(spec.name, components),
                                  channels=[c.name for c in self.dashboard.frame_channels])
        self.interaction = self.sink.interaction
        # The same progress log `rpent run` writes, plus the dashboard.
        self.events = SessionEvents(ProgressSink(log), self.sink, interaction=self.interaction)
        self.frames = FrameHub({c.name: c for c in self.dashboard.frame_channels},
                               watching=lambda: self.bus.subscribers > 0, on_new_frame=self.bus.poke)
        self._lock = threading.Lock()
        self._task: TaskRun | None = None
        self._task_id: str | None = None
        self._thread: threading.Thread | None = None
        self._abort_reason: str | None = None
        self._running = False
        # Each task writes a record of its own: a used root is refused unless resumed, and a resumed
        # session numbers its tasks after the ones already there, never reusing a folder.
        self._count = _tasks_already_in(self.output_root, resume=bool(getattr(args, "resume", False)))
        self._shared_kwargs: dict[str, Any] = {}
        self._stopped = False
        # The robot's latched stop: the operator's stop and release buttons; each task's toolkit follows it.
        self.stop_latch = robot_latch(spec.name)
        self._latch_seen = lambda event: self.sink.publish("stop_latch", event)  # `rpent stop`, between tasks too
        self.stop_latch.watch(self._latch_seen)
        if self.stop_latch.latched:  # a stop from before this session still holds: the page shows it at once
            self.sink.publish("stop_latch", {"event": "stop", **self.stop_latch.describe()})
        self.planners = planner_choices(args, spec, robot)
        for choice in self.planners:
            if not choice.available:
                log.info("planner %s is not offered: %s", choice.name, choice.reason)

    @property
    def scene_reset(self) -> SceneReset | None:
        reset = self._shared_kwargs.get(SCENE_RESET_KEY)
        return reset if isinstance(reset, SceneReset) else None

    def run_options(self) -> dict[str, Any]:
        """What the page offers besides the robot's fields: planners, recipes, the reset."""
        default = default_choice(self.args, self.planners)
        given = getattr(self.args, "recipe", None)
        recipe = str(Path(given).resolve()) if given else (default.recipes[0] if default and default.recipes else None)
        reset = self.scene_reset
        return {
            "planners": [c.to_dict() for c in self.planners],
            "default_planner": default.name if default else None,
            "default_recipe": recipe,
            "recipe_labels": {r: short_path(r, self.robot) for c in self.planners for r in c.recipes},
            "reset": {"label": reset.label, "default": reset.default} if reset else None,
        }

    # ---- session lifetime ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the shared runtime components; raises ConfigError or the runtime's own error."""
        config = self.spec.parse_config(self._task_args({}, self.output_root / "session"))
        shared = self.dashboard.shared_components
        selection = [c.name for c in shared] if self.dashboard.components else None
        self._components(shared, "starting")
        try:
            self._shared_kwargs = self.spec.init_runtime(config, selection=selection, events=self.events) or {}
        except Exception as exc:
            self._components(shared, "error", f"{type(exc).__name__}: {exc}")
            self.sink.publish("session", {"status": "error", "error": f"{type(exc).__name__}: {exc}"})
            raise
        self._components(shared, "ready")
        self.frames.attach(self._shared_kwargs.get(FRAME_SOURCES_KEY) or {})
        self.sink.publish("session", {"status": "ready"})

    @property
    def stopped(self) -> bool:
        """True once `stop` began: no task starts any more."""
        with self._lock:
            return self._stopped

    def stop(self, timeout_s: float = 60.0, *, reason: str | None = None) -> None:
        """Abort a running task, wait for its record, stop the shared runtime (safe to call twice).

        `reason` (e.g. "interrupted (Ctrl-C)") is the abort reason in the task's record and what the
        page says ended the session.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
        self.sink.publish("session", {"status": "stopping", "reason": reason})
        if thread is not None and thread.is_alive():
            self.abort(reason or "dashboard shutting down")
            thread.join(timeout_s)
        self.frames.stop()
        self.stop_latch.unwatch(self._latch_seen)
        try:
            self.spec.stop_runtime(self._shared_kwargs)
        except Exception:
            log.exception("stopping the shared runtime failed")
        self._components(self.dashboard.shared_components, "stopped")
        self.sink.publish("session", {"status": "stopped", "reason": reason})

    # ---- tasks ----------------------------------------------------------------------------------

    def start_task(self, raw_fields: dict[str, Any], *, planner: Any = None, recipe: Any = None,
                   reset: Any = None) -> str:
        """Validate the form, build config and planner, and start the task; returns its id.

        `planner`/`recipe` choose among `run_options()` (None: the command line's); `reset` runs
        the robot's scene reset first (None: its default). Raises TaskFormError (bad field, with its
        name), SessionBusy, or ConfigError.
        """
        values = validate_fields(self.dashboard.task_fields, raw_fields)
        chosen = self._choose_planner(planner, recipe)
        do_reset = self._choose_reset(reset)
        with self._lock:
            if self._stopped:
                raise SessionBusy("the session is shutting down")
            if self._running:
                raise SessionBusy(f"task {self._task_id} is still running; abort it or wait for it to end")
            self._count += 1
            task_id = f"task-{self._count:03d}"
            args = self._task_args(values, self.output_root / task_id)
            args.planner, args.recipe = chosen
            try:
                config = self.spec.parse_config(args)
                planner = make_planner(args, self.spec)
                record = RunRecord.open(config.output_dir)  # a fresh record per task
            except (ConfigError, RecordError) as exc:
                self._count -= 1
                raise TaskFormError(str(exc)) from None
            if hasattr(planner, "on_text"):  # model planners stream their text to the page
                planner.on_text = lambda text: self.sink.publish("planner_text", {"text": text})
            if hasattr(planner, "on_usage"):  # live counters, for planners that report each turn
                planner.on_usage = lambda turns, usage: self.sink.publish(
                    "counters", {"turns": turns, "tokens": (usage or {}).get("total_tokens")})
            self._task_id, self._task, self._abort_reason, self._running = task_id, None, None, True
            self._thread = threading.Thread(target=self._run_task, args=(task_id, args, config, planner, values, record, do_reset),
                                            name=f"rpent-{task_id}", daemon=True)
            self._thread.start()
        return task_id

    def _choose_planner(self, name: Any, recipe: Any) -> tuple[str, str | None]:
        options = self.run_options()
        if name is None:
            name = options["default_planner"]
        by_name = {c.name: c for c in self.planners}
        if not isinstance(name, str) or name not in by_name:
            raise TaskFormError(f"planner: must be one of {sorted(by_name)}, got {name!r}")
        choice: PlannerChoice = by_name[name]
        if not choice.available:
            raise TaskFormError(f"planner: {name} is not available here ({choice.reason})")
        if name != "replay":
            if recipe not in (None, ""):
                raise TaskFormError(f"recipe: only with the replay planner, not {name}")
            return name, None
        if recipe in (None, ""):
            recipe = options["default_recipe"]
        if recipe not in choice.recipes:
            raise TaskFormError(f"recipe: must be one of the offered recipes {list(choice.recipes)}, got {recipe!r}")
        return name, recipe

    def _choose_reset(self, reset: Any) -> bool:
        hook = self.scene_reset
        if reset is None:
            return bool(hook and hook.default)
        if not isinstance(reset, bool):
            raise TaskFormError(f"reset: must be true or false, got {reset!r}")
        if reset and hook is None:
            raise TaskFormError(f"reset: robot {self.spec.name} offers no scene reset")
        return reset

    def send_message(self, text: str) -> None:
        task = self._running_task()
        task.send_message(text)
        self.sink.publish("operator_message", {"text": text})

    def add_note(self, text: str) -> None:
        task = self._running_task()
        task.add_note(text)
        self.sink.publish("operator_note", {"text": text})

    def abort(self, reason: str = "operator abort") -> bool:
        """Cancel the active tool call (the robot stops) and end the task as aborted; blocks until stopped."""
        with self._lock:
            if not self._running:
                return False
            self._abort_reason = self._abort_reason or reason
            task = self._task
        self.sink.publish("abort_requested", {"reason": reason})
        self.interaction.cancel_all("the task was aborted")  # a motion waiting for approval is denied
        if task is not None:
            return task.abort(reason)
        return True  # the task has not built its TaskRun yet; it will see the reason

    def latch_stop(self, reason: str) -> dict[str, Any]:
        """The operator's stop: every motion of the robot stops and is refused until `release_stop` (a running
        task's toolkit follows the latch within 50 ms; its planner goes on and is told why it is refused)."""
        event = self.stop_latch.trigger("the dashboard", reason)
        self.sink.publish("stop_latch", event)
        return event

    def release_stop(self) -> bool:
        """The operator's release; False when the stop did not hold."""
        event = self.stop_latch.release("the dashboard")
        if event is not None:
            self.sink.publish("stop_latch", event)
        return event is not None

    def wait_task(self, timeout_s: float | None = None) -> bool:
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def snapshot(self) -> dict[str, Any]:
        return self.sink.snapshot()

    def task_dir(self, task_id: str) -> Path | None:
        if not task_id.startswith("task-") or not task_id[5:].isdigit() or int(task_id[5:]) > self._count:
            return None
        return self.output_root / task_id

    # ---- internals ------------------------------------------------------------------------------

    def _running_task(self) -> TaskRun:
        with self._lock:
            task = self._task
            running = self._running
        if task is None or not running:
            raise SessionBusy("no task is running")
        return task

    def _task_args(self, values: dict[str, Any], output_dir: Path) -> argparse.Namespace:
        args = argparse.Namespace(**vars(self.args))
        for name, value in values.items():
            if value is not None:
                setattr(args, name.replace("-", "_"), value)
        args.output_dir = str(output_dir)
        return args

    def _components(self, components: Any, status: str, detail: str = "") -> None:
        for component in components:
            self.sink.publish("component", {"name": component.name, "status": status, "detail": detail})

    def _run_task(self, task_id: str, args: argparse.Namespace, config: Any, planner: Any, values: dict[str, Any],
                  record: RunRecord, reset: bool = False) -> None:
        output_dir = config.output_dir
        run_log = record.run_log()
        self.sink.set_task(task_id, output_dir)
        log.info("%s: planner=%s%s reset=%s", task_id, args.planner,
                 f" recipe={args.recipe}" if args.planner == "replay" else "", "yes" if reset else "no")
        self.sink.publish("task_started", {"task_id": task_id, "fields": values, "planner": args.planner,
                                           "recipe": args.recipe if args.planner == "replay" else None,
                                           "reset": reset, "started": time.time()})
        unique = self.dashboard.unique_components
        unique_kwargs: dict[str, Any] = {}
        summary: dict[str, Any] | None = None
        try:
            if reset:
                self._reset_scene(task_id)
            if unique:
                self._components(unique, "starting")
                unique_kwargs = self.spec.init_runtime(config, selection=[c.name for c in unique], events=self.events) or {}
                self._components(unique, "ready")
                self.frames.attach(unique_kwargs.get(FRAME_SOURCES_KEY) or {})
            task = TaskRun(spec=self.spec, robot=self.robot, config=config, planner=planner,
                           planner_name=args.planner, max_turns=args.max_turns,
                           runtime_kwargs={**self._shared_kwargs, **unique_kwargs}, events=self.events,
                           record=record, dashboard_interaction=self.interaction)
            with self._lock:
                self._task = task
                reason = self._abort_reason
            if reason is not None:
                task.abort(reason)
            summary = task.run()  # a finish that solved() disagrees with is flagged there (summary["disagreement"])
        except Exception as exc:
            log.exception("task %s failed to start", task_id)
            self._components(unique, "error", f"{type(exc).__name__}: {exc}")
            summary = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "output_dir": str(output_dir)}
        finally:
            self.interaction.cancel_all("the task ended")
            if unique:
                self.frames.detach(list((unique_kwargs.get(FRAME_SOURCES_KEY) or {}).keys()))
                try:
                    self.spec.stop_runtime(unique_kwargs)
                except Exception:
                    log.exception("stopping the task's runtime components failed")
                self._components(unique, "stopped")
            run_log.close()
            self.sink.set_task(None)
            with self._lock:  # "ended" on the page and "ready for the next task" happen together
                self.sink.publish("task_ended", {"task_id": task_id, "summary": summary, "ended": time.time(),
                                                 "artifacts": self._artifacts(task_id, output_dir, summary)})
                self._running = False

    def _reset_scene(self, task_id: str) -> None:
        hook = self.scene_reset
        assert hook is not None  # _choose_reset allowed the reset only with a hook
        self.sink.publish("scene_reset", {"status": "running", "label": hook.label})
        started = time.monotonic()
        try:
            self.stop_latch.check()  # a reset moves the arms: not while the stop holds
            done = hook.run()
        except Exception as exc:
            self.sink.publish("scene_reset", {"status": "error", "error": f"{type(exc).__name__}: {exc}"})
            raise RuntimeError(f"scene reset before {task_id} failed: {exc}") from exc
        log.info("%s: scene reset in %.1f s: %s", task_id, time.monotonic() - started, done)
        self.sink.publish("scene_reset", {"status": "done", "detail": done})

    @staticmethod
    def _artifacts(task_id: str, output_dir: Path, summary: dict[str, Any] | None) -> dict[str, str]:
        found: dict[str, str] = {}
        recipe = (summary or {}).get("recipe")
        for name, path in [*((n, output_dir / n) for n in ARTIFACT_NAMES), ("recipe", Path(recipe) if recipe else None)]:
            if path is not None and path.is_file():
                url = artifact_url(task_id, output_dir, path)
                if url:
                    found[name] = url
        return found


def _tasks_already_in(root: Path, *, resume: bool) -> int:
    """The number of the last task folder in a dashboard's `root`; 0 for a new or empty one."""
    if root.exists() and not root.is_dir():
        raise RecordError(f"--output-dir: {root} is a file; the dashboard needs a directory for its task records")
    entries = os.listdir(root) if root.is_dir() else []
    if not entries:
        return 0
    if not resume:
        raise RecordError(f"--output-dir: {root} is not empty; each dashboard session needs a new or empty directory "
                          f"(pass --resume to add tasks after the task-NNN records there)")
    numbers = [int(match[1]) for match in map(_TASK_DIR.fullmatch, entries) if match]
    if not numbers:
        raise RecordError(f"--output-dir: {root} holds no dashboard task records (task-NNN/); "
                          f"--resume only continues a dashboard's directory")
    return max(numbers)
