"""RSS before, at the end of, and after a long check (issue 12: RSS returns within 10% of its start
after a 60 s check ends). Runs the check the way a worker process does: `check_config`, then the
answer and the search are dropped and `release_memory()` is called.

    .venv/bin/python bench/check_rss.py --timeout 60
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.check.engine import Limits, release_memory  # noqa: E402
from app.check.service import check_config  # noqa: E402
from app.scenarios import get  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--bug", default="forget_phase_toggle")
    parser.add_argument("--params", default="stages=4,tiles=16,consumers=4")
    args = parser.parse_args()
    params = {k: int(v) for k, v in (p.split("=") for p in args.params.split(","))}
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve(params, [args.bug] if args.bug else [])
    # Warm up on the same configuration (its program is compiled and cached once per process,
    # as in a worker that has served one check of it), then measure from there.
    check_config(scenario, cfg, Limits(timeout_s=0.5))
    release_memory()
    start = rss_mb()
    t0 = time.perf_counter()
    result = check_config(scenario, cfg, Limits(max_states=2_000_000, timeout_s=args.timeout))
    elapsed = time.perf_counter() - t0
    peak = rss_mb()
    states = result["states_explored"]
    verdict, stopped = result["verdict"], result["stopped_by"]
    del result
    release_memory()
    end = rss_mb()
    per_state = (peak - start) * (1 << 20) / max(states, 1)
    sys.stdout.write(
        f"{args.params} {args.bug}: {verdict} (stopped by {stopped}) after {elapsed:.1f} s, "
        f"{states:,} states\nRSS start {start:.0f} MB, at the end {peak:.0f} MB "
        f"({per_state:,.0f} B/state), after release {end:.0f} MB "
        f"({(end - start) / start:+.1%} of the start)\n")


if __name__ == "__main__":
    main()
