"""The language additions of issue 18: each runs in the engine as it reads, its error reads as
tested output (message and column), and the capture generator spells it in CUDA or refuses."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from app.capture.cexpr import c_expr
from app.capture.codegen import CodegenError, generate
from app.lang.compiler import instantiate, load, resolve_params
from app.lang.errors import ParamError, PipelineError
from app.scenarios import from_source, get
from app.sim.program import Line, function
from app.sim.schedule import Schedule
from app.sim.trace import Run

NVCC = shutil.which("nvcc")


def run(text: str, params=None, bugs=(), schedule: Schedule | None = None) -> Run:
    cfg = from_source(text).resolve(params or {}, list(bugs))
    return Run.complete(cfg, schedule or Schedule("round_robin"))


def steps(r: Run) -> list[dict]:
    return r.steps(1, r.total_steps, snapshots=False)


def program(text: str, params=None, bugs=()):
    pipeline = load(text, frozenset(bugs))
    return instantiate(pipeline, tuple(sorted(resolve_params(pipeline, params or {}).items())))


def error_of(text: str, bugs=()) -> PipelineError:
    with pytest.raises(PipelineError) as info:
        program(text, bugs=bugs)
    return info.value


def at(text: str, err: PipelineError) -> str:
    """The text from the error's column on."""
    return text.splitlines()[err.line - 1][err.column - 1:]


def nvcc_compiles(tmp_path, text: str, params=None, bugs=()) -> str:
    cfg = from_source(text).resolve(params or {}, list(bugs))
    cuda = generate(cfg.program, "addition", dict(cfg.params), cfg.bugs)
    if NVCC is not None:
        src = tmp_path / "k.cu"
        src.write_text(cuda)
        proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                               str(tmp_path / "k.cubin"), str(src)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        # a register the program declares and never reads is its own business
        warnings = [w for w in proc.stderr.splitlines() if "warning #" in w.lower()
                    and "was declared but never referenced" not in w
                    and "was set but never used" not in w]
        assert not warnings, proc.stderr[-3000:]
    return cuda


# ------------------------------------------------------------------ ?:, min/max, --, -=

EXPRS = """
param n = 3 in 1..10 "n";
barrier b = 4;
agent a {
    int x = 5;
    int y = 0;
    for (int i = 0; i < 4; ++i) {
        y = i < 2 ? min(x, i) : max(x, n) + (i == 3 ? 100 : 0);
        mbarrier.arrive.shared::cta.b64 _, [b];
        x -= 2; --y;
        y--;
    }
}
"""


def test_conditional_min_max_and_decrements_compute_as_in_c():
    values = [s["operands"] for s in steps(run(EXPRS)) if s["op"].startswith(("y =", "x -=",
                                                                               "--y"))]
    # x: 5, 3, 1, -1; y = min(5,0), min(3,1), max(1,3), max(-1,3) + 100; then two decrements
    assert values == [{"y": 0}, {"x": 3, "y": -1}, {"y": -2},
                      {"y": 1}, {"x": 1, "y": 0}, {"y": -1},
                      {"y": 3}, {"x": -1, "y": 2}, {"y": 1},
                      {"y": 103}, {"x": -3, "y": 102}, {"y": 101}]


def test_a_conditional_evaluates_only_its_chosen_side():
    text = ("barrier b = 1;\nagent a {\n    int z = 0;\n    int x = 0;\n"
            "    x = z != 0 ? 10 / z : -1;\n    mbarrier.arrive.shared::cta.b64 _, [b];\n}\n")
    r = run(text)
    assert r.status == "done"
    assert steps(r)[0]["operands"] == {"x": -1}
    # a constant test folds to its side: the other is never evaluated, even a division by 0
    assert program(text.replace("z != 0 ?", "0 ?").replace("10 / z", "10 / 0")) is not None


@pytest.mark.parametrize(("old", "new", "message", "column_text"), [
    ("min(x, i)", "min(x, 1, 2)", "`min` takes two numbers; got 3", "min(x, 1, 2)"),
    ("min(x, i)", "abs(x)", "`abs(...)` is not a function of expressions; they are min and max",
     "abs(x)"),
    ("min(x, i)", "x ? 1", "unexpected `;`: expected `:`", ";"),
])
def test_expression_errors_name_the_function_and_column(old, new, message, column_text):
    text = EXPRS.replace(old, new)
    err = error_of(text)
    assert err.message == message
    assert at(text, err).startswith(column_text)


