"""`POST /api/v1/check` and its SSE streams: the response contract, limits as 422s naming the
field, a 503 when every check slot is busy, and a check never blocking the event loop."""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from app.api.routes import check as check_route
from app.main import app
from tests.asyncutil import run_async

CONTRACT = {"verdict", "violations", "states_explored", "elapsed_s"}
UNSAFE = {"scenario": "double_buffer_tma", "params": {"stages": 1, "tiles": 2, "consumers": 2},
          "bugs": ["wrong_arrival_count"]}
BIG = {"scenario": "double_buffer_tma", "params": {"stages": 4, "tiles": 8, "consumers": 4},
       "bugs": ["forget_phase_toggle"]}
CORRECT_BIG = {"scenario": "double_buffer_tma",
               "params": {"stages": 4, "tiles": 8, "consumers": 4}}


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as client:
        yield client


def test_safe(client):
    response = client.post("/api/v1/check", json={"scenario": "double_buffer_tma",
                                                  "params": {"stages": 2, "tiles": 3}})
    assert response.status_code == 200
    body = response.json()
    assert CONTRACT <= body.keys()
    assert body["verdict"] == "safe" and body["violations"] == []
    assert body["states_explored"] > 0 and body["elapsed_s"] >= 0 and body["stopped_by"] is None


def test_unsafe_lists_one_violation_per_kind_with_a_trace(client):
    body = client.post("/api/v1/check", json=UNSAFE).json()
    assert body["verdict"] == "unsafe"
    kinds = [v["kind"] for v in body["violations"]]
    assert sorted(kinds) == ["deadlock", "ordering_race", "overwrite", "partial_read",
                             "reuse_before_wait", "stale_read"]
    for violation in body["violations"]:
        assert {"kind", "steps", "trace"} <= violation.keys()
        trace = violation["trace"]
        assert trace["format"] == "mbarrier-inspector/trace" and trace["version"] == 1
        assert trace["total_steps"] == violation["steps"]
        assert violation["kind"] in {d["kind"] for d in trace["steps"][-1]["diagnostics"]}


def test_the_trace_is_served_again_by_the_traces_route(client):
    violation = client.post("/api/v1/check", json=UNSAFE).json()["violations"][0]
    scenario = violation["trace"]["scenario"]
    query = {**scenario["params"], "bugs": ",".join(scenario["bugs"]), "schedule": "manual",
             "moves": ",".join(scenario["schedule"]["moves"])}
    trace = client.get("/api/v1/traces/double_buffer_tma", params=query).json()
    assert trace == violation["trace"]


def test_inconclusive_says_how_far_it_got(client):
    body = client.post("/api/v1/check", json={**CORRECT_BIG, "max_states": 2000}).json()
    assert body["verdict"] == "inconclusive" and body["stopped_by"] == "max_states"
    assert body["depth"] > 0 and "state limit" in body["message"]
    assert body["violations"] == []


def test_a_limit_after_violations_is_unsafe(client):
    params = {"stages": 2, "tiles": 6, "consumers": 3}
    body = client.post("/api/v1/check", json={**BIG, "params": params, "max_states": 2000,
                                              "timeout_s": 60}).json()
    assert body["verdict"] == "unsafe" and body["stopped_by"] == "max_states"
    assert body["violations"], "what was found before the limit is listed: it is real"


