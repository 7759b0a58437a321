"""Issue 20, items 4 and 5: no 500 on anything a client sends or a disk does (each fault injected,
not real), and the headers every answer carries."""

from __future__ import annotations

import base64
import errno
import json
import multiprocessing.context
import shutil

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from app.api import token
from app.api.routes import health
from app.core.config import Settings
from app.core.pool import Busy, WorkPool
from app.core.security import SessionKeyError, derive_key, session_key
from app.main import create_app
from app.replay import routes as replay_routes
from app.resources import traces_dir
from tests.asyncutil import run_async

API = "/api/v1"

IN_FLIGHT = """\
tensor t[300] bytes 16;
smem s[64] bytes 16 chunk 16;
barrier bar = 1;
agent p {
    for (int i = 0; i < 300; ++i) {
        cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [s[i % 64]], [t[i]], 16,
            [bar];
    }
}
"""
"""300 copies in flight at once: 600 movers ready (each copy, and each copy held back)."""


# ----------------------------------------------------------------- what a client sends

def test_more_than_255_ready_movers_build_step_and_travel_in_ids(client):
    moves = ["p"] * 300
    opened = client.post(f"{API}/sessions", json={"source": IN_FLIGHT, "schedule": "manual",
                                                  "moves": moves, "step": 300})
    assert opened.status_code == 201, opened.text
    ready = opened.json()["ready"]
    assert len(ready) > 256
    last = ready[-1]  # a move numbered past 255
    trace = client.post(f"{API}/traces", json={"source": IN_FLIGHT, "schedule": "manual",
                                               "moves": [*moves, last], "snapshots": False})
    assert trace.status_code == 200, trace.text
    assert trace.json()["steps"][-1]["agent"] == "tma"
    stepped = client.post(f"{API}/sessions/{opened.json()['id']}/step", json={"agent": last})
    assert stepped.status_code == 200, stepped.text
    token._issued.clear()  # decoded from its text, as another process would
    again = client.get(f"{API}/sessions/{stepped.json()['id']}")
    assert again.status_code == 200 and again.json()["step"] == 301


