"""Reduction 4 on programs that can cycle (docs/checker.md, "Reduction 4", *Programs that
cycle*): the persistent pass answers alone where its graph has no cycle but exact self-loops
(a failed poll), and the full search answers where it has one or found anything. Either way the
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

PROGRAMS = [(name, p.config(source, bugs, **params)) for name, source, bugs, params in AGREEMENT
            if name != "intermittent"]  # its undefined behaviour: a kind Reduction 4 skips
PROGRAMS += [("two_polls", p.config(TWO_POLLS)),
             ("two_polls_forever",
              p.config(TWO_POLLS.replace("    mbarrier.arrive.shared::cta.b64 _, [b1];\n", "")))]
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
    explorer = Explorer(cfg)
    assert explorer.cyclic or name.startswith("ring_"), name
    out = explorer.explore(BOUND)
    plain = Explorer(cfg, por=False).explore(BOUND)
    assert out.complete and plain.complete
    assert summary(out) == summary(plain), name
    if explorer.cyclic:
        assert ("livelock" in out.found) == fair_cycle_reachable(cfg), name
    if explorer.independence is not None and not out.found:
        assert out.persistent_states is not None and out.states <= plain.states * 2


def test_a_safe_polling_ring_is_answered_by_the_persistent_pass_alone():
    """The point: no second search where nothing was found and no cycle but failed polls."""
    cfg = from_source(render(Ring(1, 2, 3, 2, 1, False, True, False, False, "none"))).resolve(
        {}, [])
    explorer = Explorer(cfg)
    assert explorer.cyclic and explorer.independence is not None
    out = explorer.explore(BOUND)
    plain = Explorer(cfg, por=False).explore(BOUND)
    assert out.verdict == plain.verdict == "safe"
    assert out.states == out.persistent_states <= plain.states  # one pass: no second search
    assert out.transitions < plain.transitions
