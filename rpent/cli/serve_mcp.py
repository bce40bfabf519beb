"""`rpent serve-mcp --robot NAME`: a robot's toolkit as an MCP server over stdio or streamable HTTP.

The robot is built exactly as `rpent run` builds it (parse_config, init_runtime, get_toolkit),
and whatever happens the active call is cancelled, the toolkit closed (its record saved) and the
runtime stopped. In stdio mode stdout is the MCP wire: logging goes to stderr only.

A command, so it lives with the other commands: it starts a robot and keeps a run record the way
the runner does, and rpent.mcp (the bridge and its transports, which planners use) stays below
the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rpent.record.run_record import RunRecord
from rpent.robot import ConfigError, RobotNotFound, RobotSpec, load_robot
from rpent.runner.logs import FanOutSink, ProgressSink, setup_console
from rpent.runner.run import Terminated, describe_interruption, exit_code_for
from rpent.tools.stop_latch import robot_latch

log = logging.getLogger("rpent.mcp")  # the server's log lines keep the name they have always had

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2  # and 130 / 143 after SIGINT / SIGTERM, as rpent run

DESCRIPTION = """\
Serve a robot's tools to MCP clients (Claude Code, Codex, RobotAgent, any MCP client).

  rpent serve-mcp --robot toy                          stdio (the client starts this command)
  rpent serve-mcp --robot toy --http --port 8765       streamable HTTP at http://127.0.0.1:8765/mcp