@pytest.mark.parametrize("step", ["%C2%B2", "9" * 5000, "-1", "1e3"])
def test_an_export_step_that_is_not_a_small_number_is_422(client, step):
    response = client.get(f"/export/single_barrier?step={step}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "step"]


def test_an_id_has_one_spelling(client):
    sid = client.post(f"{API}/sessions", json={"scenario": "single_barrier"}).json()["id"]
    body, mac = sid.split(".")
    raw = base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # 16 bytes: the last of 22 characters carries 2 bits; its other 4 bits must be zero
    other_last = alphabet[alphabet.index(mac[-1]) | 1]
    spellings = [f"{body}.{mac}==", f"{body}.{mac[:-1]}{other_last}", f"{body}=.{mac}",
                 f"{body}.{mac[:10]}%0A{mac[10:]}"]
    assert base64.urlsafe_b64decode(spellings[1].split(".")[1] + "==") == raw
    token._issued.clear()
    for spelling in spellings:
        response = client.get(f"{API}/sessions/{spelling}")
        assert response.status_code == 404, spelling
    assert client.get(f"{API}/sessions/{sid}").status_code == 200


# ---------------------------------------------------------------------- what a disk does

CORRUPTIONS = {
    "steps_item_is_a_number": lambda d: d["steps"].__setitem__(1, 1),
    "agents_is_a_number": lambda d: d["layout"].__setitem__("agents", 1),
    "conformance_is_a_list": lambda d: d["source"].__setitem__("conformance", [1]),
    "window_to_is_text": lambda d: d["window"].__setitem__("to", "x"),
}


@pytest.fixture
def damaged_traces(tmp_path, monkeypatch):
    """A traces folder of one good replay beside damaged copies of it and non-JSON files."""
    good = traces_dir() / "alternate_tiles.json"
    shutil.copy(good, tmp_path / "good.json")
    for name, damage in CORRUPTIONS.items():
        doc = json.loads(good.read_text())
        damage(doc)
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    (tmp_path / "nested.json").write_text("[" * 100_000)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    monkeypatch.setattr(replay_routes, "traces_dir", lambda: tmp_path)
    monkeypatch.setattr("app.replay.catalogue.traces_dir", lambda: tmp_path)
    replay_routes._catalogue.cache_clear()
    replay_routes._cached.cache_clear()
    yield tmp_path
    replay_routes._catalogue.cache_clear()
    replay_routes._cached.cache_clear()


def test_corrupt_trace_files_are_refused_while_the_catalogue_stays_up(client, damaged_traces,
                                                                       caplog):
    response = client.get(f"{API}/replays")
    assert response.status_code == 200
    entries = {e["id"]: e for e in response.json()["replays"]}
    assert "error" not in entries["good"]
    bad = [*CORRUPTIONS, "nested", "binary"]
    assert all("error" in entries[name] for name in bad), entries
    assert sum("not served" in r.getMessage() for r in caplog.records) >= len(bad)
    for name in bad:
        one = client.get(f"{API}/replays/{name}")
        assert one.status_code == 422, (name, one.text)
        assert one.json()["detail"][0]["loc"][0] == "file"
    assert client.get(f"{API}/replays/good").status_code == 200


def _keyless(folder) -> Settings:
    return Settings(session_key="", data_dir=folder)


def test_a_data_dir_that_cannot_hold_the_key_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(SessionKeyError, match="MBI_DATA_DIR"):
        session_key(_keyless(blocker / "data"))


def test_an_empty_key_file_is_a_clear_error(tmp_path):
    (tmp_path / "session.key").write_text("")
    with pytest.raises(SessionKeyError, match="not a session key"):
        session_key(_keyless(tmp_path))


def test_a_server_that_cannot_sign_ids_does_not_start(monkeypatch):
    def broken() -> bytes:
        raise SessionKeyError("cannot create the session key /nowhere/session.key")

    monkeypatch.setattr(token, "_key", broken)
    with pytest.raises(RuntimeError, match="cannot start: cannot create the session key"), \
            TestClient(create_app()):
        pass


@pytest.mark.parametrize("length", [1, 64, 65, 128, 4096])
def test_any_key_length_signs(length):
    key = session_key(Settings(session_key="k" * length))
    assert len(key) == 32 and key == derive_key("k" * length)
    assert key != derive_key("k" * (length + 1))


def test_a_full_dev_shm_is_503_with_retry_after(client, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(multiprocessing.context.BaseContext, "RawArray", no_space)
    fresh = WorkPool("build", 1, 4)
    with pytest.raises(Busy) as err:
        run_async(lambda: fresh.run(int, "1"))
    assert err.value.retry_after == 30 and "No space left" in str(err.value)
    monkeypatch.setattr("app.api.runstore.builds", fresh)
    response = client.post(f"{API}/traces", json={"scenario": "single_barrier",
                                                  "params": {"tiles": 97}})
    assert response.status_code == 503 and response.headers["retry-after"] == "30"
    assert response.json()["detail"][0]["loc"] == ["server", "busy"]


def test_the_health_check_reports_a_broken_session_store(client, monkeypatch):
    assert client.get(f"{API}/health").json()["status"] == "ok"

    def gone(config):
        raise SessionKeyError("cannot read the session key /data/session.key: Permission denied")

    monkeypatch.setattr(health, "session_key", gone)
    response = client.get(f"{API}/health")
    assert response.status_code == 503
    store = response.json()["checks"]["session_store"]
    assert not store["ok"] and "Permission denied" in store["detail"]
    monkeypatch.setattr(health, "session_key", lambda config: b"another key")
    assert not client.get(f"{API}/health").json()["checks"]["session_store"]["ok"]


def test_the_health_check_reports_low_shared_memory(client, monkeypatch):
    class Full:
        f_bavail, f_frsize = 1, 4096

    monkeypatch.setattr(health.os, "statvfs", lambda path: Full())
    response = client.get(f"{API}/health")
    assert response.status_code == 503
    assert not response.json()["checks"]["shared_memory"]["ok"]


# ------------------------------------------------------------------------------ headers

def test_a_500_is_json_and_says_nosniff():
    app = create_app()

    @app.get("/boom")
    async def boom():
        raise ZeroDivisionError

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.json()["detail"][0]["loc"] == ["server"]


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("DELETE", f"{API}/scenarios", "GET"),
    ("PUT", f"{API}/sessions", "POST"),
    ("POST", "/static/js/trace.js", "GET, HEAD"),
    ("DELETE", f"{API}/health", "GET"),
    ("OPTIONS", f"{API}/check/stream", "GET, POST"),
    ("PUT", f"{API}/check", "POST"),
])
def test_a_405_names_the_methods_that_work(client, method, path, allow):
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.headers["x-content-type-options"] == "nosniff"


def test_a_socket_from_another_origin_is_refused_whatever_its_query(client):
    sid = client.post(f"{API}/sessions", json={"scenario": "single_barrier"}).json()["id"]
    for query in ("?embed=1", "?x=embed=1", ""):
        with pytest.raises(WebSocketDisconnect), client.websocket_connect(
                f"{API}/sessions/{sid}/ws{query}",
                headers={"origin": "http://evil.example"}) as ws:
            ws.receive_json()
    for near in ("http://127.0.0.1.evil.example", "http://127.0.0.1:8080", "https://127.0.0.1x"):
        with pytest.raises(WebSocketDisconnect), client.websocket_connect(
                f"{API}/sessions/{sid}/ws", headers={"origin": near}) as ws:
            ws.receive_json()


def test_a_socket_opens_only_on_a_socket_route(client):
    with pytest.raises(WebSocketDisconnect), client.websocket_connect(f"{API}/scenarios"):
        pass


def test_documents_fixed_by_their_url_are_immutable(client):
    trace = client.get(f"{API}/traces/single_barrier", params={"to": 3})
    assert "immutable" in trace.headers["cache-control"]
    assert trace.headers["cache-control"].startswith("public")
    sid = client.post(f"{API}/sessions", json={"scenario": "single_barrier"}).json()["id"]
    for path in (f"{API}/sessions/{sid}/trace", f"{API}/sessions/{sid}/snapshots/1"):
        control = client.get(path).headers["cache-control"]
        assert control.startswith("private") and "immutable" in control, path
    assert "immutable" not in client.get(f"{API}/sessions/{sid}").headers.get(
        "cache-control", "")


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_json_and_static_assets_are_compressed(client, encoding):
    for path in (f"{API}/scenarios", "/static/js/trace.js", f"{API}/traces/single_barrier"):
        response = client.get(path, headers={"accept-encoding": encoding})
        assert response.status_code == 200
        assert response.headers["content-encoding"] == encoding, path
        assert int(response.headers["content-length"]) < len(response.content), path
    plain = client.get(f"{API}/scenarios", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers

