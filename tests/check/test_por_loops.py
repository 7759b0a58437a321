"""Reduction 4 on programs that can cycle (docs/checker.md, "Reduction 4", *Programs that
cycle*): the persistent pass answers alone where its graph has no cycle but exact self-loops
(a failed poll) or where it left out no move the full search would try, and the full search
answers where it has one or found anything. Either way the
verdict, the kinds (livelock included, against the brute force's fair-cycle search) and the
shortest lengths are those of the search without the reduction. Bounded by states."""

from __future__ import annotations

import pytest

from app.check.engine import Explorer, Limits
from app.scenarios import from_source

from . import programs as p
from .gen_pipelines import Ring, render
from .helpers import fair_cycle_reachable
from .test_livelock import AGREEMENT
from .test_oracle import FIXED

BOUND = Limits(max_states=300_000, timeout_s=3600.0)

TWO_POLLS = """\
barrier b1 = 1;
barrier b2 = 1;
agent poller {
    int x = 0;
    int y = 0;
    while (!x) {
        mbarrier.test_wait.parity.shared::cta.b64 y, [b2], 0;
        mbarrier.test_wait.parity.shared::cta.b64 x, [b1], 0;
    }
}
agent other {
    mbarrier.arrive.shared::cta.b64 _, [b2];
    mbarrier.arrive.shared::cta.b64 _, [b1];
}
"""
"""A poll of two lines: its failed rounds are a cycle of two states, not a self-loop, so the
persistent pass's graph has a cycle; without the last arrive it never ends (a livelock)."""

LONE_POLL = TWO_POLLS.split("agent other")[0]
"""The two-line poll with no one to arrive: one mover, so no move is ever left out, and its
failed rounds are a cycle of the persistent pass's graph (a livelock)."""

PROGRAMS = [(name, p.config(source, bugs, **params)) for name, source, bugs, params in AGREEMENT
            if name != "intermittent"]  # its undefined behaviour: a kind Reduction 4 skips
PROGRAMS += [("two_polls", p.config(TWO_POLLS)),
             ("two_polls_forever",
              p.config(TWO_POLLS.replace("    mbarrier.arrive.shared::cta.b64 _, [b1];\n", ""))),
             ("lone_poll", p.config(LONE_POLL))]
PROGRAMS += [(f"ring_{ring.mutation}_{i}", from_source(render(ring)).resolve({}, []))
             for i, (ring, _) in enumerate(FIXED)]
PROGRAMS += [(f"ring_poll_{m}", from_source(render(Ring(1, 2, 3, 2, 1, False, True, False,
                                                       False, m))).resolve({}, []))
             for m in ("none", "skip_release", "poll_wrong_parity", "consumer_forgets_phase")]


def summary(out) -> tuple:
    return (out.verdict, sorted(out.found),
            {k: f.steps for k, f in out.found.items() if k != "livelock"})


@pytest.mark.parametrize(("name", "cfg"), PROGRAMS, ids=[n for n, _ in PROGRAMS])
def test_reduction_on_cycling_programs_agrees(name, cfg):
    explorer = Explorer(cfg, por_cycles=True)
    assert explorer.cyclic or name.startswith("ring_"), name
    out = explorer.explore(BOUND)
    plain = Explorer(cfg, por=False).explore(BOUND)
    assert out.complete and plain.complete
    assert summary(out) == summary(plain), name
    if explorer.cyclic:
        assert ("livelock" in out.found) == fair_cycle_reachable(cfg), name
    if explorer.independence is not None and not out.found:
        assert out.persistent_states is not None and out.states <= plain.states * 2
    if out.pruned_states == 0:  # the persistent pass was the full search: it answered alone
        assert out.exact and out.states == out.persistent_states == plain.states, name


@pytest.mark.parametrize("name", ["lone_poll", "ring_poll_tx_long", "ring_drop_as_arrive_5",
                                  "ring_skip_release_1"])
def test_a_persistent_pass_that_left_out_no_move_skips_the_second_pass(name):
    """Counted per state: a pass that never tried fewer moves than the full search would is
    that search (same states, costs and edges but exact self-loops), so its lengths and its
    livelock answer stand, even with a cycle in its graph (lone_poll); one that left a move
    out (ring_skip_release_1; ring_poll_tx_long, since a wait takes the tiles of its own
    stage only, app/check/por.py `_load_targets`) still runs the second pass."""
    cfg = dict(PROGRAMS)[name]
    out = Explorer(cfg, por_cycles=True).explore(BOUND)
    plain = Explorer(cfg, por=False).explore(BOUND)
    assert out.found and summary(out) == summary(plain), name
    assert all(out.is_shortest(kind) for kind in out.found)
    if name in ("ring_skip_release_1", "ring_poll_tx_long"):
        assert out.pruned_states > 0 and out.states > out.persistent_states
        return
    assert out.pruned_states == 0 and out.states == out.persistent_states == plain.states
    assert out.transitions <= plain.transitions
    if name == "lone_poll":
        assert out.has_cycle and "livelock" in out.found


def test_a_safe_polling_ring_is_answered_by_the_persistent_pass_alone():
    """The point: no second search where nothing was found and no cycle but failed polls."""
    cfg = from_source(render(Ring(1, 2, 3, 2, 1, False, True, False, False, "none"))).resolve(
        {}, [])
    explorer = Explorer(cfg, por_cycles=True)
    assert explorer.cyclic and explorer.independence is not None
    out = explorer.explore(BOUND)
    plain = Explorer(cfg, por=False).explore(BOUND)
    assert out.verdict == plain.verdict == "safe"
    assert out.states == out.persistent_states <= plain.states  # one pass: no second search
    assert out.transitions < plain.transitions


def test_a_program_that_cycles_is_searched_without_the_reduction_unless_asked():
    cfg = from_source(render(Ring(1, 2, 3, 2, 1, False, True, False, False, "none"))).resolve(
        {}, [])
    assert Explorer(cfg).cyclic
    assert Explorer(cfg).independence is None
    assert Explorer(cfg, por_cycles=True).independence is not None


def test_with_the_reduction_a_pass_stopped_by_its_limit_still_finds_the_fair_cycle():
    explorer = Explorer(p.config(p.EARLY_LIVELOCK_THEN_GROWTH), por_cycles=True)
    assert explorer.independence is not None
    out = explorer.explore(Limits(max_states=300, timeout_s=3600))
    assert out.stopped_by == "max_states" and not out.complete
    assert "livelock" in out.found


def test_with_the_reduction_stop_at_first_finds_the_livelock_early():
    explorer = Explorer(p.config(p.EARLY_LIVELOCK_THEN_GROWTH), por_cycles=True)
    out = explorer.explore(Limits(stop_at_first=True, max_states=1_000_000, timeout_s=3600))
    assert out.stopped_by == "first_violation" and out.states < 10_000
    assert "livelock" in out.found