def test_a_pipeline_state_cannot_go_back():
    text = ("barrier b = 1;\nagent a {\n    PipelineState<2> s;\n    --s;\n"
            "    mbarrier.arrive.shared::cta.b64 _, [b];\n}\n")
    err = error_of(text)
    assert (err.line, err.column, err.message) == (4, 5, "`--s`: a PipelineState only moves "
                                                         "forward")
    assert err.hint == "CUTLASS's PipelineState has `++s` and `s.advance(n)`, no `--`"


def line_exprs(prog) -> list:
    return [e for agent in prog.agents for node in agent.nodes
            if isinstance(node, Line) and node.kind == "assign"
            for _, e in node.args[0] if e.const is None]


def c_matches_engine(tmp_path, exprs: list, n_regs: int, low: int, high: int) -> None:
    """Each expression in C (app.capture.cexpr) over random registers gives the engine's value."""
    rng = random.Random(3)
    rows = [[0] + [rng.randint(low, high) for _ in range(n_regs)] for _ in range(60)]
    body = "\n".join(f'    printf("%lld\\n", (long long)({c_expr(e, lambda i: f"r[{i}]")}));'
                     for e in exprs)
    src = tmp_path / "e.c"
    src.write_text("#include <stdio.h>\n"
                   "static long long pl_div(long long a, long long b) { return b ? a / b : 0; }\n"
                   "static long long pl_mod(long long a, long long b) { return b ? a % b : 0; }\n"
                   f"int main(void) {{\n    long long rows[][{n_regs + 1}] = {{\n"
                   + "".join("        {" + ", ".join(map(str, row)) + "},\n" for row in rows)
                   + f"    }};\n    for (int k = 0; k < {len(rows)}; k++) {{\n"
                   "    long long* r = rows[k];\n" + body + "\n    }\n    return 0;\n}\n")
    subprocess.run(["cc", "-O0", "-o", str(tmp_path / "e"), str(src)], check=True)
    got = [int(v) for v in subprocess.run([str(tmp_path / "e")], capture_output=True,
                                          text=True, check=True).stdout.split()]
    assert got == [function(e)(row) for row in rows for e in exprs]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_conditional_and_min_max_in_c_compute_what_the_engine_computes(tmp_path):
    text = ("agent a {\n    int x = 0;\n    int y = 0;\n    int z = 0;\n"
            "    x = y < z ? min(y, z - 3) : max(y * 2, -z) + (z ? 1 : 2);\n"
            "    x = y ? z ? 3 : 4 : min(max(y, z), 7);\n"
            "    x -= 1;\n}\n")
    exprs = line_exprs(program(text))
    assert len(exprs) == 3
    c_matches_engine(tmp_path, exprs, 5, -9, 9)


def test_expressions_reach_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, EXPRS)
    assert " ? " in cuda and "r_y = (r_y - 1);" in cuda


# ------------------------------------------------------------- cluster shapes, %cluster_*, mapa

GRID = """
param cx = 2 in 1..4 "CTAs in x";
param cy = 2 in 1..4 "CTAs in y";
cluster cx, cy;
barrier bar = 1;

// each CTA signals its x-neighbour's barrier, then waits for its own
agent a {
    int x = %cluster_ctaid.x;
    int y = %cluster_ctaid.y;
    int me = %cluster_ctarank;
    int peer = (%cluster_ctaid.x ^ 1) + %cluster_ctaid.y * %cluster_nctaid.x;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [mapa(bar, peer)];
    mbarrier.try_wait.parity.shared::cta.b64 p, [bar], 0;
}
"""


def test_a_two_dimensional_cluster_from_parameters_numbers_its_ctas_x_fastest():
    prog = program(GRID)
    assert prog.cluster == 4
    seen = {(a.name, a.initial[a.registers.index("x")], a.initial[a.registers.index("y")],
             a.initial[a.registers.index("me")]) for a in prog.agents}
    assert seen == {("cta0.a", 0, 0, 0), ("cta1.a", 1, 0, 1), ("cta2.a", 0, 1, 2),
                    ("cta3.a", 1, 1, 3)}
    r = run(GRID)
    assert (r.status, r.diagnostics) == ("done", [])
    arrived = [s["operands"]["barrier"] for s in steps(r) if s["op"].startswith("mbarrier.arr")]
    assert arrived == ["cta1.bar", "cta0.bar", "cta3.bar", "cta2.bar"]
    assert program(GRID, {"cx": 2, "cy": 3}).cluster == 6


def test_a_cluster_shape_past_the_limit_is_refused():
    err = error_of(GRID.replace("cluster cx, cy;", "cluster 4, 4;"))
    assert (err.line, err.column) == (4, 1)
    assert err.message == "a cluster has 1 to 8 CTAs here; 4 x 4 makes 16"
    with pytest.raises(ParamError) as info:
        program(GRID, {"cx": 4, "cy": 4})
    assert info.value.field == "cx"
    err = error_of(GRID.replace("cluster cx, cy;", "cluster x, 2;"))
    assert (err.line, err.column, err.message) == (4, 9, "`x` is not declared here")


