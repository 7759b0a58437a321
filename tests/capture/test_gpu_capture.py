"""On a GPU: capture each shipped scenario again and check it ends the way the shipped trace does.

Marked `gpu`; skipped cleanly where CuPy or a CUDA device is missing (CI has neither). Each capture
runs in its own child process, as `make capture` does, so a trapping kernel fails only itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture.make_all import CAPTURES, build_trace
from app.capture.runner import CaptureConfig, bandwidth, capture


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

TRACES = Path(__file__).resolve().parents[2] / "traces"

OUTCOMES = {
    "single_barrier": "clean",
    "double_buffer_tma_1stage": "clean",
    "double_buffer_tma_2stage": "clean",
    "double_buffer_tma_4stage": "clean",
    "double_buffer_tma_2consumers": "clean",
    "proxy_fence_store": "clean",
    "double_buffer_tma_forget_phase_toggle_deadlock": "deadlock",
    "double_buffer_tma_forget_phase_toggle_stale": "wrong_reads",
    "double_buffer_tma_forget_producer_phase_toggle": "same_status",
    "single_barrier_forget_phase_toggle": "same_status",
    "proxy_fence_store_missing_proxy_fence": "fence_flagged",
}
"""What a fresh capture must show for each shipped trace (timing moves the exact figures)."""


def _shipped(name: str) -> dict:
    path = TRACES / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no shipped trace {path.name}")
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_a_fresh_capture_ends_like_the_shipped_trace(name):
    shipped = _shipped(name)
    raw = capture(CaptureConfig(**CAPTURES[name]))
    assert raw["records"], raw.get("error")
    doc = build_trace(name, raw)
    kinds = {d["kind"] for d in doc["diagnostics"]}
    expect = OUTCOMES[name]
    if expect == "clean":
        assert doc["status"] == shipped["status"] == "done"
        assert kinds == set(), doc["diagnostics"][:3]
        assert doc["source"]["ctas"].get("tiles_read_wrong", 0) == 0
    elif expect == "deadlock":
        assert doc["status"] == shipped["status"] == "deadlock"
        assert doc["source"]["ctas"]["timed_out"] >= doc["source"]["ctas"]["launched"] // 2
    elif expect == "wrong_reads":
        # A race: CTA 0 may read stale words or lose the race into a deadlock; over all CTAs,
        # some tiles are read wrong every time.
        assert doc["source"]["ctas"]["tiles_read_wrong"] > 0
    elif expect == "fence_flagged":
        assert doc["status"] == shipped["status"] == "done"
        assert "proxy_fence_missing" in kinds
    else:
        assert doc["status"] == shipped["status"]
    assert doc["source"]["conformance"]["divergences"] == 0


def test_the_event_log_survives_a_kernel_that_traps_or_times_out():
    raw = capture(CaptureConfig(**CAPTURES["double_buffer_tma_forget_producer_phase_toggle"]))
    assert raw["records"], "events logged before the kernel ended must reach the host"
    doc = build_trace("producer_bug", raw)
    assert doc["status"] in ("hardware_trap", "deadlock", "done")


def test_a_small_bandwidth_sweep_is_correct_and_reports_memcpy():
    doc = bandwidth(total_bytes=256 << 20, stages=[1, 4], tile_kib=[32], repeats=2)
    assert doc["memcpy"]["gbps"] > 0
    rows = [r for r in doc["results"] if r["fits"]]
    assert rows and all(r["correct"] for r in rows)
    four = max(r["gbps"] for r in rows if r["stages"] == 4)
    one = max(r["gbps"] for r in rows if r["stages"] == 1)
    assert four > one
