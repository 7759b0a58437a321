"""Engine figures: simulated steps per second, random-step snapshot latency, JSON bytes per step.

Run: `.venv/bin/python bench/engine.py`. Targets from the engine issue: at least 200,000 steps/s on
double_buffer_tma (stages 4, 100,000 tiles) and under 5 ms per random snapshot of a
1,000,000-step trace.

`bench/engine.py --against ../main` first prints the round-robin figure of this checkout beside
that of another one (its engine as the reference), each in its own process, alternating, in CPU
seconds of that process: on a busy machine wall-clock figures say more about the neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from app.scenarios import get
from app.sim.schedule import Schedule
from app.sim.trace import Run


def build(schedule: Schedule, **params) -> tuple[Run, float]:
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve(params, [])
    start = time.perf_counter()
    run = Run.complete(cfg, schedule, scenario.describe(cfg))
    return run, time.perf_counter() - start


CPU_PROBE = """
import time
from app.scenarios import get
from app.sim.schedule import Schedule
from app.sim.trace import Run
scenario = get("double_buffer_tma")
cfg = scenario.resolve({"stages": 4, "tiles": 100_000}, [])
start = time.process_time()
run = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg), step_limit=%d)
print(run.total_steps / (time.process_time() - start))
"""


def cpu_rate(tree: Path, steps: int) -> float:
    """Round-robin steps per CPU second of one process running `tree`'s engine."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CPU_PROBE % steps], cwd=tree, env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    return float(out.stdout.split()[-1])


def against(reference: Path, rounds: int = 3, steps: int = 400_000) -> None:
    here = Path(__file__).resolve().parents[1]
    print(f"double_buffer_tma S=4, round robin, {steps:,} steps, steps per CPU second "
          f"(best of {rounds}, alternating):")
    rates: dict[Path, list[float]] = {here: [], reference: []}
    for _ in range(rounds):
        for tree in rates:
            rates[tree].append(cpu_rate(tree, steps))
    for tree, values in rates.items():
        print(f"  {str(tree):<28} {max(values):>9,.0f}  ({', '.join(f'{v:,.0f}' for v in values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Needs the project's dependencies (lark: app.lang).")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="another checkout: print its round-robin figure beside this one's")
    args = parser.parse_args()
    if args.against is not None:
        against(args.against.resolve())
        return
    print("double_buffer_tma, stages 4, 100,000 tiles (the run stops at the 1,000,000-step limit)")
    runs = {}
    for schedule in (Schedule("round_robin"), Schedule("random", seed=1)):
        run, seconds = build(schedule, stages=4, tiles=100_000)
        runs[schedule.kind] = run
        print(f"  {schedule.kind:<12} {run.total_steps:>9,} steps in {seconds:6.2f} s = "
              f"{run.total_steps / seconds:>9,.0f} steps/s  (status {run.status}, "
              f"{len(run.checkpoints):,} checkpoints, {len(run.choices):,} bytes of choices)")

    run = runs["random"]
    rng = random.Random(7)
    times = []
    for _ in range(200):
        k = rng.randrange(run.total_steps + 1)
        start = time.perf_counter()
        run.snapshot(k)
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"random snapshot of the {run.total_steps:,}-step trace (200 draws): "
          f"median {statistics.median(times) * 1e3:.2f} ms, p99 {times[197] * 1e3:.2f} ms, "
          f"max {times[-1] * 1e3:.2f} ms")
    start = time.perf_counter()
    run.snapshot(900_000)
    print(f"snapshot at step 900,000: {(time.perf_counter() - start) * 1e3:.2f} ms")

    for snapshots in (True, False):
        document = run.document(500_000, 500_999, snapshots=snapshots)
        size = len(json.dumps(document, separators=(",", ":")))
        print(f"JSON per step ({'with' if snapshots else 'without'} snapshots), 1,000-step "
              f"window: {size / 1000:,.0f} bytes")
    for stages, consumers in ((1, 1), (8, 2), (16, 4)):
        small, _ = build(Schedule("random", seed=1), stages=stages, tiles=64, consumers=consumers)
        document = small.document(1, 200)
        size = len(json.dumps(document, separators=(",", ":")))
        print(f"  stages {stages:>2}, consumers {consumers}: {size / 200:,.0f} bytes per step "
              "with snapshots")


if __name__ == "__main__":
    main()
