"""Counterexamples: each replays through the engine to the same diagnostic at its last step, is a
valid trace document, and no shorter schedule reaches that diagnostic (brute force)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from app.check.engine import Limits
from app.check.service import check_config
from app.scenarios import get
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .helpers import config, explore, kinds_at_last_step, reachable_within, replay

SCHEMA = json.loads((Path(__file__).parents[2] / "app/sim/trace_schema.json").read_text())

# The smallest configurations where each toggle bites (two chunks per tile keep them small).
SMALL = [
    ("single_barrier", {"tiles": 2}, "forget_phase_toggle"),
    ("single_barrier", {"tiles": 1}, "expect_tx_short"),
    ("single_barrier", {"tiles": 2}, "expect_tx_long"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1},
     "forget_producer_phase_toggle"),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 1}, "expect_tx_short"),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 1}, "expect_tx_long"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2}, "consumer_skips_release"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1}, "producer_skips_empty_wait"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2}, "wrong_arrival_count"),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "forget_phase_toggle"),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "forget_producer_phase_toggle"),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "missing_mma_commit"),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "producer_skips_empty_wait"),
    ("proxy_fence_store", {"stages": 2, "tiles": 2}, "missing_proxy_fence"),
]
SMALL = [(s, {**p, "tile_bytes": 2048}, b) for s, p, b in SMALL]
IDS = [f"{s}-{b}" for s, _, b in SMALL]


@pytest.mark.parametrize(("scenario", "params", "bug"), SMALL, ids=IDS)
def test_counterexamples_replay_to_their_diagnostic(scenario, params, bug):
    explorer, out = explore(scenario, [bug], **params)
    assert out.found
    for kind, found in out.found.items():
        moves = explorer.schedule(out, kind)
        run = replay(explorer.cfg, moves)
        assert run.total_steps == found.steps == len(moves)
        assert kind in kinds_at_last_step(run)
        if kind == "deadlock":
            assert run.status == "deadlock"


@pytest.mark.parametrize(("scenario", "params", "bug"), SMALL, ids=IDS)
def test_no_shorter_schedule_reaches_the_diagnostic(scenario, params, bug):
    cfg = config(scenario, [bug], **params)
    _, out = explore(scenario, [bug], **params)
    for kind, found in out.found.items():
        assert reachable_within(cfg, kind, found.steps), kind
        assert not reachable_within(cfg, kind, found.steps - 1), kind


def test_violations_are_valid_trace_documents():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({"stages": 1, "tiles": 2, "consumers": 2, "tile_bytes": 2048},
                           ["wrong_arrival_count"])
    result = check_config(scenario, cfg, Limits())
    assert result["verdict"] == "unsafe"
    for violation in result["violations"]:
        trace = violation["trace"]
        jsonschema.validate(trace, SCHEMA)
        assert trace["total_steps"] == violation["steps"] == len(trace["steps"])
        assert trace["scenario"]["id"] == "double_buffer_tma"
        assert trace["scenario"]["bugs"] == ["wrong_arrival_count"]
        assert trace["scenario"]["schedule"]["kind"] == "manual"
        last = trace["steps"][-1]
        assert violation["kind"] in {d["kind"] for d in last["diagnostics"]}
        assert violation["diagnostic"] in last["diagnostics"]
        assert violation["shortest"] is True
        # The trace replays through the manual schedule it names, as any client would.
        moves = tuple(trace["scenario"]["schedule"]["moves"])
        run = Run.complete(cfg, Schedule("manual", moves=moves), scenario.describe(cfg))
        assert run.document() == trace
    steps = [v["steps"] for v in result["violations"]]
    assert steps == sorted(steps)
