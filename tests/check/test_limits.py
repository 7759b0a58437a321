"""Bounded work: every limit stops the search with an inconclusive answer that says how far it got
and keeps what it found; the answer is deterministic."""

from __future__ import annotations

import threading

import pytest

from app.check.engine import Limits, Progress
from app.check.service import check_config, validate_limits
from app.scenarios import ParamError, get

from .helpers import explore

BIG = {"stages": 4, "tiles": 8, "consumers": 4}


def test_state_limit_after_violations_is_unsafe_and_incomplete():
    _, out = explore("double_buffer_tma", ["forget_phase_toggle"], limits=Limits(max_states=3000),
                     stages=2, tiles=6, consumers=3)
    assert out.verdict == "unsafe" and out.stopped_by == "max_states"
    assert not out.complete
    assert 3000 <= out.states < 3000 + 1000
    assert "stale_wait" in out.found and out.is_shortest("stale_wait")
    assert out.depth > 0


TOGGLES = ["forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
           "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
           "wrong_arrival_count"]


@pytest.mark.parametrize("bug,params", [
    *((bug, {"stages": 2, "tiles": 4, "consumers": 2}) for bug in TOGGLES),
    *((bug, {"stages": 1, "tiles": 2, "consumers": 3}) for bug in TOGGLES),
])
def test_stop_at_first_gives_the_shortest_of_the_first_kind(bug, params):
    """The first kind the full search finds shortest is the one stop_at_first answers with,
    with the same length and fewer states."""
    _, whole = explore("double_buffer_tma", [bug], **params)
    explorer, out = explore("double_buffer_tma", [bug], limits=Limits(stop_at_first=True),
                            **params)
    assert out.verdict == "unsafe" and whole.complete
    assert out.stopped_by == "first_violation" or out.complete
    assert out.states <= whole.states
    shortest = min(f.steps for f in whole.found.values())
    assert any(out.is_shortest(kind) for kind in out.found)
    for kind, found in out.found.items():
        if out.is_shortest(kind):
            assert found.steps == whole.found[kind].steps
    assert min(f.steps for f in out.found.values()) == shortest
    scenario = get("double_buffer_tma")
    result = check_config(scenario, explorer.cfg, Limits(stop_at_first=True))
    assert result["verdict"] == "unsafe" and result["violations"][0]["shortest"]
    assert result["violations"][0]["steps"] == shortest


def test_stop_at_first_on_a_safe_configuration_searches_everything():
    _, out = explore("double_buffer_tma", limits=Limits(stop_at_first=True), stages=2, tiles=4,
                     consumers=2)
    assert out.verdict == "safe" and out.complete and out.stopped_by is None


def test_state_limit_with_nothing_found_is_inconclusive():
    _, out = explore("double_buffer_tma", limits=Limits(max_states=500), **BIG)
    assert out.verdict == "inconclusive" and out.stopped_by == "max_states"
    assert not out.complete and not out.found


def test_time_limit():
    _, out = explore("double_buffer_tma", ["forget_phase_toggle"],
                     limits=Limits(timeout_s=0.05), **BIG)
    assert out.stopped_by == "timeout" and not out.complete
    assert out.verdict == ("unsafe" if out.found else "inconclusive")
    assert out.elapsed_s < 1.0


def test_memory_limit():
    _, out = explore("double_buffer_tma", ["forget_phase_toggle"],
                     limits=Limits(max_memory=1 << 20), **BIG)
    assert out.stopped_by == "memory"


def test_cancel_and_progress_reports():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve(BIG, ["forget_phase_toggle"])
    cancel = threading.Event()
    reports: list[Progress] = []

    def progress(p: Progress) -> None:
        reports.append(p)
        cancel.set()

    result = check_config(scenario, cfg, Limits(), progress, cancel)
    assert result["stopped_by"] == "cancelled"
    assert result["verdict"] == ("unsafe" if result["violations"] else "inconclusive")
    assert reports and reports[0].states > 0 and reports[0].depth > 0
    # What was found before the stop is still listed, with its trace.
    for violation in result["violations"]:
        assert violation["trace"]["total_steps"] == violation["steps"]


def test_answers_are_deterministic():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({"stages": 1, "tiles": 2, "consumers": 2}, ["wrong_arrival_count"])
    first, second = (check_config(scenario, cfg, Limits()) for _ in range(2))
    first.pop("elapsed_s")
    second.pop("elapsed_s")
    assert first == second


@pytest.mark.parametrize(("states", "timeout", "field"), [
    (0, 1, "max_states"), (2_000_001, 1, "max_states"), (True, 1, "max_states"),
    (10, 0, "timeout_s"), (10, 61, "timeout_s"), (10, "1", "timeout_s"),
])
def test_limits_are_validated(states, timeout, field):
    with pytest.raises(ParamError) as err:
        validate_limits(states, timeout)
    assert err.value.field == field


def test_default_limits():
    assert validate_limits(None, None) == (1_000_000, 20.0)


def test_cancel_stops_the_search_promptly():
    """A worker sets the cancel event when the client leaves; the search stops within a
    fraction of a second (it looks every 128 expansions)."""
    import time

    from app.check.engine import Explorer

    cfg = get("double_buffer_tma").resolve(BIG, ["forget_phase_toggle"])
    cancel = threading.Event()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(
        Explorer(cfg).explore(Limits(timeout_s=30), cancel=cancel)))
    worker.start()
    time.sleep(0.3)
    cancel.set()
    set_at = time.perf_counter()
    worker.join(timeout=5)
    assert done and done[0].stopped_by == "cancelled"
    assert time.perf_counter() - set_at < 0.5


def test_first_found_is_when_the_verdict_became_unsafe():
    _, out = explore("double_buffer_tma", ["forget_phase_toggle"], stages=2, tiles=4,
                     consumers=2)
    assert out.verdict == "unsafe" and out.complete
    assert 0 <= out.first_found_s <= out.elapsed_s
    _, safe = explore("double_buffer_tma", stages=2, tiles=4, consumers=2)
    assert safe.first_found_s is None


def test_release_memory_runs_anywhere():
    from app.check.engine import release_memory

    release_memory()  # glibc: trims the heap; elsewhere: only collects


def test_what_a_search_keeps_is_frozen_out_of_the_collector_until_released():
    """The first collection after a search would walk every stored state: `explore` freezes
    what survives it, and `release_memory` gives it back to the collector."""
    import gc

    from app.check.engine import release_memory

    release_memory()
    assert gc.get_freeze_count() == 0
    _, out = explore("double_buffer_tma", stages=2, tiles=2)
    assert out.verdict == "safe" and gc.isenabled()
    assert gc.get_freeze_count() > len(out.keys)
    release_memory()
    assert gc.get_freeze_count() == 0
