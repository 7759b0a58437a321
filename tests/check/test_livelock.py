"""Livelock in the checker: a fair cycle (weak fairness) the movers can follow forever is
`unsafe` with a lasso that replays (the state after the last step is the state after step
`cycle_from - 1`); a spin that another mover can end is not; the reduced search, the unreduced
one and an independent brute force (tests/check/helpers.py) agree on every program here."""

from __future__ import annotations

import pytest

from app.check.engine import Explorer, Limits
from app.check.service import check_config
from app.scenarios import from_source, get
from app.sim.livelock import can_cycle, enabled_ids
from app.sim.schedule import Schedule
from app.sim.trace import Run

from . import programs as p
from .helpers import fair_cycle_reachable

BOUND = Limits(max_states=1_000_000, timeout_s=3600.0)
"""Bounded by states, not by the clock: a busy machine must not turn an answer inconclusive."""


def check(source: str, bugs=(), limits: Limits | None = None, reduce: bool = True, **params):
    scenario = from_source(source)
    return check_config(scenario, scenario.resolve(params, list(bugs)), limits or BOUND,
                        reduce=reduce)


def explore(source: str, bugs=(), reduce: bool = True, limits: Limits | None = None,
            **params):
    explorer = Explorer(p.config(source, bugs, **params), reduce)
    return explorer.explore(limits or BOUND)


def livelock_of(answer: dict) -> dict:
    (violation,) = [v for v in answer["violations"] if v["kind"] == "livelock"]
    return violation


def assert_lasso(source: str, violation: dict, bugs=(), **params) -> Run:
    """The lasso replays move by move, and closes: the state after its last move is the state
    after move `cycle_from - 1`; the document says so too."""
    cfg = p.config(source, bugs, **params)
    moves = violation["trace"]["scenario"]["schedule"]["moves"]
    run = Run(cfg, Schedule("manual", moves=tuple(moves)))
    for mover in moves:
        run.append(run.machine.resolve(mover))
    start = violation["cycle_from"]
    assert 1 <= start <= len(moves) == violation["steps"]
    assert run.machine_at(start - 1).freeze() == run.machine.freeze()
    trace = violation["trace"]
    assert trace["status"] == "livelock" and trace["cycle_from"] == start
    assert trace["total_steps"] == len(moves)
    assert "livelock" in {d["kind"] for d in trace["steps"][-1]["diagnostics"]}
    return run


def test_a_spin_that_can_never_succeed_is_a_livelock_with_a_lasso():
    answer = check(p.SPIN)
    assert answer["verdict"] == "unsafe" and answer["complete"]
    assert [v["kind"] for v in answer["violations"]] == ["livelock"]
    violation = livelock_of(answer)
    assert violation["steps"] == 1 and violation["cycle_from"] == 1 and violation["shortest"]
    assert violation["diagnostic"]["agents"] == ["spinner"]
    assert "spinner polls bar parity 0" in violation["diagnostic"]["message"]
    assert_lasso(p.SPIN, violation)


def test_the_same_spin_with_a_producer_is_safe():
    answer = check(p.SPIN_WITH_PRODUCER)
    assert answer["verdict"] == "safe", answer["message"]


def test_a_bottom_component_is_fair_once_the_others_are_done():
    violation = livelock_of(check(p.BOTTOM))
    run = assert_lasso(p.BOTTOM, violation)
    machine = run.machine_at(violation["cycle_from"] - 1)
    assert machine.current_line(1) is None  # the finisher is done before the cycle
    assert violation["trace"]["steps"][-1]["snapshot"]["agents"][1]["status"] == "done"


def test_an_exit_only_an_intermittently_enabled_mover_could_take_is_still_a_livelock():
    violation = livelock_of(check(p.INTERMITTENT))
    run = assert_lasso(p.INTERMITTENT, violation)
    start, moves = violation["cycle_from"], violation["steps"]
    seen = [("waiter" in enabled_ids(run.machine_at(step)))
            for step in range(start - 1, moves)]
    assert any(seen) and not all(seen), "the waiter is enabled in some states of the cycle only"
    cycle = violation["trace"]["scenario"]["schedule"]["moves"][start - 1:]
    assert "waiter" not in cycle


@pytest.mark.parametrize("source", [p.LOCAL_LOOP, p.LOCAL_LOOP_WITH_PRODUCER],
                         ids=["alone", "with_producer"])
def test_a_loop_of_local_moves_inside_one_closure_is_a_livelock(source):
    violation = livelock_of(check(source))
    run = assert_lasso(source, violation)
    cycle = violation["trace"]["scenario"]["schedule"]["moves"][violation["cycle_from"] - 1:]
    assert set(cycle) == {"looper"}
    assert run.machine_at(violation["cycle_from"] - 1).current_line(0) is not None
    assert "looper loops at" in violation["diagnostic"]["message"]


