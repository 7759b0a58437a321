"""The asynchronous families against what PTX 9.1 says of them: warpgroup MMAs (9.7.15),
per-thread `cp.async` and `cp.async.mbarrier.arrive` (9.7.9.25.3, 9.7.13.15.15), `st.async` /
`red.async` (9.7.9.12, 9.7.13.7), tensor copies (9.7.9.27.1.2, 5.5.3) and bulk reductions
(9.7.9.25.4.2). Each program is in tests/sim/programs or app/capture/pipelines/families;
every verdict is bounded by states."""

from __future__ import annotations

import pytest

from app.lang.errors import PipelineError
from app.sim.machine import Machine

from .semantics_helpers import config, kinds, reachable, run, source

TINY = 50_000


def all_kinds(text: str, bugs=(), limit: int = 60_000, **params) -> set[str]:
    """Every diagnostic kind some schedule reaches, by `Machine.step` alone over every
    concrete state (no reduction, no app.check code): the brute force the checker is held to."""
    machine = Machine(config(text, bugs, **params))
    start = machine.freeze()
    seen, todo, found = {start}, [start], set()
    while todo:
        assert len(seen) <= limit, "too many states for the brute force"
        frozen = todo.pop()
        machine.thaw(frozen)
        for move in list(machine.ready):
            machine.thaw(frozen)
            record = machine.step(move)
            found |= {d["kind"] for d in record["diagnostics"]}
            child = machine.freeze()
            if machine.status == "running" and child not in seen:
                seen.add(child)
                todo.append(child)
    return found


def error(text: str) -> PipelineError:
    with pytest.raises(PipelineError) as info:
        config(text)
    return info.value


# --------------------------------------------------------------------------- wgmma

def test_a_stage_is_released_after_the_wait_group_that_covers_its_read():
    assert reachable(source("wgmma_ring"), max_states=TINY) == ("safe", set())
    assert reachable(source("wgmma_pipelined"), max_states=TINY) == ("safe", set())


def test_a_release_before_the_covering_wait_group_is_an_overwrite():
    """facebookexperimental/triton#1278: the producer's next load into the stage races with
    the MMA that may still read it."""
    verdict, found = reachable(source("wgmma_ring"), ["release_before_wait"], max_states=TINY)
    assert verdict == "unsafe" and found == {"overwrite"}
    verdict, found = reachable(source("wgmma_pipelined"), ["wait_too_late"], max_states=TINY)
    assert verdict == "unsafe" and found == {"overwrite"}


def test_the_overwrite_names_the_consumer_whose_mma_still_reads():
    r = run(source("wgmma_pipelined"), bugs=["wait_too_late"])
    (diag,) = [d for d in r.diagnostics if d["kind"] == "overwrite"]
    assert "consumer" in diag["agents"] and "was still in use" in diag["message"]


def test_the_first_mma_needs_a_wgmma_fence():
    r = run(source("wgmma_ring"), bugs=["no_fence"])
    assert r.status == "undefined_behavior"
    (diag,) = r.diagnostics
    assert diag["rule"] == "wgmma_fence" and "9.7.15.7.1" in diag["message"]


WGMMA_ALONE = """
tensor  t[1] bytes 1024;
smem    s bytes 1024 chunk 1024;
agent wg warps 4 {
    st.shared [s], t[0];
    fence.proxy.async.shared::cta;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 acc, [s], t[0];
    wgmma.commit_group.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 acc, [s], t[0];
    wgmma.commit_group.sync.aligned;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 1;
    wgmma.wait_group.sync.aligned 0;
}
"""


def test_mma_async_reads_shared_memory_in_the_async_proxy():
    """PTX 9.7.15.4: a stage threads wrote needs fence.proxy.async before the MMA reads it."""
    assert kinds(run(WGMMA_ALONE)) == []
    unfenced = run(WGMMA_ALONE.replace("    fence.proxy.async.shared::cta;\n", ""))
    assert "proxy_fence_missing" in kinds(unfenced)


def test_wait_group_completes_all_but_the_n_most_recent_groups():
    r = run(WGMMA_ALONE)
    waits = [e for step in r.steps(1, r.total_steps, snapshots=False) for e in step["events"]
             if e["kind"] == "wgmma_wait_returned"]
    # three groups (the last one empty): wait_group 1 completes two, wait_group 0 the last
    assert [(w["completed"], w["pending"]) for w in waits] == [(2, 1), (1, 0)]


