"""Named barriers (PTX 9.7.13.1), `elect.sync` (9.7.13.14) and `bar.warp.sync` (9.7.13.2), with
lanes: each test states what the PTX text says and checks the engine does it."""

from __future__ import annotations

import pytest

from app.lang.errors import PipelineError

from .semantics_helpers import config, reachable, run, source


def step(run_, k: int) -> dict:
    return run_.steps(k, k, snapshots=False)[0]


def snap(run_, k: int | None = None) -> dict:
    return run_.snapshot(run_.total_steps if k is None else k)


# ------------------------------------------------------------------------------ named barriers

TWO_SYNCS = """
agent a { bar.sync 3, 64; st.global [out[0]], 1; }
agent b { bar.sync 3, 64; st.global [out[1]], 1; }
tensor out[2] bytes 16;
"""


def test_a_sync_waits_until_the_count_is_reached_and_restarts_its_waiters_at_once():
    """PTX: "When a barrier completes, the waiting threads are restarted without delay"."""
    r = run(TWO_SYNCS, moves=["a", "b", "a", "b"])
    assert r.status == "done"
    first = step(r, 1)
    assert first["operands"]["threads_arrived"] == 32
    assert snap(r, 1)["agents"][0]["status"] == "waiting"
    assert snap(r, 1)["named_barriers"] == [
        {"cta": 0, "id": 3, "threads_arrived": 32, "threads_expected": 64, "arrived": ["a"]}]
    done = [e for e in step(r, 2)["events"] if e["kind"] == "bar_completed"]
    assert done == [{"kind": "bar_completed", "named_barrier": 3, "restarted": ["a"]}]
    assert snap(r, 2)["agents"][0]["status"] == "running"
    assert snap(r, 2)["named_barriers"] == []


def test_a_parked_sync_is_not_a_mover():
    with pytest.raises(Exception, match="waits at named barrier 3"):
        run(TWO_SYNCS, moves=["a", "a"])


def test_arrive_goes_on_without_waiting():
    text = TWO_SYNCS.replace("agent b { bar.sync 3, 64;", "agent b { bar.arrive 3, 64;")
    r = run(text, moves=["b", "b", "a", "a"])
    assert r.status == "done"
    assert step(r, 2)["op"].startswith("st.global")


def test_an_arrive_in_place_of_a_sync_arrives_twice_and_hangs_the_other_warp():
    """vllm-project/vllm#26026: a warp that arrives twice before the reset counts twice, so the
    barrier completes without the load warp, which then waits for threads that never come."""
    text = source("named_barrier")
    verdict, found = reachable(text)
    assert verdict == "unsafe" and found == {"deadlock"}
    r = run(text, moves=["compute", "compute", "load"])
    assert r.status == "deadlock"
    (diag,) = [d for d in r.diagnostics if d["kind"] == "deadlock"]
    assert ("load waits at named barrier 1 (bar.sync): 32 of 64 threads arrived (load)"
            in diag["message"])
    assert reachable(text, bugs=["fixed"])[0] == "safe"


def test_a_count_no_set_of_agents_can_meet_is_a_deadlock_that_says_so():
    r = run(source("named_barrier"), bugs=["fixed"], count=96)
    assert r.status == "deadlock"
    message = r.diagnostics[-1]["message"]
    assert "named barrier 1" in message and "of 96 threads arrived" in message
    assert "the CTA has 64 threads, so no set of agents can meet a count of 96" in message


def test_a_warpgroup_agent_counts_128_threads():
    text = """
    agent wg warps 4 { bar.sync 0, 160; }
    agent w { bar.sync 0, 160; }
    """
    assert run(text).status == "done"
    assert run(text.replace("160", "192")).status == "deadlock"


def test_without_a_count_every_thread_that_has_not_exited_takes_part():
    text = """
    agent a { bar.sync 0; }
    agent b { bar.sync 0; }
    agent c { int x = 1; }
    """
    r = run(text, moves=["a", "b"])  # `c` has no line: it exited before the first step
    assert r.status == "done"
    assert step(r, 1)["operands"]["threads_expected"] == 64


def test_an_exit_completes_a_barrier_that_waited_for_the_exited_warp():
    text = """
    agent a { bar.sync 0; }
    agent c { int x = 1; ++x; }
    """
    r = run(text, moves=["a", "c", "a"])
    assert r.status == "done"
    assert any(e["kind"] == "bar_completed" for e in step(r, 3)["events"])


def test_arrivals_with_different_counts_in_one_use_are_undefined():
    text = "agent a { bar.arrive 2, 64; }\nagent b { bar.sync 2, 96; }\n"
    r = run(text)
    assert r.status == "undefined_behavior"
    (diag,) = r.diagnostics
    assert diag["rule"] == "bar_count_mismatch" and "count 64" in diag["message"]


@pytest.mark.parametrize(("operands", "what"), [("16, 48", "a named barrier's id"),
                                                ("1, 48", "multiple of the warp size")])
def test_an_id_or_count_out_of_range_stops_the_run(operands, what):
    r = run(f"agent a {{ int i = {operands.split(',')[0]}; int n = {operands.split(',')[1]}; "
            "bar.sync i, n; }")
    assert r.status == "undefined_behavior"
    assert r.diagnostics[0]["rule"] == "operand_range" and what in r.diagnostics[0]["message"]


ORDERED = """
tensor tile[1] bytes 1024;
smem   s bytes 1024 chunk 1024;
agent writer { st.shared.b32 [s], tile[0]; bar.arrive 1, 64; }
agent reader { bar.sync 1, 64; ld.shared.b32 x, [s], tile[0]; }
"""


def test_a_completed_barrier_orders_the_arrivers_writes_before_the_waiters_reads():
    """PTX: "prior memory accesses requested by this thread are performed relative to all
    threads participating in the barrier"."""
    assert reachable(ORDERED) == ("safe", set())
    unordered = ORDERED.replace("bar.arrive 1, 64;", "").replace("bar.sync 1, 64;", "")
    assert "ordering_race" in reachable(unordered)[1]


# ------------------------------------------------------------------------------------- lanes

def test_lanes_are_movers_of_one_warp_which_counts_32_threads():
    text = """
    agent producer lanes 2 { bar.sync 0, 64; }
    agent consumer { bar.sync 0, 64; }
    """
    r = run(text)
    assert [a["name"] for a in r.machine.layout()["agents"]] == ["producer.lane0", "producer.lane1",
                                                         "consumer"]
    assert r.status == "done"
    assert run(text.replace("64", "96")).status == "deadlock"


def test_a_warp_arrives_only_when_all_its_lanes_have():
    text = """
    agent producer lanes 2 { bar.sync 0, 64; }
    agent consumer { bar.sync 0, 64; }
    """
    r = run(text, moves=["producer.lane0", "consumer"])
    assert step(r, 2)["operands"]["threads_arrived"] == 32  # lane 1 has not come: not the warp


@pytest.mark.parametrize(("shape", "message"), [
    ("lanes 33", "`lanes 33`: a warp has 32 lanes; model 1 to 32 of them"),
    ("warps 2 lanes 2", "`lanes` splits one warp into movers; it does not go with `warps`"),
    ("warps 33", "`warps 33`: an agent stands for 1 to 32 warps"),
])
def test_an_agent_shape_out_of_range_is_refused(shape, message):
    with pytest.raises(PipelineError) as err:
        config(f"agent a {shape} {{ bar.sync 0; }}")
    assert err.value.message == message


def test_laneid_is_each_lanes_own():
    r = run("agent p lanes 3 { int me = %laneid; }")
    assert [a["registers"]["me"] for a in snap(r)["agents"]] == [0, 1, 2]


# -------------------------------------------------------------------------- elect, warp sync

def test_elect_in_a_warp_of_one_mover_elects_it():
    r = run("agent p { int d = 7; int p = 0; elect.sync d|p, 0xffffffff; }")
    assert snap(r)["agents"][0]["registers"] == {"d": 0, "p": 1}


def test_elect_waits_for_every_lane_then_elects_lane_0():
    text = "agent p lanes 3 { int d = 7; int p = 9; elect.sync d|p, 0xffffffff; }"
    r = run(text, moves=["p.lane2", "p.lane0", "p.lane1"])
    assert snap(r, 2)["agents"][2]["status"] == "waiting"
    regs = [a["registers"] for a in snap(r)["agents"]]
    assert regs == [{"d": 0, "p": 1}, {"d": 0, "p": 0}, {"d": 0, "p": 0}]
    assert r.status == "done" and r.total_steps == 3


def test_the_whole_warp_acquires_and_one_lane_loads_a_late_lane_hangs():
    """NVIDIA/cutlass#3654: nothing orders a non-elected lane's producer_acquire wait before
    the elected lane's TMA; its fix, a `__syncwarp()` after the wait, is safe."""
    text = source("elected_lane")
    verdict, found = reachable(text)
    assert verdict == "unsafe" and "deadlock" in found
    assert reachable(text, bugs=["syncwarp_fix"]) == ("safe", set())
    assert reachable(text, bugs=["syncwarp_fix"], tiles=6) == ("safe", set())


