"""Engine figures: simulated steps per second, random-step snapshot latency, JSON bytes per step.

Run: `.venv/bin/python bench/engine.py`. Targets from the engine issue: at least 200,000 steps/s on
double_buffer_tma (stages 4, 100,000 tiles) and under 5 ms per random snapshot of a
1,000,000-step trace.
"""

from __future__ import annotations

import json
import random
import statistics
import time

from app.scenarios import get
from app.sim.schedule import Schedule
from app.sim.trace import Run


def build(schedule: Schedule, **params) -> tuple[Run, float]:
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve(params, [])
    start = time.perf_counter()
    run = Run.complete(cfg, schedule, scenario.describe(cfg))
    return run, time.perf_counter() - start


def main() -> None:
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