NO_CLUSTER = """
barrier bar = 1;
agent a {
    if (cluster_size > 1) {
        mbarrier.arrive.release.cluster.shared::cluster.b64 _, [mapa(bar, cta ^ 1)];
    }
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [mapa(bar, 0)];
    mbarrier.try_wait.parity.shared::cta.b64 p, [bar], 0;
}
"""


def test_mapa_in_a_program_without_a_cluster_names_its_own_cta():
    r = run(NO_CLUSTER)
    assert (r.status, r.diagnostics) == ("done", [])
    assert [s["op"].split(" ")[0] for s in steps(r)] == [
        "mbarrier.arrive.release.cluster.shared::cluster.b64",
        "mbarrier.try_wait.parity.shared::cta.b64"]


def test_mapa_to_a_cta_the_cluster_lacks_is_refused_where_the_line_can_run():
    text = NO_CLUSTER.replace("if (cluster_size > 1)", "if (1)")
    err = error_of(text)
    assert (err.line, err.column) == (5, 64)
    assert at(text, err).startswith("[mapa(bar, cta ^ 1)]")
    assert err.message == "`mapa(bar, 1)`: the cluster has 1 CTA(s), ranks 0..0"
    # computed from a register, it stops the run when it runs
    text = NO_CLUSTER.replace("int", "").replace("agent a {", "agent a {\n    int k = 1;")
    text = text.replace("mapa(bar, 0)", "mapa(bar, k)")
    r = run(text)
    assert r.status == "undefined_behavior"
    assert r.diagnostics[-1]["rule"] == "out_of_bounds"


def test_mapa_names_shared_memory_only():
    text = "tensor t bytes 16;\nsmem s bytes 16 chunk 16;\n" + NO_CLUSTER.replace(
        "    mbarrier.try_wait", "    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
        "::bytes [s], [mapa(t, 0)], 16, [bar];\n    mbarrier.try_wait")
    err = error_of(text)
    assert err.message == "`mapa`: `t` is a tensor, not in shared memory"
    assert at(text, err).startswith("[mapa(t, 0)]")


def test_clusters_and_mapa_reach_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, GRID)
    assert "#define CLUSTER 4" in cuda
    cuda = nvcc_compiles(tmp_path, NO_CLUSTER)
    assert "#define CLUSTER 1" in cuda and "mapa_u32(" in cuda


# ------------------------------------------------------------ PipelineState copy and advance(n)

ADVANCE = """
param stages = 3 in 1..8 "stages";
param start = 0 in 0..1 "the first state's phase";
barrier b = 1;
agent a {
    PipelineState<stages> s = make_producer_start_state();
    PipelineState<stages> t = s;
    int ok = 1;
    int first = 0;
    for (int n = 0; n < 3 * stages + 2; ++n) {
        s.advance(n);
        for (int j = 0; j < n; ++j) {
            ++t;
        }
        ok = ok && s.index == t.index && s.phase == t.phase && s.count == t.count;
        first = n == 0 ? s.phase : first;
    }
    PipelineState<stages> u = s;
    u = t; u += 1;
    mbarrier.arrive.shared::cta.b64 _, [b];
}
"""


def final_registers(r: Run, agent: int = 0) -> dict[str, int]:
    machine = r.machine_at(r.total_steps)
    names = machine.agents[agent].registers
    return {name: machine.regs[agent][i + 1] for i, name in enumerate(names)}


