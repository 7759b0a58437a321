"""On a GPU: every generated kernel compiles with NVRTC for sm_90a, and fresh captures of generated
kernels replay through the engine in the GPU's order without a divergence.

Marked `gpu`; skipped cleanly where CuPy or a CUDA device is missing (CI has neither). CuPy is
imported only inside the tests; captures run in child processes as `gen_capture` runs them.
"""

from __future__ import annotations

import pytest

from app.capture.codegen import CodegenError, generate
from app.capture.gen_capture import CAPTURES
from app.capture.gen_runner import COMPILE_OPTIONS, capture
from app.replay.gpu_order import conformance
from app.scenarios import catalogue


def _cuda_device() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda_device(), reason="needs CuPy and a CUDA device"),
]

BUILT_INS = [(s.id, bug) for s in catalogue().values() for bug in (None, *s.bugs)]


@pytest.mark.parametrize(("scenario_id", "bug"), BUILT_INS)
def test_every_generated_built_in_compiles_with_nvrtc(scenario_id, bug):
    import cupy

    scenario = catalogue()[scenario_id]
    cfg = scenario.resolve({}, [bug] if bug else [])
    try:
        source = generate(cfg.program, scenario_id, dict(cfg.params), cfg.bugs)
    except CodegenError:
        pytest.skip(f"{scenario_id} does not run on Hopper")
    kernel = cupy.RawKernel(source, "pipeline_kernel", options=COMPILE_OPTIONS)
    kernel.compile()


@pytest.mark.parametrize("name", ["gen_single_barrier", "gen_double_buffer_tma_2stage_2consumer",
                                  "gen_release_behind", "gen_proxy_fence_store",
                                  "gen_double_buffer_tma_consumer_skips_release"])
def test_a_fresh_capture_replays_in_the_gpu_order_without_divergence(name):
    raw = capture(CAPTURES[name])
    assert raw["records"], raw.get("error")
    report = conformance(raw)
    assert report["matches"], report["first_divergence"]
    assert report["observations_checked"] > 0 or name == "gen_proxy_fence_store"


def test_a_kernel_that_may_trap_still_returns_its_log_and_conforms():
    raw = capture(CAPTURES["gen_double_buffer_tma_producer_skips_empty_wait_132ctas"])
    assert raw["records"], raw.get("error")
    report = conformance(raw)
    assert report["matches"], report["first_divergence"]
    if raw.get("error"):
        assert report["status"]["gpu"] == "hardware_trap"
