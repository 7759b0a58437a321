"""The checker against the oracle on generated pipelines (tests/check/gen_pipelines.py: clusters,
two copies per tile, polling loops, a drop-out consumer, token handshakes, one mutation): the
reduced search, the unreduced one and the brute force of tests/check/oracle.py reach the same
kinds with the same shortest schedules; every counterexample replays through the engine to its
kind (a livelock lasso closes); every `safe` is confirmed by the brute force."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from app.check.engine import Explorer, Limits
from app.check.service import check_config
from app.scenarios import from_source

from .gen_pipelines import Ring, render, rings
from .helpers import kinds_at_last_step, replay
from .oracle import shortest_kinds
from .test_livelock import assert_lasso

BOUND = Limits(max_states=200_000, timeout_s=3600.0)
"""By states, not by the clock."""


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rings())
def test_the_checker_agrees_with_the_oracle(ring):
    agree(ring)


FIXED = [  # each feature with the symptom its mutation must reach, whatever Hypothesis draws
    (Ring(2, 1, 2, 1, 1, False, False, False, False, "no_producer_tail"), "remote_after_exit"),
    (Ring(2, 1, 2, 1, 1, False, True, False, False, "skip_release"), "livelock"),
    (Ring(2, 1, 2, 1, 1, False, False, False, False, "release_before_read"), "overwrite"),
    (Ring(1, 1, 2, 1, 1, False, False, False, True, "consumer_forgets_phase"), "stale_wait"),
    (Ring(1, 2, 3, 2, 1, False, False, True, True, "token_count_high"), "livelock"),
    (Ring(1, 1, 4, 2, 1, False, False, True, False, "drop_as_arrive"), "deadlock"),
    (Ring(1, 1, 4, 2, 1, False, True, True, False, "none"), None),
    (Ring(1, 1, 2, 1, 2, True, False, False, False, "expect_short"), "tx_mismatch"),
    (Ring(1, 2, 3, 2, 1, False, True, True, True, "none"), None),
    (Ring(1, 1, 3, 1, 2, True, True, False, False, "none"), None),
    (Ring(2, 1, 2, 1, 1, False, True, False, False, "none"), None),
]


@pytest.mark.parametrize(("ring", "symptom"), FIXED, ids=[r.mutation for r, _ in FIXED])
def test_each_feature_reaches_its_symptom(ring, symptom):
    truth = agree(ring)
    assert (symptom in truth) if symptom else not truth, truth


def agree(ring: Ring) -> dict[str, int]:
    """Assert that the checker and the oracle agree on one ring; the oracle's kinds."""
    source = render(ring)
    scenario = from_source(source)
    cfg = scenario.resolve({}, [])
    truth = shortest_kinds(cfg)
    explorer = Explorer(cfg)
    reduced = explorer.explore(BOUND)
    plain = Explorer(cfg, reduce=False).explore(BOUND)
    assert reduced.complete and plain.complete, source
    assert set(reduced.found) == set(plain.found) == set(truth), (ring, source)
    for kind, found in reduced.found.items():
        if kind == "livelock":
            continue
        assert found.steps == plain.found[kind].steps == truth[kind], (kind, source)
        moves = explorer.schedule(reduced, kind)
        run = replay(cfg, moves)
        assert run.total_steps == found.steps and kind in kinds_at_last_step(run), (kind, source)
    if "livelock" in reduced.found:
        answer = check_config(scenario, cfg, BOUND)
        (violation,) = [v for v in answer["violations"] if v["kind"] == "livelock"]
        assert_lasso(source, violation)
    if ring.mutation == "none":
        assert not truth, (truth, source)
    return truth