@pytest.mark.parametrize(("body", "loc"), [
    ({"scenario": "nope"}, ["body", "scenario"]),
    ({"scenario": "double_buffer_tma", "params": {"stages": 99}}, ["body", "params", "stages"]),
    ({"scenario": "double_buffer_tma", "params": {"lanes": 2}}, ["body", "params", "lanes"]),
    ({"scenario": "single_barrier", "params": {"stages": 2}}, ["body", "params", "stages"]),
    ({"scenario": "double_buffer_tma", "params": {"tiles": "4"}}, ["body", "params", "tiles"]),
    ({"scenario": "double_buffer_tma", "bugs": ["nope"]}, ["body", "bugs"]),
    ({"scenario": "double_buffer_tma", "bugs": ["missing_mma_commit"]}, ["body", "bugs"]),
    ({"scenario": "double_buffer_tma", "max_states": 2_000_001}, ["body", "max_states"]),
    ({"scenario": "double_buffer_tma", "max_states": 0}, ["body", "max_states"]),
    ({"scenario": "double_buffer_tma", "timeout_s": 61}, ["body", "timeout_s"]),
    ({"scenario": "double_buffer_tma", "timeout_s": 0}, ["body", "timeout_s"]),
    ({"scenario": "double_buffer_tma", "seed": 1}, ["body", "seed"]),
    ({}, ["body", "scenario"]),
])
def test_bad_requests_are_422_naming_the_field(client, body, loc):
    response = client.post("/api/v1/check", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:len(loc)] == loc


def test_busy_server_answers_503(client, monkeypatch):
    monkeypatch.setattr(check_route.checks, "free", [])  # every slot taken
    response = client.post("/api/v1/check", json=UNSAFE)
    assert response.status_code == 503 and int(response.headers["Retry-After"]) > 0
    response = client.post("/api/v1/check/stream", json=UNSAFE)
    assert response.status_code == 503 and "Retry-After" in response.headers
    monkeypatch.undo()
    assert client.post("/api/v1/check", json=UNSAFE).status_code == 200


def read_events(response) -> list[tuple[str, dict]]:
    events, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[len("event: "):]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[len("data: "):])))
    return events


