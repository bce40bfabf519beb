"""`rpent eval`: its flags, and the command (run a sweep, or `--summarise` one from its records)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rpent.eval.sweep import SweepError, load_sweep, parse_id_list

log = logging.getLogger("rpent.eval")

EPILOG = """\
examples:
  rpent eval --robot toy --planner replay --recipe robots/toy/recipes/red_block_in_bin.jsonl --repeats 4 --out runs/eval-toy
  rpent eval --robot libero --suites libero_object --tasks 0-9 --init-states 0-1 \\
      --planner robots.libero.scripted_planner:ScriptedPickPlacePlanner --out runs/eval-object
  rpent eval --sweep sweep.yaml --out runs/eval --ray-address 10.0.0.5:6379
  rpent eval --summarise runs/eval-object
"""


def add_eval_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "eval", help="run a benchmark sweep of episodes on Ray, or summarise one",
        description="Run every episode of a sweep as an ordinary run (the `rpent run` record, in <out>/<episode>/) "
        "on a Ray cluster, resumable, then write results.json, results.md and success.png into --out.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--summarise", "--summarize", metavar="DIR", help="rebuild results from a sweep folder's records and exit")
    parser.add_argument("--out", help="the sweep folder (new, or the same sweep's folder to resume it)")
    parser.add_argument("--sweep", help="YAML file of sweep fields (docs/eval.md); flags override it")
    parser.add_argument("--robot", help="robot name")
    parser.add_argument("--suites", nargs="+", help="LIBERO suites")
    parser.add_argument("--tasks", help="task ids, e.g. 0-9 or 0,3,5")
    parser.add_argument("--init-states", help="initial states, e.g. 0-1")
    parser.add_argument("--seeds", help="scene seeds, e.g. 1-10")
    parser.add_argument("--repeats", type=int, help="runs of each episode (default 1)")
    parser.add_argument("--planner", help="api, claude_code, codex, replay (default) or package.module:Class")
    parser.add_argument("--recipe", help="replay recipe; may use {suite} {task} {init_state} {seed} {repeat}")
    parser.add_argument("--model", help="model of a model planner")
    parser.add_argument("--base-url", help="model endpoint")
    parser.add_argument("--api-key-env", help="environment variable holding the API key")
    parser.add_argument("--vla-endpoint", help="VLA policy server passed to every episode")
    parser.add_argument("--max-turns", type=int, help="per episode (default 60)")
    parser.add_argument("--max-wall-time", type=float, dest="max_wall_time_s", help="seconds per episode")
    parser.add_argument("--token-budget", type=int, help="tokens for the whole sweep; no new episode starts once spent")
    parser.add_argument("--retries", type=int, help="re-runs of an episode whose worker died (default 2)")
    parser.add_argument("--concurrency", type=int, help="episodes at once (default 2)")
    parser.add_argument("--cpus-per-episode", type=float, help="Ray CPUs each episode declares (default 1)")
    parser.add_argument("--memory-per-episode-mb", type=int, help="Ray memory each episode declares (default 3072)")
    parser.add_argument("--gpus-per-episode", type=float, help="Ray GPUs each episode declares (default 0)")
    parser.add_argument("--sim-hosts", help="loopback addresses the episodes' simulators share out, e.g. 127.0.0.140-169 "
                        "(default 127.0.0.1-254): each concurrent episode gets a block of its own (robots with --sim-hosts)")
    parser.add_argument("--ray-address", help="an existing Ray cluster (host:port); default: a local one on 127.0.0.1")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the local Ray instance (default: all)")
    parser.add_argument("--ray-temp-dir", help="session folder of the local Ray instance (default Ray's, /tmp/ray)")
    parser.add_argument("robot_args", nargs="*", metavar="-- ROBOT_FLAG", help="more robot flags after --, for every episode")
    return parser


def _overrides(args: argparse.Namespace) -> dict:
    ids = {name: parse_id_list(getattr(args, name), f"--{name.replace('_', '-')}") if getattr(args, name) else None
           for name in ("tasks", "init_states", "seeds")}
    names = ("robot", "suites", "repeats", "planner", "recipe", "model", "base_url", "api_key_env", "vla_endpoint",
             "max_turns", "max_wall_time_s", "token_budget", "retries", "concurrency", "cpus_per_episode",
             "memory_per_episode_mb", "gpus_per_episode", "sim_hosts")
    values = {name: getattr(args, name) for name in names}
    values["robot_args"] = list(args.robot_args) or None
    return {**values, **ids}


def _in_flag_terms(message: str, args: argparse.Namespace) -> str:
    """A sweep field's refusal names the flag it came from (`--repeats: ...`), as rpent run's do."""
    field, sep, rest = message.partition(": ")
    if not sep or getattr(args, field, None) is None:
        return message  # from the sweep file, or no field at all
    flag = {"max_wall_time_s": "--max-wall-time"}.get(field, "--" + field.replace("_", "-"))
    return f"{flag}: {rest}"


def eval_command(args: argparse.Namespace) -> int:
    from rpent.eval.results import PLOT_FILE, RESULTS_FILE, TABLE_FILE, summarise

    try:
        if args.summarise:
            out = Path(args.summarise)
        else:
            if not args.out:
                raise SweepError("--out: required (the sweep folder)")
            # Paths as typed, made absolute here: the episodes run in a Ray worker's folder.
            out = Path(args.out).expanduser().absolute()
            sweep = load_sweep(args.sweep, _overrides(args)).with_paths_from(Path.cwd())
            from rpent.eval.schedule import run_sweep

            outcome = run_sweep(sweep, out, ray_address=args.ray_address, num_cpus=args.num_cpus,
                                ray_temp_dir=Path(args.ray_temp_dir) if args.ray_temp_dir else None)
            print(f"ran {len(outcome.ran)}, already complete {len(outcome.skipped_complete)}, "
                  f"failed {len(outcome.failed)}, not run (token budget) {len(outcome.not_run)}; "
                  f"tokens {outcome.tokens_used}", file=sys.stderr)
        results = summarise(out)
    except SweepError as exc:
        print(f"rpent: error: {_in_flag_terms(str(exc), args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rpent eval: interrupted; the same command resumes the sweep", file=sys.stderr)
        return 130
    print((out / TABLE_FILE).read_text(), end="")
    print(f"{out / RESULTS_FILE}, {out / TABLE_FILE}, {out / PLOT_FILE}", file=sys.stderr)
    failed = [r for r in results["episodes"] if r["status"] in ("crashed",)]
    return 1 if failed else 0
