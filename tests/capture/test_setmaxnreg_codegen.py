"""Hopper codegen of `setmaxnreg` (PTX 9.1 section 9.7.19.5): every thread of the agent's
warpgroups executes `setmaxnreg.{inc,dec}.sync.aligned.u32 N`, the kernel starts every warp with
the program's `registers N` (`__maxnreg__`), everything is inlined so ptxas can follow each
warpgroup's count, what cannot be launched as the engine counts is refused, and the source
assembles with nvcc to exactly the launch count with the instructions in its SASS."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.capture.codegen import CodegenError, generate
from app.replay.gpu_log import GpuRecord
from app.scenarios import from_source

PIPELINES = Path(__file__).resolve().parents[2] / "app" / "capture" / "pipelines"
HANDOFF = (PIPELINES / "register_handoff.pipe").read_text()
NVCC = shutil.which("nvcc")


def kernel(text: str, bugs=()) -> str:
    cfg = from_source(text).resolve({}, list(bugs))
    return generate(cfg.program, "setmaxnreg", dict(cfg.params), cfg.bugs)


def test_each_warpgroup_executes_setmaxnreg_and_the_kernel_starts_at_the_launch_count():
    text = kernel(HANDOFF)
    assert text.count('asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");') == 1
    assert text.count('asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");') == 2
    assert 'extern "C" __global__ void __maxnreg__(168) pipeline_kernel(' in text
    assert "__launch_bounds__" not in text and "__noinline__" not in text
    # the line is not under `c.lane == 0`: all 128 threads run it; the first warp logs it
    body = text.split('asm volatile("setmaxnreg.inc')[0].rsplit("{", 1)[1]
    assert "c.lane" not in body
    assert "K_SETMAXNREG, 1, NODE, 1, (u64)232" in text  # detail 1: an `.inc`
    assert "K_SETMAXNREG, 0, NODE, 0, (u64)40" in text


def test_a_kernel_without_setmaxnreg_keeps_its_launch_bounds():
    text = kernel("agent p warps 4 { bar.sync 1, 160; }\nagent q { bar.sync 1, 160; }\n")
    assert "__launch_bounds__(160, 1)" in text and "__maxnreg__" not in text
    assert "__device__ __noinline__ void agent_0" in text


@pytest.mark.parametrize(("text", "message"), [
    ("registers 172;\nagent p warps 4 { setmaxnreg.dec.sync.aligned.u32 24; }\n",
     "`registers 172` with setmaxnreg: a warp is allocated registers in units of 8 per "
     "thread"),
    ("registers 200;\nagent p warps 4 { setmaxnreg.dec.sync.aligned.u32 24; }\n"
     "agent c[2] warps 4 { setmaxnreg.inc.sync.aligned.u32 240; }\n",
     "`registers 200` for 384 threads needs 76,800 registers; a Hopper CTA has at most 65,536 "
     "(the launch would fail): at most 168 registers a thread"),
])
def test_what_cannot_launch_as_the_engine_counts_is_refused(text, message):
    with pytest.raises(CodegenError) as err:
        kernel(text)
    assert message in str(err.value)


def test_an_inc_is_ordered_by_when_it_returned():
    """`.inc` blocks until the pool holds its registers: the replay orders it by the clock read
    after it (an observation), a `.dec` by the clock before it (an effect)."""
    def rec(detail):
        return GpuRecord(0, 0, 100, 900, "setmaxnreg", 0, detail, (232, 0, 0, 0, 0), 0)
    assert rec(1).key == 900
    assert rec(0).key == 100


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (no GPU needed)")
def test_the_kernel_assembles_to_the_launch_count(tmp_path):
    src = tmp_path / "handoff.cu"
    src.write_text(kernel(HANDOFF))
    proc = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o",
                           str(tmp_path / "handoff.cubin"), str(src)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]  # C7508: ignored
    assert "Used 168 registers" in proc.stderr, proc.stderr[-3000:]
