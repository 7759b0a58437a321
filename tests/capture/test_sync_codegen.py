"""Hopper codegen of the synchronization instructions (named barriers, elect.sync,
bar.warp.sync, the cluster barrier and fence.mbarrier_init, try_wait with its suspend-time
hint): each line is spelled as the program writes it, the kernel is never safer than its
program, what the generator cannot place is refused, and the sources compile with nvcc."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from app.capture.codegen import CodegenError, generate
from app.scenarios import from_source
from tests.sim.semantics_helpers import source

TRY_THEN_WAIT = """
barrier full = 1;
agent producer { mbarrier.arrive.shared::cta.b64 _, [full]; }
agent consumer {
    int ok = 0;
    mbarrier.try_wait.parity.shared::cta.b64 ok, [full], 0, 1000;
    if (!ok) { mbarrier.try_wait.parity.shared::cta.b64 _, [full], 0; }
}
"""
ELECT = """
agent p {
    int d = 0;
    int e = 0;
    elect.sync d|e, 0xffffffff;
    __syncwarp();
    if (e + d) { bar.arrive 2, 64; }
}
agent q { bar.sync 2, 64; }
"""


def kernel(text: str, bugs=()) -> str:
    cfg = from_source(text).resolve({}, list(bugs))
    return generate(cfg.program, "test", dict(cfg.params), bugs)


def test_named_barriers_are_spelled_as_written_and_the_kernel_ends_on_barrier_15():
    text = kernel(source("named_barrier"))
    assert 'asm volatile("bar.arrive %0, %1;"' in text
    assert 'asm volatile("bar.sync %0, %1;"' in text
    assert 'asm volatile("barrier.sync 15;" ::: "memory");' in text
    assert "__syncthreads();\n}" not in text


def test_elect_gives_every_lane_the_elected_lanes_answer():
    text = kernel(ELECT)
    assert "elect.sync %0|P, 0xffffffff;" in text
    assert "__shfl_sync(FULL_MASK, p, 0)" in text
    assert 'asm volatile("bar.warp.sync 0xffffffff;" ::: "memory");' in text


def test_a_program_that_fences_its_own_inits_gets_no_fence_from_the_kernel():
    text = source("cluster_init")
    fenced = kernel(text)
    assert 'asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");' in fenced
    assert 'asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");' in fenced
    bare = kernel(text, ["no_init_fence"])
    kernel_start = bare.index("// " + "-" * 66 + " the kernel")
    body = bare[bare.index("__device__ __noinline__ void agent_0"):kernel_start]
    assert 'asm volatile("fence.mbarrier_init' not in body
    assert "mbar_init_fence();" not in body


def test_a_try_wait_that_may_fail_is_one_try_with_its_hint():
    text = kernel(TRY_THEN_WAIT)
    assert "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;" in text
    assert text.count("bounded_wait_parity(b") == 1  # only the blocking one loops


@pytest.mark.parametrize(("text", "message"), [
    ("agent p warps 4 { int e = 0; elect.sync _|e, 0xffffffff; }\n",
     "in an agent of `warps 4`: in the kernel each of its warps"),
    ("agent p { bar.sync 1; }\n", "without a thread count"),
    ("agent p { bar.sync 15, 32; }\n", "the kernel ends on barrier 15"),
])
def test_what_the_generator_cannot_place_is_refused(text, message):
    with pytest.raises(CodegenError, match=message.replace("`", ".")):
        kernel(text)


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed)")
@pytest.mark.parametrize("name", ["named_barrier", "cluster_init", "try_then_wait", "elect",
                                  "elected_lane"])
def test_the_kernels_compile_with_nvcc_for_sm_90a(tmp_path, name):
    texts = {"try_then_wait": TRY_THEN_WAIT, "elect": ELECT}
    text = texts.get(name) or source(name)
    src = tmp_path / f"{name}.cu"
    src.write_text(kernel(text))
    proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                           str(tmp_path / f"{name}.cubin"), str(src)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # no warning at all: a remote arrive declares no token it cannot have (once nvcc's #177)
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]


def test_an_agent_of_four_warps_runs_as_a_warpgroup():
    """`warps 4` stands for 128 threads: the kernel runs the agent as four warps (the first
    issues and logs), so its named-barrier arrival counts 128 threads, as the engine does."""
    text = kernel("agent p warps 4 { bar.sync 1, 160; }\nagent q { bar.sync 1, 160; }\n")
    assert "__launch_bounds__(160, 1)" in text
    assert "case 0: return 0;" in text and "c.lane = (threadIdx.x & 31) + 32 * warp_sub(warp);" \
        in text


def test_a_lanes_agents_membermask_is_the_lines_own_over_the_modelled_lanes():
    text = kernel("""agent p lanes 3 { int d = 0; int e = 0;
        if (%laneid != 0) { elect.sync d|e, 0x6; bar.warp.sync 0xfffffffe; } }""")
    assert "elect.sync %0|P, 0x6;" in text
    assert 'asm volatile("bar.warp.sync 0x6;" ::: "memory");' in text  # lanes 3..31 exit at once


BAR_RED = """agent p { int d = 0; int q = 1; bar.red.popc.u32 d, 1, 64, q;
    bar.red.and.pred d, 2, 64, d == 64; barrier.cta.red.or.aligned.pred _, 3, 64, !q; }
