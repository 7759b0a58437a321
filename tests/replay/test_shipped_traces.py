"""Every shipped GPU trace validates, passes conformance (or says why not), and is exactly what the
decoder makes of its raw log under traces/raw/ (the raw logs are the decoder's fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture.make_all import CAPTURES, build_trace
from app.replay.conformance import check_trace
from app.replay.store import NOT_TRACES, schema_errors, trace_schema, validate_trace

TRACES = Path(__file__).resolve().parents[2] / "traces"
SHIPPED = sorted(p for p in TRACES.glob("*.json") if p.stem not in NOT_TRACES)

REQUIRED = (
    "single_barrier", "single_barrier_forget_phase_toggle", "double_buffer_tma_1stage",
    "double_buffer_tma_2stage", "double_buffer_tma_4stage",
    "double_buffer_tma_forget_phase_toggle_deadlock", "double_buffer_tma_forget_phase_toggle_stale",
    "double_buffer_tma_forget_producer_phase_toggle", "proxy_fence_store",
    "proxy_fence_store_missing_proxy_fence",
)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_lessons_traces_are_all_shipped():
    assert {p.stem for p in SHIPPED} >= set(REQUIRED)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_trace_is_small_and_valid(path):
    assert path.stat().st_size < 1_000_000
    doc = _load(path)
    validate_trace(doc)
    schema = trace_schema()
    if schema is not None:
        assert schema_errors(doc, schema) == []
    assert doc["source"]["kind"] == "gpu"
    assert doc["source"]["device"].startswith("NVIDIA")
    assert all(isinstance(s["time_ns"], int) for s in doc["steps"])
    times = [s["time_ns"] for s in doc["steps"]]
    assert times == sorted(times)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_trace_passes_conformance_or_explains_why(path):
    doc = _load(path)
    report = check_trace(doc)
    assert report.checked > 0 or not doc["initial"]["barriers"]
    assert report.recorded_divergences == [] or report.divergences
    if report.divergences:
        assert "Conformance:" in doc["source"]["lesson"]
        assert any(d["kind"] == "divergence" for d in doc["diagnostics"])
    assert doc["source"]["conformance"] == report.summary()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_decoding_the_raw_log_gives_the_shipped_trace(path):
    raw_path = TRACES / "raw" / f"{path.stem}.raw.json"
    assert path.stem in CAPTURES
    raw = _load(raw_path)
    assert raw["config"]["scenario"] == CAPTURES[path.stem]["scenario"]
    assert build_trace(path.stem, raw) == _load(path)


def test_the_headline_outcomes_of_the_lessons():
    def doc(name):
        return _load(TRACES / f"{name}.json")

    for name in ("single_barrier", "double_buffer_tma_1stage", "double_buffer_tma_2stage",
                 "double_buffer_tma_4stage", "proxy_fence_store"):
        assert doc(name)["status"] == "done"
        assert doc(name)["diagnostics"] == []
    stale = doc("double_buffer_tma_forget_phase_toggle_stale")
    assert {"stale_wait", "partial_read"} <= {d["kind"] for d in stale["diagnostics"]}
    assert doc("double_buffer_tma_forget_phase_toggle_deadlock")["status"] == "deadlock"
    assert doc("double_buffer_tma_forget_producer_phase_toggle")["status"] == "hardware_trap"
    fence = doc("proxy_fence_store_missing_proxy_fence")
    assert "proxy_fence_missing" in {d["kind"] for d in fence["diagnostics"]}


def test_bandwidth_is_shipped_and_meets_the_target():
    bw = _load(TRACES / "bandwidth.json")
    assert bw["format"] == "mbarrier-inspector/bandwidth"
    sizes = {r["tile_bytes"] for r in bw["results"]}
    assert sizes == {4096, 16384, 32768}
    assert {r["stages"] for r in bw["results"]} == set(range(1, 9))
    assert all(r["correct"] for r in bw["results"] if r["fits"])
    assert bw["best_fraction_of_memcpy"] >= 0.9
