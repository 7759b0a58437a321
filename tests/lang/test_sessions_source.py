"""Sessions on a pipeline text: the id carries only the text's sha256; a process that lacks the
text answers 409 `{"need_source": sha256}` and learns it from `POST /pipelines/sources`."""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient

from app.api import sources, token
from app.main import create_app
from app.scenarios import get

SOURCE = get("single_barrier").source.replace("param tiles       = 3 ", "param tiles       = 2 ")


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client


def forget_everything():
    """What a fresh worker process knows: no text, no id it issued itself."""
    sources._sources.clear()
    sources._size = 0
    token._issued.clear()


def test_a_session_on_a_text_steps_and_survives_a_process_that_lacks_the_text(client):
    created = client.post("/api/v1/sessions", json={"source": SOURCE,
                                                    "bugs": ["forget_phase_toggle"]})
    assert created.status_code == 201, created.text
    view = created.json()
    assert view["scenario"]["id"] is None
    assert view["scenario"]["source_sha256"] == hashlib.sha256(SOURCE.encode()).hexdigest()
    assert SOURCE not in view["id"]  # the id names the text by its hash
    stepped = client.post(f"/api/v1/sessions/{view['id']}/step", json={}).json()
    assert stepped["step"] == 1 and stepped["record"]["op"].startswith("mbarrier.init")

    forget_everything()
    missing = client.get(f"/api/v1/sessions/{stepped['id']}")
    assert missing.status_code == 409
    assert missing.json()["need_source"] == view["scenario"]["source_sha256"]
    with client.websocket_connect(f"/api/v1/sessions/{stepped['id']}/ws") as ws:
        assert ws.receive_json()["need_source"] == view["scenario"]["source_sha256"]

    taught = client.post("/api/v1/pipelines/sources", json={"source": SOURCE})
    assert taught.json() == {"source_sha256": view["scenario"]["source_sha256"]}
    again = client.get(f"/api/v1/sessions/{stepped['id']}")
    assert again.status_code == 200 and again.json()["step"] == 1


def test_a_session_names_exactly_one_pipeline(client):
    both = client.post("/api/v1/sessions", json={"source": SOURCE, "scenario": "single_barrier"})
    assert both.status_code == 422 and both.json()["detail"][0]["loc"][-1] == "source"
    broken = client.post("/api/v1/sessions", json={"source": SOURCE.replace("{", "", 1)})
    assert broken.status_code == 422 and broken.json()["detail"][0]["line"] >= 1
