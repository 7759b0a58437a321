"""app/check/parallel.py: the search with helper processes stores the same states, in the same
order, at the same costs and with the same parents as the search alone (so the same verdict,
kinds, shortest lengths and counts), and its helpers take only slots no other check holds,
giving them back as soon as one arrives (app/core/pool.py's accounting). Bounded by states."""

from __future__ import annotations

import multiprocessing

import pytest

from app.check import parallel, parallel_helper
from app.check.engine import Explorer
from app.check.service import check_config
from app.core.pool import Lender, WorkPool
from app.scenarios import get

from .helpers import STATE_BOUND, config, lengths
from .test_counterexamples import SMALL

COMPARED = [
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 2}, []),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, []),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, []),
    *[(s, p, [b]) for s, p, b in SMALL[::2]],
]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few states, and every level sent out: the helpers do all the work."""
    monkeypatch.setattr(parallel, "CHUNK", 3)
    monkeypatch.setattr(parallel, "MIN_LEVEL", 1)


def _same(alone, together):
    assert together.verdict == alone.verdict
    assert lengths(together) == lengths(alone)
    assert (together.states, together.transitions) == (alone.states, alone.transitions)
    assert list(together.keys) == list(alone.keys)
    assert list(together.cost) == list(alone.cost)
    assert list(together.parent) == list(alone.parent)
    assert together.complete == alone.complete
    assert {k: (f.node, f.child) for k, f in together.found.items()} == \
        {k: (f.node, f.child) for k, f in alone.found.items()}


@pytest.mark.parametrize(("scenario", "params", "bugs"), COMPARED,
                         ids=[f"{s}-{(b or ['correct'])[0]}" for s, _, b in COMPARED])
def test_the_search_with_helpers_stores_what_the_search_alone_stores(scenario, params, bugs,
                                                                     small_chunks):
    cfg = config(scenario, bugs, **params)
    alone = Explorer(cfg).explore(STATE_BOUND)
    together = Explorer(cfg).explore(STATE_BOUND, lent=parallel.Lent.fixed(2), helpers=2)
    _same(alone, together)
    assert alone.workers == 1
    assert 2 <= together.workers <= 3  # the levels of the smallest have one chunk or two


def test_the_answer_reports_its_workers_and_replays_its_counterexamples(small_chunks):
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({"stages": 1, "tiles": 2, "consumers": 2}, ["wrong_arrival_count"])
    alone = check_config(scenario, cfg, STATE_BOUND)
    together = check_config(scenario, cfg, STATE_BOUND, lent=parallel.Lent.fixed(1),
                            helpers=3)
    assert (alone["workers"], together["workers"]) == (1, 2)
    assert together["verdict"] == alone["verdict"] == "unsafe"
    assert together["states_explored"] == alone["states_explored"]
    assert ([(v["kind"], v["steps"], v["trace"]) for v in together["violations"]]
            == [(v["kind"], v["steps"], v["trace"]) for v in alone["violations"]])


def test_no_free_slot_means_the_search_runs_alone(small_chunks):
    cfg = config("double_buffer_tma", stages=1, tiles=2, consumers=1)
    out = Explorer(cfg).explore(STATE_BOUND, lent=parallel.Lent.fixed(0), helpers=4)
    assert out.workers == 1 and out.verdict == "safe"


def _lender(idle: int) -> Lender:
    context = multiprocessing.get_context("spawn")
    spare = context.RawArray("i", 2)
    spare[0] = idle
    return Lender(spare, context.Lock())


def test_a_lender_lends_only_idle_slots_and_wants_them_back_when_a_check_arrives():
    lender = _lender(2)
    assert lender.borrow(5) == 2
    assert lender.borrow(1) == 0  # all lent
    assert lender.owed() == 0
    lender.spare[0] = 1  # a check took a slot
    assert lender.owed() == 1
    lender.give_back(1)
    assert lender.owed() == 0 and lender.borrow(3) == 0
    lender.give_back(1)
    assert lender.spare[1] == 0


def test_the_pool_publishes_the_slots_no_job_holds():
    pool = WorkPool("check", workers=3, queue=2)
    pool.spare = multiprocessing.get_context("spawn").RawArray("i", 2)
    pool._publish()
    assert pool.spare[0] == 3
    taken = [pool.free.pop() for _ in range(2)]  # two checks, as `run` takes their slots
    pool._publish()
    assert pool.spare[0] == 1
    taken.extend(pool.free.pop() for _ in range(2))  # one more running and one queued
    pool._publish()
    assert pool.spare[0] == 0
    for slot in taken:
        pool._release(slot)
    assert pool.spare[0] == 3


def test_helpers_are_given_back_during_the_search_when_a_check_arrives(small_chunks):
    """A lender that wants its slot back after a few levels: the search gives it back at the
    next level, goes on with what it has, and still stores what the search alone stores."""
    lender = _lender(2)
    looks = {"n": 0, "given_back_at": None}

    def owed() -> int:
        looks["n"] += 1
        if looks["n"] == 5:
            lender.spare[0] = 1  # a check arrived
        return lender.owed()

    def give_back(k: int) -> None:
        if looks["given_back_at"] is None:
            looks["given_back_at"] = looks["n"]
        lender.give_back(k)

    lent = parallel.Lent(lender.borrow, owed, give_back)
    cfg = config("double_buffer_tma", stages=2, tiles=3, consumers=2)
    alone = Explorer(cfg).explore(STATE_BOUND)
    together = Explorer(cfg).explore(STATE_BOUND, lent=lent, helpers=2)
    _same(alone, together)
    assert together.workers >= 2
    assert looks["given_back_at"] == 5  # at the level the check arrived, not at the end
    assert lender.spare[1] == 0  # every slot back once the search ended


def test_a_failure_in_a_helper_is_the_searchs_internal_error(small_chunks, monkeypatch):
    def broken(*args):
        raise ValueError("a consistency check failed")

    monkeypatch.setattr(parallel_helper, "_expand_key", broken)
    cfg = config("double_buffer_tma", stages=2, tiles=3, consumers=2)
    with pytest.raises(AssertionError, match="in a helper of the search: ValueError"):
        Explorer(cfg).explore(STATE_BOUND, lent=parallel.Lent.fixed(1), helpers=1)
