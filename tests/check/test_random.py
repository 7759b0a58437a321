"""Whatever 500 random schedules find, the checker finds too, never later than its shortest."""

from __future__ import annotations

import pytest

from app.sim.schedule import Schedule
from app.sim.trace import Run

from .helpers import config, explore, lengths

SEEDS = range(500)
CONFIGS = [
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 2, "tile_bytes": 2048},
     ["forget_phase_toggle"]),
    ("double_buffer_tma", {"stages": 1, "tiles": 3, "consumers": 2, "tile_bytes": 2048},
     ["wrong_arrival_count"]),
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 2, "tile_bytes": 2048}, []),
    ("kloop_tma_mma", {"stages": 1, "tiles": 3, "tile_bytes": 2048},
     ["forget_producer_phase_toggle"]),
    ("single_barrier", {"tiles": 3}, ["expect_tx_short"]),
    ("proxy_fence_store", {"stages": 2, "tiles": 4}, ["missing_proxy_fence"]),
]


@pytest.mark.parametrize(("scenario", "params", "bugs"), CONFIGS,
                         ids=[f"{s}-{'-'.join(b) or 'correct'}" for s, _, b in CONFIGS])
def test_random_schedules_find_nothing_the_checker_misses(scenario, params, bugs):
    cfg = config(scenario, bugs, **params)
    _, out = explore(scenario, bugs, **params)
    shortest = lengths(out)
    seen: set[str] = set()
    for seed in SEEDS:
        run = Run.complete(cfg, Schedule("random", seed=seed))
        first: dict[str, int] = {}
        for diagnostic in run.diagnostics:
            first.setdefault(diagnostic["kind"], diagnostic["step"])
        for kind, step in first.items():
            assert kind in shortest, f"seed {seed} reached {kind}; the checker says unreachable"
            assert step >= shortest[kind], f"seed {seed} reached {kind} in {step} steps"
        seen |= first.keys()
    if not bugs:
        assert out.verdict == "safe" and not seen
    else:
        assert seen, "no random schedule failed: pick a configuration where the bug bites"
