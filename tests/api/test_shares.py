"""Issue 20, item 3: answers and memory bounded in bytes, and each client's share: validation
errors capped, session views and socket messages with their diagnostics windowed, the run cache
bounded in bytes, and per-client shares of requests, build time, checks and streams (429 with
Retry-After past them)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from app.api import runstore
from app.api.routes import check as check_routes
from app.api.session import MAX_DIAGNOSTICS
from app.core import clients
from app.core.clients import Buckets
from app.main import app
from app.sim.schedule import Schedule
from tests.asyncutil import run_async
from tests.check.programs import ARRIVES_FOREVER

API = "/api/v1"


def create(client, **body):
    response = client.post(f"{API}/sessions", json={"scenario": "single_barrier", **body})
    assert response.status_code == 201, response.text
    return response.json()


# ---------------------------------------------------------------------- bounded answers

def test_a_body_of_96000_unknown_keys_is_a_small_quick_422(client):
    body = "{" + ",".join(f'"k{i}":1' for i in range(96_000)) + "}"
    body = body[:1_000_000]
    body = body[:body.rfind(",")] + "}"
    started = time.monotonic()
    response = client.post(f"{API}/mbarrier/run", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == 422 and len(response.content) < 1000
    assert "keys" in response.json()["detail"][0]["msg"]
    assert time.monotonic() - started < 5  # was 5.5 s of a stalled event loop, and 9.6 MB


def test_validation_errors_are_the_first_ones_and_a_count(client):
    ops = [{"op": "arrive", "count": "x"} for _ in range(10_000)]
    response = client.post(f"{API}/mbarrier/run", json={"ops": ops})
    assert response.status_code == 422
    body = response.json()
    assert len(body["detail"]) == 20 and body["errors_total"] == 10_000
    assert len(response.content) < 10_000
    few = client.post(f"{API}/mbarrier/run", json={"ops": ops[:2]}).json()
    assert len(few["detail"]) == 2 and "errors_total" not in few


def test_a_run_with_a_diagnostic_per_step_has_a_small_session_view(client):
    response = client.post(f"{API}/sessions", json={"source": ARRIVES_FOREVER})
    assert response.status_code == 201
    assert len(response.content) < 200_000  # was 28.8 MB: every diagnostic of 100,000 steps
    view = response.json()
    total = view["diagnostics_total"]
    assert total > 90_000 and len(view["diagnostics"]) <= MAX_DIAGNOSTICS
    seek = client.post(f"{API}/sessions/{view['id']}/seek", json={"step": 70_000}).json()
    again = client.get(f"{API}/sessions/{seek['id']}").json()
    steps = [d["step"] for d in again["diagnostics"]]
    assert steps[0] == view["diagnostics"][0]["step"]  # the run's first one
    assert min(steps[1:]) <= 70_000 <= max(steps[1:])
    with client.websocket_connect(f"{API}/sessions/{seek['id']}/ws") as ws:
        first = ws.receive_text()  # was a close (1008) before it: the message was too big
    assert len(first) < 200_000 and json.loads(first)["diagnostics_total"] == total


def test_a_run_of_few_diagnostics_lists_them_all(client):
    view = create(client, bugs=["forget_phase_toggle"])
    trace = client.get(f"{API}/traces/single_barrier",
                       params={"bugs": "forget_phase_toggle"}).json()
    assert view["diagnostics"] == trace["diagnostics"]
    assert view["diagnostics_total"] == len(trace["diagnostics"])


def test_the_run_cache_is_bounded_in_bytes_per_process(monkeypatch):
    """The host's budget shared by its processes: 1 MiB for 2 workers is 512 KiB each."""
    store = runstore.RunStore()
    monkeypatch.setattr(runstore, "settings",
                        replace(runstore.settings, run_cache_mb=1, workers=2))
    assert runstore.cache_budget(runstore.settings) == 512 << 10
    sizes = []
    for tiles in range(20, 40):
        key = runstore.RunKey("double_buffer_tma", (("tiles", tiles),), (),
                              Schedule("round_robin"))
        run, key = runstore.build_run(key)
        entry = store.put(key, run)
        sizes.append(entry.bytes)
        assert store.bytes <= 512 << 10 or len(store.entries) == 1
        assert store.bytes == sum(e.bytes for e in store.entries.values())
    assert len(store.entries) < 20 and sum(sizes) > 512 << 10


