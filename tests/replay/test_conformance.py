"""Conformance catches doctored traces and the model's replay orders concurrent operations."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from app.replay.conformance import check_trace
from app.replay.model import Op, Replay
from app.sim.barrier import Mbarrier

TRACES = Path(__file__).resolve().parents[2] / "traces"


def _trace(name: str) -> dict:
    return json.loads((TRACES / f"{name}.json").read_text())


def _index(doc, agent, op, tile=None, barrier=None):
    for i, s in enumerate(doc["steps"]):
        if s["agent"] != agent or s["op"] != op:
            continue
        if tile is not None and s["operands"].get("tile", s.get("_tile")) != tile:
            continue
        if barrier is not None and s["operands"].get("barrier") != barrier:
            continue
        return i
    raise AssertionError(f"no {agent} {op}")


def test_the_shipped_trace_passes():
    assert check_trace(_trace("double_buffer_tma_2stage")).ok


def test_a_wait_that_returned_too_early_is_caught():
    doc = _trace("double_buffer_tma_2stage")
    bad = copy.deepcopy(doc)
    steps = bad["steps"]
    # consumer0's wait for tile 2 (full_barrier[0], the third consumer wait) moved before the
    # producer's arrive.expect_tx for tile 2: it claims to have returned before the tile existed.
    waits = [i for i, s in enumerate(steps)
             if s["agent"] == "consumer0" and s["op"] == "mbarrier.try_wait.parity"]
    wait = steps.pop(waits[2])
    arrives = [i for i, s in enumerate(steps)
               if s["agent"] == "producer" and s["op"] == "mbarrier.arrive.expect_tx"]
    steps.insert(arrives[2], wait)
    report = check_trace(bad)
    assert not report.ok
    assert report.divergences and report.recorded_divergences
    found = report.divergences[0]
    assert found["kind"] == "divergence" and found["agents"] == ["consumer0"]
    assert found["step"] == wait["step"]
    assert "full_barrier[0]" in found["message"]


def test_a_doctored_token_is_caught():
    doc = _trace("single_barrier")
    bad = copy.deepcopy(doc)
    token = next(o for o in bad["source"]["observed"] if "token_parity" in o)
    token["token_parity"] ^= 1
    report = check_trace(bad)
    assert [d["step"] for d in report.divergences] == [token["step"]]


def test_a_doctored_wait_result_is_caught():
    bad = copy.deepcopy(_trace("single_barrier"))
    wait = next(o for o in bad["source"]["observed"] if "wait_complete" in o)
    wait["wait_complete"] = False
    assert not check_trace(bad).ok


def test_landing_steps_moved_after_the_wait_break_the_recorded_order():
    bad = copy.deepcopy(_trace("single_barrier"))
    steps = bad["steps"]
    wait = next(i for i, s in enumerate(steps) if s["op"] == "mbarrier.try_wait.parity")
    landings = [i for i in range(wait) if steps[i]["agent"] == "tma"]
    moved = steps.pop(landings[-1])
    steps.insert(wait, moved)
    report = check_trace(bad)
    assert report.divergences == []
    assert report.recorded_divergences


def _barrier(count: int) -> Mbarrier:
    b = Mbarrier()
    b.init(count)
    return b


def test_concurrent_arrives_are_put_in_token_order():
    """consumer1's arrive was logged first, but its token shows it arrived second."""
    ops = [
        Op("consumer1", "arrive", barrier=0, value=1, clock=100, token_parity=0, token_pending=1),
        Op("consumer0", "arrive", barrier=0, value=1, clock=110, token_parity=0, token_pending=2),
    ]
    actions = list(Replay([_barrier(2)], ["empty_barrier[0]"]).run(ops))
    assert [a.op.agent for a in actions] == ["consumer0", "consumer1"]
    assert all(a.reordered and a.divergence is None for a in actions)


def test_a_wait_that_returned_between_two_arrives_goes_between_them():
    ops = [
        Op("consumer0", "arrive", barrier=0, value=1, clock=100, token_parity=0, token_pending=1),
        Op("consumer1", "arrive", barrier=0, value=1, clock=106, token_parity=1, token_pending=1),
        Op("producer", "wait", barrier=0, value=0, clock=150, wait_complete=True),
    ]
    actions = list(Replay([_barrier(1)], ["empty_barrier[0]"]).run(ops))
    assert [a.op.agent for a in actions] == ["consumer0", "producer", "consumer1"]
    assert all(a.divergence is None for a in actions)


def test_far_apart_operations_are_never_reordered():
    ops = [
        Op("consumer1", "arrive", barrier=0, value=1, clock=100, token_parity=0, token_pending=1),
        Op("consumer0", "arrive", barrier=0, value=1, clock=90_000, token_parity=0,
           token_pending=2),
    ]
    actions = list(Replay([_barrier(2)], ["empty_barrier[0]"]).run(ops))
    assert actions[0].divergence is not None


def test_a_copy_in_flight_for_too_long_must_have_landed():
    ops = [
        Op("producer", "arrive_expect_tx", barrier=0, value=1024, clock=0, token_parity=0,
           token_pending=1),
        Op("producer", "tma_load", barrier=0, clock=10, load="load:t0", chunks=1,
           chunk_bytes=1024),
        Op("consumer0", "wait", barrier=0, value=0, clock=4_000_000, wait_complete=False),
    ]
    actions = list(Replay([_barrier(1)], ["full_barrier[0]"]).run(ops))
    assert actions[-1].divergence and "timed out" in actions[-1].divergence