def test_syncwarp_orders_memory_among_the_lanes():
    """PTX 9.7.13.2: "threads within warp that wish to communicate via memory can store to
    memory, execute bar.warp.sync, and then safely read values stored by other threads"."""
    text = """
    tensor tile[1] bytes 1024;
    smem   s bytes 1024 chunk 1024;
    agent w lanes 2 {
        if (%laneid == 0) { st.shared.b32 [s], tile[0]; }
        __syncwarp();
        if (%laneid == 1) { ld.shared.b32 x, [s], tile[0]; }
    }
    """
    assert reachable(text) == ("safe", set())
    assert reachable(text.replace("__syncwarp();", ""))[0] == "unsafe"


def test_a_lane_that_exited_does_not_hold_up_its_warp():
    text = """
    agent w lanes 2 {
        if (%laneid == 0) { __syncwarp(); }
    }
    """
    assert run(text).status == "done"
    assert reachable(text) == ("safe", set())


# ------------------------------------------------------------------ try_wait and its time limit

TRY_THEN_WAIT = """
barrier full = 1;
agent producer { mbarrier.arrive.shared::cta.b64 _, [full]; }
agent consumer {
    int ok = 0;
    int tries = 0;
    mbarrier.try_wait.parity.shared::cta.b64 ok, [full], 0, 1000;
    if (!ok) {
        tries = 1;
        mbarrier.try_wait.parity.shared::cta.b64 _, [full], 0;
    }
}
"""


def test_try_wait_whose_answer_is_branched_on_may_return_false_before_the_phase_completes():
    """PTX 9.7.13.15.16: a suspended thread resumes when the phase completes "OR before the
    phase completes following a system-dependent time limit" (`suspendTimeHint` sets it).
    CUTLASS's consumer_try_wait, then consumer_wait(token): both answers are explored."""
    early = run(TRY_THEN_WAIT, moves=["consumer", "consumer", "producer", "consumer"])
    assert early.status == "done"
    assert step(early, 1)["events"] == [{"kind": "wait_pending", "barrier": "full", "parity": 0}]
    assert snap(early)["agents"][1]["registers"] == {"ok": 0, "tries": 1}
    late = run(TRY_THEN_WAIT, moves=["producer", "consumer"])  # once complete: true
    assert late.status == "done" and late.total_steps == 2
    assert snap(late)["agents"][1]["registers"] == {"ok": 1, "tries": 0}
    assert reachable(TRY_THEN_WAIT) == ("safe", set())


def test_try_wait_looped_on_is_the_blocking_wait():
    """`while (!ok) try_wait ok`: a false answer would only come back to the same line, so
    the line blocks until the phase completes, as before."""
    text = """
    barrier full = 1;
    agent producer { mbarrier.arrive.shared::cta.b64 _, [full]; }
    agent consumer {
        int ok = 0;
        while (!ok) { mbarrier.try_wait.parity.shared::cta.b64 ok, [full], 0, 100; }
    }
    """
    with pytest.raises(Exception, match="waiting on full parity 0"):
        run(text, moves=["consumer"])
    assert reachable(text) == ("safe", set())


# -------------------------------------------------------------------------- cluster barrier

def test_a_peer_cta_arrives_only_after_the_fenced_init_and_the_cluster_barrier():
    """PTX 9.7.13.4: `fence.mbarrier_init.release.cluster` orders the thread's earlier inits,
    and `barrier.cluster.arrive.relaxed` then carries them to the waiting CTAs; without the
    fence the relaxed arrive orders nothing, with a `.release` arrive the init is released
    anyway (9.7.13.3: the wait makes the accesses before the arrive visible)."""
    text = source("cluster_init")
    assert reachable(text) == ("safe", set())
    assert reachable(text, bugs=["no_init_fence"]) == ("unsafe", {"ordering_race"})
    assert reachable(text, bugs=["release_arrive"]) == ("safe", set())
    verdict, found = reachable(text, bugs=["no_cluster_barrier"])
    assert verdict == "unsafe" and "ordering_race" in found


def test_the_init_race_names_the_barrier_and_the_missing_fence():
    r = run(source("cluster_init"), bugs=["no_init_fence"])
    diag = next(d for d in r.diagnostics if d["kind"] == "ordering_race")
    assert diag["barrier"] in ("cta0.bar", "cta1.bar")
    assert "nothing orders the mbarrier.init" in diag["message"]
    assert "fence.mbarrier_init.release.cluster" in diag["message"]