@pytest.mark.parametrize("stages", [1, 2, 3, 5])
def test_advance_n_is_n_increments_as_cutlass_writes_it(stages):
    r = run(ADVANCE, {"stages": stages})
    assert r.status == "done"
    regs = final_registers(r)
    assert regs["ok"] == 1 and regs["first"] == 1  # a copy took the producer's start phase
    total = sum(range(3 * stages + 2))
    assert regs["s.count"] == total and regs["s.index"] == total % stages
    assert regs["s.phase"] == 1 ^ (total // stages) % 2
    assert (regs["u.index"], regs["u.count"]) == ((total + 1) % stages, total + 1)
    copies = [s for s in steps(r) if s["op"] == "u = t; u += 1"]
    assert len(copies) == 1  # one line, one step


@pytest.mark.parametrize(("old", "new", "message", "column_text"), [
    ("PipelineState<stages> t = s;", "PipelineState<2> t = s;",
     "`s` is a PipelineState<3>; `t` is a PipelineState<2>", "s;"),
    ("u = t; u += 1;", "u = ok;",
     "`u` is a PipelineState: assign it another one, or one of its fields", "u = ok;"),
    ("s.advance(n);", "s.advance(s.index);", "`s.advance(...)`: the count reads `s` itself",
     "s.index"),
    ("s.advance(n);", "s.advance(-1);", "a PipelineState advances by 0..2^32-1; got -1", "-1"),
    ("s.advance(n);", "s.retreat(n);", "a PipelineState has no method `retreat`",
     "s.retreat"),
    ("s.advance(n);", "ok.advance(n);", "`ok.advance(...)`: only a PipelineState has methods",
     "ok.advance"),
])
def test_pipeline_state_errors(old, new, message, column_text):
    text = ADVANCE.replace(old, new)
    err = error_of(text)
    assert err.message == message
    assert at(text, err).startswith(column_text)


def test_advance_by_a_negative_register_stops_the_run():
    text = ADVANCE.replace("s.advance(n);", "s.advance(n - 1);")
    r = run(text)
    assert r.status == "undefined_behavior"
    assert r.diagnostics[-1]["rule"] == "operand_range"


def test_pipeline_state_copy_and_advance_reach_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, ADVANCE)
    assert "pl_div(" in cuda and "r_u_index = r_t_index;" in cuda


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_advance_in_c_computes_what_the_engine_computes(tmp_path):
    text = ("agent a {\n    PipelineState<3> s;\n    int n = 0;\n"
            "    s.advance(n);\n    s += n + 4;\n}\n")
    prog = program(text)
    exprs = line_exprs(prog)
    assert len(exprs) == 6
    c_matches_engine(tmp_path, exprs, len(prog.agents[0].registers), 0, 9)


# -------------------------------------------------------------------------- register arrays

PHASES = """
param stages = 3 in 1..8 "barriers in the ring";
barrier b[stages] = 1;
agent a {
    int ph[stages];
    int seen[2] = {7};
    int j = 0;
    for (int k = 0; k < 2 * stages + 1; ++k) {
        mbarrier.arrive.shared::cta.b64 _, [b[j]];
        mbarrier.try_wait.parity.shared::cta.b64 seen[1], [b[j]], ph[j];
        ph[j] ^= 1; j = (j + 1) % stages;
    }
}
"""


def test_a_register_array_keeps_one_phase_bit_per_barrier():
    r = run(PHASES)
    assert (r.status, r.diagnostics) == ("done", [])
    waits = [s["operands"]["parity"] for s in steps(r) if "try_wait" in s["op"]]
    assert waits == [0, 0, 0, 1, 1, 1, 0]
    regs = final_registers(r)
    assert [regs[f"ph[{k}]"] for k in range(3)] == [1, 0, 0]
    assert (regs["seen[0]"], regs["seen[1]"]) == (7, 1)  # the rest of `{7}` is 0, then a dest
    # one shared phase register would be the bug: the second barrier's wait asks parity 1
    bad = run(PHASES.replace("ph[j] ^= 1;", "ph[0] ^= 1;").replace("ph[j]];", "ph[0]];"))
    assert bad.status == "deadlock"


def test_a_register_array_index_out_of_range_stops_the_run():
    r = run(PHASES.replace("j = (j + 1) % stages;", "j = j + 1;"))
    assert r.status == "undefined_behavior"
    assert r.diagnostics[-1]["rule"] == "out_of_bounds"
    assert "b[3] is out of range" in r.diagnostics[-1]["message"]
    r = run(PHASES.replace("[b[j]], ph[j];", "[b[j]], ph[j + k];"))
    assert r.status == "undefined_behavior"
    assert "ph[4] is out of range: ph has 3 element(s)" in r.diagnostics[-1]["message"]


@pytest.mark.parametrize(("old", "new", "message", "column_text"), [
    ("ph[j] ^= 1;", "ph ^= 1;", "`ph` is a register array; name one element", "ph ^= 1;"),
    ("[b[j]], ph[j];", "[b[j]], ph;", "`ph` is a register array; name one element", "ph;"),
    ("int ph[stages];", "int ph[stages] = 1;", "`ph` is an array: initialize it with `{...}`",
     "1;"),
    ("int j = 0;", "int j = {0};", "`j` is one register: `{...}` initializes an array",
     "{0};"),
    ("{7}", "{7, 8, 9}", "`seen` has 2 element(s); 3 values initialize it", "9}"),
    ("ph[j] ^= 1;", "ph[3] ^= 1;", "`ph[3]` is out of range: `ph` has 3 element(s)",
     "ph[3]"),
    ("ph[j] ^= 1;", "ph[ph[0]] ^= 1;", "`ph[...]`: the index reads `ph` itself", "ph[0]]"),
    ("seen[1], [b[j]]", "seen[j], [b[j]]",
     "a destination is one register: `seen[k]` with k a constant in 0..1", "seen[j]"),
    ("ph[j] ^= 1;", "j[0] ^= 1;", "`j` is not an array", "j[0]"),
])
def test_register_array_errors(old, new, message, column_text):
    text = PHASES.replace(old, new)
    err = error_of(text)
    assert err.message == message
    assert at(text, err).startswith(column_text)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_register_array_elements_in_c_compute_what_the_engine_computes(tmp_path):
    prog = program(PHASES)
    exprs = [e for e in line_exprs(prog) if "_oob" in e.code or " if " in e.code]
    assert exprs
    c_matches_engine(tmp_path, exprs, len(prog.agents[0].registers), 0, 2)


