"""How a Franka deployment is configured, started (real arms or franky-sim) and turned into a toolkit.

One module serves the single-arm robot `franka` and, through `DualFrankaSpec` in robots/dual_franka,
the two-arm robot: they differ only in the default config file, the toolkit class and the prompts.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robots.franka.config import CONFIG_DIR, FrankaConfig, load_franka_config
from robots.franka.prompt_bundle import PROMPT_BUNDLE
from robots.franka.recording import DEFAULT_HZ as DEFAULT_RECORD_HZ
from robots.franka.tool_bounds import envelope_tools
from robots.franka.toolkit import FrankaToolkit
from rpent.loopback import loopback_hosts
from rpent.robot import (
    ConfigError,
    Dashboard,
    FrameChannel,
    RobotSpec,
    RunConfig,
    RuntimeComponent,
    TaskField,
    memory_for,
)
from rpent.robot.components import RuntimeNodeComponent
from rpent.runtime.arm import RuntimeFault
from rpent.tools import Tool, Toolkit
from rpent.tools.events import DashboardEventSink


class FrankaSpec(RobotSpec):
    """The Franka robot as `rpent` knows it: its flags, how its deployment is read and how it is started.

    Everything deployment-specific comes from data: the deployment YAML (`--config`: arms and their FCI
    hosts, cameras, the safety file, the VLA endpoint) and the safety envelope it names (`--safety-file`),
    read and checked by `deployment()` before anything moves; the tool ranges a model sees come from
    that same envelope (`list_tools`). `init_runtime` starts the arms, grippers and cameras in this
    process (real ones, or franky-sim with rendered cameras under `--sim`), `runtime_nodes` says
    which of them run as ROS nodes instead, and `make_toolkit` wraps the runtime in a FrankaToolkit.
    DualFrankaSpec (robots/dual_franka) is this class with another default config, toolkit and prompts.
    """

    name = "franka"
    prompts = PROMPT_BUNDLE
    default_task = "Pick up the red cube and lift it 10 cm above the table."
    toolkit_class: type[Toolkit] = FrankaToolkit
    default_config = CONFIG_DIR / "franka.yaml"
    dashboard = Dashboard(
        task_command="Start task",
        task_fields=(TaskField("task", "Task", "text", default="Pick up the red cube and lift it 10 cm above the table."),),
        components=(RuntimeComponent("arms", "Arms and grippers", shared=True), RuntimeComponent("cameras", "Cameras", shared=True)),
        # One channel per camera the simulated scene has (robots.franka.toolkit.SIM_IMAGE_ORDER).
        frame_channels=(FrameChannel("front", "Front camera", max_fps=4.0), FrameChannel("top", "Top camera", max_fps=2.0),
                        FrameChannel("wrist", "Wrist camera", max_fps=4.0)),
    )

    def list_tools(self, args: argparse.Namespace | None = None) -> list[Tool]:
        """The tools as a run offers them: their ranges from the safety envelope of --config/--safety-file."""
        franka = self.deployment(args if args is not None else argparse.Namespace())
        safety = franka.safety()
        limits = {arm.name: safety.limits_for(arm.name) for arm in franka.arms}
        return Toolkit(tools=envelope_tools(self.toolkit_class.tools, limits)).list_tools()

    def add_cli_args(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("franka")
        group.add_argument("--sim", action="store_true", help="start franky-sim in this process (loopback 127.0.0.x) instead of real arms")
        group.add_argument("--sim-seed", type=int, default=None, metavar="N",
                           help="with --sim: place the objects at random reachable positions and yaws, the same for the "
                                "same N (default: the fixed scene)")
        group.add_argument("--sim-hosts", metavar="ADDRESSES",
                           help="with --sim: the loopback addresses franky-sim may bind, one per arm, busy ones skipped, "
                                "e.g. 127.0.0.140-169 (default 127.0.0.1-254; rpent eval gives each concurrent episode its own)")
        group.add_argument("--config", default=str(self.default_config),
                           help=f"deployment YAML: arms (FCI hosts), cameras, safety file (default {self.default_config.name})")
        group.add_argument("--safety-file", help="safety envelope YAML (default: the one the deployment YAML names)")
        group.add_argument("--approve-motions", action="store_true",
                           help="every motion waits for the operator's approval (dashboard, or y/n on this terminal)")
        group.add_argument("--video-fps", type=float, default=5.0,
                           help="frames per second of episode.mp4 during motions, every camera tiled and labelled "
                                "in each frame (0: none; default 5)")
        group.add_argument("--record-hz", type=float, default=DEFAULT_RECORD_HZ,
                           help="samples per second of the record's stream while the robot acts: every arm's state "
                                "and action and every camera's frame, for `rpent export lerobot` (0: none; default "
                                f"{DEFAULT_RECORD_HZ:g}, DROID's rate)")
        group.add_argument("--target-object", default="cube", help="sim object whose lift counts as solved (default cube)")
        group.add_argument("--vla-endpoint", metavar="ws://HOST:PORT",
                           help="openpi policy server (serve_policy.py --env=DROID) for run_policy "
                                "(default: vla_endpoint of the deployment YAML; none: no policy)")

    def deployment(self, args: argparse.Namespace) -> FrankaConfig:
        """The deployment YAML (--config) with --safety-file and --approve-motions applied, its safety file read."""
        path = Path(getattr(args, "config", None) or self.default_config)
        if not path.is_file():
            raise ConfigError(f"--config: no such file {path}")
        try:
            franka = load_franka_config(path)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"--config: {exc}") from None
        update: dict[str, Any] = {}
        safety_file = getattr(args, "safety_file", None)
        if safety_file:
            if not Path(safety_file).is_file():
                raise ConfigError(f"--safety-file: no such file {safety_file}")
            update["safety_file"] = str(Path(safety_file).resolve())
        if getattr(args, "approve_motions", False):
            update["require_approval"] = True
        vla_endpoint = getattr(args, "vla_endpoint", None)
        if vla_endpoint:
            try:
                update["vla_endpoint"] = FrankaConfig.websocket_endpoint(vla_endpoint)
            except ValueError as exc:
                raise ConfigError(f"--vla-endpoint: {exc}") from None
        franka = franka.model_copy(update=update)
        try:
            franka.safety()  # validates the file before anything starts
        except (ValueError, OSError) as exc:
            raise ConfigError(f"--safety-file: {exc}") from None
        return franka

    def parse_config(self, args: argparse.Namespace) -> RunConfig:
        franka = self.deployment(args)
        require_approval = franka.safety().default.require_approval  # init_runtime needs it
        video_fps = getattr(args, "video_fps", 5.0)
        if not 0 <= video_fps <= 30:
            raise ConfigError(f"--video-fps: must be between 0 and 30, got {video_fps}")
        record_hz = getattr(args, "record_hz", DEFAULT_RECORD_HZ)
        if not 0 <= record_hz <= 30:
            raise ConfigError(f"--record-hz: must be between 0 and 30, got {record_hz}")
        sim, sim_seed = bool(getattr(args, "sim", False)), getattr(args, "sim_seed", None)
        if sim_seed is not None and (isinstance(sim_seed, bool) or not isinstance(sim_seed, int) or sim_seed < 0):
            raise ConfigError(f"--sim-seed: must be an integer >= 0, got {sim_seed!r}")
        if sim_seed is not None and not sim:
            raise ConfigError("--sim-seed: only with --sim (real arms have no random scene)")
        sim_hosts = getattr(args, "sim_hosts", None)
        if sim_hosts is not None:
            if not sim:
                raise ConfigError("--sim-hosts: only with --sim (real arms are at the hosts of --config)")
            try:
                sim_hosts = loopback_hosts(sim_hosts, "--sim-hosts")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        config = self.base_config(args, arms=", ".join(a.name for a in franka.arms))
        config.options.update(
            franka=franka, sim=sim, sim_seed=sim_seed, sim_hosts=sim_hosts, video_fps=video_fps, record_hz=record_hz,
            require_approval=require_approval,
            target_object=getattr(args, "target_object", "cube"),
        )
        return config

    def init_runtime(
        self, config: RunConfig, *, selection: Sequence[str] | None = None, events: DashboardEventSink
    ) -> dict[str, Any]:
        from robots.franka.runtime import build_runtime

        arms, cameras = self.selects(selection, "arms"), self.selects(selection, "cameras")
        if cameras and not arms:
            raise ConfigError("selection: the franka cameras need the arms (their poses come from the arms' joints); "
                              "select 'arms' too")
        if not arms:
            return {}
        if not cameras and not config.options["sim"]:
            raise ConfigError("selection: real franka arms start with their cameras; select 'cameras' too")
        approval = getattr(events, "approval_channel", None)
        franka = config.options["franka"]
        if approval is None and config.options["require_approval"]:
            from robots.franka.approval import CliApprovalChannel

            approval = CliApprovalChannel()
        try:
            runtime = build_runtime(franka, sim=config.options["sim"], sim_seed=config.options.get("sim_seed"),
                                    sim_cameras=cameras, approval=approval, sim_hosts=config.options.get("sim_hosts"))
        except RuntimeFault as exc:
            if config.options["sim"]:
                raise
            # The usual first-hour mistake: the README's commands use the simulator, this one did not.
            raise RuntimeFault(f"{exc}; for the simulator, add --sim") from exc
        runtime.video_fps = config.options["video_fps"]
        from robots.franka.scene_reset import scene_reset_for
        from rpent.robot.scene_reset import SCENE_RESET_KEY

        return {"runtime": runtime, "frame_sources": {cam.name: cam.capture for cam in runtime.cameras},
                SCENE_RESET_KEY: scene_reset_for(runtime)}

    # Runtime nodes (rpent_ros, runtime_mode:=ros): which parts run where, as data.
    def runtime_nodes(self, args: argparse.Namespace) -> list[RuntimeNodeComponent]:
        from robots.franka.components import runtime_nodes

        return runtime_nodes(self.deployment(args), args, Path(getattr(args, "config", None) or self.default_config))

    def runtime_from_nodes(self, config: RunConfig, parts: Sequence[tuple[RuntimeNodeComponent, Any]], *,
                           events: DashboardEventSink) -> dict[str, Any]:
        from robots.franka.components import runtime_from_nodes

        return runtime_from_nodes(config, parts, approval=getattr(events, "approval_channel", None))

    def stop_runtime(self, runtime_kwargs: dict[str, Any]) -> None:
        runtime = runtime_kwargs.get("runtime")
        if runtime is not None:
            runtime.stop_all()
            runtime.close()

    def add_calibrate_args(self, parser: argparse.ArgumentParser) -> None:
        from robots.franka.calibration.cli import add_calibrate_args

        add_calibrate_args(parser, self.default_config)

    def calibrate(self, args: argparse.Namespace) -> int:
        from robots.franka.calibration.cli import run_calibrate  # OpenCV and SciPy load only to calibrate

        return run_calibrate(args, self.deployment(args))

    def make_toolkit(self, *, runtime_kwargs: dict[str, Any], dashboard_events: DashboardEventSink | None, config: RunConfig) -> Toolkit:
        return self.toolkit_class(
            robot=runtime_kwargs["runtime"],
            memory=memory_for(config, self.name),
            output_dir=config.output_dir,
            dashboard_events=dashboard_events,
            target_object=config.options.get("target_object", "cube"),
            record_hz=config.options.get("record_hz", 0.0),
            task=config.task,
            exterior_camera=config.options["franka"].policy.exterior_camera if "franka" in config.options else None,
        )


def get_robot_spec() -> FrankaSpec:
    return FrankaSpec()


def get_toolkit(*, runtime_kwargs: dict[str, Any], dashboard_events: DashboardEventSink | None, config: RunConfig) -> Toolkit:
    return get_robot_spec().make_toolkit(runtime_kwargs=runtime_kwargs, dashboard_events=dashboard_events, config=config)
