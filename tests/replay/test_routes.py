"""GET /api/v1/replays: the router the app includes (FastAPI's TestClient)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

fastapi = pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from app.capture.ship import DIFFERENCES  # noqa: E402
from app.replay import routes  # noqa: E402
from app.replay.routes import router  # noqa: E402

PROBES = Path(__file__).resolve().parent / "probes_v2.json"


@pytest.fixture(scope="module")
def client():
    app = fastapi.FastAPI()
    app.include_router(router, prefix="/api/v1")
    with TestClient(app) as c:
        yield c


def test_list(client):
    body = client.get("/api/v1/replays").json()
    entries = {r["id"]: r for r in body["replays"]}
    assert {"single_barrier", "double_buffer_tma_1stage_forget_phase_toggle"} <= set(entries)
    assert all(r["matches"] is True for rid, r in entries.items() if rid not in DIFFERENCES)
    assert all(entries[rid]["matches"] is False for rid in DIFFERENCES if rid in entries)


def test_one_replay_and_a_window(client):
    whole = client.get("/api/v1/replays/double_buffer_tma_2stage_1consumer").json()
    assert whole["source"]["kind"] == "gpu"
    part = client.get(
        "/api/v1/replays/double_buffer_tma_2stage_1consumer?from=5&to=9&snapshots=false")
    body = part.json()
    assert body["window"] == {"from": 5, "to": 9}
    assert [s["step"] for s in body["steps"]] == [5, 6, 7, 8, 9]
    assert "snapshot" not in body["steps"][0]


def test_unknown_is_404_naming_the_field(client):
    for path in ("nope", "nope/kernel", "nope/conformance", "bandwidth/kernel"):
        res = client.get(f"/api/v1/replays/{path}")
        assert res.status_code == 404, path
        assert res.json()["detail"][0]["loc"] == ["path", "replay_id"]


def test_bandwidth_and_conformance(client):
    bw = client.get("/api/v1/replays/bandwidth").json()
    assert bw["best_fraction_of_memcpy"] >= 0.9
    conf = client.get("/api/v1/replays/single_barrier/conformance").json()
    doc = client.get("/api/v1/replays/single_barrier").json()
    assert conf == doc["source"]["conformance"] and conf["matches"] is True


def test_the_kernel_that_ran_is_plain_text(client):
    res = client.get("/api/v1/replays/single_barrier/kernel")
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/plain")
    assert "mbarrier.try_wait.parity" in res.text


def test_probes_are_served_and_missing_probes_are_404(client, tmp_path, monkeypatch):
    res = client.get("/api/v1/replays/probes")
    assert res.status_code == 200
    assert res.json()["format"] == "mbarrier-inspector/tx-probes"
    shutil.copy(PROBES, tmp_path / "probes.json")
    monkeypatch.setattr("app.replay.catalogue.traces_dir", lambda: tmp_path)
    rows = client.get("/api/v1/replays/probes").json()["scale"]["rows"]
    assert rows[1]["model"]["reachable"] == ["partial_read", "deadlock"]
    (tmp_path / "probes.json").unlink()
    res = client.get("/api/v1/replays/probes")
    assert res.status_code == 404
    assert res.json()["detail"][0]["loc"] == ["file", "probes"]
    assert routes.router is router