def test_register_arrays_reach_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, PHASES)
    assert "r_ph_2_" in cuda


# ------------------------------------------------------ toggles scoped to one agent of an array

RING = get("double_buffer_tma").source + """
bug second_skips_release "consumer 1 never releases its stage" {
    in consumer[1] replace "consumer_release(pipe_state);" with "// BUG: consumer 1 keeps it";
}
bug last_skips_release "the last consumer never releases its stage" {
    in consumer[consumers - 1] delete "consumer_release(pipe_state);";
}
"""


def released_by(r: Run) -> set[str]:
    return {s["agent"] for s in steps(r) if s["op"].startswith("mbarrier.arrive")
            and s["agent"].startswith("consumer")}


def test_a_toggle_scoped_to_one_agent_of_an_array_patches_that_agent_only():
    params = {"consumers": 3, "tiles": 3}
    assert released_by(run(RING, params)) == {"consumer0", "consumer1", "consumer2"}
    r = run(RING, params, ["second_skips_release"])
    assert r.status == "deadlock"
    assert released_by(r) == {"consumer0", "consumer2"}
    prog = program(RING, params, ["second_skips_release"])
    texts = {a.name: {n.text for n in a.nodes if isinstance(n, Line)} for a in prog.agents}
    assert "// BUG: consumer 1 keeps it" not in str(texts["consumer0"])
    assert not any("consumer_release" in t for t in texts["consumer1"])
    # the index is an expression over parameters
    r = run(RING, params, ["last_skips_release"])
    assert released_by(r) == {"consumer0", "consumer1"}
    # both: consumers 1 and 2 each lose their release (different elements may patch one text)
    r = run(RING, params, ["second_skips_release", "last_skips_release"])
    assert released_by(r) == {"consumer0"}


def test_a_toggle_scoped_to_a_missing_element_is_refused():
    with pytest.raises(ParamError) as info:
        program(RING, {"consumers": 1}, ["second_skips_release"])
    assert info.value.field == "bugs"
    assert str(info.value) == ("second_skips_release patches `consumer[1]`, but `consumer` "
                               "has 1 agent(s)")


@pytest.mark.parametrize(("old", "new", "message", "column_text"), [
    ("in consumer[1] replace", "in producer[1] replace",
     "bug `second_skips_release`: `producer` is one agent, not an array", "1] replace"),
    ('[1] replace "consumer_release(pipe_state);"', '[1] replace "mbarrier.init"',
     "bug `second_skips_release`: 'mbarrier.init' occurs 0 times in agent consumer[1]; a patch "
     "must find its text exactly once", "in consumer[1]"),
])
def test_element_scoped_toggle_errors(old, new, message, column_text):
    text = RING.replace(old, new, 1)
    err = load(text).broken["second_skips_release"]
    assert err.message == message
    assert at(text, err).startswith(column_text)


def test_an_element_scoped_toggle_reaches_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, RING, {"consumers": 2, "tiles": 2}, ["second_skips_release"])
    assert "// BUG: consumer 1 keeps it" not in cuda  # a comment: no line of its own
    assert cuda.count("consumer_release: mbarrier.arrive") == 1


def test_the_checker_finds_what_an_element_scoped_toggle_breaks():
    from app.check.engine import Explorer, Limits

    bound = Limits(max_states=200_000, timeout_s=3600.0)
    params = {"consumers": 2, "tiles": 2, "stages": 1}
    safe = Explorer(from_source(RING).resolve(params, [])).explore(bound)
    assert safe.complete and not safe.found
    cfg = from_source(RING).resolve(params, ["second_skips_release"])
    out = Explorer(cfg).explore(bound)
    assert "deadlock" in out.found


# ------------------------------------------------------------- a copy of part of a tile

