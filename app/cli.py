"""`mbarrier-inspector serve | trace | check | validate | capture | promela | trail`: the command
engine's edge. Wherever a scenario is named, a pipeline file (`my_ring.pipe`) may stand instead."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from app.lang.compiler import MAX_SOURCE_BYTES
from app.scenarios import ParamError, PipelineError, Scenario, catalogue, from_source
from app.scenarios import get as get_scenario
from app.scenarios.schedules import parse_schedule
from app.sim.machine import MoveError
from app.sim.trace import Run

LEGACY_FLAGS = ("stages", "tiles", "tile_bytes", "chunk_bytes", "consumers")
"""Parameters with flags of their own (the built-ins'); `--param NAME=VALUE` sets any other."""


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario and its parameters, shared by `trace`, `check` and `capture`."""
    parser.add_argument("scenario", help="a built-in scenario id (" + ", ".join(catalogue())
                        + ") or a pipeline file")
    for name in LEGACY_FLAGS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int)
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="any parameter the pipeline declares (repeatable)")
    parser.add_argument("--bugs", default="", help="comma-separated bug toggles")


def config_params(args: argparse.Namespace) -> dict:
    params = {name: getattr(args, name, None) for name in LEGACY_FLAGS}
    for item in getattr(args, "param", []):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParamError("param", f"--param takes NAME=VALUE; got {item[:40]!r}")
        params[name.strip()] = value.strip()
    return params


def load_scenario(name: str) -> Scenario:
    """A built-in by id, or a pipeline file (anything that names an existing file or ends in
    `.pipe`)."""
    path = Path(name)
    if name.endswith(".pipe") or (path.suffix and path.exists()):
        try:
            size = path.stat().st_size
        except OSError as err:
            raise ParamError("scenario", f"cannot read {name}: {err.strerror}") from None
        if size > MAX_SOURCE_BYTES:
            raise ParamError("scenario", f"{name} is over {MAX_SOURCE_BYTES // 1024} KiB")
        return from_source(path.read_text(encoding="utf-8", errors="replace"))
    return get_scenario(name)


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
    trace.add_argument("--format", choices=("json", "perfetto"), default="json",
                       help="perfetto: the Chrome Trace Event Format (docs/perfetto.md)")

    validate = sub.add_parser("validate", help="check a pipeline file and say what it declares")
    validate.add_argument("file", help="a pipeline file (.pipe)")

    for module in _subsystem_clis():
        module.add_parser(sub)
    return parser


def _subsystem_clis() -> list:
    """The `check`, `promela`, `trail` and `capture` commands live beside their subsystems."""
    from app.capture import cli as capture_cli
    from app.check import cli as check_cli
    from app.check import promela_cli

    return [check_cli, promela_cli, capture_cli]


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.file)
    pipeline = scenario.pipeline
    cfg = scenario.resolve({}, [])
    program = cfg.program
    print(f"{args.file}: ok (sha256 {pipeline.sha256[:12]})")
    for name, spec in scenario.parameters.items():
        print(f"  param   {name} = {spec['default']} in {spec['min']}..{spec['max']}"
              f"  {spec['doc']}")
    print(f"  barriers {', '.join(b.name for b in program.barriers) or 'none'}")
    print(f"  stages   {', '.join(s.name for s in program.stages) or 'none'}")
    for agent in program.agents:
        print(f"  agent   {agent.name}: {len(agent.listing)} lines")
    for toggle in pipeline.toggles():
        broken = "  (BROKEN: " + toggle["error"]["message"] + ")" if "error" in toggle else ""
        print(f"  bug     {toggle['name']}: {toggle['description']}{broken}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    cfg = scenario.resolve(config_params(args), args.bugs)
    schedule = parse_schedule(args.schedule, args.seed, args.moves)
    run = Run.complete(cfg, schedule, scenario.describe(cfg))
    if args.summary:
        print_summary(run)
    elif args.format == "perfetto":
        from app.export.perfetto import to_chrome_trace

        document = run.document(snapshots=not args.no_snapshots)
        json.dump(to_chrome_trace(document), sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
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
            import os

            import uvicorn

            os.environ["MBI_WORKERS"] = str(args.workers)  # its processes share the host's
            from app.core.wire import uvicorn_options

            uvicorn.run("app.main:app", host=args.host, port=args.port, workers=args.workers,
                        ws_per_message_deflate=args.ws_deflate, **uvicorn_options())
            return 0
        if args.command == "trace":
            return cmd_trace(args)
        if args.command == "validate":
            return cmd_validate(args)
        return args.run(args)
    except KeyError as err:
        parser.error(f"no scenario {err.args[0]!r}; scenarios: {', '.join(catalogue())}")
    except PipelineError as err:
        where = getattr(args, "file", None) or getattr(args, "scenario", "pipeline")
        text = Path(where).read_text(encoding="utf-8", errors="replace") \
            if Path(where).is_file() else ""
        sys.stderr.write(f"{where}:{err.render(text)}\n")
        return 2
    except (ParamError, MoveError) as err:
        field = f"{err.field}: " if isinstance(err, ParamError) else ""
        parser.error(f"{field}{err}")
    except BrokenPipeError:
        return _reader_gone()
    return 2


def _reader_gone() -> int:
    """The reader of stdout left (`| head`): no traceback, and the shell's status for SIGPIPE,
    which no verdict uses (0 safe, 1 unsafe, 2 usage, 3 internal)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141



if __name__ == "__main__":
    sys.exit(main())
