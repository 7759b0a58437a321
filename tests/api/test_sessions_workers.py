"""Two real uvicorn worker processes on loopback and no sticky sessions: every request opens a
new connection, so either worker may answer, and each rebuilds the session from its id."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets

from tests.asyncutil import run_async
from tests.browser.server import uvicorn_server

API = "/api/v1"
TIMEOUT = httpx.Timeout(120)
"""A fresh worker builds its first run on a busy machine: generous, since an answer is awaited."""


@pytest.fixture(scope="module")
def two_workers():
    with uvicorn_server(workers=2) as base:
        yield base


def test_any_worker_continues_any_session(two_workers):
    trace = httpx.get(f"{two_workers}{API}/traces/double_buffer_tma?schedule=random&seed=5"
                      "&bugs=forget_phase_toggle", timeout=TIMEOUT).json()
    created = httpx.post(f"{two_workers}{API}/sessions", json={
        "scenario": "double_buffer_tma", "schedule": "random", "seed": 5,
        "bugs": ["forget_phase_toggle"]}, timeout=TIMEOUT)
    assert created.status_code == 201
    sid = created.json()["id"]
    workers = {created.headers["x-worker"]}
    for k in range(1, trace["total_steps"] + 1):
        with httpx.Client(base_url=two_workers, timeout=TIMEOUT) as fresh:  # a new connection
            response = fresh.post(f"{API}/sessions/{sid}/step")
        assert response.status_code == 200, response.text
        view = response.json()
        assert view["snapshot"] == trace["steps"][k - 1]["snapshot"]
        workers.add(response.headers["x-worker"])
        sid = view["id"]
    back = httpx.post(f"{two_workers}{API}/sessions/{sid}/back", timeout=TIMEOUT).json()
    assert back["snapshot"] == trace["steps"][-2]["snapshot"]
    assert len(workers) == 2, "both worker processes should have answered"


def test_a_socket_on_one_worker_takes_an_id_from_another(two_workers):
    created = httpx.post(f"{two_workers}{API}/sessions",
                         json={"scenario": "single_barrier", "step": 7}, timeout=TIMEOUT).json()

    async def play():
        url = two_workers.replace("http", "ws") + f"{API}/sessions/{created['id']}/ws"
        async with websockets.connect(url, open_timeout=120) as ws:
            first = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "step"}))
            second = json.loads(await ws.recv())
            return first, second

    first, second = run_async(play, 120)
    assert first["step"] == 7 and second["step"] == 8
    assert second["record"]["op"].startswith("mbarrier.try_wait.parity")
