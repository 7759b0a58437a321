"""Loading replays: the catalogue, and clear errors for corrupt or unknown files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.replay.catalogue import list_replays, load_kernel, load_probes, load_replay
from app.replay.store import MAX_BYTES, ReplayError

TRACES = Path(__file__).resolve().parents[2] / "traces"
PROBES = Path(__file__).resolve().parent / "probes_v2.json"


@pytest.fixture
def folder(tmp_path):
    shutil.copy(TRACES / "single_barrier.json", tmp_path / "good.json")
    return tmp_path


def _write(folder: Path, name: str, doc) -> None:
    (folder / f"{name}.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_the_catalogue_lists_every_shipped_gpu_replay():
    entries = list_replays()
    ids = {e["id"] for e in entries}
    assert "double_buffer_tma_1stage_forget_phase_toggle" in ids
    assert "bandwidth" not in ids and "probes" not in ids
    assert all("error" not in e for e in entries)
    entry = next(e for e in entries if e["id"] == "single_barrier")
    assert entry["device"] == "NVIDIA H200" and entry["status"] == "done"
    assert entry["lesson"] and entry["matches"] is True and entry["title"]
    assert entry["pipeline"] == "single_barrier" and entry["bugs"] == []


def test_load_replay_returns_the_document(folder):
    doc = load_replay("good", folder)
    assert doc["source"]["kind"] == "gpu"


@pytest.mark.parametrize("replay_id", ["nope", "../etc/passwd", "UPPER", "", "bandwidth",
                                       "probes"])
def test_unknown_or_malformed_ids_are_404(folder, replay_id):
    with pytest.raises(ReplayError) as err:
        load_replay(replay_id, folder)
    assert err.value.status == 404 and err.value.field == "replay_id"


def _doctored(folder: Path, change) -> ReplayError:
    doc = json.loads((folder / "good.json").read_text())
    change(doc)
    _write(folder, "bad", doc)
    with pytest.raises(ReplayError) as err:
        load_replay("bad", folder)
    return err.value


def test_not_json_names_the_file(folder):
    _write(folder, "bad", "{not json")
    with pytest.raises(ReplayError, match="file: bad.json is not valid JSON"):
        load_replay("bad", folder)


def test_a_file_over_the_limit_is_refused(folder):
    _write(folder, "big", " " * (MAX_BYTES + 1))
    with pytest.raises(ReplayError) as err:
        load_replay("big", folder)
    assert err.value.status == 413


def _conformance(d: dict) -> dict:
    return d["source"]["conformance"]


@pytest.mark.parametrize("field, change", [
    ("version", lambda d: d.update(version=2)),
    ("trace.steps", lambda d: d.pop("steps")),
    ("steps[3].step", lambda d: d["steps"][3].update(step=99)),
    ("steps[2].agent", lambda d: d["steps"][2].update(agent="ghost")),
    ("steps[1].events[0].kind", lambda d: d["steps"][1]["events"][0].update(kind="teleport")),
    ("steps[5].time_ns", lambda d: d["steps"][5].pop("time_ns")),
    ("initial.barriers[0].parity",
     lambda d: d["initial"]["barriers"][0].update(parity=1)),
    ("scenario.params.tiles", lambda d: d["scenario"]["params"].update(tiles="8")),
    ("source.conformance", lambda d: d["source"].pop("conformance")),
    ("source.conformance.matches", lambda d: _conformance(d).update(matches="yes")),
    ("source.conformance.first_divergence",
     lambda d: _conformance(d).update(first_divergence={"step": 3, "why": "made up"})),
    ("source.conformance.first_divergence.step",
     lambda d: _conformance(d).update(matches=False, first_divergence={"step": 0, "why": "x"})),
    ("source.conformance.first_divergence.why",
     lambda d: _conformance(d).update(matches=False, first_divergence={"step": 2})),
    ("source.conformance.observations_checked",
     lambda d: _conformance(d).update(observations_checked=-1)),
    ("source.lesson", lambda d: d["source"].update(lesson=["a list"])),
    ("source.ctas.outcomes.finished",
     lambda d: d["source"]["ctas"]["outcomes"].update(finished="all")),
    ("source.ctas.agents", lambda d: d["source"]["ctas"].pop("agents")),
    ("source.device", lambda d: d["source"].update(device="H200")),
])
def test_a_corrupt_replay_names_the_field(folder, field, change):
    assert _doctored(folder, change).field == field


def test_a_corrupt_file_is_listed_with_its_error(folder):
    _write(folder, "bad", {"format": "x"})
    doc = json.loads((folder / "good.json").read_text())
    doc["source"]["conformance"]["matches"] = None
    _write(folder, "worse", doc)
    entries = {e["id"]: e for e in list_replays(folder)}
    assert "error" in entries["bad"] and "error" not in entries["good"]
    assert "source.conformance.matches" in entries["worse"]["error"]


# ------------------------------------------------------------------------------ kernels


def test_the_kernel_that_ran_is_its_cuda_text():
    text = load_kernel("single_barrier")
    assert "mbarrier.try_wait.parity" in text and "pipeline_kernel" in text


@pytest.mark.parametrize("replay_id", ["nope", "../x", "probes"])
def test_an_unknown_kernel_is_404(replay_id):
    with pytest.raises(ReplayError) as err:
        load_kernel(replay_id)
    assert err.value.status == 404


def test_an_oversized_kernel_is_refused(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "gen_big.cu").write_text("x" * (600 * 1024))
    with pytest.raises(ReplayError) as err:
        load_kernel("big", tmp_path)
    assert err.value.status == 413


# ------------------------------------------------------------------------------- probes


def test_the_probes_fixture_and_the_shipped_probes_validate(tmp_path):
    shutil.copy(PROBES, tmp_path / "probes.json")
    doc = load_probes(tmp_path)
    assert doc["version"] == 2 and doc["scale"]["rows"][1]["rates"]["hung"] == 0.753
    assert load_probes()["format"] == "mbarrier-inspector/tx-probes"


def test_no_probes_file_is_404(tmp_path):
    with pytest.raises(ReplayError) as err:
        load_probes(tmp_path)
    assert err.value.status == 404


@pytest.mark.parametrize("field, change", [
    ("format", lambda d: d.update(format="something else")),
    ("version", lambda d: d.update(version=4)),
    ("probes[0].probe", lambda d: d["probes"][0].pop("probe")),
    ("scale.rows", lambda d: d["scale"].update(rows={})),
    ("scale.rows[0].early", lambda d: d["scale"]["rows"][0].update(early=-2)),
    ("scale.rows[0].rates.hung", lambda d: d["scale"]["rows"][0]["rates"].update(hung=7)),
    ("scale.rows[0].model.reachable",
     lambda d: d["scale"]["rows"][0]["model"].update(reachable="deadlock")),
    ("granularity", lambda d: d.update(granularity="128")),
    # version 3's parts
    ("remote_after_exit.rows", lambda d: d.update(version=3, remote_after_exit={"rows": {}})),
    ("no_complete.rows[0].probe",
     lambda d: d.update(version=3, no_complete={"rows": [{"probe": 1}]})),
    ("remote_after_exit.rows[0].endings.trapped",
     lambda d: d.update(version=3, remote_after_exit={
         "rows": [{"probe": "arrive_0us", "endings": {"trapped": -1}}]})),
    ("remote_after_exit.rows[0].silicon",
     lambda d: d.update(version=3, remote_after_exit={
         "rows": [{"probe": "arrive_0us", "silicon": "trapped"}]})),
    ("no_complete.rows[0].model.reachable",
     lambda d: d.update(version=3, no_complete={
         "rows": [{"probe": "no_complete", "model": {"reachable": "no_complete"}}]})),
])
def test_corrupt_probes_name_the_field(tmp_path, field, change):
    doc = json.loads(PROBES.read_text())
    change(doc)
    (tmp_path / "probes.json").write_text(json.dumps(doc))
    with pytest.raises(ReplayError) as err:
        load_probes(tmp_path)
    assert err.value.field == field
