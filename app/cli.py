"""`mbarrier-inspector serve | trace | check | capture`: the command line, at the engine's edge."""

from __future__ import annotations

import argparse
import json
import sys

from app.api.runs import parse_schedule
from app.scenarios import ParamError, catalogue
from app.scenarios import get as get_scenario
from app.sim.machine import MoveError
from app.sim.trace import Run


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario and its parameters, shared by `trace`, `check` and `capture`."""
    parser.add_argument("scenario", help="scenario id: " + ", ".join(catalogue()))
    parser.add_argument("--stages", type=int)
    parser.add_argument("--tiles", type=int)
    parser.add_argument("--tile-bytes", type=int)
    parser.add_argument("--chunk-bytes", type=int)
    parser.add_argument("--consumers", type=int)
    parser.add_argument("--bugs", default="", help="comma-separated bug toggles")


def config_params(args: argparse.Namespace) -> dict:
    return {"stages": args.stages, "tiles": args.tiles, "tile_bytes": args.tile_bytes,
            "chunk_bytes": args.chunk_bytes, "consumers": args.consumers}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mbarrier-inspector", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the API and the browser UI")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--ws-deflate", action="store_true",
                       help="compress WebSocket frames (permessage-deflate): less bandwidth, "
                            "about a quarter more server CPU a played step")

    trace = sub.add_parser("trace", help="print a trace as JSON (or a step table)")
    add_config_arguments(trace)
    trace.add_argument("--schedule", default="round_robin",
                       choices=("round_robin", "random", "manual"))
    trace.add_argument("--seed", type=int, default=0)
    trace.add_argument("--moves", default="", help="manual schedule: comma-separated movers")
    trace.add_argument("--summary", action="store_true", help="a readable step table instead")
    trace.add_argument("--no-snapshots", action="store_true", help="leave snapshots out")

    for module in _subsystem_clis():
        module.add_parser(sub)
    return parser


def _subsystem_clis() -> list:
    """The `check` and `capture` commands live beside their subsystems."""
    from app.capture import cli as capture_cli
    from app.check import cli as check_cli

    return [check_cli, capture_cli]


def cmd_trace(args: argparse.Namespace) -> int:
    scenario = get_scenario(args.scenario)
    cfg = scenario.resolve(config_params(args), args.bugs)
    schedule = parse_schedule(args.schedule, args.seed, args.moves)
    run = Run.complete(cfg, schedule, scenario.describe(cfg))
    if args.summary:
        print_summary(run)
    else:
        json.dump(run.document(snapshots=not args.no_snapshots), sys.stdout,
                  separators=(",", ":"))
        sys.stdout.write("\n")
    return 0


def print_summary(run: Run) -> None:
    """One line per step: who moved, what it did, what happened, what went wrong."""
    print(f"{'step':>6}  {'agent':<12} {'op':<46} events")
    for record in run.steps(1, run.total_steps, snapshots=False):
        events = "; ".join(_event_text(e) for e in record["events"])
        print(f"{record['step']:>6}  {record['agent']:<12} {record['op'][:46]:<46} {events}")
        for diagnostic in record["diagnostics"]:
            print(f"{'':>6}  !! {diagnostic['kind']}: {diagnostic['message']}")
    print(f"status: {run.status} after {run.total_steps} steps, "
          f"{len(run.diagnostics)} diagnostic(s)")


def _event_text(event: dict) -> str:
    fields = ", ".join(f"{k}={v}" for k, v in event.items() if k != "kind")
    return f"{event['kind']}({fields})"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            import uvicorn

            uvicorn.run("app.main:app", host=args.host, port=args.port, workers=args.workers,
                        ws_per_message_deflate=args.ws_deflate)
            return 0
        if args.command == "trace":
            return cmd_trace(args)
        return args.run(args)
    except KeyError as err:
        parser.error(f"no scenario {err.args[0]!r}; scenarios: {', '.join(catalogue())}")
    except (ParamError, MoveError) as err:
        field = f"{err.field}: " if isinstance(err, ParamError) else ""
        parser.error(f"{field}{err}")
    return 2



if __name__ == "__main__":
    sys.exit(main())
