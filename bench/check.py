"""Benchmark of the schedule checker beside SPIN: time to verdict, states and states per second on
double_buffer_tma (tile_bytes 2048, chunk_bytes 1024), and SPIN's verdict, stored states and total
time (`spin -a` + `gcc -O2 -DSAFETY` + `./pan -m100000`) on the equivalent Promela model
(bench/spin/ring.py), measured in the same run.

    .venv/bin/python bench/check.py                 # issue 12's table and the S2 T4 toggles
    .venv/bin/python bench/check.py --grid          # stages 1-4 x tiles 1-8 x consumers 1-4 x
                                                    # every toggle and none (1,024 rows: hours)
    .venv/bin/python bench/check.py --config 4,8,4 --config 2,4,2,forget_phase_toggle
    .venv/bin/python bench/check.py --repeat 3      # best and median of three checker runs
    .venv/bin/python bench/check.py --no-spin       # the checker alone
    .venv/bin/python bench/check.py --unreduced     # also the plain breadth-first search

`verdict s`: when the verdict was known. For a safe row that is the whole search; for an unsafe
row it is the first violation found (from then on the answer is `unsafe` even if a limit stops
the search: a client asking with a shorter `timeout_s` gets it then). `answer s`: the whole
answer as `check_config` builds it (the search to its end or its limit, `--timeout`, plus every
counterexample's trace document); `*` marks a search a limit stopped. `states/s` divides the
stored states (after the reductions) by the search time. SPIN stops at its first error, as the
verdict column does. Without `spin` or `gcc` on PATH the SPIN columns say `skipped`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "spin"))

from ring import promela, run_spin  # noqa: E402

from app.check.engine import Explorer, Limits  # noqa: E402
from app.check.service import violation  # noqa: E402
from app.scenarios import get  # noqa: E402

SCENARIO = "double_buffer_tma"
TOGGLES = (None, "forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
           "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
           "wrong_arrival_count")
ISSUE_TABLE = [(4, 8, 2, None), (4, 16, 2, None), (3, 8, 3, None), (4, 8, 4, None),
               (4, 8, 4, "forget_phase_toggle")]


def checker(stages: int, tiles: int, consumers: int, bug: str | None, reduce: bool,
            repeat: int, timeout: float) -> dict:
    """What `check_config` does (search, then one trace per kind), timed in its parts."""
    scenario = get(SCENARIO)
    cfg = scenario.resolve({"stages": stages, "tiles": tiles, "consumers": consumers,
                            "tile_bytes": 2048, "chunk_bytes": 1024}, [bug] if bug else [])
    describe = scenario.describe(cfg)
    verdicts, answers, rates = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        explorer = Explorer(cfg, reduce)
        out = explorer.explore(Limits(max_states=2_000_000, timeout_s=timeout))
        for kind in out.found:
            violation(explorer, out, kind, describe)
        answers.append(time.perf_counter() - start)
        verdicts.append(out.first_found_s if out.found else out.elapsed_s)
        rates.append(out.states / max(out.elapsed_s, 1e-9))
        del explorer
    verdict = out.verdict + ("" if out.complete else "*")
    return {"verdict": verdict, "states": out.states, "best": min(verdicts),
            "median": statistics.median(verdicts), "answer": min(answers), "rate": max(rates)}


def spin(stages: int, tiles: int, consumers: int, bug: str | None) -> dict | None:
    if shutil.which("spin") is None or shutil.which("gcc") is None:
        return None
    return run_spin(promela(stages, tiles, consumers, bug))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", action="store_true", help="the whole grid of issue 12")
    parser.add_argument("--config", action="append", default=[], metavar="S,T,K[,TOGGLE]")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds each search may take (the API's largest limit: 60)")
    parser.add_argument("--no-spin", action="store_true")
    parser.add_argument("--unreduced", action="store_true",
                        help="also run the search without reductions (slow)")
    args = parser.parse_args()
    if args.config:
        rows = [(int(s), int(t), int(k), rest[0] if rest else None)
                for s, t, k, *rest in (c.split(",") for c in args.config)]
    elif args.grid:
        rows = [(s, t, k, bug) for s in range(1, 5) for t in range(1, 9) for k in range(1, 5)
                for bug in TOGGLES]
    else:
        rows = ISSUE_TABLE + [(2, 4, k, bug) for k in (1, 2) for bug in TOGGLES]
    use_spin = not args.no_spin
    if use_spin and (shutil.which("spin") is None or shutil.which("gcc") is None):
        print("spin or gcc not found: the SPIN columns are skipped")
        use_spin = False
    print(f"{SCENARIO} tile_bytes=2048 chunk_bytes=1024 (python {sys.version.split()[0]}); "
          f"checker best/median of {args.repeat}; * = a limit stopped the search")
    header = (f"{'S':>1} {'T':>2} {'K':>1} {'toggle':<28} {'mode':<8} {'verdict':<9} "
              f"{'states':>9} {'verdict s':>9} {'median':>7} {'answer s':>8} {'states/s':>9} | "
              f"{'spin':<6} {'spin states':>11} {'spin s':>7} {'agree':>5} {'faster':>6}")
    print(header)
    print("-" * len(header))
    totals = {"states": 0, "seconds": 0.0, "verdicts": 0.0, "faster": 0, "agree": 0,
              "compared": 0, "rows": 0}
    modes = [True, False] if args.unreduced else [True]
    for stages, tiles, consumers, bug in rows:
        theirs = spin(stages, tiles, consumers, bug) if use_spin else None
        for reduce in modes:
            ours = checker(stages, tiles, consumers, bug, reduce, args.repeat, args.timeout)
            line = (f"{stages:>1} {tiles:>2} {consumers:>1} {bug or '(correct)':<28} "
                    f"{'reduced' if reduce else 'full BFS':<8} {ours['verdict']:<9} "
                    f"{ours['states']:>9,} {ours['best']:>9.3f} {ours['median']:>7.3f} "
                    f"{ours['answer']:>8.2f} {ours['rate']:>9,.0f} | ")
            if theirs is None:
                line += "skipped"
            else:
                agree = ours["verdict"].rstrip("*") == theirs["verdict"]
                faster = ours["best"] < theirs["total_s"]
                line += (f"{theirs['verdict']:<6} {theirs['states'] or 0:>11,} "
                         f"{theirs['total_s']:>7.2f} {'yes' if agree else 'NO':>5} "
                         f"{'yes' if faster else 'no':>6}")
                if reduce:
                    totals["compared"] += 1
                    totals["agree"] += agree
                    totals["faster"] += faster
            if reduce:
                totals["rows"] += 1
                totals["states"] += ours["states"]
                totals["seconds"] += ours["states"] / max(ours["rate"], 1e-9)
                totals["verdicts"] += ours["best"]
            print(line, flush=True)
    summary = (f"reduced search: {totals['rows']} configurations, {totals['states']:,} states in "
               f"{totals['seconds']:.2f} s of search "
               f"({totals['states'] / max(totals['seconds'], 1e-9):,.0f} states/s), "
               f"{totals['verdicts']:.2f} s to all verdicts")
    if totals["compared"]:
        summary += (f"; SPIN compared on {totals['compared']}: verdicts agree on "
                    f"{totals['agree']}, the checker is faster on {totals['faster']}")
    print(summary)


if __name__ == "__main__":
    main()