HALVES = """
param tiles = 2 in 1..8 "tiles";
tensor tile[tiles] bytes 4096;
tensor out[tiles] bytes 4096;
smem s bytes 4096 chunk 1024;
barrier full = 1;
agent a {
    for (int k = 0; k < tiles; ++k) {
        mbarrier.arrive.expect_tx.shared::cta.b64 _, [full], 4096;
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [s], [tile[k] + 0], 2048, [full];
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [s + 2048], [tile[k] + 2048], 2048, [full];
        mbarrier.try_wait.parity.shared::cta.b64 p, [full], k % 2;
        ld.shared x, [s], tile[k];
        cp.async.bulk.global.shared::cta.bulk_group [out[k] + 2048], [s + 2048], 2048;
        cp.async.bulk.commit_group;
        cp.async.bulk.wait_group 0;
    }
}
"""


def test_a_tile_copied_in_two_parts_reads_whole():
    r = run(HALVES)
    assert (r.status, r.diagnostics) == ("done", [])


def test_a_part_copied_from_the_wrong_offset_lands_off_its_place():
    text = HALVES.replace("[tile[k] + 2048], 2048", "[tile[k] + 1024], 2048")
    r = run(text)
    kinds = [d["kind"] for d in r.diagnostics]
    assert kinds[0] == "partial_read"
    assert "tile 0 -1024 bytes off its place" in r.diagnostics[0]["message"]
    machine = r.machine_at(r.diagnostics[0]["step"])
    chunks = machine.snapshot()["stages"][0]["chunks"]
    assert [c["tile"] for c in chunks] == [0, 0, 0, 0]
    assert [c.get("shifted") for c in chunks] == [None, None, -1024, -1024]


def test_a_global_offset_outside_the_tile_stops_the_run():
    r = run(HALVES.replace("[tile[k] + 2048], 2048", "[tile[k] + 3072], 2048"))
    assert r.status == "undefined_behavior"
    assert r.diagnostics[-1]["rule"] == "copy_shape"
    assert "at offset 3072 of a tile tile (4096 bytes)" in r.diagnostics[-1]["message"]
    r = run(HALVES.replace("[out[k] + 2048]", "[out[k] + 2056]"))
    assert r.diagnostics[-1]["rule"] == "copy_shape"


def test_a_global_offset_error_names_its_column():
    text = HALVES.replace("[tile[k] + 2048]", "[tile[k] + half]")
    err = error_of(text)
    assert err.message == "`half` is not declared here"
    assert at(text, err).startswith("half]")


def test_the_checker_sees_the_misplaced_part():
    from app.check.engine import Explorer, Limits

    bound = Limits(max_states=200_000, timeout_s=3600.0)
    cfg = from_source(HALVES).resolve({"tiles": 1}, [])
    assert not Explorer(cfg).explore(bound).found
    bad = from_source(HALVES.replace("[tile[k] + 2048], 2048", "[tile[k]], 2048"))
    # `[tile[k]]` with no offset keeps the place of `[s + 2048]`: still whole
    assert not Explorer(bad.resolve({"tiles": 1}, [])).explore(bound).found
    bad = from_source(HALVES.replace("[tile[k] + 2048], 2048", "[tile[k] + 0], 2048"))
    assert "partial_read" in Explorer(bad.resolve({"tiles": 1}, [])).explore(bound).found


def test_a_part_of_a_tile_reaches_a_kernel(tmp_path):
    cuda = nvcc_compiles(tmp_path, HALVES)
    assert "tile_ptr(c, t) + goff" in cuda



# ------------------------------------------------- two shared-memory views of one region

UNION = """param tiles = 3 in 1..8 "k-tiles of the mainloop";
tensor tile[tiles] bytes 2048;
tensor out bytes 4096;
smem ring[2] bytes 2048 chunk 1024 release empty_barrier;
smem epi bytes 4096 chunk 1024 at ring;   // the epilogue reuses the mainloop's bytes
barrier full_barrier[2] = 1;
barrier empty_barrier[2] = 2;
barrier mainloop_done = 2;

agent producer {
    PipelineState<2> pipe_state = make_producer_start_state();
    for (int k = 0; k < tiles; ++k) {
        producer_acquire(pipe_state, 2048);
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [ring[pipe_state.index]], [tile[k]], 2048, [full_barrier[pipe_state.index]];
        ++pipe_state;
    }
}

agent consumer[2] {
    PipelineState<2> pipe_state;
    for (int k = 0; k < tiles; ++k) {
        consumer_wait(pipe_state);
        ld.shared x, [ring[pipe_state.index]], tile[k];
        consumer_release(pipe_state);
        ++pipe_state;
    }
    mbarrier.arrive.shared::cta.b64 _, [mainloop_done];
    mbarrier.try_wait.parity.shared::cta.b64 p, [mainloop_done], 0;
    if (rank == 0) {
        st.shared [epi], out;
        fence.proxy.async.shared::cta;
        cp.async.bulk.global.shared::cta.bulk_group [out], [epi], 4096;
        cp.async.bulk.commit_group;
        cp.async.bulk.wait_group.read 0;
    }
}

bug epilogue_before_peers "consumer 0 writes the epilogue before consumer 1 left the ring" {
    in consumer delete "mbarrier.try_wait.parity.shared::cta.b64 p, [mainloop_done], 0;";
}
"""


