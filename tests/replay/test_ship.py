"""`app.capture.ship`: a diverging log ships only with the sentence that explains it, the launch
figures add up, and the command writes what `build` makes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.capture import ship
from app.capture.codegen import KIND_CODE

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"


def _raw(name: str) -> dict:
    return json.loads((RAW / f"gen_{name}.raw.json").read_text())


def _diverging() -> dict:
    raw = copy.deepcopy(_raw("single_barrier"))
    waits = [i for i, r in enumerate(raw["records"]) if r[4] & 0xFF == KIND_CODE["wait_parity"]]
    raw["records"][waits[1]][7] = 0  # the second wait said to give up
    return raw


def test_a_diverging_log_is_refused_without_a_sentence_that_explains_it():
    with pytest.raises(ship.ShipError, match="DIFFERENCES"):
        ship.build(_diverging())


def test_a_diverging_log_ships_with_its_sentence_in_the_lesson(monkeypatch):
    why = "The H200 gave up on this wait for reasons this test makes up."
    monkeypatch.setitem(ship.DIFFERENCES, "single_barrier", why)
    doc = ship.build(_diverging())
    c = doc["source"]["conformance"]
    assert c["matches"] is False and c["first_divergence"]["step"] >= 1
    assert why in doc["source"]["lesson"]
    assert f"disagrees at step {c['first_divergence']['step']}" in doc["source"]["lesson"]


def test_a_one_off_capture_may_diverge_without_a_sentence():
    doc = ship.build(_diverging(), strict=False)
    assert doc["source"]["conformance"]["matches"] is False
    assert "disagrees at step" in doc["source"]["lesson"]


def test_a_log_that_is_not_format_2_is_refused():
    with pytest.raises(ship.ShipError, match="format v2"):
        ship.build({"format": "mbarrier-inspector/raw-gpu-log", "version": 1, "name": "x"})


def test_launch_figures_add_up_over_ctas_and_agents():
    raw = _raw("double_buffer_tma_wrong_arrival_count")
    ctas = ship.launch_figures(raw)
    assert ctas["launched"] == 132 == sum(ctas["outcomes"].values())
    assert ctas["reads_wrong"] == sum(a["reads_wrong"] for a in ctas["agents"])
    assert [a["name"] for a in ctas["agents"]] == raw["agents"]
    out = ctas["stored"]["out"]
    assert out["elements"] == 132 * 8 and 0 <= out["changed"] <= out["elements"]
    assert out["changed"] == raw["dst"]["out"]["changed_all_ctas"]
    trapped = ship.launch_figures(_raw("double_buffer_tma_producer_skips_empty_wait_132ctas"))
    assert trapped["trapped"] and trapped["outcomes"]["not_reported"] > 0


def test_the_command_writes_the_documents_build_makes(tmp_path):
    assert ship.main(["--only", "single_barrier", "--out-dir", str(tmp_path)]) == 0
    written = (tmp_path / "single_barrier.json").read_text()
    assert written == ship.encode(ship.build(_raw("single_barrier")))
    assert [p.name for p in tmp_path.iterdir()] == ["single_barrier.json"]
