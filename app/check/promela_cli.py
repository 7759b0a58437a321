"""`mbarrier-inspector promela FILE|ID [--param ...] [--bugs ...]`: write the Promela model of a
pipeline for SPIN (docs/checker.md, "SPIN"); `mbarrier-inspector trail MODEL.pml.trail`: turn
SPIN's counterexample back into a manual schedule and replay it on the engine.

Exit status of `trail`: 0 the engine confirms (the schedule's last step raises the kind asked,
or the run ends as a livelock / deadlock), 3 it does not (the export and the engine disagree:
report it), 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import add_config_arguments, config_params, load_scenario
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .cli import replay_command, say
from .promela import KINDS, NotExported
from .promela_spin import (
    SpinError,
    SpinMissing,
    model_text,
    parse_replay,
    read_origin,
    schedule,
    tools,
)

EXIT_DISAGREE = 3


def add_parser(subparsers) -> None:
    promela = subparsers.add_parser(
        "promela", help="write a Promela model of the pipeline for SPIN",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(promela)
    promela.add_argument("-o", "--output", help="write the model here (default: stdout)")
    promela.add_argument("--max-ops", type=int, default=None,
                         help="room for this many copies in flight (default: from the program)")
    promela.set_defaults(run=run_promela)
    trail = subparsers.add_parser(
        "trail", help="replay a SPIN trail of an exported model on the engine",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    trail.add_argument("trail", help="MODEL.pml.trail (the model beside it)")
    trail.add_argument("--livelock", action="store_true",
                       help="the trail is a non-progress cycle of the -DLIVELOCK variant")
    trail.set_defaults(run=run_trail)


def run_promela(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    cfg = scenario.resolve(config_params(args), args.bugs)
    origin = ({"scenario": scenario.id} if scenario.id else
              {"source": scenario.source, "file": args.scenario})
    try:
        text = model_text(cfg, origin, args.max_ops)
    except NotExported as err:
        sys.stderr.write(f"promela: {err}\n")
        return 2
    if args.output:
        Path(args.output).write_text(text)
        name = args.output
    else:
        sys.stdout.write(text)
        name = "model.pml"
    kinds = ", ".join(f"{i + 1} {k}" for i, k in enumerate(KINDS) if k != "deadlock")
    sys.stderr.write(
        f"SPIN: spin -a {name} && gcc -O2 -DSAFETY -DVECTORSZ=65536 -o pan pan.c\n"
        f"  a kind: MBI_QUERY=n ./pan -E -m1000000   (n: {kinds})\n"
        f"  deadlock (invalid end state): ./pan -m1000000\n"
        f"  livelock: spin -DLIVELOCK -a {name} && gcc -O2 -DNP -DVECTORSZ=65536 -o pan pan.c "
        "&& ./pan -l -f -E -m1000000\n"
        f"  states: spin -DCOUNT -a {name} && gcc -O2 -DSAFETY -DNOREDUCE -DVECTORSZ=65536 "
        "-o pan pan.c && ./pan -E -m1000000\n"
        f"  then: mbarrier-inspector trail {name}.trail\n")
    return 0


def run_trail(args: argparse.Namespace) -> int:
    trail = Path(args.trail)
    pml = trail.with_suffix("") if trail.suffix == ".trail" else trail
    if not trail.exists() or not pml.exists():
        sys.stderr.write(f"trail: need {pml} and {pml}.trail\n")
        return 2
    text = pml.read_text()
    try:
        origin = read_origin(text)
        spin, _ = tools()
    except (SpinError, SpinMissing) as err:
        sys.stderr.write(f"trail: {err}\n")
        return 2
    from app.scenarios import from_source, get

    scenario = get(origin["scenario"]) if "scenario" in origin else from_source(origin["source"])
    cfg = scenario.resolve(origin["params"], origin["bugs"])
    import subprocess

    defines = ["-DLIVELOCK"] if args.livelock else []
    out = subprocess.run([spin, *defines, "-t", pml.name], cwd=pml.parent or ".",
                         capture_output=True, text=True, check=False)
    moves, cycle = parse_replay(out.stdout + out.stderr)
    try:
        names = schedule(cfg, moves)
    except SpinError as err:
        sys.stderr.write(f"trail: {err}\n")
        return EXIT_DISAGREE
    return report(cfg, origin, names, cycle)


def report(cfg, origin: dict, names: list[str], cycle: int | None) -> int:
    """Replay the schedule as a manual run and say what the engine finds at its end."""
    run = Run.complete(cfg, Schedule("manual", moves=tuple(names)))
    last = run.steps(run.total_steps, run.total_steps, snapshots=False) if names else []
    kinds = [d["kind"] for d in last[0]["diagnostics"]] if last else []
    where = origin.get("scenario") or origin.get("file") or "PIPELINE.pipe"
    trace = {"scenario": {"params": origin["params"], "bugs": origin["bugs"]}}
    say(f"SPIN's trail: {len(names)} moves"
          + (f", a cycle from move {cycle + 1}" if cycle is not None else ""))
    if cycle is not None:
        confirmed = run.status == "livelock"
        say(f"the engine: status {run.status} after {run.total_steps} steps"
              + ("" if confirmed else ": not the livelock SPIN found"))
    else:
        confirmed = bool(kinds) or run.status == "deadlock"
        say(f"the engine: {', '.join(kinds) or 'nothing'} at step {len(names)}, status "
              f"{run.status}")
        for diagnostic in last[0]["diagnostics"] if last else []:
            say(f"  {diagnostic['kind']}: {diagnostic['message']}")
    say(f"replay: {replay_command(where, trace, names)}")
    return 0 if confirmed else EXIT_DISAGREE
