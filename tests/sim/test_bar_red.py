"""`bar.red` / `barrier.red` (PTX 9.7.13.1): a named barrier whose completion writes a reduction
of every participating thread's predicate into each waiting thread's destination. Each test
states what the PTX text says and checks the engine does it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from app.lang.errors import PipelineError

from .semantics_helpers import config, reachable, run


def registers(run_) -> list[dict]:
    return [a["registers"] for a in run_.snapshot(run_.total_steps)["agents"]]


def two_warps(line_a: str, line_b: str, qa: int = 1, qb: int = 0, warps_b: int = 1) -> str:
    shape = f" warps {warps_b}" if warps_b > 1 else ""
    return (f"agent a {{ int d = 7; int q = {qa}; {line_a} }}\n"
            f"agent b{shape} {{ int d = 7; int q = {qb}; {line_b} }}\n")


def test_popc_counts_the_threads_whose_predicate_is_true_into_every_waiter():
    """"The result of .popc is the number of threads with a True predicate"; "the final value
    is written to the destination register in all threads waiting at the barrier"."""
    line = "bar.red.popc.u32 d, 1, 64, q;"
    r = run(two_warps(line, line), moves=["a", "b"])
    assert r.snapshot(1)["agents"][0]["status"] == "waiting"  # .red waits as .sync does
    assert r.status == "done" and registers(r) == [{"d": 32, "q": 1}, {"d": 32, "q": 0}]
    done = r.steps(2, 2, snapshots=False)[0]["events"][-1]
    assert done == {"kind": "bar_completed", "named_barrier": 1, "restarted": ["a"],
                    "reduction": {"op": "popc", "value": 32}}


def test_a_warpgroup_gives_its_predicate_for_each_of_its_threads_and_the_complement():
    """"The c predicate (or its complement) from all threads": `!q` in a 2-warp agent is 64
    true threads."""
    r = run(two_warps("barrier.cta.red.popc.aligned.u32 d, 2, q;",
                      "bar.cta.red.popc.u32 d, 2, !q;", qa=0, qb=0, warps_b=2))
    assert [x["d"] for x in registers(r)] == [64, 64]


@pytest.mark.parametrize(("op", "qa", "qb", "want"), [
    ("and", 1, 1, 1), ("and", 1, 0, 0), ("or", 0, 0, 0), ("or", 0, 1, 1)])
def test_and_and_or_say_whether_all_or_any_predicate_is_true(op, qa, qb, want):
    line = f"bar.red.{op}.pred d, 3, q;"
    r = run(two_warps(line, line, qa, qb))
    assert r.status == "done" and [x["d"] for x in registers(r)] == [want, want]


def test_a_sink_destination_is_allowed_and_the_barrier_is_reusable():
    text = two_warps("bar.red.or.pred _, 0, q; bar.red.popc.u32 d, 0, q;",
                     "bar.red.or.pred _, 0, q; bar.red.popc.u32 d, 0, q;", qa=1, qb=1)
    r = run(text)
    assert r.status == "done" and [x["d"] for x in registers(r)] == [64, 64]


def test_mixing_red_with_sync_on_one_use_is_undefined():
    """"barrier{.cta}.red should not be intermixed with barrier{.cta}.sync or
    barrier{.cta}.arrive using the same active barrier. Execution in this case is
    unpredictable"."""
    for other in ("bar.sync 1, 64;", "bar.arrive 1, 64;", "bar.red.and.pred d, 1, 64, q;"):
        r = run(two_warps("bar.red.or.pred d, 1, 64, q;", other))
        assert r.status == "undefined_behavior", other
        diag = r.diagnostics[-1]
        assert diag["rule"] == "bar_red_mixed" and "9.7.13.1" in diag["message"]


def test_a_count_no_warps_can_meet_is_a_deadlock_naming_bar_red():
    line = "bar.red.or.pred d, 1, 96, q;"
    r = run(two_warps(line, line))
    assert r.status == "deadlock"
    assert "named barrier 1 (bar.red): 64 of 96 threads arrived" in r.diagnostics[-1]["message"]


def test_an_exited_warp_does_not_take_part():
    """Without a count, "all threads in the CTA participate" that have not exited."""
    r = run(two_warps("bar.red.popc.u32 d, 0, q;", "int z = 0;", qa=1))
    assert r.status == "done" and registers(r)[0]["d"] == 32


def test_red_orders_memory_as_sync_does():
    """".red ... guarantees that when the barrier completes, prior memory accesses requested by
    this thread are performed relative to all threads participating in the barrier"."""
    text = """
    tensor tile[1] bytes 1024;
    smem   s bytes 1024 chunk 1024;
    agent a { int d = 0; st.shared.b32 [s], tile[0]; bar.red.popc.u32 d, 1, 64, 1; }
    agent b { int d = 0; bar.red.popc.u32 d, 1, 64, 1; ld.shared.b32 x, [s], tile[0]; }
    """
    assert reachable(text) == ("safe", set())


def test_red_is_refused_in_an_agent_of_lanes():
    with pytest.raises(PipelineError) as info:
        config("agent w lanes 2 { int d = 0; bar.red.popc.u32 d, 0, 1; }")
    assert info.value.message == ("`bar.red` in an agent of `lanes N`: the predicates of its "
                                  "lanes N..31, which take part in the reduction, are not "
                                  "modelled")


def test_the_reduced_search_finds_what_the_full_search_finds_and_traces_validate():
    from app.check.engine import Explorer, Limits
    from app.sim import SCHEMA_PATH

    text = two_warps("bar.red.or.pred d, 1, 64, q; ++q;", "bar.red.or.pred d, 1, 64, q;") + \
        "agent c { int z = 0; ++z; }\n"
    cfg = config(text)
    full = Explorer(cfg, reduce=False).explore(Limits(200_000, 600.0))
    reduced = Explorer(cfg, reduce=True).explore(Limits(200_000, 600.0))
    assert full.verdict == reduced.verdict == "safe"
    jsonschema.validate(run(text).document(), json.loads(SCHEMA_PATH.read_text()))