def test_an_mma_issued_before_its_tile_landed_is_a_partial_read():
    text = source("wgmma_ring").replace("        consumer_wait(r);\n", "")
    assert "partial_read" in reachable(text, max_states=TINY)[1]


@pytest.mark.parametrize(("types", "message"), [
    ("m64n128k16.f32.f16.bf16", "`.f16.bf16`: A and B are not a pair `wgmma.mma_async` takes"),
    ("m64n128k16.f16.bf16.bf16", "`.f16` is not an accumulator type for `.bf16` inputs"),
    ("m64n128k32.f32.bf16.bf16", "`.m64n128k32` is not a shape for `.bf16` inputs"),
    ("m64n128k32.s32.s8.u8.satfinite", None),
    ("m64n128k16.f32.f16.f16.satfinite", "`.satfinite` is not a qualifier of a `.f16` MMA"),
])
def test_wgmma_types_follow_the_syntax_blocks(types, message):
    text = WGMMA_ALONE.replace("m64n64k16.f32.f16.f16", types, 1)
    if message is None:
        config(text)
        return
    err = error(text)
    assert err.message == message and "9.7.15.5.2" in err.hint


# ------------------------------------------------------------------------ cp.async

def test_cp_async_writes_are_known_after_the_wait_group_that_covers_them():
    text = source("cp_async_groups")
    assert reachable(text, max_states=TINY) == ("safe", set())
    assert reachable(text, ["wait_all"], max_states=TINY) == ("safe", set())
    for bug in ("wait_one", "no_wait"):
        assert reachable(text, [bug], max_states=TINY) == ("unsafe", {"ordering_race"})


def test_cp_async_mbarrier_arrive_tracks_the_prior_copies():
    text = source("cp_async_mbarrier")
    assert reachable(text, max_states=TINY) == ("safe", set())
    assert reachable(text, ["inc"], max_states=TINY) == ("safe", set())
    # a copy after the arrive is not tracked: the consumer may read it unlanded or unordered
    assert {"partial_read", "ordering_race"} <= reachable(text, ["late_copy"],
                                                          max_states=TINY)[1]
    # .noinc plus the thread's own arrive: the phase completes before the copies, and the
    # asynchronous arrive lands in the next phase
    assert {"ordering_race", "reuse_before_wait", "deadlock"} <= reachable(
        text, ["noinc_and_arrive"], max_states=TINY)[1]


def test_without_noinc_the_pending_count_is_incremented_at_issue():
    """PTX 9.7.13.15.15: the increment comes before the asynchronous arrive, so the arrive is
    zero-net in the current phase; with .noinc the barrier's count must include it."""
    def pending_after(text, bugs, kind):
        r = run(text, bugs=bugs)
        for step in r.steps(1, r.total_steps):
            if any(e["kind"] == kind for e in step["events"]):
                (full,) = [b for b in step["snapshot"]["barriers"] if b["name"] == "full"]
                return full["pending_arrivals"], step["snapshot"]["cp_async"]
        raise AssertionError(kind)

    text = source("cp_async_mbarrier")
    pending, state = pending_after(text, ["inc"], "cp_async_arrive_issued")
    assert pending == 2 and state[0]["arrives"] == ["full"]
    pending, _ = pending_after(text, [], "cp_async_arrive_issued")
    assert pending == 1


def test_the_asynchronous_arrive_is_a_mover_a_schedule_can_name():
    text = source("cp_async_mbarrier")
    moves = ["producer", "producer", "producer", "cp.async:producer:arrive:full", "consumer",
             "consumer"]
    r = run(text, moves=moves)
    assert r.status == "done" and kinds(r) == []
    # the consumer cannot pass its wait before the asynchronous arrive
    with pytest.raises(Exception, match="waiting on full"):
        run(text, moves=["producer", "producer", "producer", "consumer"])