def test_stream_sends_progress_then_the_result(client):
    body = {**BIG, "max_states": 20_000, "timeout_s": 60}  # bounded by states, not the clock
    with client.stream("POST", "/api/v1/check/stream", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = read_events(r)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "progress" and kinds[-1] == "result" and kinds.count("result") == 1
    progress = [data for kind, data in events if kind == "progress"]
    assert len(progress) >= 2 and progress[-1]["states_explored"] > 0
    assert {"states_explored", "depth", "frontier", "elapsed_s", "found"} <= progress[-1].keys()
    result = events[-1][1]
    assert result["verdict"] in ("inconclusive", "unsafe") and result["stopped_by"] == "max_states"


def test_progress_says_unsafe_as_soon_as_a_violation_is_found(client):
    body = {**BIG, "bugs": ["wrong_arrival_count"], "max_states": 20_000, "timeout_s": 60}
    with client.stream("POST", "/api/v1/check/stream", json=body) as r:
        events = read_events(r)
    found = [data["found"] for kind, data in events if kind == "progress" and data["found"]]
    assert all("found" in data for kind, data in events if kind == "progress")
    assert found, "no progress event listed a violation"
    result = events[-1][1]
    assert result["verdict"] == "unsafe"
    assert set(found[0]) <= {v["kind"] for v in result["violations"]}


def test_get_stream_for_event_source(client):
    query = {"scenario": "double_buffer_tma", "stages": 1, "tiles": 2, "consumers": 2,
             "bugs": "wrong_arrival_count"}
    with client.stream("GET", "/api/v1/check/stream", params=query) as response:
        events = read_events(response)
    assert events[-1][0] == "result" and events[-1][1]["verdict"] == "unsafe"
    assert events[-1][1] | {"elapsed_s": 0} == \
        client.post("/api/v1/check", json=UNSAFE).json() | {"elapsed_s": 0}


@pytest.mark.parametrize(("query", "field"), [
    ({"scenario": "double_buffer_tma", "stages": 0}, "stages"),
    ({"scenario": "double_buffer_tma", "bugs": "nope"}, "bugs"),
    ({"scenario": "double_buffer_tma", "max_states": 3_000_000}, "max_states"),
    ({"scenario": "double_buffer_tma", "lanes": 1}, "lanes"),
    ({"scenario": "nope"}, "scenario"),
])
def test_get_stream_rejects_bad_queries(client, query, field):
    response = client.get("/api/v1/check/stream", params=query)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", field]


async def _answers_during_two_long_checks() -> tuple[list[float], list[float]]:
    """When each GET answered and when each check did (perf_counter), two checks at once."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        gets, checks = [], []

        async def long_check():
            body = {**BIG, "max_states": 30_000, "timeout_s": 60}  # bounded by states
            response = await client.post("/api/v1/check", json=body)
            checks.append(time.perf_counter())
            assert response.status_code == 200, response.text[:200]
            # a limit ends it either way: on a crowded machine 30,000 states can outlast 60 s
            assert response.json()["stopped_by"] in ("max_states", "timeout", None)

        async def meanwhile():
            await anyio.sleep(0.3)
            for _ in range(3):
                response = await client.get("/api/v1/scenarios")
                gets.append(time.perf_counter())
                assert response.status_code == 200
                await anyio.sleep(0.1)

        async with anyio.create_task_group() as group:
            group.start_soon(long_check)
            group.start_soon(long_check)  # two at once starved the loop when checks were threads
            group.start_soon(meanwhile)
        return gets, checks


def test_a_check_does_not_block_the_event_loop():
    """The GETs are answered while both checks still run: a check that held the event loop
    would delay them past its own answer (compared in order, not against a clock bound)."""
    gets, checks = run_async(_answers_during_two_long_checks, 300)
    assert len(gets) == 3 and max(gets) < min(checks), (gets, checks)


def test_stop_at_first_answers_with_one_shortest_counterexample(client):
    whole = client.post("/api/v1/check", json=UNSAFE).json()
    body = client.post("/api/v1/check", json={**UNSAFE, "stop_at_first": True}).json()
    assert body["verdict"] == "unsafe" and body["stopped_by"] == "first_violation"
    assert body["complete"] is False
    first = body["violations"][0]
    assert first["shortest"] and first["steps"] == whole["violations"][0]["steps"]
    assert body["states_explored"] <= whole["states_explored"]
    query = {"scenario": "double_buffer_tma", "stages": 1, "tiles": 2, "consumers": 2,
             "bugs": "wrong_arrival_count", "stop_at_first": "true"}
    with client.stream("GET", "/api/v1/check/stream", params=query) as response:
        text = "".join(response.iter_text())
    result = json.loads(text.split("event: result\ndata: ", 1)[1].split("\n", 1)[0])
    assert result["stopped_by"] == "first_violation"


def test_stop_at_first_must_be_a_boolean(client):
    response = client.post("/api/v1/check", json={**UNSAFE, "stop_at_first": "yes"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "stop_at_first"]


async def _two_runaways_then_a_check() -> list[dict]:
    from tests.check.programs import STORES_FOREVER

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 timeout=60) as client:
        answers: list[dict] = []

        async def runaway():
            response = await client.post("/api/v1/check", json={"source": STORES_FOREVER,
                                                                  "timeout_s": 1})
            answers.append(response.json())

        async def then_a_check():
            await anyio.sleep(0.2)  # both workers are in a closure that never ends by itself
            response = await client.post("/api/v1/check", json={
                "scenario": "double_buffer_tma", "params": {"stages": 2, "tiles": 3}})
            answers.append(response.json())

        async with anyio.create_task_group() as group:
            group.start_soon(runaway)
            group.start_soon(runaway)
            group.start_soon(then_a_check)
        return answers


def test_two_checks_whose_closures_never_end_do_not_pin_the_workers():
    """Issue 20: a `while (1)` issuing bulk stores made `close` run forever before the search
    looked at its clock; two such checks pinned both workers and every later check hung."""
    start = time.perf_counter()
    answers = run_async(_two_runaways_then_a_check)
    assert time.perf_counter() - start < 30  # generous: each check ends by its own timeout
    runaways = [a for a in answers if a.get("verdict") == "inconclusive"]
    assert len(runaways) == 2
    assert all(a["stopped_by"] in ("timeout", "runaway") for a in runaways)
    assert all("may not terminate" in a["message"] for a in runaways)
    assert any(a.get("verdict") == "safe" for a in answers)