def explore(text: str, bugs=(), **params):
    from app.check.engine import Explorer, Limits

    cfg = from_source(text).resolve(params, list(bugs))
    return Explorer(cfg).explore(Limits(max_states=300_000, timeout_s=3600.0))


def test_an_epilogue_over_the_mainloop_bytes_is_safe_after_every_consumer_left():
    assert (run(UNION).status, run(UNION).diagnostics) == ("done", [])
    out = explore(UNION)
    assert out.complete and not out.found


def test_writing_one_view_overwrites_a_tile_owed_in_the_other():
    out = explore(UNION, ["epilogue_before_peers"])
    assert "overwrite" in out.found
    # the same program with the epilogue in bytes of its own: nothing to find
    apart = UNION.replace(" at ring;", ";")
    assert not explore(apart, ["epilogue_before_peers"]).found
    # the engine's message names both views and who still holds the tile
    for seed in range(40):
        r = run(UNION, bugs=["epilogue_before_peers"], schedule=Schedule("random", seed=seed))
        over = [d for d in r.diagnostics if d["kind"] == "overwrite"]
        if over:
            assert "wrote epi, which shares its bytes with ring[" in over[0]["message"]
            assert "consumer1 had not released it" in over[0]["message"]
            break
    else:
        pytest.fail("no schedule of 40 showed the overwrite")


VIEWS = """
tensor t[2] bytes 2048;
smem a[2] bytes 2048 chunk 1024;
smem same bytes 4096 chunk 1024 at a;
smem half[2] bytes 1024 chunk 1024 at a;
agent w {
    st.shared [same], t[0];
    ld.shared x, [a[0]], t[0];
}
"""


def test_views_read_each_others_bytes_where_they_lie():
    r = run(VIEWS)
    assert r.diagnostics == []
    text = VIEWS.replace("ld.shared x, [a[0]], t[0];", "ld.shared x, [half[1]], t[0];")
    r = run(text)
    assert [d["kind"] for d in r.diagnostics] == ["stale_read"]
    assert "tile 0 +1024 bytes off its place" in r.diagnostics[0]["message"]
    chunks = r.machine_at(r.total_steps).snapshot()["stages"]
    assert {c["name"]: [k.get("shifted") for k in c["chunks"]] for c in chunks} == {
        "a[0]": [None, None], "a[1]": [2048, 2048], "same": [None] * 4, "half[0]": [None],
        "half[1]": [1024]}


@pytest.mark.parametrize(("old", "new", "message"), [
    ("at a;\nsmem half", "at b;\nsmem half", "`at b`: no smem array of that name declared "
                                               "before `same`"),
    ("bytes 4096 chunk 1024 at a", "bytes 4096 chunk 512 at a",
     "`same` views `a`, whose chunks are 1024 bytes; its own are 512"),
    ("bytes 4096 chunk 1024 at a", "bytes 8192 chunk 1024 at a", "`same` has 8192 bytes; `a` has "
                                                                  "4096"),
    ("half[2] bytes 1024 chunk 1024 at a", "half[2] bytes 1024 chunk 1024 at same",
     "`at same`: `same` is itself a view; name the array it views"),
])
def test_view_errors(old, new, message):
    text = VIEWS.replace(old, new)
    err = error_of(text)
    assert err.message == message
    assert at(text, err).startswith("smem ")


def test_views_reach_a_kernel_over_the_same_bytes(tmp_path):
    from app.capture.codegen import layout

    cfg = from_source(UNION).resolve({}, [])
    lay = layout(cfg.program)
    ring0, ring1, epi = lay.stage_offsets
    assert ring1 == ring0 + 2048 and epi == ring0
    nvcc_compiles(tmp_path, UNION)


def test_capture_refuses_a_stage_of_another_cta_and_spells_its_own():
    text = ("cluster 2;\ntensor t bytes 1024;\nsmem s bytes 1024 chunk 1024;\nagent a {\n"
            "    st.shared [s], t;\n    ld.shared::cluster x, [mapa(s, cta ^ 1)], t;\n}\n")
    cfg = from_source(text).resolve({}, [])
    with pytest.raises(CodegenError, match="stages of the executing CTA only"):
        generate(cfg.program, "remote", {})
    own = text.replace("cluster 2;\n", "").replace("mapa(s, cta ^ 1)", "mapa(s, 0)")
    assert "check_tile(" in generate(from_source(own).resolve({}, []).program, "own", {})