# ------------------------------------------------------------------------------- shares

async def _from(host: str, paths: list[str]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app, client=(host, 4321))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return [await client.get(path) for path in paths]


def test_requests_past_an_address_share_are_429_but_pages_are_not(monkeypatch):
    monkeypatch.setattr(clients, "requests_by_address",
                        Buckets("requests from one address", 1.0, 5))
    paths = [f"{API}/health"] * 7 + [f"{API}/scenarios", "/static/js/trace.js"]
    answers = run_async(lambda: _from("10.1.2.3", paths))
    codes = [a.status_code for a in answers]
    assert codes[:5] == [200] * 5 and codes[6] == 429 and codes[-1] == 200
    refused = answers[-2]
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert refused.json()["detail"][0]["loc"] == ["server", "rate"]
    assert refused.headers["x-content-type-options"] == "nosniff"
    others = run_async(lambda: _from("10.9.9.9", [f"{API}/health"]))  # another address
    local = run_async(lambda: _from("127.0.0.1", [f"{API}/health"] * 8))  # not a class
    assert others[0].status_code == 200 and all(a.status_code == 200 for a in local)


def test_a_session_past_its_request_share_is_429(client, monkeypatch):
    monkeypatch.setattr(clients, "requests_by_session",
                        Buckets("requests of one session", 1.0, 3))
    sid = create(client)["id"]
    codes = []
    for _ in range(5):
        response = client.post(f"{API}/sessions/{sid}/step")
        codes.append(response.status_code)
        sid = response.json().get("id", sid)
    assert codes[:3] == [200] * 3 and codes[-1] == 429
    other = create(client)["id"]  # another student is not held back
    assert client.post(f"{API}/sessions/{other}/step").status_code == 200


async def _sessions_from_one_address(host: str) -> dict:
    """Two students behind one address (a class behind one NAT): each steps on its own."""
    transport = httpx.ASGITransport(app=app, client=(host, 4321))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        async def session() -> str:
            response = await client.post(f"{API}/sessions", json={"scenario": "single_barrier"})
            assert response.status_code == 201, response.text
            return response.json()["id"]

        ids = {"a": await session(), "b": await session()}
        codes: dict[str, list[int]] = {"a": [], "b": [], "forged": [], "address": []}
        for name in ("a", "a", "a", "a", "b", "b", "a"):
            response = await client.post(f"{API}/sessions/{ids[name]}/step")
            codes[name].append(response.status_code)
            if response.status_code == 200:
                ids[name] = response.json()["id"]
        forged = ids["b"][:-4] + ("AAAA" if not ids["b"].endswith("AAAA") else "BBBB")
        for _ in range(2):
            codes["forged"].append((await client.get(f"{API}/sessions/{forged}")).status_code)
        codes["address"].append((await client.get(f"{API}/scenarios")).status_code)
        return codes


def test_two_sessions_on_one_address_have_a_bucket_each(monkeypatch):
    """A client is its session where it has one: a session's requests pay its own bucket, not
    its address's (the class behind one NAT shares one address); a request without a valid id
    (a forged one included) pays its address's."""
    monkeypatch.setattr(clients, "requests_by_session",
                        Buckets("requests of one session", 1e-3, 3))
    monkeypatch.setattr(clients, "requests_by_address",
                        Buckets("requests from one address", 1e-3, 4))
    codes = run_async(lambda: _sessions_from_one_address("10.3.3.3"))
    assert codes["a"] == [200, 200, 200, 429, 429], codes  # a's bucket: 3
    assert codes["b"] == [200, 200], codes  # b's own bucket, though a is refused
    # The address paid for the two POST /sessions only, so two more fit, then none.
    assert codes["forged"] == [404, 404] and codes["address"] == [429], codes


