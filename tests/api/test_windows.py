"""Issue 20, item 6: trace windows as the browser's player asks for them (docs/trace-format.md,
"Windows"): one full snapshot and a patch per step, built in the window pool, kept by content
(ETag, 304, immutable) and compressed once."""

from __future__ import annotations

import copy
import gzip
import json

import jsonschema
import pytest

from app.api.windows import Window, WindowCache, accepted_encodings
from app.sim import SCHEMA_PATH

API = "/api/v1"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
PLAIN = {"accept-encoding": "identity"}


def apply(snapshot: dict, patch: dict) -> dict:
    """A patch as static/js/player.js applies it."""
    out = {**copy.deepcopy(snapshot), **patch["set"]}
    for name, items in patch["items"].items():
        out[name] = list(out[name])
        for index, item in items.items():
            out[name][int(index)] = item
    return out


def replayed(doc: dict) -> list[dict]:
    """Each step's snapshot, rebuilt from `base` and the patches."""
    snapshot, out = doc["base"], []
    for step in doc["steps"]:
        snapshot = apply(snapshot, step["patch"])
        out.append(snapshot)
    return out


def session(client, **body) -> dict:
    response = client.post(f"{API}/sessions", json={"scenario": "double_buffer_tma", **body})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.mark.parametrize("first,last", [(1, 256), (257, 512), (300, 340)])
def test_a_patched_window_rebuilds_every_snapshot_of_the_full_one(client, first, last):
    view = session(client, params={"tiles": 40}, schedule="random", seed=5)
    path = f"{API}/sessions/{view['id']}/trace"
    query = {"from": first, "to": last}
    full = client.get(path, params=query).json()
    compact = client.get(path, params={**query, "patches": "true"}).json()
    jsonschema.validate(compact, SCHEMA)  # still a trace document, with base and patches
    assert [s["step"] for s in compact["steps"]] == list(range(first, last + 1))
    assert all("snapshot" not in s and "patch" in s for s in compact["steps"])
    assert replayed(compact) == [s["snapshot"] for s in full["steps"]]
    records = [{k: v for k, v in s.items() if k != "patch"} for s in compact["steps"]]
    assert records == [{k: v for k, v in s.items() if k != "snapshot"} for s in full["steps"]]
    for name in ("window", "total_steps", "status", "diagnostics", "diagnostics_total",
                 "scenario", "layout", "initial"):
        assert compact[name] == full[name], name
    before = client.get(f"{API}/sessions/{view['id']}/snapshots/{first - 1}").json()
    assert compact["base"] == before["snapshot"]  # the state after step from - 1
    raw = client.get(path, params=query, headers=PLAIN).content
    smaller = client.get(path, params={**query, "patches": "true"}, headers=PLAIN).content
    assert len(smaller) * 2 < len(raw)  # about a third


def test_a_patched_window_of_a_session_with_picks_names_them(client):
    view = session(client, params={"tiles": 4, "consumers": 2})
    sid = view["id"]
    ready = [name for name in view["ready"] if name != view["ready"][0]] or view["ready"]
    sid = client.post(f"{API}/sessions/{sid}/step", json={"agent": ready[-1]}).json()["id"]
    doc = client.get(f"{API}/sessions/{sid}/trace", params={"patches": "true"}).json()
    full = client.get(f"{API}/sessions/{sid}/trace").json()
    assert doc["scenario"] == full["scenario"]
    assert replayed(doc) == [s["snapshot"] for s in full["steps"]]
    jsonschema.validate(doc, SCHEMA)


@pytest.mark.parametrize("form", [{}, {"snapshots": "false"}, {"patches": "true"}])
def test_a_window_past_the_end_is_empty_in_every_form(client, form):
    """Found by schemathesis: `from` beyond the last step once raised in the window pool."""
    view = session(client, params={"tiles": 2})
    path = f"{API}/sessions/{view['id']}/trace"
    total = client.get(path).json()["total_steps"]
    for first in (total + 1, total + 90):
        response = client.get(path, params={"from": first, "to": first, **form})
        assert response.status_code == 200, response.text
        doc = response.json()
        assert doc["steps"] == [] and doc["total_steps"] == total
        assert doc["window"] == {"from": first, "to": first - 1}
        jsonschema.validate(doc, SCHEMA)
        if "patches" in form:
            final = client.get(f"{API}/sessions/{view['id']}/snapshots/{total}").json()
            assert doc["base"] == final["snapshot"]


def test_builtin_traces_take_patches_too_and_refuse_them_without_snapshots(client):
    path = f"{API}/traces/double_buffer_tma"
    doc = client.get(path, params={"tiles": 8, "patches": "true"}).json()
    whole = client.get(path, params={"tiles": 8}).json()
    assert doc["base"] == whole["initial"] and replayed(doc) == [
        s["snapshot"] for s in whole["steps"]]
    refused = client.get(path, params={"patches": "true", "snapshots": "false"})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"][-1] == "patches"