def test_a_helper_reads_and_writes_register_array_elements_it_is_given():
    text = PHASES.replace("agent a {", """helper flip(bit) {
    bit ^= 1;
}

helper flip_at(bits, i) {
    bits[i] ^= 1;
}

agent a {""").replace("ph[j] ^= 1; j = (j + 1) % stages;",
                      "flip(ph[j]);\n        flip_at(ph, j);\n        flip(ph[j]);\n"
                      "        j = (j + 1) % stages;")
    r = run(text)
    assert (r.status, r.diagnostics) == ("done", [])
    assert [s["operands"]["parity"] for s in steps(r) if "try_wait" in s["op"]] == [
        0, 0, 0, 1, 1, 1, 0]


def test_an_element_scoped_toggle_patches_every_lane_of_that_warp():
    text = ("barrier b = 4;\nagent w[2] lanes 2 {\n    int ph[2] = {0, 0};\n"
            "    mbarrier.arrive.shared::cta.b64 _, [b];\n"
            "    mbarrier.try_wait.parity.shared::cta.b64 _, [b], ph[0];\n}\n"
            'bug late "warp 1 waits for the wrong parity" {\n'
            '    in w[1] replace "ph[0];" with "ph[0] ^ 1;";\n}\n')
    assert run(text).status == "done"
    r = run(text, bugs=["late"])
    assert r.status == "deadlock"
    waits = {s["agent"]: s["operands"]["parity"] for s in steps(r) if "try_wait" in s["op"]}
    assert waits == {"w0.lane0": 0, "w0.lane1": 0}  # warp 1's lanes wait for parity 1 forever


def test_views_are_one_resource_to_the_partial_order_reduction():
    """st.shared through the epilogue view and the ring's loads and reads are lines the
    partial-order reduction knows (app/check/por.py): it must not take a write through one view
    and a read of the other for independent moves."""
    from app.check.engine import Explorer, Limits
    from app.check.por import Independence

    text = UNION.replace("""        fence.proxy.async.shared::cta;
        cp.async.bulk.global.shared::cta.bulk_group [out], [epi], 4096;
        cp.async.bulk.commit_group;
        cp.async.bulk.wait_group.read 0;
""", "")
    bound = Limits(max_states=300_000, timeout_s=3600.0)
    cfg = from_source(text).resolve({}, ["epilogue_before_peers"])
    explorer = Explorer(cfg)
    assert isinstance(explorer.independence, Independence)
    assert "overwrite" in explorer.explore(bound).found
    assert not Explorer(from_source(text).resolve({}, [])).explore(bound).found


SPIN_CASES = [
    ("advance", ADVANCE, {"stages": 2}, []),
    ("conditional, min, max", EXPRS, {}, []),
    ("register array", PHASES.replace("int j = 0;", "int j = 0;\n    int want = 0;").replace(
        "[b[j]], ph[j];", "[b[j]], want;").replace("ph[j] ^= 1; j = (j + 1) % stages;",
                                                    "ph[j] ^= 1; j = (j + 1) % stages; "
                                                    "want = ph[j];"), {"stages": 2}, []),
    ("element-scoped toggle", RING, {"consumers": 2, "tiles": 2, "stages": 1},
     ["second_skips_release"]),
]


@pytest.mark.parametrize(("what", "text", "params", "bugs"), SPIN_CASES,
                         ids=[c[0] for c in SPIN_CASES])
def test_spin_agrees_with_the_checker_on_the_additions(tmp_path, what, text, params, bugs):
    from app.check.engine import Explorer, Limits
    from app.check.promela_spin import SpinMissing, reachable, tools

    try:
        tools()
    except SpinMissing as err:
        pytest.skip(str(err))
    cfg = from_source(text).resolve(params, bugs)
    found = Explorer(cfg).explore(Limits(max_states=300_000, timeout_s=3600.0)).found
    spin = reachable(cfg, tmp_path / "reach", optimize="-O0")
    assert all(run.complete for run in spin.values())
    assert {k for k, run in spin.items() if run.reached} == set(found)


def test_the_promela_export_refuses_views_and_parts_of_tiles_by_name():
    from app.check.promela import NotExported, export

    with pytest.raises(NotExported, match="views of shared memory"):
        export(from_source(UNION).resolve({}, []))
    with pytest.raises(NotExported, match="a copy of part of a tile"):
        export(from_source(HALVES).resolve({"tiles": 1}, []))