@pytest.mark.parametrize("consumers", [2, 3])
def test_symmetric_spinners(consumers):
    violation = livelock_of(check(p.SPINNERS, consumers=consumers))
    assert_lasso(p.SPINNERS, violation, consumers=consumers)
    cycle = violation["trace"]["scenario"]["schedule"]["moves"][violation["cycle_from"] - 1:]
    assert set(cycle) == {f"consumer{i}" for i in range(consumers)}, "every spinner moves"
    assert check(p.SPINNERS_WITH_PRODUCER, consumers=consumers)["verdict"] == "safe"


AGREEMENT = [
    ("spin", p.SPIN, (), {}),
    ("spin_with_producer", p.SPIN_WITH_PRODUCER, (), {}),
    ("bottom", p.BOTTOM, (), {}),
    ("intermittent", p.INTERMITTENT, (), {}),
    ("local_loop", p.LOCAL_LOOP_WITH_PRODUCER, (), {}),
    ("spinners3", p.SPINNERS, (), {"consumers": 3}),
    ("spinners3_producer", p.SPINNERS_WITH_PRODUCER, (), {"consumers": 3}),
    ("ring_poll", p.RING_POLL, (), {"consumers": 2}),
    ("ring_poll_tx_long", p.RING_POLL, ("expect_tx_long",), {"consumers": 2}),
    ("ring_poll_no_release", p.RING_POLL, ("consumer_skips_release",), {"stages": 1}),
    ("ring_poll_s3_tx_long", p.RING_POLL, ("expect_tx_long",),
     {"stages": 3, "tiles": 6, "consumers": 2}),
    ("ring_poll_k3", p.RING_POLL, (), {"stages": 2, "tiles": 4, "consumers": 3}),
    ("ring_poll_k3_tx_long", p.RING_POLL, ("expect_tx_long",),
     {"stages": 2, "tiles": 4, "consumers": 3}),
]


@pytest.mark.parametrize("name,source,bugs,params", AGREEMENT, ids=[a[0] for a in AGREEMENT])
def test_reduced_unreduced_and_brute_force_agree(name, source, bugs, params):
    reduced = explore(source, bugs, **params)
    plain = explore(source, bugs, reduce=False, **params)
    assert reduced.complete and plain.complete
    assert set(reduced.found) == set(plain.found)
    for kind in reduced.found.keys() - {"livelock"}:
        assert reduced.found[kind].steps == plain.found[kind].steps, kind
    assert ("livelock" in reduced.found) == fair_cycle_reachable(p.config(source, bugs,
                                                                          **params))
    if "livelock" in reduced.found:
        assert_lasso(source, livelock_of(check(source, bugs, **params)), bugs, **params)


def test_a_ring_that_polls_is_a_livelock_where_blocking_waits_deadlock():
    answer = check(p.RING_POLL, ["expect_tx_long"], consumers=2)
    assert {v["kind"] for v in answer["violations"]} == {"livelock"}
    assert "repeats forever" in livelock_of(answer)["diagnostic"]["message"]


def test_stop_at_first_answers_a_livelock():
    answer = check(p.SPIN, limits=Limits(stop_at_first=True, timeout_s=3600))
    assert answer["verdict"] == "unsafe" and livelock_of(answer)["cycle_from"] == 1


def test_a_search_stopped_by_its_limit_still_finds_a_fully_expanded_fair_cycle():
    answer = check(p.EARLY_LIVELOCK_THEN_GROWTH, limits=Limits(max_states=300, timeout_s=3600))
    assert answer["stopped_by"] == "max_states" and not answer["complete"]
    assert answer["verdict"] == "unsafe"
    violation = livelock_of(answer)
    assert not violation["shortest"]
    assert_lasso(p.EARLY_LIVELOCK_THEN_GROWTH, violation)


def test_stop_at_first_looks_for_a_livelock_before_the_graph_ends():
    """The graph never ends (a counter that grows), so the livelock is found by an early look
    at what was expanded (`engine.EARLY_ANALYSIS`), not at the end."""
    answer = check(p.EARLY_LIVELOCK_THEN_GROWTH,
                   limits=Limits(stop_at_first=True, max_states=1_000_000, timeout_s=3600))
    assert answer["verdict"] == "unsafe" and answer["stopped_by"] == "first_violation"
    assert answer["states_explored"] < 10_000
    assert_lasso(p.EARLY_LIVELOCK_THEN_GROWTH, livelock_of(answer))


def test_every_built_in_scenario_keeps_no_edges():
    for scenario_id in ("single_barrier", "double_buffer_tma", "cluster_multicast",
                        "kloop_tma_mma", "proxy_fence_store"):
        scenario = get(scenario_id)
        for bug in (None, *scenario.bugs):
            cfg = scenario.resolve({}, [bug] if bug else [])
            assert not can_cycle(cfg.program), (scenario_id, bug)


def test_a_for_loop_whose_body_writes_its_variable_is_not_counted():
    counted = "agent a {\n    int y = 0;\n    for (int k = 0; k < 3; ++k) { y = k; }\n}\n"
    assert not can_cycle(p.config(counted).program)
    rewound = "agent a {\n    for (int k = 0; k < 3; ++k) { k = k - 1; }\n}\n"
    assert can_cycle(p.config(rewound).program)
    violation = livelock_of(check(rewound))  # it never ends: a loop of local moves
    assert_lasso(rewound, violation)
