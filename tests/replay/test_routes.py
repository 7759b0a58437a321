"""GET /api/v1/replays: the router the app includes (FastAPI's TestClient)."""

from __future__ import annotations

import pytest

fastapi = pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from app.replay.routes import router  # noqa: E402


@pytest.fixture(scope="module")
def client():
    app = fastapi.FastAPI()
    app.include_router(router, prefix="/api/v1")
    with TestClient(app) as c:
        yield c


def test_list(client):
    body = client.get("/api/v1/replays").json()
    ids = {r["id"] for r in body["replays"]}
    assert {"single_barrier", "double_buffer_tma_forget_phase_toggle_stale"} <= ids


def test_one_replay_and_a_window(client):
    whole = client.get("/api/v1/replays/double_buffer_tma_2stage").json()
    assert whole["source"]["kind"] == "gpu"
    part = client.get("/api/v1/replays/double_buffer_tma_2stage?from=5&to=9&snapshots=false")
    body = part.json()
    assert body["window"] == {"from": 5, "to": 9}
    assert [s["step"] for s in body["steps"]] == [5, 6, 7, 8, 9]
    assert "snapshot" not in body["steps"][0]


def test_unknown_is_404_naming_the_field(client):
    res = client.get("/api/v1/replays/nope")
    assert res.status_code == 404
    assert res.json()["detail"][0]["loc"] == ["path", "replay_id"]


def test_bandwidth_and_conformance(client):
    bw = client.get("/api/v1/replays/bandwidth").json()
    assert bw["best_fraction_of_memcpy"] >= 0.9
    conf = client.get("/api/v1/replays/single_barrier/conformance").json()
    assert conf["passes"] is True
