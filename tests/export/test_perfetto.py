"""The Perfetto / Chrome trace export of simulated and GPU traces (app/export/perfetto.py)."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from app.cli import main
from app.export.perfetto import (
    SIM_STEP_US,
    file_name,
    run_name,
    to_chrome_trace,
    trace_event_schema,
)
from app.replay.catalogue import list_replays, load_replay
from app.scenarios import get as get_scenario
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .perfetto_checks import check_export, schema_errors, step_events, thread_names

SIMULATED = [
    ("single_barrier", {}, ""),
    ("single_barrier", {}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 4}, ""),
    ("double_buffer_tma", {"stages": 2, "tiles": 4}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 4, "consumers": 2}, "wrong_arrival_count"),
    ("kloop_tma_mma", {}, ""),
    ("proxy_fence_store", {}, "missing_proxy_fence"),
]
GPU_IDS = [r["id"] for r in list_replays() if "error" not in r]


def simulate(scenario_id: str, params: dict, bugs: str, **window) -> dict:
    scenario = get_scenario(scenario_id)
    cfg = scenario.resolve(params, bugs)
    run = Run.complete(cfg, Schedule("random", seed=5), scenario.describe(cfg))
    return run.document(**window)


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(trace_event_schema())


@pytest.mark.parametrize("event, field", [
    ({"name": "a", "ph": "X", "ts": 0, "pid": 1, "tid": 1}, "dur"),
    ({"name": "c", "ph": "C", "ts": 0, "pid": 1, "args": {"n": "one"}}, "args/n"),
    ({"name": "thread_name", "ph": "M", "pid": 1, "args": {"name": "x"}}, "tid"),
    ({"name": "d", "ph": "i", "ts": 0, "pid": 1, "s": "t"}, "tid"),
    ({"name": "a", "ph": "Q", "ts": 0, "pid": 1, "tid": 1}, "ph"),
])
def test_the_schema_refuses_malformed_events(event, field):
    errors = schema_errors({"traceEvents": [event]})
    assert errors and any(field in e for e in errors), errors


@pytest.mark.parametrize("scenario_id, params, bugs", SIMULATED)
def test_simulated_traces(scenario_id, params, bugs):
    doc = simulate(scenario_id, params, bugs)
    chrome = to_chrome_trace(doc)
    check_export(doc, chrome)
    for event in step_events(chrome):
        assert event["ts"] == (event["args"]["step"] - 1) * SIM_STEP_US
        assert event["dur"] == SIM_STEP_US
    json.dumps(chrome, allow_nan=False)


def test_each_barrier_is_a_counter_ending_in_the_last_snapshot():
    doc = simulate("double_buffer_tma", {"stages": 2, "tiles": 4}, "forget_phase_toggle")
    chrome = to_chrome_trace(doc)
    last: dict[str, dict] = {}
    for event in chrome["traceEvents"]:
        if event["ph"] == "C":
            last[event["name"]] = event["args"]
    final = doc["steps"][-1]["snapshot"]["barriers"]
    assert last == {b["name"]: {"pending_arrivals": b["pending_arrivals"],
                                "tx_count": b["tx_count"], "phase": b["phase"]} for b in final}


def test_waits_and_copies_in_flight_are_slices():
    doc = simulate("double_buffer_tma", {"stages": 2, "tiles": 4}, "")
    chrome = to_chrome_trace(doc)
    names = thread_names(chrome)
    copies = [e for e in chrome["traceEvents"] if e.get("cat") == "tma,in_flight"]
    issued = [e for s in doc["steps"] for e in s["events"] if e["kind"] == "tma_issued"]
    assert sorted(c["args"]["op"] for c in copies) == sorted(e["op"] for e in issued)
    assert all(names[c["tid"]].startswith("TMA engine: copies in flight") for c in copies)
    assert all(c["dur"] > 0 for c in copies)
    waits = [e for e in chrome["traceEvents"] if e.get("cat") == "wait"]
    assert waits and all(w["dur"] > 0 for w in waits)
    assert {names[w["tid"]] for w in waits} <= {"producer", "consumer0"}


def test_a_deadlocked_run_leaves_its_waits_unfinished_at_the_end():
    doc = simulate("double_buffer_tma", {"stages": 2, "tiles": 4}, "forget_phase_toggle")
    assert doc["status"] == "deadlock"
    chrome = to_chrome_trace(doc)
    end = doc["total_steps"] * SIM_STEP_US
    unfinished = [e for e in chrome["traceEvents"]
                  if e.get("cat") == "wait" and e["args"].get("unfinished")]
    assert unfinished and all(e["ts"] + e["dur"] == end for e in unfinished)


def test_a_window_exports_its_steps_only():
    doc = simulate("double_buffer_tma", {"stages": 2, "tiles": 6}, "", first=20, last=45)
    chrome = to_chrome_trace(doc)
    check_export(doc, chrome)
    assert [e["args"]["step"] for e in step_events(chrome)] == list(range(20, 46))


def test_without_snapshots_steps_and_diagnostics_remain():
    doc = simulate("single_barrier", {}, "forget_phase_toggle", snapshots=False)
    chrome = to_chrome_trace(doc)
    check_export(doc, chrome)
    assert [e for e in chrome["traceEvents"] if e["ph"] == "i"]
    counters = [e for e in chrome["traceEvents"] if e["ph"] == "C"]
    assert {e["ts"] for e in counters} == {0.0}, "only the initial state is known"


@pytest.mark.parametrize("replay_id", GPU_IDS)
def test_gpu_replays_sit_at_their_logged_times(replay_id):
    """Each step at its %globaltimer ns (read back from the JSON text); what the log does not
    time is flagged reconstructed; a wait ends when it returned, `waited_ns` after it began."""
    doc = load_replay(replay_id)
    chrome = json.loads(json.dumps(to_chrome_trace(copy.deepcopy(doc))))
    check_export(doc, chrome)
    observed = {o["step"]: o for o in doc["source"]["observed"]}
    logged = {s["step"]: s["time_ns"] for s in doc["steps"]}
    for event in step_events(chrome):
        number = event["args"]["step"]
        assert round(event["ts"] * 1000) == logged[number]
        assert event["dur"] == 0
        assert event["args"]["reconstructed"] is (doc["steps"][number - 1]["agent"] == "tma")
    waits = [e for e in chrome["traceEvents"] if e.get("cat") == "wait"]
    assert len(waits) == sum("waited_ns" in o for o in observed.values())
    for wait in waits:
        number = wait["args"]["returned_step"]
        assert round((wait["ts"] + wait["dur"]) * 1000) == logged[number]
        begin = logged[number] - observed[number]["waited_ns"]
        if not wait["args"].get("begin_clipped"):
            assert round(wait["ts"] * 1000) == begin
        else:
            assert round(wait["ts"] * 1000) > begin
    copies = [e for e in chrome["traceEvents"] if e.get("cat", "").endswith("in_flight")]
    assert all(c["args"]["reconstructed"] for c in copies)
    assert chrome["otherData"].get("globaltimer_start_ns") == \
        doc["source"].get("globaltimer_start_ns")


def test_the_cli_writes_a_perfetto_trace(capsys):
    assert main(["trace", "single_barrier", "--bugs", "forget_phase_toggle",
                 "--format", "perfetto"]) == 0
    chrome = json.loads(capsys.readouterr().out)
    assert main(["trace", "single_barrier", "--bugs", "forget_phase_toggle"]) == 0
    doc = json.loads(capsys.readouterr().out)
    check_export(doc, chrome)
    assert chrome["otherData"]["source_kind"] == "simulation"


def test_the_cli_refuses_an_unknown_format(capsys):
    with pytest.raises(SystemExit):
        main(["trace", "single_barrier", "--format", "svg"])
    assert "--format" in capsys.readouterr().err


def test_the_file_and_metadata_name_the_run_with_its_toggles():
    buggy = simulate("double_buffer_tma", {"stages": 2, "tiles": 4}, "forget_phase_toggle")
    correct = simulate("double_buffer_tma", {"stages": 2, "tiles": 4}, "")
    assert file_name(buggy) == "double_buffer_tma-forget_phase_toggle-random5.perfetto.json"
    assert file_name(correct) == "double_buffer_tma-random5.perfetto.json"
    other = to_chrome_trace(buggy)["otherData"]
    assert other["run"] == run_name(buggy)
    assert other["bugs"] == ["forget_phase_toggle"]
    assert other["schedule"] == {"kind": "random", "seed": 5}
    assert other["params"]["stages"] == 2
    assert to_chrome_trace(correct)["otherData"]["bugs"] == []


def test_a_pasted_pipeline_is_named_by_its_sha256_and_odd_characters_are_not_sent():
    doc = {"scenario": {"id": None, "bugs": ["b"], "source_sha256": "ab" * 32,
                        "schedule": {"kind": "round_robin"}}, "source": {"kind": "simulation"}}
    assert run_name(doc) == "pipeline-" + "ab" * 6 + "-b"
    doc["scenario"]["id"] = 'x"; y'
    assert run_name(doc) == "x___y-b"


def test_a_gpu_trace_is_named_by_its_replay_id():
    replay_id = next(r for r in GPU_IDS if "forget_phase_toggle" in r)
    assert file_name(load_replay(replay_id)) == f"{replay_id}.perfetto.json"
