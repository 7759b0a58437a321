"""Refuse what is not modelled (issue 17, item 7): every form the language once accepted and ran
as something else is now an error at the column of the word at fault, in words that tell a typo
from a gap, or is modelled as PTX 9.1 writes it; through the API each is a 422 naming the column.
Every pipeline the project ships still compiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.lang import opcodes, syntax
from app.lang.compiler import instantiate, load, resolve_params
from app.lang.errors import PipelineError
from app.lang.syntax import Helper, Instr
from app.main import create_app
from app.scenarios import catalogue, from_source
from app.sim.program import Line
from app.sim.schedule import Schedule
from app.sim.trace import Run

ROOT = Path(__file__).parents[2]
HEAD = """cluster 2;
tensor tile[1] bytes 1024;
smem s bytes 1024 chunk 1024;
barrier bar = 1;
agent a {
    int state = 0;
"""
REMOTE_WAIT = ("PTX 9.7.13.15.8: on a barrier in another CTA (`.shared::cluster`) only arrive, "
               "expect-tx and complete-tx are supported")


def program(body: str) -> str:
    return f"{HEAD}    {body}\n}}\n"


def compile_text(text: str):
    pipeline = load(text, frozenset())
    return instantiate(pipeline, tuple(sorted(resolve_params(pipeline, {}).items())))


def error_of(body: str) -> tuple[PipelineError, str]:
    text = program(body)
    with pytest.raises(PipelineError) as info:
        compile_text(text)
    return info.value, text


def lines_of(body: str) -> list[Line]:
    prog = compile_text(program(body))
    return [n for n in prog.agents[0].nodes if isinstance(n, Line)]


# (the line, the message, the hint (exact, or a part of it after "..."), the text at the caret)
REFUSED = [
    # misspelt qualifiers: `try_wait.parityy` ran as a token wait, a scope typo ran
    ("mbarrier.try_wait.parityy.shared::cta.b64 p, [bar], 0;",
     "`.parityy` is not a qualifier of `mbarrier.try_wait`", "did you mean `.parity`?",
     "parityy"),
    ("mbarrier.arrive.release.clustr.shared::cluster.b64 _, [bar];",
     "`.clustr` is not a qualifier of `mbarrier.arrive`", "did you mean `.cluster`?", "clustr"),
    ("mbarrier.arrive.nocomplete.shared::cta.b64 state, [bar], 1;",
     "`.nocomplete` is not a qualifier of `mbarrier.arrive`", "did you mean `.noComplete`?",
     "nocomplete"),
    ("mbarrier.try_waitt.parity.shared::cta.b64 p, [bar], 0;",
     "`mbarrier.try_waitt` is not an instruction the engine knows",
     "did you mean `mbarrier.try_wait`?", "try_waitt"),
    # qualifiers PTX has, but not here, or not alone, or not twice
    ("mbarrier.try_wait.parity.release.cta.shared::cta.b64 p, [bar], 0;",
     "`.release` is not a `.sem` of `mbarrier.try_wait.parity`",
     "PTX 9.7.13.15.16: its `.sem` is `.acquire` or `.relaxed`", "release"),
    ("mbarrier.arrive.acquire.cta.shared::cta.b64 _, [bar];",
     "`.acquire` is not a `.sem` of `mbarrier.arrive`",
     "PTX 9.7.13.15.13: its `.sem` is `.release` or `.relaxed`", "acquire"),
    ("mbarrier.arrive.release.shared::cta.b64 _, [bar];",
     "`.release` needs a `.scope` beside it (`.cta` or `.cluster`)",
     "PTX 9.7.13.15.13: qualifiers `.sem` and `.scope` must be specified together", "release"),
    ("mbarrier.try_wait.parity.cluster.shared::cta.b64 p, [bar], 0;",
     "`.cluster` needs a `.sem` beside it (`.acquire` or `.relaxed`)",
     "PTX 9.7.13.15.16: qualifiers `.sem` and `.scope` must be specified together", "cluster"),
    ("mbarrier.arrive.release.relaxed.cta.shared::cta.b64 _, [bar];",
     "`.relaxed`: `mbarrier.arrive` already has its `.sem` (`.release`)",
     "PTX gives each slot one value: `.sem` = `.release` | `.relaxed`", "relaxed"),
    ("mbarrier.arrive.noComplete.relaxed.cta.shared::cta.b64 state, [bar], 1;",
     "`.relaxed` is not a `.sem` of `mbarrier.arrive.noComplete`",
     "PTX 9.7.13.15.13: its `.sem` is `.release`", "relaxed"),
    ("mbarrier.arrive.noComplete.shared::cluster.b64 _, [bar], 1;",
     "`.noComplete` takes no `.shared::cluster`",
     "a `.noComplete` arrive returns a state, so its barrier is in the executing CTA (PTX "
     "9.7.13.15.13: `.shared{::cta}` only)", "shared::cluster"),
    ("mbarrier.arrive.noComplete.shared::cta.b64 state, [bar];",
     "`mbarrier.arrive.noComplete` takes its `count` (PTX 9.7.13.15.13: `state, [addr], count`)",
     "the form is `mbarrier.arrive.noComplete.shared::cta.b64 {state,} [barrier], count;`",
     "mbarrier.arrive.noComplete"),
    ("mbarrier.arrive.shared::cta.expect_tx.b64 _, [bar], 1024;",
     "`.expect_tx` comes right after `mbarrier.arrive`",
     "write `mbarrier.arrive.expect_tx.shared::cta.b64`", "expect_tx"),
    # a qualifier PTX has that the engine does not model
    ("mbarrier.try_wait.parity.phase_type::conditional.shared::cta.b64 p, [bar], 0;",
     "`.phase_type::conditional` is not modelled",
     "`.phase_type` is a PTX ISA 9.3 qualifier of `mbarrier.try_wait` (section 9.7.14.16.19); "
     "this table follows PTX 9.1, which has none", "phase_type::conditional"),
    ("ld.shared.v4.b32 x, [s], tile[0];", "`.v4` is not modelled",
     "vector operands (`{a, b}`) have no spelling in the language", "v4"),
    ("ld.acquire.cta.shared.b32 x, [s], tile[0];", "`.acquire` is not modelled",
     "...scoped loads and stores", "acquire"),
    ("fence.proxy.async.global;", "`.global` is not modelled", "...proxy wrote", "global"),
    ("cp.async.bulk.global.shared::cta.bulk_group.cp_mask [tile[0]], [s], 1024, 0xffff;",
     "`.cp_mask` is not modelled", "...whole chunks", "cp_mask"),
    ("tcgen05.commit.cta_group::2.mbarrier::arrive::one.b64 [bar];",
     "`.cta_group::2` is not modelled", "CTA pairs (`.cta_group::2`) are not modelled yet",
     "cta_group::2"),
    ("ld.b32 x, [s], tile[0];", "`ld` with no state space (generic addressing) is not modelled",
     "write `.shared`, `.shared::cta`, `.shared::cluster` or `.global`", "b32"),
    ("cp.async.bulk.shared::cluster.global [s], [tile[0]], 1024, [bar];",
     "`cp.async.bulk.shared::cluster.global` needs its `.completion_mechanism`: "
     "`.mbarrier::complete_tx::bytes`", "PTX 9.7.9.25.4.1", "global"),
    # waits, init and inval through `mapa`: PTX 9.7.13.15.8
    ("mbarrier.try_wait.parity.shared::cta.b64 p, [mapa(bar, cta ^ 1)], 0;",
     "`mbarrier.try_wait.parity` cannot take a barrier in another CTA (`mapa`)", REMOTE_WAIT,
     "[mapa(bar"),
    ("mbarrier.test_wait.parity p, [mapa(bar, 1)], 0;",
     "`mbarrier.test_wait.parity` cannot take a barrier in another CTA (`mapa`)", REMOTE_WAIT,
     "[mapa(bar"),
    ("mbarrier.try_wait p, [mapa(bar, 1)], state;",
     "`mbarrier.try_wait` cannot take a barrier in another CTA (`mapa`)", REMOTE_WAIT,
     "[mapa(bar"),
    ("mbarrier.init [mapa(bar, 1)], 1;",
     "`mbarrier.init` cannot take a barrier in another CTA (`mapa`)", REMOTE_WAIT, "[mapa(bar"),
    ("mbarrier.inval.shared::cluster.b64 [bar];",
     "a wait, init or inval needs a barrier in the executing CTA (`.shared::cta`)", REMOTE_WAIT,
     "shared::cluster"),
    ("mbarrier.try_wait.parity.shared::cluster.b64 p, [bar], 0;",
     "a wait, init or inval needs a barrier in the executing CTA (`.shared::cta`)", REMOTE_WAIT,
     "shared::cluster"),
    ("mbarrier.arrive.release.cluster.shared::cluster.b64 state, [mapa(bar, cta ^ 1)];",
     "`mbarrier.arrive` on a barrier in another CTA cannot return a state: write `_` as its "
     "destination", "PTX 9.7.13.15.8: on `.shared::cluster`, arrive is \"supported, cannot "
     "return result\" (9.7.13.15.13: the sink `_` is mandatory)", "state, [mapa"),
    ("mbarrier.arrive.release.cluster.shared::cta.b64 _, [mapa(bar, cta ^ 1)];",
     "`mapa(...)` names another CTA's shared memory, but `.shared::cta` is the executing CTA's "
     "own", "write `.shared::cluster` (PTX 9.7.13.15.8)", "[mapa(bar"),
    ("ld.shared.b32 x, [mapa(s, cta ^ 1)], tile[0];",
     "`mapa(...)` names another CTA's shared memory, but `.shared` is the executing CTA's own",
     "write `.shared::cluster` (PTX 9.7.13.15.8)", "[mapa(s"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
     "[mapa(s, 1)], [tile[0]], 1024, [bar], 3;",
     "a multicast load names its stage in the issuing CTA, without `mapa`",
     "the copy lands at the same offset in every CTA of `ctaMask` (PTX 9.7.9.25.4.1)",
     "[mapa(s"),
    # operands PTX has and the engine does not model
    ("mbarrier.test_wait.parity.shared::cta.b64 p, [bar], 0, 1000;", "too many operands",
     "the form is `mbarrier.test_wait.parity.shared::cta.b64 {waitComplete,} [barrier], "
     "phaseParity;`", "1000"),
    ("setmaxnreg.inc.sync.aligned.u32 100;",
     "`imm-reg-count` is an integer constant in 24..256, a multiple of 8 (PTX 9.7.19.5)",
     "the form is `setmaxnreg.inc.sync.aligned.u32 imm-reg-count;`", "100"),
    ("setmaxnreg.sync.aligned.u32 240;", "`setmaxnreg` needs its `.action`: `.inc` or `.dec`",
     "PTX 9.7.19.5", "u32"),
    ("cp.async.bulk.wait_group.read state;", "N is an integer constant (PTX 9.7.9.27.2.2)",
     "the form is `cp.async.bulk.wait_group.read N;`", "state"),
    # instructions PTX has and the engine does not model yet: a gap, not a typo
    ("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
     "[s], [tile[0]], [bar];",
     "expected a tensor map and its coordinates, like `[A, {0, k * 64}]`",
     "the form is `cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::"
     "bytes [smem[i]], [tensorMap, {c0, ...}], [barrier] {, ctaMask} {, cache-policy};`",
     "[tile[0]]"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
     "[s], [tile, {x, y}], [bar];",
     "`tile` is a tensor without a box: declare it as a tensor map (`tensor tile shape {...} "
     "box {...} elem E;`)", "PTX 9.7.9.27.1.2: the tensor map gives the box a tensor copy "
                            "moves", "[tile, {x, y}]"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
     "[s], [tile, {x, y}], [bar];", "`.im2col` is not modelled",
     "the engine models `.tile` (the box as it is); gather, scatter and im2col modes are not "
     "modelled", "im2col"),
    ("fence.mbarrier_init.release.cta;", "`.cta` is not a `.scope` of `fence.mbarrier_init`",
     "PTX 9.7.13.4: its `.scope` is `.cluster`", "cta"),
    ("barrier.cluster.arrive.acquire;", "`.acquire` is not a `.sem` of `barrier.cluster.arrive`",
     "PTX 9.7.13.3: its `.sem` is `.release` or `.relaxed`", "acquire"),
    ("bar.red.popc.pred n, 0, 1;", "`.red.popc` writes a count: its type is `.u32`, not "
     "`.pred`", "PTX 9.7.13.1: `bar.red.popc.u32 d, a{, b}, {!}c;`, `bar.red.op.pred p, a{, b}, "
     "{!}c;` with `.op` `.and` or `.or`", "bar.red"),
    ("bar.red.and.u32 n, 0, 1;", "`.red.and` writes a predicate: its type is `.pred`, not "
     "`.u32`", "...`.op` `.and` or `.or`", "bar.red"),
    ("bar.red.xor.pred n, 0, 1;", "`.xor` is not a `.op` of `bar.red`",
     "PTX 9.7.13.1: its `.op` is `.popc`, `.and` or `.or`", "xor"),
    ("bar.arrive 1;", "`bar.arrive` takes its thread count `b` (PTX 9.7.13.1: a non-zero "
     "thread count is required for `arrive`)", "the form is `bar.arrive a, b;`", "bar.arrive"),
    ("elect.sync _|p, 0xffff;", "membermask 0xffff in an agent that is a whole warp: its 32 "
     "threads move in lockstep, so those outside the mask would execute it (undefined, PTX "
     "9.7.13.14)", "declare the agent's lanes (`agent NAME lanes N`) and have the lanes of the "
     "mask execute it, e.g. `if (%laneid < 2) { ... }`", "0xffff"),
    ("elect.sync p, 0xffffffff;", "expected `d|p`: the leader's laneid and the leader predicate",
     "write `_|is_leader` to keep only the predicate (PTX 9.7.13.14)", "p,"),
    ("bar.warp.sync 3;", "membermask 0x3 in an agent that is a whole warp: its 32 threads "
     "move in lockstep, so those outside the mask would execute it (undefined, PTX 9.7.13.2)",
     "declare the agent's lanes (`agent NAME lanes N`) and have the lanes of the mask execute "
     "it, e.g. `if (%laneid < 2) { ... }`", "3"),
    ("bar.warp.sync 0;", "a membermask is a non-zero 32-bit integer; got 0",
     "PTX 9.7.13.2: bit i names lane i, and the executing thread must be one of them", "0"),
    ("bar.warp.sync state;", "the membermask is a constant here (a 32-bit integer naming lanes by "
     "bit)", "write the lanes as a number, `0x3` for lanes 0 and 1", "state"),
    ("mbarrier.arrive_drop.expect_tx.shared::cta.b64 _, [bar], 1024;",
     "`mbarrier.arrive_drop.expect_tx` is not modelled yet", "...(PTX 9.7.13.15.14)",
     "expect_tx"),
    ("mbarrier.pending_count.b64 x, state;",
     "`mbarrier.pending_count` is not modelled yet in a pipeline", "...(PTX 9.7.13.15.17)",
     "pending_count"),
    ("tcgen05.fence::before_thread_sync;",
     "`tcgen05.fence::before_thread_sync` is not modelled yet", "PTX 9.7.16.11.1",
     "fence::before_thread_sync"),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 acc, [s], tile[0];",
     "sparse warpgroup MMAs are not modelled yet", "PTX 9.7.15.6.3", "sp"),
    ("cp.async.ca.shared.global [s], [tile[0]], 16, 8;",
     "`src-size` and `ignore-src` (a copy that fills with zeros) are not modelled",
     "the engine tracks which tile each chunk holds; leave the operand out", "8;"),
    ("fence.proxy.asynk;", "`fence.proxy.asynk` is not an instruction the engine knows",
     "did you mean `fence.proxy.async`?", "asynk"),
    ("cp.async.bulk;", "`cp.async.bulk` is not a whole instruction",
     "...`.commit_group`", "bulk"),
]


@pytest.mark.parametrize(("body", "message", "hint", "caret"), REFUSED,
                         ids=[c[0].split(" ")[0][:60] for c in REFUSED])
def test_what_the_engine_does_not_model_is_refused_at_its_column(body, message, hint, caret):
    err, text = error_of(body)
    assert err.message == message
    if hint.startswith("..."):
        assert hint[3:] in err.hint
    else:
        assert err.hint == hint
    assert err.line == HEAD.count("\n") + 1
    assert text.splitlines()[err.line - 1][err.column - 1:].startswith(caret), err.render(text)


def test_a_refusal_renders_as_a_compiler_prints_it():
    err, text = error_of("mbarrier.try_wait.parityy.shared::cta.b64 p, [bar], 0;")
    assert err.render(text).splitlines() == [
        "7:23: `.parityy` is not a qualifier of `mbarrier.try_wait`",
        "7 |     mbarrier.try_wait.parityy.shared::cta.b64 p, [bar], 0;",
        "                          ^",
        "hint: did you mean `.parity`?",
    ]


# --------------------------------------------------------------- modelled, as PTX writes it

@pytest.mark.parametrize(("body", "sem", "scope"), [
    ("mbarrier.arrive.shared::cta.b64 _, [bar];", "release", "cta"),
    ("mbarrier.arrive.relaxed.cluster.shared::cta.b64 _, [bar];", "relaxed", "cluster"),
    ("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [mapa(bar, cta ^ 1)];",
     "release", "cluster"),
    ("mbarrier.arrive.expect_tx.relaxed.cta.shared::cta.b64 _, [bar], 1024;", "relaxed", "cta"),
    ("mbarrier.arrive_drop.shared::cta.release.cluster.b64 _, [bar];", "release", "cluster"),
    ("mbarrier.try_wait.parity.shared::cta.b64 p, [bar], 0;", "acquire", "cta"),
    ("mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64 p, [bar], 0;", "relaxed",
     "cluster"),
    ("mbarrier.test_wait.acquire.cluster.b64 p, [bar], state;", "acquire", "cluster"),
    ("mbarrier.expect_tx.shared::cta.b64 [bar], 1024;", None, None),
    ("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [mapa(bar, 1)], 1024;",
     "relaxed", "cluster"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [s], [tile[0]], 1024, "
     "[bar];", "release", "cluster"),
    ("tcgen05.commit [bar];", None, "cluster"),
    ("ld.shared.b32 x, [s], tile[0];", None, None),
])
def test_sem_and_scope_reach_the_line_with_ptx_defaults(body, sem, scope):
    """PTX 9.7.13.15.13 / .16: "If the .sem qualifier is absent, .release [.acquire] is assumed
    by default ... If the .scope qualifier is not specified then it defaults to .cta";
    9.7.9.25.4.1: a bulk copy's complete-tx "has .release semantics at the .cluster scope";
    9.7.16.12.1: a commit's arrive-on "is the cluster scope"."""
    (line,) = lines_of(body)
    assert (line.sem, line.scope) == (sem, scope)
    assert line.op == body.split(" ")[0]


def test_no_complete_is_a_flag_of_the_arrive_it_spells():
    """PTX 9.7.13.15.13: `mbarrier.arrive.noComplete{.release.cta}{.shared{::cta}}.b64 state,
    [addr], count;` must not complete the phase; the line carries the modifier."""
    for body in ("mbarrier.arrive.noComplete.shared::cta.b64 state, [bar], 1;",
                 "mbarrier.arrive.noComplete.release.cta.b64 state, [bar], 1;"):
        (line,) = lines_of(body)
        assert (line.kind, line.flags, line.sem, line.scope) == (
            "arrive", frozenset({"noComplete"}), "release", "cta")
    (drop,) = lines_of("mbarrier.arrive_drop.noComplete.shared.b64 _, [bar], 1;")
    assert (drop.kind, drop.flags) == ("arrive_drop", frozenset({"noComplete"}))
    (plain,) = lines_of("mbarrier.arrive.shared::cta.b64 state, [bar], 1;")
    assert plain.flags == frozenset()


def test_distributed_shared_memory_reads_and_writes_name_the_remote_stage():
    ld, st = lines_of("ld.shared::cluster.b32 x, [mapa(s, cta ^ 1)], tile[0];\n"
                      "    st.shared::cluster.b32 [mapa(s, cta ^ 1)], tile[0];")
    assert (ld.kind, st.kind) == ("ld_shared", "st_shared")
    assert ld.args[1].cta is not None and st.args[0].cta is not None
    (local,) = lines_of("ld.shared::cluster x, [s], tile[0];")
    assert local.args[1].cta is None


def test_a_cache_hint_is_read_and_changes_nothing():
    """PTX 9.7.9.25.4.1: `cache-policy` "is treated as a performance hint only, and does not
    change the memory consistency behavior of the program"."""
    (hinted,) = lines_of("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes."
                         "L2::cache_hint [s], [tile[0]], 1024, [bar], 0x12;")
    (plain,) = lines_of("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                        "[s], [tile[0]], 1024, [bar];")
    assert hinted.args == plain.args and hinted.kind == plain.kind == "load"
    err, _ = error_of("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes."
                      "L2::cache_hint [s], [tile[0]], 1024, [bar];")
    assert err.message == "the `cache-policy` operand of `.L2::cache_hint` is missing"


def test_ptx_shorthands_read_as_the_full_spelling():
    short = lines_of("mbarrier.try_wait.parity p, [bar], 0;\n    tcgen05.commit [bar];")
    full = lines_of("mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [bar], 0;\n"
                    "    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
                    "[bar];")
    assert [(x.kind, x.args, x.sem, x.scope, x.flags) for x in short] == \
           [(x.kind, x.args, x.sem, x.scope, x.flags) for x in full]


# ------------------------------------------------------------------------------- the API

@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client


API_CASES = [next(c for c in REFUSED if c[1] == message) for message in (
    "`.parityy` is not a qualifier of `mbarrier.try_wait`",
    "`mbarrier.try_wait.parity` cannot take a barrier in another CTA (`mapa`)",
    "`.im2col` is not modelled",
    "`.phase_type::conditional` is not modelled")] + [
    c for c in REFUSED if "[tile, {x, y}], [bar]" in c[0]][:1]


@pytest.mark.parametrize(("body", "message", "hint", "caret"), API_CASES,
                         ids=["misspelt", "remote_wait", "tensor_copy_mode", "not_modelled",
                              "tensor_copy_operands"])
@pytest.mark.parametrize(("route", "extra"), [
    ("/api/v1/pipelines/validate", {}),
    ("/api/v1/traces", {"snapshots": False}),
    ("/api/v1/check", {}),
])
def test_the_api_answers_a_refusal_with_a_422_naming_the_column(client, route, extra, body,
                                                                message, hint, caret):
    text = program(body)
    response = client.post(route, json={"source": text, **extra})
    assert response.status_code == 422, response.text[:300]
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "source"] and detail["type"] == "pipeline_error"
    assert detail["msg"] == detail["message"] == message
    assert detail["line"] == HEAD.count("\n") + 1
    assert text.splitlines()[detail["line"] - 1][detail["column"] - 1:].startswith(caret)
    assert detail["hint"]


# ------------------------------------------------------------- what the project ships

PIPES = sorted(p for p in ROOT.glob("**/*.pipe")
               if ".venv" not in p.parts and p.name != "prelude.pipe")


@pytest.mark.parametrize("path", PIPES, ids=[str(p.relative_to(ROOT)) for p in PIPES])
def test_every_shipped_pipeline_compiles_with_every_toggle(path):
    scenario = from_source(path.read_text())
    scenario.resolve({}, [])
    for bug in scenario.bugs:
        try:
            scenario.resolve({}, [bug])
        except Exception as err:  # a toggle may need parameters (`requires`): not an opcode
            assert not isinstance(err, PipelineError), (bug, err)


def test_the_built_ins_are_all_among_them():
    assert {s.id for s in catalogue().values()} <= {p.stem for p in PIPES}


def test_every_prelude_instruction_is_a_modelled_form():
    text = (ROOT / "app" / "lang" / "prelude.pipe").read_text()
    helpers = [h for h in syntax.parse(text).items if isinstance(h, Helper)]

    def instructions(node):
        if isinstance(node, Instr):
            yield node
        elif isinstance(node, tuple | list):
            for item in node:
                yield from instructions(item)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                yield from instructions(getattr(node, name))

    instrs = list(instructions(helpers))
    assert len(helpers) == 5 and len(instrs) == 6
    for instr in instrs:
        opcodes.parse(instr.opcode, instr.pos.line, instr.pos.column)


def test_the_tutorial_in_the_docs_compiles_and_runs_as_it_says():
    doc = (ROOT / "docs" / "language.md").read_text()
    tutorial = doc[doc.index("## Tutorial"):doc.index("## Declarations")]
    text = "\n".join(re.findall(r"```c\n(.*?)```", tutorial, re.S))
    cfg = from_source(text).resolve({}, [])
    run = Run.complete(cfg, Schedule("round_robin"))
    assert (run.status, run.total_steps) == ("done", 28)


def test_the_error_examples_in_the_docs_are_what_the_language_prints():
    doc = (ROOT / "docs" / "language.md").read_text()
    section = doc[doc.index("## Instructions"):doc.index("### Instruction reference")]
    blocks = re.findall(r"```\n(\d+:\d+: .*?)```", section, re.S)
    assert len(blocks) >= 3
    head = "".join(HEAD.splitlines(keepends=True)[:5])
    for block in blocks:
        shown = block.rstrip("\n").splitlines()
        text = head + shown[1].split(" | ", 1)[1] + "\n}\n"
        with pytest.raises(PipelineError) as info:
            compile_text(text)
        assert info.value.render(text).splitlines() == shown


@pytest.mark.parametrize(("body", "message", "hint", "caret"), [
    ("bar.sync 16, 64;", "a CTA has named barriers 0..15; got 16",
     'PTX 9.7.13.1: "Each CTA instance has sixteen barriers numbered 0..15"', "16"),
    ("bar.sync 1, 48;", "a thread count is a multiple of the warp size (32) up to 1024; got 48",
     'PTX 9.7.13.1: "the value must be a multiple of warp size"', "48"),
    ("barrier.arrive.aligned 1, 2048;",
     "a thread count is a multiple of the warp size (32) up to 1024; got 2048",
     'PTX 9.7.13.1: "the value must be a multiple of warp size"', "2048"),
    ("int x = %laneid;", "`%laneid` is not declared here",
     "each lane of an agent declared `lanes N` has its own `%laneid`; an agent without lanes "
     "is a whole warp", "%laneid"),
])
def test_synchronization_operands_are_checked_at_their_column(body, message, hint, caret):
    err, text = error_of(body)
    assert (err.message, err.hint) == (message, hint)
    assert text.splitlines()[err.line - 1][err.column - 1:].startswith(caret), err.render(text)