INIT_IN_CTA = """
barrier bar;
agent a {
    mbarrier.init.shared::cta.b64 [bar], 1;
    bar.sync 1, 64;
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
agent b {
    bar.sync 1, 64;
    mbarrier.try_wait.parity.shared::cta.b64 _, [bar], 0;
}
"""


def test_a_ctas_own_agents_see_the_init_after_a_named_barrier():
    assert reachable(INIT_IN_CTA) == ("safe", set())
    unordered = INIT_IN_CTA.replace("bar.sync 1, 64;", "")
    assert "ordering_race" in reachable(unordered)[1] or "undefined_behavior" in \
        reachable(unordered)[1]


def test_a_declared_barrier_needs_no_init_ordering():
    """`barrier X = N;` is initialized before step 0: no agent needs to see an init."""
    text = INIT_IN_CTA.replace("barrier bar;", "barrier bar = 1;").replace(
        "    mbarrier.init.shared::cta.b64 [bar], 1;\n", "").replace("bar.sync 1, 64;", "")
    assert reachable(text) == ("safe", set())


def test_a_second_cluster_arrive_before_the_barrier_completes_is_undefined():
    text = "cluster 2;\nagent w { barrier.cluster.arrive; barrier.cluster.arrive; }\n"
    r = run(text, moves=["cta0.w", "cta0.w"])
    assert r.status == "undefined_behavior"
    assert r.diagnostics[0]["rule"] == "cluster_arrive_twice"


def test_a_cluster_wait_without_an_arrive_never_returns():
    r = run("cluster 2;\nagent w { barrier.cluster.wait; }\n")
    assert r.status == "deadlock"
    assert "without having arrived" in r.diagnostics[-1]["message"]


def test_the_cluster_barrier_waits_for_every_cta_and_ignores_exited_threads():
    text = """
    cluster 2;
    agent w { barrier.cluster.arrive; barrier.cluster.wait; }
    agent idle { int x = 0; }
    """
    r = run(text, moves=["cta0.w", "cta0.w"][:1] + ["cta1.w", "cta0.w", "cta1.w"])
    assert r.status == "done"
    with pytest.raises(Exception, match="cannot be made"):
        run(text, moves=["cta0.w", "cta0.w"])


# ------------------------------------------------------------------------------- setmaxnreg

REGS = """
param want = 240 in 24..256 "registers each consumer asks for";
registers 168;
agent producer warps 4 { setmaxnreg.dec.sync.aligned.u32 24; }
agent consumer[2] warps 4 { setmaxnreg.inc.sync.aligned.u32 want; }
"""


def test_setmaxnreg_inc_waits_for_the_registers_dec_gives_back():
    """PTX 9.7.19.5: `.inc` "blocks the execution until enough registers are available in the
    CTA's register pool"; `.dec` releases registers to it."""
    with pytest.raises(Exception, match="setmaxnreg.inc 240 for 9216 registers; the CTA's pool "
                                        "holds 0"):
        run(REGS, moves=["consumer0"])
    r = run(REGS, moves=["producer", "consumer0", "consumer1"])
    assert r.status == "done"
    assert reachable(REGS) == ("safe", set())


def test_consumers_that_ask_for_more_than_the_pool_holds_wait_forever():
    r = run(REGS, want=248)
    assert r.status == "deadlock"
    assert "the CTA's pool holds 8192" in r.diagnostics[-1]["message"]


def test_setmaxnreg_against_the_current_count_is_undefined():
    r = run("registers 168;\nagent p warps 4 { setmaxnreg.dec.sync.aligned.u32 200; }\n")
    assert r.status == "undefined_behavior"
    assert r.diagnostics[0]["rule"] == "setmaxnreg_range"


@pytest.mark.parametrize(("text", "message"), [
    ("registers 168;\nagent p { setmaxnreg.dec.sync.aligned.u32 24; }\n",
     "`setmaxnreg.dec.sync.aligned.u32` is executed by a whole warpgroup: declare "
     "`agent p warps 4` (PTX 9.7.19.5)"),
    ("agent p warps 4 { setmaxnreg.dec.sync.aligned.u32 24; }\n",
     "`setmaxnreg.dec.sync.aligned.u32` needs the registers every thread is launched with: "
     "declare `registers N;` (the kernel's maximum, PTX 9.7.19.5)"),
])
def test_setmaxnreg_is_refused_outside_a_warpgroup_or_without_a_launch_count(text, message):
    with pytest.raises(PipelineError) as err:
        config(text)
    assert err.value.message == message


