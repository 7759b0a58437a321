"""Every shipped GPU replay validates, matches the engine replayed in the GPU's order (or its lesson
explains the difference), and is byte for byte what `app.capture.ship` makes of its raw log."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from app.capture.ship import DIFFERENCES, SKIPPED, build, encode, raw_logs, replay_id
from app.replay.catalogue import list_replays
from app.replay.store import (
    MAX_BYTES,
    NOT_TRACES,
    schema_errors,
    trace_schema,
    validate_replay,
)

TRACES = Path(__file__).resolve().parents[2] / "traces"
SHIPPED = sorted(p for p in TRACES.glob("*.json") if p.stem not in NOT_TRACES)
RAW = {p.name[len("gen_"):-len(".raw.json")]: p for p in raw_logs(TRACES / "raw")}


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_generated_capture_is_shipped_and_nothing_else():
    assert {p.stem for p in SHIPPED} == set(RAW)
    assert len(SHIPPED) >= 20
    assert not set(SKIPPED) & {p.stem for p in SHIPPED}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_replay_is_small_and_valid(path):
    assert path.stat().st_size < MAX_BYTES // 2
    doc = validate_replay(_load(path))
    schema = trace_schema()
    assert schema_errors(doc, schema) == []
    jsonschema.Draft202012Validator(schema).validate(doc)  # the walk's reference
    source = doc["source"]
    assert source["kind"] == "gpu" and source["id"] == path.stem
    assert source["device"]["device"].startswith("NVIDIA")
    assert source["pipeline"] and source["title"] and source["lesson"]
    assert source["ctas"]["launched"] == source["launch"]["grid"]
    times = [s["time_ns"] for s in doc["steps"]]
    assert times == sorted(times)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_replay_matches_or_its_lesson_explains_why(path):
    source = _load(path)["source"]
    conformance = source["conformance"]
    assert conformance["observations_checked"] > 0
    if conformance["matches"]:
        assert conformance["first_divergence"] is None
        assert "the engine explains all" in source["lesson"]
    else:
        assert DIFFERENCES[path.stem] in source["lesson"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_lesson_says_a_bounded_wait_gave_up_only_where_the_log_has_one(path):
    """A named barrier has no deadline: where no wait logged its timeout the launch hung, and
    the lesson says so rather than telling of a wait that gave up; no title has empty `()`."""
    source = _load(path)["source"]
    gave_up = any("gave up" in o["what"] for o in source["observed"])
    assert "()" not in source["title"]
    assert ("wait gave up" in source["lesson"]) == (
        gave_up and source["conformance"]["status"]["gpu"] == "deadlock"), source["lesson"]
    if source["conformance"]["status"]["gpu"] == "deadlock" and not gave_up:
        assert "the launch hung" in source["lesson"]


def test_a_lesson_says_why_ctas_never_reported():
    """CTAs with no report were ended by a trap, or by the host when the launch hung: the
    lesson's launch sentence names which (app.capture.lessons reads the launch's error)."""
    from app.capture.lessons import lesson

    doc = _load(TRACES / "double_buffer_tma_producer_skips_empty_wait_132ctas.json")
    assert "132 never reported (the trap ended them)" in lesson(doc)
    doc["source"]["error"] = {"name": "launch_hung", "message": "the kernel had not finished"}
    text = lesson(doc)
    assert "132 never reported (the host ended the hung launch)" in text
    assert "trap ended" not in text


@pytest.mark.parametrize("corrupt", [
    lambda d: d.pop("layout"),
    lambda d: d["steps"][0].__setitem__("op", 7),
    lambda d: d["steps"][0]["events"].append({"kind": "no_such_event"}),
    lambda d: d.__setitem__("status", "halted"),
    lambda d: d["initial"]["barriers"][0].__setitem__("phase", -1),
    lambda d: d["source"].__setitem__("kind", "tpu"),
    lambda d: d.__setitem__("total_steps", "many"),
])
def test_the_schema_walk_refuses_what_jsonschema_refuses(corrupt):
    doc = _load(SHIPPED[0])
    corrupt(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(trace_schema()).validate(doc)
    assert schema_errors(doc, trace_schema())


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipping_the_raw_log_again_gives_the_same_bytes(path):
    raw = _load(RAW[path.stem])
    assert replay_id(raw) == path.stem
    assert encode(build(raw)) == path.read_text()


def test_the_catalogue_lists_every_shipped_replay():
    entries = {e["id"]: e for e in list_replays()}
    assert set(entries) == {p.stem for p in SHIPPED}
    assert all("error" not in e for e in entries.values())
    one = entries["double_buffer_tma_2stage_1consumer"]
    assert one["pipeline"] == "double_buffer_tma" and one["device"] == "NVIDIA H200"
    assert one["status"] == "done" and one["matches"] is True and one["lesson"]
    assert entries["release_behind"]["pipeline"] is None
    assert "release" in entries["release_behind"]["title"]


def test_the_headline_outcomes():
    def source(name):
        return _load(TRACES / f"{name}.json")["source"]

    for name in ("single_barrier", "double_buffer_tma_2stage_1consumer", "proxy_fence_store"):
        assert source(name)["conformance"]["status"]["gpu"] == "done"
    stale = _load(TRACES / "double_buffer_tma_1stage_forget_phase_toggle.json")
    kinds = {d["kind"] for d in stale["diagnostics"]}
    # the stale wait always; what the reader then finds is a race (an older or a torn tile)
    assert "stale_wait" in kinds and kinds & {"stale_read", "partial_read"}
    assert stale["source"]["ctas"]["reads_wrong"] > 0
    assert source("double_buffer_tma_forget_phase_toggle")["conformance"]["status"]["gpu"] \
        == "deadlock"
    trap = source("double_buffer_tma_forget_producer_phase_toggle_132ctas")
    assert trap["conformance"]["status"]["gpu"] == "hardware_trap"
    assert trap["ctas"]["trapped"] and "traps" in trap["lesson"]
    short = source("double_buffer_tma_expect_tx_short")
    assert short["conformance"]["landings_held"] >= 1


def test_bandwidth_is_shipped_and_meets_the_target():
    bw = _load(TRACES / "bandwidth.json")
    assert bw["format"] == "mbarrier-inspector/bandwidth"
    sizes = {r["tile_bytes"] for r in bw["results"]}
    assert sizes == {4096, 16384, 32768}
    assert {r["stages"] for r in bw["results"]} == set(range(1, 9))
    assert all(r["correct"] for r in bw["results"] if r["fits"])
    assert bw["best_fraction_of_memcpy"] >= 0.9
