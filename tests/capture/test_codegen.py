"""The code generator on the CPU: every built-in x toggle generates (or is refused with a reason),
the text holds the PTX its lines spell, the shipped kernels are what the generator makes today,
C expressions compute what the engine computes, and the sources compile with nvcc where it is
installed (a compiler needs no GPU)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from app.capture.cexpr import c_expr
from app.capture.codegen import CodegenError, generate, layout
from app.capture.gen_capture import CAPTURES, main
from app.capture.gen_runner import plan
from app.lang.compiler import instantiate, load
from app.lang.errors import PipelineError
from app.scenarios import catalogue, from_source
from app.sim.program import Assign, Branch, Line, function

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"
BUILT_INS = [(s.id, bug) for s in catalogue().values() for bug in (None, *s.bugs)]


def _source(scenario_id: str, bugs=(), params=None) -> str:
    cfg = catalogue()[scenario_id].resolve(params or {}, list(bugs))
    return generate(cfg.program, scenario_id, dict(cfg.params), cfg.bugs)


@pytest.mark.parametrize(("scenario_id", "bug"), BUILT_INS)
def test_every_built_in_and_toggle_generates_or_is_refused_with_a_reason(scenario_id, bug):
    bugs = [bug] if bug else []
    if not catalogue()[scenario_id].gpu:  # Blackwell's tcgen05
        assert "tcgen05" in catalogue()[scenario_id].gpu_note
        with pytest.raises(CodegenError, match="tcgen05"):
            _source(scenario_id, bugs)
        return
    text = _source(scenario_id, bugs)
    assert 'extern "C" __global__' in text and "pipeline_kernel(" in text
    cfg = catalogue()[scenario_id].resolve({}, bugs)
    for agent in cfg.program.agents:
        for n, node in enumerate(agent.nodes):
            if isinstance(node, Line):
                assert f"// [{n}] {node.text}" in text  # every line, with its source text


def test_a_cluster_runs_each_ctas_agents_and_sends_remote_arrives_through_mapa():
    text = _source("cluster_multicast")
    cfg = catalogue()["cluster_multicast"].resolve({}, [])
    lay = layout(cfg.program)
    assert (lay.cluster, lay.agents_per_cta, lay.threads) == (2, 2, 64)
    # every CTA has the same layout: cta1's barriers and stages sit where cta0's do
    assert lay.bar_local == (0, 1, 0, 1, 2, 3, 2, 3)
    assert lay.bar_cta == (0, 0, 1, 1, 0, 0, 1, 1)
    assert lay.stage_offsets[0] == lay.stage_offsets[2] and lay.stage_cta == (0, 0, 1, 1)
    assert "#define CLUSTER 2" in text and "switch (slot)" in text
    assert "barrier.cluster.arrive.release.aligned;" in text
    assert text.count("mapa_u32(bar_addr(c, b), bar_cta(b))") == 2  # one per consumer
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" in text
    assert ".multicast::cluster [%0], [%1], %2, [%3], %4;" in text
    for producer in ("void agent_0(", "void agent_2("):  # each CTA multicasts its half
        body = text[text.index(producer):]
        assert "bulk_load_multicast(" in body[:body.index("\n}\n")]
    # cta0's consumer releases cta1's empty barrier: flat numbers 6 and 7
    consumer0 = text[text.index("void agent_1("):text.index("void agent_2(")]
    assert "const u32 b = 6 + (u32)b_i;" in consumer0
    # and cta1's consumer releases cta0's: flat numbers 4 and 5
    consumer1 = text[text.index("void agent_3("):]
    assert "const u32 b = 4 + (u32)b_i;" in consumer1.split("mapa(")[1]


def test_a_state_through_the_cluster_window_is_refused():
    """PTX 9.7.13.15.13: an arrive on a `.shared::cluster` barrier cannot return a state; the
    language refuses it before any kernel is generated."""
    source = catalogue()["cluster_multicast"].source.replace(
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _,",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 tok,").replace(
        "agent consumer {", "agent consumer {\n    int tok = 0;")
    with pytest.raises(PipelineError, match="cannot return"):
        from_source(source).resolve({}, [])


def test_logging_compiled_out_keeps_the_lines_and_drops_the_staging_area():
    cfg = catalogue()["double_buffer_tma"].resolve({}, [])
    logged, bare = layout(cfg.program), layout(cfg.program, logging=False)
    assert bare.smem_bytes == bare.staging_offset < logged.smem_bytes
    text = generate(cfg.program, logging=False)
    assert "#define LOGGING 0" in text and "cp.async.bulk.wait_group.read 0;" in text


def test_the_ring_spells_its_ptx():
    text = _source("double_buffer_tma", params={"consumers": 2})
    for ptx in ("mbarrier.try_wait.parity.shared::cta.b64",
                "mbarrier.arrive.expect_tx.shared::cta.b64",
                "mbarrier.arrive.shared::cta.b64",
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                "cp.async.bulk.global.shared::cta.bulk_group",
                "cp.async.bulk.commit_group;",
                "cp.async.bulk.wait_group.read 0;",
                "fence.mbarrier_init.release.cluster;",
                "%%globaltimer", "%%clock64"):
        assert ptx in text, ptx
    assert text.count("__device__ __noinline__ void agent_") == 3
    # the barriers the file initializes before the agents start
    assert "mbar_init(smem_u32(smem) + 8 * 2, 2);  // empty_barrier[0]" in text
    # every wait is bounded
    assert "bounded_wait_parity(bar_addr(c, b), (u32)parity, c.deadline, &tries)" in text
    assert "goto timed_out;" in text


def test_toggles_change_the_kernel_as_they_change_the_text():
    plain = _source("proxy_fence_store")
    bug = _source("proxy_fence_store", ["missing_proxy_fence"])
    assert "proxy_fence();  // every lane that wrote shared memory" in plain
    assert "proxy_fence();  // every lane that wrote shared memory" not in bug
    wrong = _source("double_buffer_tma", ["wrong_arrival_count"], {"consumers": 2})
    assert "mbar_init(smem_u32(smem) + 8 * 2, 1);  // empty_barrier[0]" in wrong
    single = _source("single_barrier")
    assert "mbar_init(bar_addr(c, b), count);" in single  # the thread inits its own barrier
    assert "r_phase = (r_phase ^ 1);" in single
    assert "r_phase = (r_phase ^ 1);" not in _source("single_barrier", ["forget_phase_toggle"])


def test_a_pipeline_that_differs_from_every_built_in_generates():
    text = plan(CAPTURES["gen_copy_per_chunk"]).cuda
    assert "if (!(r_c < 4)) goto" in text  # the inner loop over the tile's chunks
    assert "const i64 off = (r_c * 1024);" in text


def test_shipped_kernels_are_what_the_generator_makes_now():
    shipped = sorted(RAW.glob("gen_*.cu"))
    assert shipped, "no generated kernels under traces/raw"
    for path in shipped:
        name = path.stem
        if name not in CAPTURES:
            continue
        assert plan(CAPTURES[name]).cuda == path.read_text(), name


def test_sources_only_writes_every_kernel(tmp_path):
    assert main(["--sources-only", "--out", str(tmp_path), "--only",
                 "gen_single_barrier,gen_release_behind"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen_release_behind.cu",
                                                         "gen_single_barrier.cu"]


def test_layout_places_barriers_stages_and_the_log():
    cfg = catalogue()["double_buffer_tma"].resolve({"stages": 3}, [])
    lay = layout(cfg.program)
    assert lay.stage_offsets == (128, 128 + 4096, 128 + 8192)
    assert lay.staging_offset == 128 + 3 * 4096
    assert lay.threads == 64
    assert lay.tensor_tiles == (0, 6)  # tile[0..5], then out[0..5]


# ------------------------------------------------------------------------- C expressions

EXPRESSIONS = """
param n = 3 in 1..10 "n";
tensor tile[4] bytes 16;
smem smem bytes 16 chunk 16;
agent a {
    int x = 0;
    int y = 0;
    int z = 0;
    x = y / n - z % n;
    x = (y - 7) / 2 + (z - 5) % 3;
    x = y * 4 | z ^ ~y & 5;  // (`<<` and `>>` do not parse yet, though docs list them)
    x = (y < z) + (y <= z) * 2 + (y == z) * 4 + (y != z) * 8 + (y > z) * 16 + (y >= z) * 32;
    x = (y && z) + 2 * (y || z) + 4 * !y + -z;
    if (y % 2 == 0 && z > -3 || x != 1) {
        ld.shared x, [smem], tile[0];
    }
}
"""


def _exprs(program):
    out = []
    for agent in program.agents:
        for node in agent.nodes:
            if isinstance(node, Branch):
                out.append(node.cond)
            elif isinstance(node, Assign):
                out.extend(e for _, e in node.updates)
            elif isinstance(node, Line) and node.kind == "assign":
                out.extend(e for _, e in node.args[0])
    return [e for e in out if e.const is None]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_c_expressions_compute_what_the_engine_computes(tmp_path):
    pipeline = load(EXPRESSIONS)
    program = instantiate(pipeline, (("n", 3),))
    exprs = _exprs(program)
    assert len(exprs) >= 6

    def reg(i):
        return f"r[{i}]"

    rng = random.Random(7)
    rows = [[0, 0, 0, rng.randint(-20, 20), rng.randint(-20, 20), rng.randint(-20, 20)]
            for _ in range(40)]
    body = "\n".join(f'    printf("%lld\\n", (long long)({c_expr(e, reg)}));' for e in exprs)
    lines = ["#include <stdio.h>",
             "static long long pl_div(long long a, long long b) { return b ? a / b : 0; }",
             "static long long pl_mod(long long a, long long b) { return b ? a % b : 0; }",
             "int main(void) {", "    long long rows[][6] = {"]
    lines += ["        {" + ", ".join(map(str, row)) + "}," for row in rows]
    lines += ["    };", f"    for (int k = 0; k < {len(rows)}; k++) {{",
              "    long long* r = rows[k];", body, "    }", "    return 0;", "}"]
    src = tmp_path / "exprs.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "exprs"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(src)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    want = [function(e)(row) for row in rows for e in exprs]
    assert got == want


# ------------------------------------------------------------------------------- nvcc

NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed)")
@pytest.mark.parametrize("name", ["gen_single_barrier", "gen_double_buffer_tma_2stage_2consumer",
                                  "gen_proxy_fence_store", "gen_copy_per_chunk"])
def test_generated_kernels_compile_with_nvcc_for_sm_90a(tmp_path, name):
    src = tmp_path / f"{name}.cu"
    src.write_text(plan(CAPTURES[name]).cuda)
    proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                           str(tmp_path / f"{name}.cubin"), str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]


def test_from_source_pipelines_generate():
    scenario = from_source((Path(__file__).resolve().parents[2] / "app" / "capture"
                            / "pipelines" / "release_behind.pipe").read_text())
    cfg = scenario.resolve({"stages": 2, "tiles": 3}, [])
    text = generate(cfg.program, "release_behind", dict(cfg.params))
    assert text.count("bounded_wait_parity(") >= 3  # the producer's and the consumer's two


# ------------------------------------------------------------------------------- the CLI


def test_the_capture_command_refuses_what_hopper_cannot_run(tmp_path, capsys):
    from app.capture.cli import main as cli

    out = str(tmp_path / "x.json")
    assert cli(["capture", "kloop_tma_mma", "--out", out]) == 2
    assert "tcgen05" in capsys.readouterr().err
    assert cli(["capture", "cluster_multicast", "--ctas", "3", "--out", out]) == 2
    assert "clusters of 2" in capsys.readouterr().err
    assert cli(["capture", "no_such_pipeline", "--out", out]) == 2
    assert "neither a built-in" in capsys.readouterr().err
    pipe = Path(__file__).resolve().parents[2] / "app" / "capture" / "pipelines"
    assert cli(["capture", str(pipe / "release_behind.pipe"), "--param", "stages", "--out",
                out]) == 2
    assert "NAME=INTEGER" in capsys.readouterr().err
    assert cli(["capture", str(pipe / "release_behind.pipe"), "--param", "stages=99", "--out",
                out]) == 2
    assert "stages" in capsys.readouterr().err


# ------------------------------------------------------- the kernel is never safer than its program

TAIL_BARRIER = "    __syncthreads();\n    if (CLUSTER > 1) cluster_sync();\n}"


def test_a_cluster_kernel_ends_as_its_program_ends():
    """No cluster barrier before exit: each CTA exits when its own agents are done, so a peer's
    late remote arrive meets an exited CTA on the GPU as in the engine; `exit_sync` keeps the
    barrier the generator once ended every cluster kernel with; 1-CTA kernels are unchanged."""
    cfg = catalogue()["cluster_multicast"].resolve({}, ["no_producer_tail"])
    plain = generate(cfg.program, "cluster_multicast")
    held = generate(cfg.program, "cluster_multicast", exit_sync=True)
    assert plain.rstrip().endswith("__syncthreads();\n}") and TAIL_BARRIER not in plain
    assert held.rstrip().endswith(TAIL_BARRIER)
    assert plain.count("cluster_sync();") == held.count("cluster_sync();") - 1
    assert _source("single_barrier").rstrip().endswith(TAIL_BARRIER)


NO_COMPLETE = """barrier bar = 2;
agent thread {
    mbarrier.arrive.noComplete.shared::cta.b64 s, [bar], 1;
    mbarrier.arrive.shared::cta.b64 _, [bar];
}
"""


def test_no_complete_is_spelled_as_written(tmp_path):
    cfg = from_source(NO_COMPLETE).resolve({}, [])
    text = generate(cfg.program, "no_complete")
    assert 'asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 %0, [%1], %2;"' in text
    assert text.count("token = mbar_arrive(bar_addr(c, b), v);") == 1  # the plain arrive
    if NVCC:
        src = tmp_path / "nc.cu"
        src.write_text(text)
        proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                               str(tmp_path / "nc.cubin"), str(src)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("line, spelled", [
    ("mbarrier.arrive.relaxed.cta.shared::cta.b64 _, [bar];", ".release.cta"),
    ("mbarrier.arrive.release.cluster.shared::cta.b64 _, [bar];", ".release.cta"),
    ("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 _, [bar], 0;", ".acquire.cta"),
    ("mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 _, [bar], 0;", ".acquire.cta"),
])
def test_an_ordering_the_generator_would_not_spell_is_refused(line, spelled):
    cfg = from_source(f"barrier bar = 1;\nagent thread {{\n    {line}\n}}\n").resolve({}, [])
    with pytest.raises(CodegenError, match=f"issues this as \\{spelled}"):
        generate(cfg.program, "ordering")


ASYNC_PROGRAMS = ["wgmma_ring", "wgmma_pipelined", "cp_async_groups", "cp_async_mbarrier",
                  "st_async", "red_async", "bulk_reduce", "tensor_box"]


def _program_source(name: str, bugs=()) -> tuple[str, object]:
    from tests.sim.semantics_helpers import config, source

    cfg = config(source(name), bugs)
    return generate(cfg.program, name, dict(cfg.params), cfg.bugs), cfg


def test_the_asynchronous_families_spell_their_ptx():
    text, _ = _program_source("wgmma_ring")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, " in text
    assert 'asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");' in text
    assert "__launch_bounds__(160, 1)" in text  # the producer's warp, the consumer's four
    assert "warp_agent(warp)" in text
    text, _ = _program_source("cp_async_mbarrier", ["inc"])
    assert "cp.async.cg.shared.global [%0], [%1], 16;" in text
    assert "cp.async.mbarrier.arrive.shared::cta.b64 [%0];" in text
    text, _ = _program_source("cp_async_mbarrier")
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" in text
    text, _ = _program_source("st_async")
    assert ("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], "
            "{%1, %2, %3, %4}, [%5];") in text
    text, _ = _program_source("bulk_reduce")
    assert "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" in text
    text, cfg = _program_source("tensor_box")
    assert ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
            "[%0], [%1, {%2, %3}], [%4];") in text
    assert "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" in text
    assert "check_box_0(" in text and "box_oob_0(" in text
    lay = layout(cfg.program)
    assert [box.name for _, box in lay.tensor_maps] == ["A"]
    assert lay.map_offset % 128 == 0 and lay.gmem_cta_bytes >= lay.map_offset + 128
    # a program without warpgroups keeps one warp per agent, as every shipped kernel does
    text, _ = _program_source("cp_async_groups")
    assert "__launch_bounds__(32 * AGENTS_PER_CTA, 1)" in text and "warp_agent" not in text


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed)")
@pytest.mark.parametrize("name", ASYNC_PROGRAMS)
def test_the_asynchronous_families_compile_with_nvcc_for_sm_90a(tmp_path, name):
    text, _ = _program_source(name)
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                           str(tmp_path / f"{name}.cubin"), str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]
