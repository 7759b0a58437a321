"""Loading replays: the catalogue, and clear errors for corrupt or unknown files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.replay.store import MAX_BYTES, ReplayError, list_replays, load_replay

TRACES = Path(__file__).resolve().parents[2] / "traces"


@pytest.fixture
def folder(tmp_path):
    shutil.copy(TRACES / "single_barrier.json", tmp_path / "good.json")
    return tmp_path


def _write(folder: Path, name: str, doc) -> None:
    (folder / f"{name}.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_the_catalogue_lists_every_shipped_gpu_trace():
    entries = list_replays()
    ids = {e["id"] for e in entries}
    assert "double_buffer_tma_forget_phase_toggle_stale" in ids
    assert "bandwidth" not in ids
    assert all("error" not in e for e in entries)
    entry = next(e for e in entries if e["id"] == "single_barrier")
    assert entry["device"] == "NVIDIA H200" and entry["status"] == "done"
    assert entry["lesson"] and entry["conformance"]["passes"]


def test_load_replay_returns_the_document(folder):
    doc = load_replay("good", folder)
    assert doc["source"]["kind"] == "gpu"


@pytest.mark.parametrize("replay_id", ["nope", "../etc/passwd", "UPPER", "", "bandwidth"])
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
])
def test_a_corrupt_trace_names_the_field(folder, field, change):
    assert _doctored(folder, change).field == field


def test_a_corrupt_file_is_listed_with_its_error(folder):
    _write(folder, "bad", {"format": "x"})
    entries = {e["id"]: e for e in list_replays(folder)}
    assert "error" in entries["bad"] and "error" not in entries["good"]