def test_a_window_is_kept_by_content_shared_by_every_id_of_its_run(client):
    view = session(client, params={"tiles": 20})
    first = client.get(f"{API}/sessions/{view['id']}/trace",
                       params={"from": 1, "to": 256, "patches": "true"})
    assert first.status_code == 200
    etag, control = first.headers["etag"], first.headers["cache-control"]
    assert control.startswith("private") and "immutable" in control
    moved = client.post(f"{API}/sessions/{view['id']}/seek", json={"step": 9}).json()["id"]
    again = client.get(f"{API}/sessions/{moved}/trace",
                       params={"from": 1, "to": 256, "patches": "true"})
    assert again.headers["etag"] == etag and again.content == first.content
    held = client.get(f"{API}/sessions/{moved}/trace",
                      params={"from": 1, "to": 256, "patches": "true"},
                      headers={"if-none-match": etag})
    assert held.status_code == 304 and held.content == b"" and held.headers["etag"] == etag
    other = client.get(f"{API}/sessions/{moved}/trace", params={"from": 1, "to": 255,
                                                                "patches": "true"})
    assert other.headers["etag"] != etag  # another window, another tag


def test_a_window_is_compressed_once_in_the_coding_the_client_accepts(client):
    view = session(client, params={"tiles": 20})
    path = f"{API}/sessions/{view['id']}/trace"
    query = {"from": 1, "to": 256, "patches": "true"}
    plain = client.get(path, params=query, headers=PLAIN)
    assert "content-encoding" not in plain.headers
    zipped = client.get(path, params=query, headers={"accept-encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) * 5 < len(plain.content)
    assert zipped.content == plain.content  # httpx inflated it: the same document
    squeezed = client.get(path, params=query, headers={"accept-encoding": "gzip, zstd"})
    assert squeezed.headers["content-encoding"] in ("zstd", "gzip")
    assert squeezed.content == plain.content


def test_a_window_is_compressed_only_in_the_codings_its_clients_asked_for(client):
    """A class's browsers accept one coding: the worker compresses a window in its first
    client's, and in another only when a client that needs it asks."""
    from app.api import windows

    if "zstd" not in windows.CODINGS:
        pytest.skip("no zstd codec in this Python")
    view = session(client, params={"tiles": 20})
    path = f"{API}/sessions/{view['id']}/trace"
    query = {"from": 1, "to": 100, "patches": "true"}
    squeezed = client.get(path, params=query, headers={"accept-encoding": "gzip, zstd"})
    assert squeezed.headers["content-encoding"] == "zstd"
    key, window = next((k, w) for k, w in windows.cache.windows.items()
                       if w.etag == squeezed.headers["etag"])
    assert set(window.coded) == {"zstd"}
    held = windows.cache.bytes
    zipped = client.get(path, params=query, headers={"accept-encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == squeezed.content  # httpx inflated both: one document
    assert set(window.coded) == {"zstd", "gzip"} and windows.cache.get(key) is window
    assert windows.cache.bytes == held + len(window.coded["gzip"])


def test_accept_encoding_is_read_with_its_weights():
    assert accepted_encodings("gzip, deflate, br, zstd") == {"gzip", "deflate", "br", "zstd"}
    assert accepted_encodings("zstd;q=0, gzip;q=0.5") == {"gzip"}
    assert accepted_encodings("") == set()
    window = Window(b"{}", '"t"', {"gzip": gzip.compress(b"{}"), "zstd": b"z"})
    assert window.encoded("zstd;q=0, gzip") == (window.coded["gzip"], "gzip")
    assert window.encoded("identity") == (b"{}", None)


def test_the_window_cache_is_bounded_in_bytes():
    cache = WindowCache()
    windows = [Window(bytes(100), f'"{i}"', {"gzip": bytes(10)}) for i in range(10)]
    for i, window in enumerate(windows):
        cache.put(("run", i), window, budget=330)
    assert cache.bytes <= 330 and len(cache.windows) == 3
    assert cache.get(("run", 9)) is windows[9] and cache.get(("run", 0)) is None


def test_a_session_past_its_share_of_the_window_worker_waits_while_others_play(
        client, monkeypatch):
    from app.core import clients

    monkeypatch.setitem(clients.window_time, "session",
                        clients.Buckets("window time of one session", 1e-6, 0.0))
    greedy, other = (session(client, params={"tiles": 60}, schedule="random", seed=s)["id"]
                     for s in (11, 12))
    path = f"{API}/sessions/{greedy}/trace"
    assert client.get(path, params={"from": 1, "to": 256}).status_code == 200  # into debt
    refused = client.get(path, params={"from": 257, "to": 512})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert client.get(path, params={"from": 1, "to": 256}).status_code == 200  # kept: free
    assert client.get(f"{API}/sessions/{other}/trace",
                      params={"from": 1, "to": 256}).status_code == 200
