"""How the LIBERO robot is configured, started (env_server, optional vla_server) and turned into a toolkit."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robots.libero.arm import LiberoRobot
from robots.libero.env_server import LiberoEnvClient
from robots.libero.openpi_options import OpenpiOptions, add_openpi_args, openpi_options
from robots.libero.prompt_bundle import PROMPT_BUNDLE
from robots.libero.sim import SUITES
from robots.libero.toolkit import MODES, LiberoToolkit, Mode
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
from rpent.rpc import BaseVLAClient, Endpoint, RpcError, ServerProcess, endpoint_arg
from rpent.rpc.transport.vla_endpoint import VlaEndpoint, WebsocketEndpoint, vla_endpoint_arg
from rpent.runtime.env import Policy
from rpent.tools.events import DashboardEventSink

ENV_SERVER_MODULE = "robots.libero.env_server"
#: Creating a LIBERO env takes 10-13 s on an idle machine; loaded CI machines need headroom.
ENV_READY_TIMEOUT_S = 240.0


class LiberoSpec(RobotSpec):
    name = "libero"
    prompts = PROMPT_BUNDLE
    toolkit_class = LiberoToolkit
    dashboard = Dashboard(
        task_command="Start episode",
        task_fields=(
            TaskField("suite", "Suite", "choice", default="libero_object", choices=SUITES),
            TaskField("task_id", "Task id", "int", default=0),
            TaskField("init_state", "Init state", "int", default=0),
        ),
        components=(RuntimeComponent("env", "LIBERO env server", shared=False),),
        frame_channels=(FrameChannel("agentview", "Agent view", max_fps=5.0),),
    )

    def add_cli_args(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("LIBERO")
        group.add_argument(
            "--suite", default="libero_object", help=f"one of {', '.join(SUITES)} (default libero_object)"
        )
        group.add_argument("--task-id", type=int, default=0, help="task index in the suite (default 0)")
        group.add_argument("--init-state", type=int, default=0, help="initial scene layout index (default 0)")
        group.add_argument("--seed", type=int, default=0, help="simulator seed (default 0)")
        group.add_argument("--camera-size", type=int, default=256, help="camera image size in pixels (default 256)")
        group.add_argument(
            "--env-endpoint",
            type=endpoint_arg,
            default=None,
            help="attach to a running env_server ([http|socket://]host:port) instead of starting one",
        )
        group.add_argument(
            "--vla-endpoint",
            type=vla_endpoint_arg,
            default=None,
            help="VLA server used by the run_vla tool: [http|socket]://host:port for an rpent.rpc vla_server, "
            "ws://host:port or wss:// for an openpi policy server (without it, run_vla is refused)",
        )
        add_openpi_args(group)
        group.add_argument("--mode", default="normal", help="normal (one episode) or attempts (several, with resets)")
        group.add_argument("--attempts-per-session", type=int, default=3, help="episodes allowed in attempts mode")
        group.add_argument(
            "--state-output-dir", type=Path, default=None, help="save the sim state after every motion here"
        )

    def parse_config(self, args: argparse.Namespace) -> RunConfig:
        from robots.libero.sim import task_ref

        suite = getattr(args, "suite", "libero_object")
        if suite not in SUITES:
            raise ConfigError(f"--suite: must be one of {', '.join(SUITES)}, got {suite!r}")
        try:
            ref = task_ref(suite, int(getattr(args, "task_id", 0)))
        except ValueError as exc:
            raise ConfigError(f"--task-id: {exc}") from None
        init_state = int(getattr(args, "init_state", 0))
        if not 0 <= init_state < ref.n_init_states:
            raise ConfigError(f"--init-state: must be from 0 to {ref.n_init_states - 1}, got {init_state}")
        camera_size = int(getattr(args, "camera_size", 256))
        if not 16 <= camera_size <= 1024:
            raise ConfigError(f"--camera-size: must be from 16 to 1024 pixels, got {camera_size}")
        mode = getattr(args, "mode", "normal")
        if mode not in MODES:
            raise ConfigError(f"--mode: must be one of {', '.join(MODES)}, got {mode!r}")
        attempts = int(getattr(args, "attempts_per_session", 3))
        if not 1 <= attempts <= 100:
            raise ConfigError(f"--attempts-per-session: must be from 1 to 100, got {attempts}")
        if not getattr(args, "task", None):
            args.task = ref.language
        config = self.base_config(
            args,
            suite=suite,
            task_id=ref.task_id,
            task_name=ref.name,
            instruction=ref.language,
            mode=mode,
            attempts_per_session=attempts,
        )
        config.options.update(
            suite=suite,
            task_id=ref.task_id,
            init_state=init_state,
            seed=int(getattr(args, "seed", 0)),
            camera_size=camera_size,
            env_endpoint=getattr(args, "env_endpoint", None),
            vla_endpoint=getattr(args, "vla_endpoint", None),
            openpi=openpi_options(args),
            mode=mode,
            attempts_per_session=attempts,
            state_output_dir=getattr(args, "state_output_dir", None),
        )
        return config

    def init_runtime(
        self, config: RunConfig, *, selection: Sequence[str] | None = None, events: DashboardEventSink
    ) -> dict[str, Any]:
        if not self.selects(selection, "env"):
            return {}  # e.g. the dashboard's session start: the env starts with each task
        runtime: dict[str, Any] = {}
        try:
            return self._start(config.options, runtime)
        except BaseException:
            self.stop_runtime(runtime)  # the runner only gets runtime_kwargs back on success
            raise

    def _start(self, opts: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
        endpoint: Endpoint | None = opts.get("env_endpoint")
        if endpoint is None:
            server = ServerProcess(
                ENV_SERVER_MODULE,
                "socket://127.0.0.1:0",
                args=[
                    "--suite",
                    opts["suite"],
                    "--task-id",
                    str(opts["task_id"]),
                    "--init-state",
                    str(opts["init_state"]),
                    "--seed",
                    str(opts["seed"]),
                    "--camera-size",
                    str(opts["camera_size"]),
                ],
                ready_timeout_s=ENV_READY_TIMEOUT_S,
            )
            runtime["env_server"] = server  # stop_runtime stops only what this run started
            endpoint = server.start()
        env = LiberoEnvClient(endpoint)
        runtime["env"] = env
        try:
            info = env.task_info()
        except RpcError as exc:
            raise ConfigError(f"--env-endpoint: no LIBERO env server answers at {endpoint} ({exc})") from None
        if (info["suite"], info["task_id"]) != (opts["suite"], opts["task_id"]):
            raise ConfigError(
                f"--env-endpoint: the server at {endpoint} runs {info['suite']} task {info['task_id']}, "
                f"not {opts['suite']} task {opts['task_id']}"
            )
        vla = opts.get("vla_endpoint")
        policy = connect_policy(vla, opts.get("openpi")) if vla is not None else None
        runtime["policy"] = policy
        robot = LiberoRobot(env, policy=policy)
        robot.reset(init_state=opts["init_state"])  # an attached server may be mid-episode
        runtime["robot"] = robot
        return runtime

    def stop_runtime(self, runtime_kwargs: dict[str, Any]) -> None:
        for key in ("policy", "env"):
            client = runtime_kwargs.get(key)
            if client is not None:
                client.close()
        server = runtime_kwargs.get("env_server")
        if server is not None:
            server.stop()


def get_robot_spec() -> LiberoSpec:
    return LiberoSpec()


def get_toolkit(
    *,
    runtime_kwargs: dict[str, Any],
    dashboard_events: DashboardEventSink | None,
    config: RunConfig,
    mode: Mode | None = None,
    attempts_per_session: int | None = None,
    state_output_dir: str | Path | None = None,
) -> LiberoToolkit:
    opts = config.options
    return LiberoToolkit(
        robot=runtime_kwargs["robot"],
        memory=memory_for(config, "libero"),
        output_dir=config.output_dir,
        dashboard_events=dashboard_events,
        mode=mode or opts.get("mode", "normal"),
        attempts_per_session=attempts_per_session or opts.get("attempts_per_session", 3),
        state_output_dir=state_output_dir if state_output_dir is not None else opts.get("state_output_dir"),
    )


def connect_policy(endpoint: VlaEndpoint, openpi: OpenpiOptions | None = None) -> Policy:
    """The client for --vla-endpoint: openpi's websocket protocol for ws:// and wss://, else rpent.rpc.

    Neither connects here: the first run_vla does, so a policy server may start after the run.
    """
    if isinstance(endpoint, WebsocketEndpoint):
        from robots.libero.openpi_policy import OpenpiLiberoPolicy  # openpi-client only when asked for
        from rpent.rpc.transport.vla_openpi import OpenpiPolicyClient

        options = openpi or OpenpiOptions()
        client = OpenpiPolicyClient(
            endpoint, connect_timeout_s=options.connect_timeout_s, infer_timeout_s=options.infer_timeout_s
        )
        return OpenpiLiberoPolicy(client, options)
    return BaseVLAClient(endpoint)