# ------------------------------------------------------------------------- the trace document

@pytest.mark.parametrize("name", ["named_barrier", "elected_lane", "cluster_init"])
def test_their_traces_validate_against_the_schema(name):
    import json

    import jsonschema

    from app.sim import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    r = run(source(name))
    jsonschema.validate(r.document(), schema)
    for moves in (["compute", "compute", "load"],) if name == "named_barrier" else ():
        jsonschema.validate(run(source(name), moves=moves).document(), schema)


def test_a_setmaxnreg_and_a_warp_trace_validate_against_the_schema():
    import json

    import jsonschema

    from app.sim import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(run(REGS).document(), schema)
    jsonschema.validate(run("agent p lanes 2 { int d = 0; int e = 0; elect.sync d|e, "
                            "0xffffffff; __syncwarp(); }").document(), schema)


# ------------------------------------------------------- the checker's reductions stay exact

REDUCTION_CASES = [
    ("named_barrier", (), {}), ("named_barrier", ("fixed",), {}),
    ("named_barrier", ("fixed",), {"count": 96}),
    ("elected_lane", (), {}), ("elected_lane", ("syncwarp_fix",), {}),
    ("cluster_init", (), {}), ("cluster_init", ("no_init_fence",), {}),
    ("cluster_init", ("no_cluster_barrier",), {}),
]
INLINE_CASES = [TRY_THEN_WAIT, REGS, ORDERED, INIT_IN_CTA,
                "agent a { bar.sync 0; }\nagent c { int x = 1; ++x; }\n",
                "agent w lanes 3 { if (%laneid != 1) { __syncwarp(); } int y = 0; ++y; }\n",
                "agent w lanes 2 { int e = 0; elect.sync _|e, 0xffffffff; if (e) "
                "{ bar.arrive 1, 64; } }\nagent v { bar.sync 1, 64; }\n"]


@pytest.mark.parametrize("case", REDUCTION_CASES + [(t, (), {}) for t in INLINE_CASES],
                         ids=lambda c: c[0][:20] + "-" + "-".join(c[1]))
def test_the_reduced_search_finds_what_the_full_search_finds(case):
    """Local moves, identical agents and lanes, exits: the reduced search must reach every
    diagnostic kind the unreduced one does, and no other."""
    from app.check.engine import Explorer, Limits

    text, bugs, params = case
    text = source(text) if "\n" not in text else text
    cfg = config(text, bugs, **params)
    full = Explorer(cfg, reduce=False).explore(Limits(200_000, 600.0))
    reduced = Explorer(cfg, reduce=True).explore(Limits(200_000, 600.0))
    assert full.verdict == reduced.verdict
    assert set(full.found) == set(reduced.found)


def test_elect_orders_no_memory_between_lanes():
    """PTX 9.7.13.14's `.sync` only waits; unlike `bar.warp.sync` it promises no ordering."""
    text = """
    tensor tile[1] bytes 1024;
    smem   s bytes 1024 chunk 1024;
    agent w lanes 2 {
        if (%laneid == 0) { st.shared.b32 [s], tile[0]; }
        elect.sync _|_, 0xffffffff;
        if (%laneid == 1) { ld.shared.b32 x, [s], tile[0]; }
    }
    """
    assert "ordering_race" in reachable(text)[1]
    assert reachable(text.replace("elect.sync _|_, 0xffffffff;", "__syncwarp();")) == (
        "safe", set())


@pytest.mark.parametrize(("sync", "arrive"), [
    ("bar.cta.sync", "bar.cta.arrive"), ("barrier.sync", "barrier.arrive"),
    ("barrier.sync.aligned", "barrier.arrive.aligned"), ("barrier.cta.sync", "barrier.cta.arrive")])
def test_every_spelling_of_a_named_barrier_is_the_same_barrier(sync, arrive):
    """PTX 9.7.13.1: `.cta` "doesn't change the semantics"; `bar.sync` is
    `barrier.sync.aligned`; warps may mix forms on one barrier."""
    text = f"agent a {{ {sync} 4, 64; }}\nagent b {{ {arrive} 4, 64; bar.sync 5, 32; }}\n"
    r = run(text, moves=["a", "b", "b"])
    assert r.status == "done"
    assert [e["kind"] for e in step(r, 2)["events"]] == ["bar_arrive", "bar_completed"]