def test_a_session_past_its_build_share_waits_while_others_build(client, monkeypatch):
    """The case of issue 20: one student forking a run per step (naming a mover the schedule
    did not choose) took the build worker from everyone else."""
    monkeypatch.setitem(clients.build_time, "session",
                        Buckets("build time of one session", 0.001, 0.0))
    view = create(client, scenario="double_buffer_tma", params={"tiles": 30})
    sid = view["id"]
    codes = []
    for _ in range(12):  # each pick forks a new run; the first one puts the session in debt
        now = client.get(f"{API}/sessions/{sid}").json()
        at = now["step"] + 1
        record = client.get(f"{API}/sessions/{sid}/trace",
                            params={"from": at, "to": at, "snapshots": "false"}).json()
        chosen = record["steps"][0]
        chosen = (f"tma:{chosen['operands']['op']}" if chosen["agent"] == "tma"
                  else chosen["agent"])
        other = [a for a in now["ready"] if a != chosen]
        if not other:  # one mover only here: the schedule's step
            sid = client.post(f"{API}/sessions/{sid}/step").json()["id"]
            continue
        response = client.post(f"{API}/sessions/{sid}/step", json={"agent": other[0]})
        codes.append(response.status_code)
        if response.status_code != 200:
            break
        sid = response.json()["id"]
    assert 429 in codes, codes
    refused = response
    assert int(refused.headers["retry-after"]) >= 1
    assert "build time" in refused.json()["detail"][0]["msg"]
    fresh = create(client, scenario="double_buffer_tma", params={"tiles": 31})
    assert fresh["step"] == 0  # a new session builds at once


def test_a_session_holds_at_most_its_share_of_streams(client, monkeypatch):
    monkeypatch.setattr(clients, "settings", replace(clients.settings, streams_per_session=2))
    sid = create(client)["id"]
    with client.websocket_connect(f"{API}/sessions/{sid}/ws") as one, \
            client.websocket_connect(f"{API}/sessions/{sid}/ws") as two:
        assert one.receive_json()["type"] == two.receive_json()["type"] == "state"
        with client.websocket_connect(f"{API}/sessions/{sid}/ws") as three:
            refused = three.receive_json()
        assert refused["status"] == 429 and refused["field"] == "server"
        sse = client.get(f"{API}/sessions/{sid}/events")
        assert sse.status_code == 429 and sse.headers["retry-after"]
    with client.websocket_connect(f"{API}/sessions/{sid}/ws") as again:
        assert again.receive_json()["type"] == "state"  # given back when they closed


def test_an_address_holds_at_most_its_share_of_streams(monkeypatch):
    monkeypatch.setattr(clients, "settings", replace(clients.settings, streams_per_address=2))
    with TestClient(app, client=("10.4.5.6", 5000)) as client:
        _three_sockets_from_one_address(client)
    with TestClient(app) as local:  # loopback: a local user, no per-address share
        _three_sockets_from_one_address(local, refused=False)


def _three_sockets_from_one_address(client, refused: bool = True) -> None:
    ids = [create(client)["id"] for _ in range(3)]
    with client.websocket_connect(f"{API}/sessions/{ids[0]}/ws") as one, \
            client.websocket_connect(f"{API}/sessions/{ids[1]}/ws") as two:
        one.receive_json()
        two.receive_json()
        with client.websocket_connect(f"{API}/sessions/{ids[2]}/ws") as three:
            answer = three.receive_json()
            assert answer.get("status") == 429 if refused else answer["type"] == "state"
    with client.websocket_connect(f"{API}/sessions/{ids[2]}/ws") as later:
        assert later.receive_json()["type"] == "state"


async def _two_checks_from_one_address() -> list[int]:
    transport = httpx.ASGITransport(app=app, client=("10.7.7.7", 4000))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 timeout=60) as client:
        codes: list[int] = []

        async def check(delay: float):
            await anyio.sleep(delay)
            response = await client.post(f"{API}/check", json={
                "scenario": "double_buffer_tma", "params": {"stages": 4, "tiles": 8,
                                                            "consumers": 4},
                "max_states": 20_000, "timeout_s": 30})  # waits for a slot on a busy machine
            codes.append(response.status_code)
            if response.status_code == 429:
                assert int(response.headers["retry-after"]) >= 1

        async with anyio.create_task_group() as group:
            group.start_soon(check, 0.0)
            group.start_soon(check, 0.5)
        return codes


def test_an_address_holds_at_most_its_share_of_checks(monkeypatch):
    monkeypatch.setattr(check_routes, "settings",
                        replace(check_routes.settings, checks_per_address=1))
    codes = run_async(_two_checks_from_one_address, 60)
    assert sorted(codes) == [200, 429]
    assert not clients.checks_held.held


@pytest.fixture(autouse=True)
def _fresh_buckets():
    """Every test starts with full buckets (the module's client shares one address)."""
    for table in (clients.requests_by_address, clients.requests_by_session,
                  *clients.build_time.values(), *clients.window_time.values()):
        table.table.clear()
    yield