def test_cp_size_follows_the_cache_operator():
    text = source("cp_async_groups")
    err = error(text.replace("cp.async.cg.shared.global [s], [t[0]], 16;",
                             "cp.async.cg.shared.global [s], [t[0]], 8;"))
    assert err.message.startswith("cp-size is an integer constant: 16")
    r = run(text.replace("cp.async.cg.shared.global [s], [t[0]], 16;",
                         "cp.async.ca.shared.global [s], [t[0]], 4;"))
    assert r.status == "undefined_behavior" and r.diagnostics[0]["rule"] == "copy_shape"


# ----------------------------------------------------------------- st.async, red.async

def test_st_async_completes_its_bytes_on_the_peer_barrier():
    text = source("st_async")
    assert reachable(text, max_states=TINY) == ("safe", set())
    found = reachable(text, ["short"], max_states=TINY)[1]
    assert {"tx_mismatch", "partial_read"} <= found
    # the reader's CTA may exit while the second store is still on its way
    assert "remote_after_exit" in found


def test_red_async_into_another_cta():
    text = source("red_async")
    assert reachable(text, max_states=TINY) == ("safe", set())
    assert "ordering_race" in reachable(text, ["no_wait"], max_states=TINY)[1]
    own = run(text.replace("[mapa(counter, 0)], 1, [mapa(done, 0)]",
                           "[mapa(counter, 1)], 1, [mapa(done, 1)]"))
    assert own.diagnostics[-1]["rule"] == "async_store_cta"


def test_async_stores_need_a_cluster_and_pairs_ptx_has():
    err = error(source("st_async").replace("cluster 2;\n", ""))
    assert err.message == "`mapa(s, 1)`: the cluster has 1 CTA(s), ranks 0..0"
    err = error(source("red_async").replace(".add.u32", ".add.b32"))
    assert err.message == "`.add.b32` is not a `red.async` reduction"


# -------------------------------------------------------------------- tensor copies

def test_a_tensor_copy_completes_the_whole_box_its_fill_included():
    """PTX 9.7.9.27.1.2 and 5.5.3.3: the box at {64, 0} reaches past the tensor's 96 columns,
    and its complete-tx still counts all 1,024 bytes."""
    r = run(source("tensor_box"))
    assert kinds(r) == []
    steps = r.steps(1, r.total_steps, snapshots=False)
    landed = [e["bytes"] for s in steps for e in s["events"]
              if e["kind"] == "complete_tx" and e["barrier"] == "full[1]"]
    assert sum(landed) == 1024


def test_announcing_only_the_in_bounds_bytes_hangs_or_reads_early():
    """mirage-project/mirage#705: fewer bytes announced than the box brings."""
    verdict, found = reachable(source("tensor_box"), ["in_bounds_bytes"], max_states=TINY)
    assert verdict == "unsafe" and {"deadlock", "partial_read", "tx_mismatch"} <= found


def test_tensor_copy_coordinates_and_dimensions():
    text = source("tensor_box")
    r = run(text.replace("[A, {64, 0}]", "[A, {32, 0}]"))
    assert r.diagnostics[-1]["rule"] == "copy_shape"
    err = error(text.replace("tensor.2d.shared::cluster.global.tile", "tensor.1d.shared::"
                             "cluster.global.tile"))
    assert err.message.startswith("`.1d` with 2 coordinate(s) on `A`")
    err = error(text.replace("box {64, 8} elem 2", "box {3, 1} elem 2"))
    assert "multiple of 16 bytes" in err.message


TENSOR_STORE = """
tensor  A shape {128} box {64} elem 4;
smem    s bytes 256 chunk 256;
agent thread {
    st.shared [s], A[1];
    fence.proxy.async.shared::cta;
    cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [A, {64}], [s];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
    ld.global.b32 v, [A[1]];
}
"""


def test_a_tensor_store_is_a_bulk_store_of_the_box():
    assert reachable(TENSOR_STORE, max_states=TINY) == ("safe", set())
    early = TENSOR_STORE.replace("wait_group 0;", "wait_group.read 0;")
    assert reachable(early, max_states=TINY) == ("unsafe", {"store_not_visible"})


# ------------------------------------------------------------------ bulk reductions

