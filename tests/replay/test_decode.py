"""The decoder on hand-made raw logs and on a raw log captured on the H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture import kernels as K
from app.capture.decode import DecodeError, decode
from app.replay.conformance import check_trace

from .rawlog import RawLog, single_barrier_log

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"


def test_a_correct_single_barrier_log_decodes_to_a_clean_trace():
    doc = decode(single_barrier_log(3).raw())
    assert doc["status"] == "done"
    assert doc["diagnostics"] == []
    ops = [s["op"] for s in doc["steps"] if s["agent"] == "thread"]
    assert ops[:4] == ["mbarrier.init", "mbarrier.arrive.expect_tx",
                       "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                       "mbarrier.try_wait.parity"]
    landed = [s for s in doc["steps"] if s["agent"] == "tma"]
    assert len(landed) == 3 * 4
    assert doc["steps"][-1]["snapshot"]["barriers"][0]["phase"] == 3
    assert check_trace(doc).ok


def test_a_forgotten_phase_toggle_is_a_stale_wait():
    doc = decode(single_barrier_log(3, forget_phase=True).raw())
    stale = [d for d in doc["diagnostics"] if d["kind"] == "stale_wait"]
    assert len(stale) == 1 and "tile 1" in stale[0]["message"]


def test_a_timeout_becomes_a_deadlock():
    log = RawLog("single_barrier", ["thread"], tiles=2)
    log.add(0, 100, K.OP_INIT, 0, 0, a=1)
    log.add(0, 200, K.OP_ARRIVE_EXPECT_TX, 0, 0, a=4096, token=log.token(0, 1), result=1)
    log.add(0, 300, K.OP_TMA_LOAD, 0, 0, a=4096, b=4)
    log.add(0, 4_000_000, K.OP_WAIT, 0, 0, a=1, b=400, result=0, extra=500)
    doc = decode(log.raw())
    assert doc["status"] == "deadlock"
    assert doc["diagnostics"][-1]["kind"] == "deadlock"
    assert doc["steps"][-1]["snapshot"]["agents"][0]["status"] == "waiting"


def test_an_error_becomes_a_hardware_trap():
    log = single_barrier_log(1)
    log.error = {"name": "cudaErrorLaunchFailure", "message": "unspecified launch failure"}
    doc = decode(log.raw())
    assert doc["status"] == "hardware_trap"
    assert doc["diagnostics"][-1]["kind"] == "hardware_trap"
    assert "cudaErrorLaunchFailure" in doc["diagnostics"][-1]["message"]


@pytest.mark.parametrize("field, change", [
    ("format", lambda raw: raw.update(format="other")),
    ("config", lambda raw: raw.pop("config")),
    ("records", lambda raw: raw.update(records="x")),
    ("records[0]", lambda raw: raw["records"][0].pop()),
    ("records[0]", lambda raw: raw["records"][0].__setitem__(4, 99)),
])
def test_a_corrupt_raw_log_names_the_field(field, change):
    raw = single_barrier_log(1).raw()
    change(raw)
    with pytest.raises(DecodeError, match=field.replace("[", r"\[").replace("]", r"\]")):
        decode(raw)


def test_the_captured_raw_log_names_the_stale_words():
    raw = json.loads((RAW / "double_buffer_tma_forget_phase_toggle_stale.raw.json").read_text())
    assert raw["device"]["device"] == "NVIDIA H200"
    doc = decode(raw)
    reads = [d for d in doc["diagnostics"] if d["kind"] in ("partial_read", "stale_read")]
    assert reads
    assert all("words" in d["message"] and "held tile" in d["message"] for d in reads)
    observed = {o["step"]: o for o in doc["source"]["observed"]}
    for d in reads:
        assert observed[d["step"]]["bad_words"] > 0


def test_tokens_decode_parity_and_pending_arrivals():
    raw = json.loads((RAW / "double_buffer_tma_2consumers.raw.json").read_text())
    doc = decode(raw)
    tokens = [o for o in doc["source"]["observed"] if "token" in o]
    releases = [o for o in tokens if o["agent"].startswith("consumer")]
    assert {o["token_pending"] for o in releases} == {1, 2}
    for o in tokens:
        assert o["token_parity"] == int(o["token"], 16) >> 63