agent q { int d = 0; bar.red.popc.u32 d, 1, 64, 0; bar.red.and.pred d, 2, 64, 1;
    barrier.cta.red.or.aligned.pred _, 3, 64, 1; }"""


def test_bar_red_is_spelled_as_written_with_its_predicate_and_logs_the_value():
    """PTX 9.7.13.1: `bar.red.popc.u32 d, a, b, c` and `bar.red.op.pred p, a, b, c` take a
    predicate `c`; the kernel sets it from the program's expression (`!q` computed in C) and
    logs what the barrier wrote, so the replay can compare it with the engine's reduction."""
    text = kernel(BAR_RED)
    assert "setp.ne.u32 P, %3, 0;\\n\\tbar.red.popc.u32 %0, %1, %2, P;" in text
    assert "bar.red.and.pred Q, %1, %2, P;\\n\\tselp.u32 %0, 1, 0, Q;" in text
    assert "barrier.cta.red.or.aligned.pred Q, %1, %2, P;" in text
    assert "const u32 q = ((!r_q)) ? 1u : 0u;" in text
    assert "log_put(L, pre, post, K_BAR_RED" in text and "r_d = v;" in text
    assert 'asm volatile("barrier.sync 15;" ::: "memory");' in text  # 0..14 are the program's


def test_bar_red_without_a_thread_count_is_refused_as_bar_sync_is():
    with pytest.raises(CodegenError, match="without a thread count"):
        kernel("agent p { int d = 0; bar.red.popc.u32 d, 1, 1; }\n")


def test_an_instruction_the_generator_has_no_code_for_is_refused_by_name(monkeypatch):
    from app.capture.sync_code import SyncCode

    monkeypatch.delattr(SyncCode, "_bar_red")
    with pytest.raises(CodegenError, match="bar.red.popc.u32.*no kernel code"):
        kernel(BAR_RED)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed)")
@pytest.mark.parametrize("name", ["bar_red", "partial_mask", "bar_red_program"])
def test_bar_red_and_partial_masks_compile_with_nvcc_for_sm_90a(tmp_path, name):
    text = BAR_RED if name == "bar_red_program" else source(name)
    src = tmp_path / f"{name}.cu"
    src.write_text(kernel(text))
    proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-o",
                           str(tmp_path / f"{name}.cubin"), str(src)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]


def test_a_partial_mask_elects_the_lowest_lane_of_it_in_the_engine_and_is_spelled():
    """partial_mask.pipe: lanes 1..3 of the load warp elect lane 1 (`elect.sync` with mask
    0xe) and sync with `bar.warp.sync 0xe`; lane 0 takes no part."""
    from app.scenarios import from_source as parse
    from tests.sim.semantics_helpers import run

    text = source("partial_mask")
    assert "elect.sync %0|P, 0xe;" in kernel(text)
    assert 'asm volatile("bar.warp.sync 0xe;" ::: "memory");' in kernel(text)
    r = run(text)
    assert r.status == "done"
    regs = [a["registers"] for a in r.snapshot(r.total_steps)["agents"][:4]]
    assert [x["leader"] for x in regs] == [0, 1, 1, 1] and [x["me"] for x in regs] == [0, 1, 0, 0]
    assert parse(text).bugs