def test_a_bulk_reduction_is_read_in_the_async_proxy_and_written_later():
    text = source("bulk_reduce")
    assert reachable(text, max_states=TINY) == ("safe", set())
    assert reachable(text, ["read_only"], max_states=TINY) == ("unsafe", {"store_not_visible"})
    assert "proxy_fence_missing" in reachable(text, ["no_fence"], max_states=TINY)[1]


def test_bulk_reduction_pairs_follow_the_ptx_table():
    text = source("bulk_reduce")
    assert error(text.replace(".add.f32", ".inc.f32")).message == \
        "`.inc.f32` is not a bulk reduction into global memory"
    assert "`.noftz`" in error(text.replace(".add.f32", ".add.f16")).message
    config(text.replace(".add.f32", ".add.noftz.bf16"))


# -------------------------------------------------------- the checker against brute force

CASES = [("wgmma_ring", (), {"tiles": 2}), ("wgmma_ring", ("release_before_wait",), {"tiles": 2}),
         ("wgmma_pipelined", ("wait_too_late",), {"tiles": 3}),
         ("cp_async_groups", ("wait_one",), {}), ("cp_async_mbarrier", (), {}),
         ("cp_async_mbarrier", ("noinc_and_arrive",), {}),
         ("cp_async_mbarrier", ("late_copy",), {}), ("st_async", (), {}),
         ("st_async", ("short",), {}), ("red_async", ("no_wait",), {}),
         ("tensor_box", ("in_bounds_bytes",), {}), ("bulk_reduce", ("read_only",), {})]


@pytest.mark.parametrize(("name", "bugs", "params"), CASES,
                         ids=[f"{n}-{'-'.join(b) or 'correct'}" for n, b, _ in CASES])
def test_the_checker_finds_what_every_schedule_reaches(name, bugs, params):
    """The reduced search (local moves, symmetry) reaches exactly the kinds the brute force
    over every concrete state reaches: the new movers (asynchronous arrives and stores) and the
    hidden registers that hold the families' state are explored soundly."""
    text = source(name)
    verdict, found = reachable(text, bugs, max_states=TINY, **params)
    assert found == all_kinds(text, bugs, **params)
    assert verdict == ("unsafe" if found else "safe")


def _two_consumers(text: str) -> str:
    return (text.replace("barrier empty_barrier[stages] = 1;", "barrier empty_barrier[stages] = 2;")
            .replace("agent consumer warps 4 {", "agent consumer[2] warps 4 {"))


@pytest.mark.parametrize("bugs", [(), ("release_before_wait",)], ids=["correct", "early"])
def test_identical_warpgroups_are_explored_soundly(bugs):
    """Two identical consumer warpgroups: the checker renames identical agents, and each one's
    wgmma state (hidden registers) goes with it."""
    text = _two_consumers(source("wgmma_ring"))
    verdict, found = reachable(text, bugs, max_states=200_000, tiles=3)
    assert found == all_kinds(text, bugs, limit=400_000, tiles=3)
    assert verdict == ("unsafe" if bugs else "safe")


EPILOGUE = WGMMA_ALONE.replace("    wgmma.wait_group.sync.aligned 1;\n", "").replace(
    "tensor  t[1] bytes 1024;", "tensor  t[1] bytes 1024;\ntensor  out bytes 1024;")


def test_the_accumulator_is_read_after_the_wait_group_that_covers_it():
    """PTX 9.7.15.7.3: reading the accumulator earlier is undefined; 9.7.15.7.1: a register
    access between two MMAs needs a wgmma.fence before the second."""
    after = EPILOGUE.replace("wgmma.wait_group.sync.aligned 0;\n",
                             "wgmma.wait_group.sync.aligned 0;\n    st.global [out], acc;\n")
    assert run(after).status == "done"
    early = EPILOGUE.replace("wgmma.wait_group.sync.aligned 0;\n",
                             "st.global [out], acc;\n    wgmma.wait_group.sync.aligned 0;\n")
    r = run(early)
    assert r.status == "undefined_behavior" and r.diagnostics[-1]["rule"] == "wgmma_accumulator"
    other = early.replace("st.global [out], acc;", "st.global [out], other;")
    assert run(other).status == "done"
    mma = "    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 acc, [s], t[0];\n"
    again = after.replace("    st.global [out], acc;\n", "    st.global [out], acc;\n" + mma)
    assert run(again).diagnostics[-1]["rule"] == "wgmma_fence"
    err = error(WGMMA_ALONE.replace("agent wg warps 4 {", "agent wg warps 4 {\n    int acc = 0;"))
    assert err.message.startswith("the accumulator `d` is a name of its own")