Results carry the JSON text, the paths of saved PNG images and inline image blocks; a failed
call has isError set; an MCP cancellation stops exactly that call.
"""


def add_serve_mcp_arguments(parser: argparse.ArgumentParser, robot_spec: RobotSpec | None = None) -> None:
    parser.add_argument("--robot", required=True, help="robot name (see `rpent robots`)")
    transport = parser.add_argument_group("transport")
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    transport.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    transport.add_argument("--port", type=int, default=8765, help="HTTP port; 0 picks a free one (default 8765)")
    transport.add_argument("--allow-remote", action="store_true",
                           help="allow a non-loopback --host (the server has no authentication: trusted networks only)")
    offer = parser.add_argument_group("what is offered")
    offer.add_argument("--read-image", action="store_true",
                       help="also offer the read_image tool (for clients that cannot open PNG files themselves)")
    offer.add_argument("--no-images", action="store_true",
                       help="send results as text with PNG paths only, without inline image blocks")
    offer.add_argument("--name", help="server name shown to clients (default rpent-<robot>)")
    run = parser.add_argument_group("robot and record")
    run.add_argument("--task", help="task text for the robot's prompt variables (default: the robot's default task)")
    run.add_argument("--output-dir", help="where steps.jsonl, images/ and episode.mp4 go: a new or empty directory "
                                          "(default runs/<robot>-mcp-<time>)")
    run.add_argument("--resume", action="store_true",
                     help="continue the record in --output-dir as a new segment (its files end in -N; nothing is overwritten)")
    run.add_argument("--memory-dir", help="the robot's memory directory (default: $RPENT_MEMORY_DIR/<robot> or ~/.local/share/rpent/memory/<robot>)")
    run.add_argument("--memory-access", choices=("read-only", "read-write", "inbox-write"), default="inbox-write",
                     help="what tools may write in memory (default inbox-write)")
    output = parser.add_argument_group("output")
    output.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    output.add_argument("--json", dest="json_logs", action="store_true", help="stderr log lines as JSON")
    if robot_spec is not None:
        robot_spec.add_cli_args(parser)


def add_serve_mcp_parser(subparsers: Any, robot_spec: RobotSpec | None = None) -> argparse.ArgumentParser:
    """Add the `serve-mcp` command; pass the robot's spec (when --robot is known) for its own flags."""
    parser = subparsers.add_parser(
        "serve-mcp", help="serve a robot's tools over MCP (stdio or streamable HTTP)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_mcp_arguments(parser, robot_spec)
    return parser


def serve_mcp(args: argparse.Namespace) -> int:
    """Build the robot, serve until the client leaves (stdio) or a signal arrives (HTTP), clean up."""
    setup_console(quiet=args.quiet, json_logs=args.json_logs)  # stderr only
    from rpent.mcp.transports import bind_socket, check_host

    sock = None
    try:
        module = load_robot(args.robot)
        spec = module.get_robot_spec()
        if getattr(args, "output_dir", None) is None:
            args.output_dir = str(Path("runs") / f"{spec.name}-mcp-{time.strftime('%Y%m%d-%H%M%S')}")
        config = spec.parse_config(args)
        if args.http:
            check_host(args.host, allow_remote=args.allow_remote)
            if not 0 <= args.port <= 65535:
                raise ConfigError(f"--port: must be 0..65535, got {args.port}")
            try:  # listen before the robot starts: a busy port must not leave a started robot behind
                sock = bind_socket(args.host, args.port)
            except OSError as exc:
                raise ConfigError(f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        # Last, so a refused flag leaves no directory behind; a used directory is refused (RecordError).
        record = RunRecord.open(config.output_dir, resume=getattr(args, "resume", False))
    except (ConfigError, RobotNotFound, ValueError) as exc:  # RecordError is a ValueError
        if sock is not None:
            sock.close()
        print(f"rpent serve-mcp: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    # Like rpent run's record: everything logged goes to run.log, tracebacks there only (not on stderr).
    with record.run_log():
        return _serve_robot(args, spec, module, config, sock)


def _serve_robot(args: argparse.Namespace, spec: RobotSpec, module: Any, config: Any, sock: Any) -> int:
    from rpent.mcp.bridge import build_mcp_server
    from rpent.mcp.transports import serve_http, serve_stdio, stdout_to_stderr

    events = FanOutSink(ProgressSink(log), None)
    runtime_kwargs: dict[str, Any] = {}
    toolkit = None
    code = EXIT_OK
    # SIGINT and SIGTERM end the server like Ctrl-C ends `rpent run` (the robot is stopped, the record
    # saved, exit 130 or 143), also when it was started with SIGINT ignored (a script's `cmd &`).
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)} if _main_thread() else {}
    try:
        log.info("starting robot %s (record in %s) ...", spec.name, config.output_dir)
        # In stdio mode fd 1 is the MCP wire: whatever the robot's drivers print at start-up goes to stderr.
        with stdout_to_stderr() if not args.http else _nothing():
            runtime_kwargs = spec.init_runtime(config, selection=None, events=events)
            toolkit = module.get_toolkit(runtime_kwargs=runtime_kwargs, dashboard_events=events, config=config)
            toolkit.use_stop_latch(robot_latch(spec.name))
        server = build_mcp_server(
            toolkit, name=args.name or f"rpent-{spec.name}", include_read_image=args.read_image,
            images=not args.no_images,
        )
        if args.http:
            # uvicorn handles SIGINT/SIGTERM itself: the active call is cancelled at once, then the
            # graceful shutdown runs and the signal is raised again (KeyboardInterrupt below).
            def cancel_now() -> None:
                threading.Thread(target=toolkit.cancel_active_and_wait,
                                 kwargs={"timeout": 10, "reason": "MCP server shutting down"}, daemon=True).start()

            asyncio.run(serve_http(server, host=args.host, port=args.port, on_signal=cancel_now, sock=sock))
        else:
            log.info("serving MCP over stdio")
            _serve_stdio_interruptibly(server, serve_stdio)
        log.info("MCP client gone; shutting down" if not args.http else "MCP server stopped; shutting down")
    except KeyboardInterrupt as exc:
        log.warning("%s: stopping the robot and saving the record", describe_interruption(exc))
        code = exit_code_for(exc)
    except Exception as exc:
        log.exception("serve-mcp failed: %s: %s", type(exc).__name__, exc)
        code = EXIT_FAILED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if sock is not None:
            sock.close()
        _shutdown(spec, toolkit, runtime_kwargs)
    return code


def _serve_stdio_interruptibly(server: Any, serve_stdio: Any) -> None:
    """Serve stdio in a daemon thread while the main thread waits for it or for a signal.

    The SDK reads stdin in a worker thread that blocks in read() until the client closes the pipe;
    made from a daemon thread, that worker is a daemon too, so a signal ends the server (record
    saved, 130/143) instead of leaving it waiting at exit for a client that does not leave.
    """
    done = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(serve_stdio(server))
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, name="rpent-mcp-stdio", daemon=True).start()
    while not done.wait(0.25):  # a signal raises here, in the main thread
        pass
    if failure:
        raise failure[0]


def _shutdown(spec: RobotSpec, toolkit: Any, runtime_kwargs: dict[str, Any]) -> None:
    if toolkit is not None:
        try:
            if not toolkit.cancel_active_and_wait(timeout=10, reason="MCP server shutting down"):
                log.error("a tool call was still running 10 s after cancel")
            episode = toolkit.close(timeout=30)
            if episode:
                log.info("episode video: %s", episode)
        except Exception:
            log.exception("closing the toolkit failed")
    try:
        spec.stop_runtime(runtime_kwargs)
    except Exception:
        log.exception("stopping the runtime failed")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()

