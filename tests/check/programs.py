"""Small pipelines that loop, for the livelock tests: spins that can never succeed, the same spins
with a producer, a bottom component, a fair cycle whose exit only an intermittently enabled
mover could take, a loop of an agent's own lines, symmetric spinners, a ring whose consumers
poll, and closures that never end."""

from __future__ import annotations

from app.scenarios import from_source
from app.sim.config import PipelineConfig

SPIN = """\
barrier bar = 1;
agent spinner {
    int ok = 0;
    while (!ok) { mbarrier.test_wait.parity.shared::cta.b64 ok, [bar], 0; }
}
"""
"""Issue 17's first program: nobody ever completes phase 0."""

SPIN_WITH_PRODUCER = SPIN + """\
agent producer {
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
"""

BOTTOM = SPIN + """\
barrier other = 1;
agent finisher {
    mbarrier.arrive.shared::cta.b64 _, [other];
    mbarrier.try_wait.parity.shared::cta.b64 p, [other], 0;
}
"""
"""The spin goes on after the finisher is done: a bottom component (no exit), fair."""

INTERMITTENT = """\
barrier bar;
agent toggler {
    while (1) {
        mbarrier.init.shared::cta.b64 [bar], 1;
        mbarrier.arrive.shared::cta.b64 _, [bar];
        mbarrier.inval.shared::cta.b64 [bar];
    }
}
agent waiter {
    mbarrier.try_wait.parity.shared::cta.b64 p, [bar], 0;
}
"""
"""The waiter can leave the toggler's cycle only in the states where phase 0 has completed (or
the barrier is invalid): enabled now and then, never throughout, so weak fairness does not
make it move, and the cycle without it is a livelock."""

LOCAL_LOOP = """\
agent looper {
    int x = 0;
    while (1) { x = x; }
}
"""
LOCAL_LOOP_WITH_PRODUCER = LOCAL_LOOP + """\
barrier bar = 1;
agent producer {
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
"""

SPINNERS = """\
param consumers = 2 in 1..4 "spinners";
barrier bar = 1;
agent consumer[consumers] {
    int ok = 0;
    while (!ok) { mbarrier.test_wait.parity.shared::cta.b64 ok, [bar], 0; }
}
"""
SPINNERS_WITH_PRODUCER = SPINNERS + """\
agent producer {
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
"""

RING_POLL = """\
param stages = 2 in 1..4 "stages";
param tiles  = 3 in 1..8 "tiles";
param consumers = 1 in 1..3 "consumers";
tensor  tile[tiles] bytes 2048;
smem    smem[stages] bytes 2048 chunk 1024 release empty_barrier;
barrier full_barrier[stages] = 1;
barrier empty_barrier[stages] = consumers;

agent producer {
    PipelineState<stages> pipe_state = make_producer_start_state();
    for (int k = 0; k < tiles; ++k) {
        producer_acquire(pipe_state, 2048);
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [smem[pipe_state.index]], [tile[k]], 2048, [full_barrier[pipe_state.index]];
        ++pipe_state;
    }
}

agent consumer[consumers] {
    PipelineState<stages> pipe_state;
    int ok = 0;
    for (int k = 0; k < tiles; ++k) {
        ok = 0;
        while (!ok) {
            mbarrier.test_wait.parity.shared::cta.b64 ok, [full_barrier[pipe_state.index]],
                pipe_state.phase;
        }
        ld.shared x, [smem[pipe_state.index]], tile[k];
        consumer_release(pipe_state);
        ++pipe_state;
    }
}

bug expect_tx_long "the producer announces more bytes than the copy brings" {
    replace "producer_acquire(pipe_state, 2048);" with "producer_acquire(pipe_state, 3072);";
}
bug consumer_skips_release "the consumers never release" {
    replace "consumer_release(pipe_state);" with "ld.shared y, [smem[pipe_state.index]], tile[k];";
}
"""
"""A ring whose consumers poll `test_wait` in a `while` loop: safe as written; with a toggle
the polls can never succeed and the producer waits on them (a livelock, not a deadlock: the
consumers still move)."""

STORES_FOREVER = """\
tensor out[1] bytes 1024;
smem s[1] bytes 1024 chunk 1024;
agent storer {
    while (1) {
        cp.async.bulk.global.shared::cta.bulk_group [out[0]], [s[0]], 1024;
        cp.async.bulk.commit_group;
    }
}
"""
"""Issue 20's runaway: bulk stores issued forever, never waited for; every move is local, so
one closure would make them forever, each a new bulk group (the state never repeats)."""

ARRIVES_FOREVER = """\
barrier bar = 1;
agent arriver {
    while (1) { mbarrier.arrive.shared::cta.b64 _, [bar]; }
}
"""
"""A `while (1)` that arrives forever: the phase count grows, no state repeats."""

EARLY_LIVELOCK_THEN_GROWTH = """\
barrier bar = 1;
barrier gate = 1;
barrier c = 1;
agent spinner {
    int ok = 0;
    while (!ok) { mbarrier.test_wait.parity.shared::cta.b64 ok, [bar], 0; }
}
agent chooser {
    int open = 0;
    int polls = 0;
    int seen = 0;
    mbarrier.test_wait.parity.shared::cta.b64 open, [gate], 0;
    if (open) {
        while (1) {
            mbarrier.test_wait.parity.shared::cta.b64 seen, [c], 0;
            polls += 1;
        }
    }
}
agent opener {
    mbarrier.arrive.shared::cta.b64 _, [gate];
}
"""
"""Where the chooser polls before the opener arrives, it is done and the spinner spins alone
(a small fair component); where it polls after, it counts its polls of `c` forever and the
states never end: a search stopped by its state limit (or by `stop_at_first`'s early looks)
still finds the fair component among what it expanded."""


def config(source: str, bugs=(), **params) -> PipelineConfig:
    return from_source(source).resolve(params, list(bugs))
