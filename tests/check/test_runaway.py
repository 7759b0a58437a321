"""Every CPU loop of the checker honours its bounds, the closure of local moves included: a
closure that never ends (bulk stores issued forever, never waited for) stops at its bound of
moves, at the deadline, or at cancellation, and the answer says the program may not terminate.
Bounded by moves and states, not by an idle machine; the one time asserted is generous."""

from __future__ import annotations

import threading
import time

from app.check.budget import Limits
from app.check.engine import Explorer

from . import programs as p
from .test_livelock import check


def test_a_runaway_closure_ends_at_its_bound_of_moves():
    answer = check(p.STORES_FOREVER, limits=Limits(max_local_moves=500, timeout_s=3600))
    assert answer["verdict"] == "inconclusive" and answer["stopped_by"] == "runaway"
    assert answer["states_explored"] == 0 and not answer["complete"]
    assert "may not terminate" in answer["message"] and "storer made" in answer["message"]


def test_a_runaway_after_the_first_states_ends_too():
    source = p.STORES_FOREVER.replace("agent storer {", """barrier bar = 1;
agent storer {
    mbarrier.try_wait.parity.shared::cta.b64 q, [bar], 0;""") + """agent opener {
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
"""
    answer = check(source, limits=Limits(max_local_moves=500, timeout_s=3600))
    assert answer["stopped_by"] == "runaway" and answer["states_explored"] >= 1


def test_cancel_reaches_into_a_closure():
    cancel = threading.Event()
    cancel.set()
    out = Explorer(p.config(p.STORES_FOREVER)).explore(Limits(), cancel=cancel)
    assert out.stopped_by == "cancelled" and out.verdict == "inconclusive"


def test_the_deadline_reaches_into_a_closure():
    start = time.perf_counter()
    answer = check(p.STORES_FOREVER, limits=Limits(timeout_s=0.3))
    assert answer["stopped_by"] == "timeout"
    assert "may not terminate" in answer["message"]
    assert time.perf_counter() - start < 0.3 + 10


def test_a_loop_of_local_moves_is_not_a_runaway():
    answer = check(p.LOCAL_LOOP, limits=Limits(max_local_moves=100, timeout_s=3600))
    assert answer["verdict"] == "unsafe" and answer["stopped_by"] is None


def test_a_counter_that_grows_forever_stops_at_the_state_limit():
    answer = check(p.ARRIVES_FOREVER, limits=Limits(max_states=500, timeout_s=3600))
    assert answer["stopped_by"] == "max_states" and not answer["complete"]
    assert "livelock" not in {v["kind"] for v in answer["violations"]}
    assert "may not terminate" in answer["message"]