SCHEMA_CASES = [("wgmma_ring", ()), ("cp_async_mbarrier", ("inc",)), ("st_async", ()),
                ("red_async", ()), ("tensor_box", ("in_bounds_bytes",)), ("bulk_reduce", ())]


@pytest.mark.parametrize(("name", "bugs"), SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_traces_of_the_asynchronous_families_validate_against_the_schema(name, bugs):
    import json

    import jsonschema

    from app.sim import SCHEMA_PATH

    document = run(source(name), bugs=bugs).document()
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    parts = {"wgmma_ring": "wgmma", "cp_async_mbarrier": "cp_async", "st_async": "async_stores",
             "red_async": "async_stores"}
    if name in parts:
        assert all(parts[name] in step["snapshot"] for step in document["steps"])


def test_a_wgmma_agent_is_a_warpgroup():
    err = error(WGMMA_ALONE.replace("agent wg warps 4 {", "agent wg {"))
    assert err.message == "`wgmma.fence` is a warpgroup's instruction: the agent must be four warps"
    assert "warps 4" in err.hint


MISSPELT = [
    ("wgmma.fence.sync.alignd;", "`.alignd` is not a qualifier of `wgmma.fence`", ".aligned"),
    ("wgmma.commit_grup.sync.aligned;", "`wgmma.commit_grup` is not an instruction the engine "
     "knows", "wgmma.commit_group"),
    ("cp.async.cg.sharde.global [s], [t[0]], 16;", "`.sharde` is not a qualifier of `cp.async`",
     ".shared"),
    ("cp.async.mbarrier.arrive.noinck.shared::cta.b64 [bar];",
     "`.noinck` is not a qualifier of `cp.async.mbarrier.arrive`", ".noinc"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.ad.f32 [t[0]], [s], 64;",
     "`.ad` is not a qualifier of `cp.reduce.async.bulk`", ".add"),
    ("cp.async.bulk.tensor.1d.shared::clustr.global.mbarrier::complete_tx::bytes [s], "
     "[M, {0}], [bar];", "`.shared::clustr` is not a qualifier of `cp.async.bulk.tensor`",
     ".shared::cluster"),
]


@pytest.mark.parametrize(("line", "message", "suggestion"), MISSPELT,
                         ids=[m[0].split(" ")[0][:40] for m in MISSPELT])
def test_a_misspelt_qualifier_is_refused_with_a_suggestion(line, message, suggestion):
    text = ("tensor t[1] bytes 64;\ntensor M shape {16} box {16} elem 4;\n"
            "smem s bytes 64 chunk 16;\nbarrier bar = 1;\n"
            f"agent a warps 4 {{\n    {line}\n}}\n")
    err = error(text)
    assert err.message == message and err.hint == f"did you mean `{suggestion}`?"
    assert err.line == 6


def test_groups_that_are_never_waited_for_stop_at_the_engine_bound():
    text = ("agent t {\n    for (int k = 0; k < 70; ++k) {\n        cp.async.commit_group;\n"
            "    }\n}\n")
    r = run(text)
    assert r.status == "undefined_behavior" and r.diagnostics[-1]["rule"] == "pending_limit"
    assert run(text.replace("70", "64")).status == "done"


def test_every_pending_asynchronous_store_has_a_name_of_its_own():
    """Two stores of one tile into two stages of the peer are two movers, named apart."""
    text = source("st_async").replace("smem    s bytes 32 chunk 16;",
                                      "smem    s bytes 32 chunk 16;\nsmem    u bytes 32 chunk 16;")
    text = text.replace("[mapa(s, cta ^ 1) + 16]", "[mapa(u, cta ^ 1)]")
    machine = Machine(config(text))
    machine.step(machine.resolve("cta0.writer"))
    machine.step(machine.resolve("cta0.writer"))
    names = [n for n in machine.moves() if n.startswith("st.async:")]
    assert names == ["st.async:cta0.writer:t0@cta1", "st.async:cta0.writer:t0#2@cta1"]
