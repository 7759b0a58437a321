"""The engine replayed in the GPU's order, on raw logs of generated kernels captured on the H200
(traces/raw/gen_*.raw.json): every one conforms, the manual schedule it yields reproduces the run,
what the hardware showed is what the engine says, and doctored logs diverge at the step where the
doctoring shows."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from app.capture.codegen import KIND_CODE
from app.capture.ship import DIFFERENCES
from app.replay.gpu_order import (
    ReplayError,
    config_of,
    conformance,
    gpu_records,
    merged,
    replay,
)
from app.sim.trace import Run

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"
HIDDEN_BY_THE_KERNEL = {"gen_remote_after_exit_exit_sync"}
"""A kernel with a cluster barrier before exit that its program does not have: the model stops
where the program reaches into the exited CTA, the GPU (kept alive by the barrier) goes on."""
EXPLAINED = {f"gen_{name}" for name in DIFFERENCES}
"""Logs whose replay diverges for a reason app.capture.ship.DIFFERENCES writes down (a landing
order the GPU does not log); tests/replay/test_shipped_traces.py checks their lessons say so."""
LOGS = sorted(p for p in RAW.glob("gen_*.raw.json")
              if p.name[:-len(".raw.json")] not in HIDDEN_BY_THE_KERNEL | EXPLAINED)


def _raw(name: str) -> dict:
    return json.loads((RAW / f"{name}.raw.json").read_text())


def _name(path: Path) -> str:
    return path.name[:-len(".raw.json")]


def test_there_are_logs_of_generated_kernels():
    assert len(LOGS) >= 20


@pytest.mark.parametrize("path", LOGS, ids=_name)
def test_every_captured_log_replays_in_the_gpu_order_without_divergence(path):
    raw = json.loads(path.read_text())
    state = replay(raw)
    report = state.summary()
    assert report["matches"] is True, report["first_divergence"]
    assert report["first_divergence"] is None
    assert report["gpu_records"] == sum(1 for r in raw["records"] if r[0] == 0)
    # the schedule the GPU chose reproduces the engine's run move for move
    again = Run.complete(config_of(raw), state.schedule)
    assert again.total_steps == state.run.total_steps
    assert again.status == state.run.status
    assert again.diagnostics == state.run.diagnostics


def test_the_model_stops_where_an_exit_barrier_hid_the_bug():
    report = replay(_raw("gen_remote_after_exit_exit_sync")).summary()
    assert report["matches"] is False
    assert "remote_after_exit" in report["first_divergence"]["why"]


def _diagnostics(name: str) -> Counter:
    return Counter(d["kind"] for d in replay(_raw(name)).run.diagnostics)


@pytest.mark.parametrize("name", ["gen_single_barrier", "gen_double_buffer_tma_2stage_1consumer",
                                  "gen_double_buffer_tma_2stage_2consumer", "gen_release_behind",
                                  "gen_copy_per_chunk", "gen_proxy_fence_store"])
def test_clean_pipelines_end_done_with_no_diagnostic(name):
    state = replay(_raw(name))
    assert state.run.status == "done"
    assert state.summary()["status"] == {"gpu": "done", "engine": "done"}
    assert state.run.diagnostics == []
    assert all(o["gpu"] == "all chunks right" for o in state.observations
               if o["what"].startswith("read"))


def test_the_one_stage_phase_bug_reads_stale_words_on_the_gpu_and_in_the_engine():
    state = replay(_raw("gen_double_buffer_tma_1stage_forget_phase_toggle"))
    kinds = Counter(d["kind"] for d in state.run.diagnostics)
    assert kinds["stale_wait"] >= 1 and kinds["stale_read"] + kinds["partial_read"] >= 1
    wrong = [o for o in state.observations if o["what"].startswith("read")
             and o["gpu"] != "all chunks right"]
    assert wrong and all("earlier-tile words" in o["gpu"] for o in wrong)
    assert all(o["engine"] != "all chunks right" for o in wrong)


def test_timeouts_are_the_engines_deadlocks():
    for name in ("gen_double_buffer_tma_consumer_skips_release",
                 "gen_double_buffer_tma_expect_tx_long"):
        report = conformance(_raw(name))
        assert report["status"] == {"gpu": "deadlock", "engine": "deadlock"}, name


SHORT = ("gen_single_barrier_expect_tx_short", "gen_double_buffer_tma_expect_tx_short",
         "gen_copy_per_chunk_expect_tx_short")


def test_a_short_announcement_ends_either_way_and_the_engine_follows():
    """A short expect_tx is a race on silicon (traces/probes.json): the phase completes early
    or the count steps over zero. Either ending replays; a hang only with held bytes."""
    endings = set()
    for name in SHORT:
        report = conformance(_raw(name))
        assert report["matches"], (name, report["first_divergence"])
        gpu = report["status"]["gpu"]
        assert report["status"]["engine"] == gpu, name
        endings.add(gpu)
        if gpu == "deadlock":
            assert report["landings_held"] >= 1, name
    assert "deadlock" in endings


def test_the_missing_proxy_fence_is_flagged_on_every_store():
    assert _diagnostics("gen_proxy_fence_store_missing_proxy_fence")["proxy_fence_missing"] == 16


def test_merged_order_keeps_each_agents_order():
    raw = _raw("gen_double_buffer_tma_2stage_2consumer")
    per_agent = gpu_records(raw)
    order = merged(per_agent)
    assert len(order) == sum(len(a) for a in per_agent)
    for slot, records in enumerate(per_agent):
        assert [r.seq for r in order if r.slot == slot] == [r.seq for r in records]


# ----------------------------------------------------------------------------- doctoring


def _find(raw: dict, kind: str, slot: int | None = None, nth: int = 0) -> int:
    code = KIND_CODE[kind]
    hits = [i for i, r in enumerate(raw["records"])
            if r[4] & 0xFF == code and (slot is None or r[1] == slot)]
    return hits[nth]


def test_a_wait_said_to_time_out_where_the_bytes_had_landed_diverges():
    raw = copy.deepcopy(_raw("gen_single_barrier"))
    i = _find(raw, "wait_parity", nth=1)
    raw["records"][i][7] = 0  # ok = 0
    report = conformance(raw)
    assert not report["matches"]
    assert "gave up" in report["first_divergence"]["why"]


def test_a_flipped_token_parity_diverges():
    raw = copy.deepcopy(_raw("gen_double_buffer_tma_2stage_1consumer"))
    i = _find(raw, "arrive_expect_tx", nth=0)
    raw["records"][i][7] ^= 1 << 63
    report = conformance(raw)
    assert not report["matches"]
    assert "arrived on full_barrier[0]" in report["first_divergence"]["why"]


def test_a_read_said_to_be_wrong_where_the_engine_has_the_tile_diverges():
    raw = copy.deepcopy(_raw("gen_release_behind"))
    i = _find(raw, "ld_shared", nth=2)
    raw["records"][i][7] = 0b0111  # chunk 3 not right
    raw["records"][i][9] = 0b1000  # never written
    report = conformance(raw)
    assert not report["matches"]
    assert "read tile 2" in report["first_divergence"]["why"]


def test_a_record_at_the_wrong_node_is_a_control_flow_divergence():
    raw = copy.deepcopy(_raw("gen_single_barrier"))
    i = _find(raw, "load", nth=1)
    raw["records"][i][4] = (raw["records"][i][4] & ~(0xFFFF << 16)) | (5 << 16)
    report = conformance(raw)
    assert not report["matches"]
    assert "node" in report["first_divergence"]["why"]


def test_a_trap_the_engine_cannot_explain_diverges():
    raw = copy.deepcopy(_raw("gen_single_barrier"))
    raw["records"] = raw["records"][:10]  # cut after the second tile's arrive and load
    raw["error"] = {"name": "cudaErrorLaunchFailure", "message": "unspecified launch failure"}
    report = conformance(raw)
    assert not report["matches"]
    assert "trapped" in report["first_divergence"]["why"]


def test_a_log_that_is_not_a_generated_kernels_is_refused():
    old = {**json.loads((RAW / "gen_single_barrier.raw.json").read_text()), "version": 1,
           "config": {"scenario": "single_barrier"}}  # a hand-written kernel's log (v1)
    with pytest.raises(ReplayError, match="format v2"):
        replay(old)


# ------------------------------------------------------------------------- trace documents


def test_the_store_knows_every_kind_the_schema_names():
    from app.replay.store import DIAGNOSTIC_KINDS, EVENT_KINDS, STATUSES
    from app.sim import SCHEMA_PATH

    defs = json.loads(SCHEMA_PATH.read_text())["$defs"]
    assert set(defs["diagnostic"]["properties"]["kind"]["enum"]) == DIAGNOSTIC_KINDS
    assert set(defs["event"]["properties"]["kind"]["enum"]) == EVENT_KINDS
    assert set(defs["status"]["enum"]) == STATUSES
    assert {"init", "arrive", "chunk_landed", "warp_sync"} <= EVENT_KINDS
    assert {"stale_wait", "deadlock", "divergence"} <= DIAGNOSTIC_KINDS


@pytest.mark.parametrize("path", LOGS, ids=_name)
def test_a_replay_is_a_valid_gpu_trace_document(path):
    from app.replay.gpu_order import document
    from app.replay.store import validate_trace

    raw = json.loads(path.read_text())
    state = replay(raw, int(raw.get("replay_cta", 0)))
    doc = validate_trace(document(state, snapshots=False))
    assert doc["source"]["kind"] == "gpu"
    assert doc["source"]["conformance"]["matches"] is True
    times = [s["time_ns"] for s in doc["steps"]]
    assert times == sorted(times)
    assert doc["source"]["kernel"] == f"traces/raw/{_name(path)}.cu"
    assert (RAW / f"{_name(path)}.cu").exists()


def test_a_trap_is_explained_by_the_engines_next_move():
    # The 1-stage producer_skips_empty_wait capture did not trap on the H200; cut its log where
    # the producer's second arrive.expect_tx would come and say the kernel trapped there.
    raw = copy.deepcopy(_raw("gen_double_buffer_tma_1stage_producer_skips_empty_wait"))
    producer = [r for r in raw["records"] if r[1] == 0][:3]  # start, arrive.expect_tx, load
    assert [KIND_CODE_NAMES[r[4] & 0xFF] for r in producer] == ["start", "arrive_expect_tx",
                                                              "load"]
    consumer = [r for r in raw["records"] if r[1] == 1][:1]  # start
    raw["records"] = producer + consumer
    raw["error"] = {"name": "cudaErrorLaunchFailure", "message": "unspecified launch failure"}
    report = conformance(raw)
    assert report["matches"], report["first_divergence"]
    assert report["status"]["gpu"] == "hardware_trap"
    assert report["status"]["engine"] == "undefined_behavior"
    assert any("next move by producer is over_arrival" in n for n in report["notes"])


KIND_CODE_NAMES = {code: name for name, code in KIND_CODE.items()}


def test_what_the_stores_left_in_global_memory_is_checked():
    raw = _raw("gen_double_buffer_tma_2stage_1consumer")
    state = replay(raw)
    stored = [o for o in state.observations if o["what"].endswith("in global memory")]
    assert len(stored) == 8 and all(o["agrees"] for o in stored)
    doctored = copy.deepcopy(raw)
    doctored["dst"]["out"]["cta0"][3] = [[2, 1024]]  # out[3] said to hold tile 2's words
    report = conformance(doctored)
    assert not report["matches"]
    assert "out[3]" in report["first_divergence"]["why"]
