"""`mbarrier-inspector check SCENARIO [params] [--bugs a,b]`: explore every schedule and say whether
the pipeline is safe, or print the shortest schedule that reaches each diagnostic kind.

A progress bar on stderr shows how much of the state or time budget is spent. Exit status: 0 safe,
1 unsafe, 2 inconclusive (a limit stopped the search); argparse's own errors also exit with 2;
3 an internal error (a consistency check of the checker failed: one line on stderr names the
configuration, to report).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from app.cli import (
    LEGACY_FLAGS,
    add_config_arguments,
    config_params,
    load_scenario,
    print_summary,
)
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .engine import Limits, Progress
from .parallel import Lent
from .service import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_MEMORY,
    InternalError,
    check_config,
    validate_limits,
)

EXIT = {"safe": 0, "unsafe": 1, "inconclusive": 2}
EXIT_INTERNAL = 3
CLI_MAX_STATES = 100_000_000
CLI_MAX_TIMEOUT_S = 24 * 3600.0
"""The command line runs on the user's own machine: it may go past the server's limits (the
memory limit, MBI_CHECK_MAX_MEMORY_MB, still applies)."""
BAR_WIDTH = 24


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "check", help="explore every schedule: safe, or the shortest failing schedule per kind",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(parser)
    parser.add_argument("--max-states", type=int, default=DEFAULT_MAX_STATES,
                        help=f"stop after this many states (default {DEFAULT_MAX_STATES:,})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"stop after this many seconds (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--stop-at-first", action="store_true",
                        help="stop at the first violation whose shortest schedule is known")
    parser.add_argument("--json", action="store_true",
                        help="print the whole answer (with trace documents) as JSON")
    parser.add_argument("--steps", action="store_true",
                        help="print each counterexample as a step table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-reduction", action="store_true",
                        help="plain breadth-first search over every state (for comparison)")
    parser.add_argument("--no-partial-order", action="store_true",
                        help="the search without its partial-order reduction (for comparison)")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes the search may run on (default 1; more where the "
                             "program cannot cycle: app/check/parallel.py)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    cfg = scenario.resolve(config_params(args), args.bugs)
    max_states, timeout_s = validate_limits(args.max_states, args.timeout, CLI_MAX_STATES,
                                            CLI_MAX_TIMEOUT_S)
    limits = Limits(max_states, timeout_s, MAX_MEMORY, args.stop_at_first)
    bar = None if args.no_progress else ProgressBar(limits, sys.stderr)
    try:
        helpers = max(0, args.workers - 1)
        result = check_config(scenario, cfg, limits, bar, reduce=not args.no_reduction,
                              por=not args.no_partial_order, lent=Lent.fixed(helpers),
                              helpers=helpers)
    except InternalError as err:
        if bar is not None and bar.drawn and bar.tty:
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(" ".join(str(err).split()) + "\n")
        return EXIT_INTERNAL
    if bar is not None:
        bar.finish(result)
    if args.json:
        json.dump(result, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        print_result(result, scenario.id or args.scenario, args.steps, cfg)
    return EXIT[result["verdict"]]


def say(text: str = "") -> None:
    """One line on stdout (the answer; progress goes to stderr)."""
    sys.stdout.write(text + "\n")


def print_result(result: dict, scenario_id: str, steps: bool, cfg) -> None:
    say(result["message"])
    say(f"{result['states_explored']:,} states, {result['transitions']:,} moves tried, "
          f"{result['elapsed_s']:.2f} s")
    for violation in result["violations"]:
        note = "" if violation["shortest"] else " (a shorter one may exist)"
        say(f"\n{violation['kind']}: {violation['steps']} steps{note}")
        say(f"  {violation['diagnostic']['message']}")
        moves = violation["trace"]["scenario"]["schedule"]["moves"]
        say(f"  replay: {replay_command(scenario_id, violation['trace'], moves)}")
        if steps:
            print_summary(Run.complete(cfg, Schedule("manual", moves=tuple(moves))))


def replay_command(scenario_id: str, trace: dict, moves: list[str]) -> str:
    """The `trace` command line that shows this counterexample step by step."""
    params = " ".join(f"--{k.replace('_', '-')} {v}" if k in LEGACY_FLAGS else f"--param {k}={v}"
                      for k, v in trace["scenario"]["params"].items())
    bugs = trace["scenario"]["bugs"]
    bug_flag = f" --bugs {','.join(bugs)}" if bugs else ""
    return (f"mbarrier-inspector trace {scenario_id} {params}{bug_flag} --schedule manual "
            f"--summary --moves {','.join(moves)}")


class ProgressBar:
    """`[#####.....] 12,345 states  depth 40  1.2 s` on one line of stderr, redrawn in place on a
    terminal; elsewhere (a log file, a pipe) one line at most every few seconds."""

    def __init__(self, limits: Limits, stream):
        self.limits = limits
        self.stream = stream
        self.tty = stream.isatty()
        self.last_line = 0.0
        self.drawn = False

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if not self.tty and now - self.last_line < 5.0:
            return
        self.last_line = now
        used = max(p.states / self.limits.max_states, p.elapsed_s / self.limits.timeout_s)
        filled = min(BAR_WIDTH, int(used * BAR_WIDTH))
        line = (f"checking [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {p.states:,} states  "
                f"depth {p.depth}  {p.elapsed_s:.1f} s")
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = True

    def finish(self, result: dict) -> None:
        end = "\r\x1b[K" if self.tty and self.drawn else ""
        self.stream.write(f"{end}checked {result['states_explored']:,} states in "
                          f"{result['elapsed_s']:.2f} s: {result['verdict']}\n")
        self.stream.flush()
