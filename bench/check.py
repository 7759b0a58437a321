"""Benchmark of the schedule checker: states per second and time to verdict for every bug toggle on
double_buffer_tma with stages 2, tiles 4, consumers 1 and 2 (issue 5's figures).

    .venv/bin/python bench/check.py               # reduced search (what the API and CLI run)
    .venv/bin/python bench/check.py --unreduced   # also the plain breadth-first search, to compare
    .venv/bin/python bench/check.py --repeat 3    # best of three runs per configuration

`search` is the exploration alone; `verdict` adds building every counterexample's trace document
(what a client waits for). `states/s` counts the states the search stores (after the reductions);
`moves/s` counts `Machine.step` calls, the unit of work.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.check.engine import Explorer, Limits  # noqa: E402
from app.check.service import check_config  # noqa: E402
from app.scenarios import get  # noqa: E402

SCENARIO = "double_buffer_tma"
TOGGLES = (None, "forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
           "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
           "wrong_arrival_count")


def measure(consumers: int, bug: str | None, reduce: bool, repeat: int) -> dict:
    scenario = get(SCENARIO)
    cfg = scenario.resolve({"stages": 2, "tiles": 4, "consumers": consumers},
                           [bug] if bug else [])
    best = None
    for _ in range(repeat):
        explorer = Explorer(cfg, reduce)
        out = explorer.explore(Limits(max_states=2_000_000, timeout_s=600))
        start = time.perf_counter()
        result = check_config(scenario, cfg, Limits(max_states=2_000_000, timeout_s=600),
                              reduce=reduce)
        verdict_s = time.perf_counter() - start
        row = {"verdict": out.verdict, "states": out.states, "moves": out.transitions,
               "search_s": out.elapsed_s, "verdict_s": verdict_s,
               "kinds": ",".join(v["kind"] for v in result["violations"]) or "-"}
        if best is None or row["verdict_s"] < best["verdict_s"]:
            best = row
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unreduced", action="store_true",
                        help="also run the search without reductions (slow)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    modes = [True, False] if args.unreduced else [True]
    print(f"{SCENARIO} stages=2 tiles=4 (python {sys.version.split()[0]})")
    header = (f"{'c':>1} {'toggle':<28} {'mode':<9} {'verdict':<8} {'states':>9} {'moves':>9} "
              f"{'search s':>8} {'verdict s':>9} {'states/s':>9} {'moves/s':>9}  kinds")
    print(header)
    print("-" * len(header))
    totals = {mode: [0, 0, 0.0, 0.0, 0.0] for mode in modes}
    for consumers in (1, 2):
        for bug in TOGGLES:
            for reduce in modes:
                row = measure(consumers, bug, reduce, args.repeat)
                mode = "reduced" if reduce else "full BFS"
                search = max(row["search_s"], 1e-9)
                print(f"{consumers:>1} {bug or '(correct)':<28} {mode:<9} {row['verdict']:<8} "
                      f"{row['states']:>9,} {row['moves']:>9,} {row['search_s']:>8.3f} "
                      f"{row['verdict_s']:>9.3f} {row['states'] / search:>9,.0f} "
                      f"{row['moves'] / search:>9,.0f}  {row['kinds']}", flush=True)
                total = totals[reduce]
                total[0] += row["states"]
                total[1] += row["moves"]
                total[2] += row["search_s"]
                total[3] += row["verdict_s"]
                total[4] = max(total[4], row["verdict_s"])
    for reduce, (states, moves, search, verdict, slowest) in totals.items():
        mode = "reduced" if reduce else "full BFS"
        print(f"{mode}: {states:,} states, {moves:,} moves in {search:.2f} s of search "
              f"({states / search:,.0f} states/s, {moves / search:,.0f} moves/s); "
              f"all verdicts {verdict:.2f} s, slowest {slowest:.2f} s")


if __name__ == "__main__":
    main()
