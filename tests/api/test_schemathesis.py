"""Schemathesis over every operation of the OpenAPI document, with real scenario, replay and
session ids fed in beside generated ones: no 500, and every answer as the document says (status
codes, bodies, headers; a documented 503 with Retry-After is allowed).

`make test` runs a fast subset; `make fuzz` runs MBI_FUZZ_EXAMPLES per operation (10,000+
requests in all)."""

from __future__ import annotations

import os
import time

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from app.main import create_app
from app.replay.catalogue import list_replays
from app.scenarios import catalogue

EXAMPLES = int(os.environ.get("MBI_FUZZ_EXAMPLES", "12"))

app = create_app()
# A build of a 900,000-step run takes 20 s on a loaded 2-core machine (its limit is 30 s): the
# fuzzer waits for it rather than calling a slow answer a failure.
CONFIG = SchemathesisConfig.from_dict({"request-timeout": 60, "checks": {
    "positive_data_acceptance": {
        # Each field's schema bounds are the widest over the catalogue; a scenario may allow
        # less, and some rules join fields (a chunk divides its tile, a bug toggle belongs to a
        # scenario): those answer 422 naming the field, which is still a documented answer.
        "expected-statuses": ["2xx", "404", "409", "410", "422", "429", "503"]}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)

SCENARIOS = list(catalogue())
REPLAYS = [r["id"] for r in list_replays()]


RETRIES = 12


def _session_ids() -> list[str]:
    with TestClient(app) as client:
        ids = []
        for body in ({"scenario": "single_barrier"},
                     {"scenario": "double_buffer_tma", "schedule": "random", "seed": 4,
                      "step": 5, "bugs": ["forget_phase_toggle"]},
                     {"scenario": "double_buffer_tma", "picks": [{"step": 1,
                                                                  "agent": "producer"}]}):
            response = client.post("/api/v1/sessions", json=body)
            for _ in range(RETRIES):  # a busy machine may answer 503: retry as a client would
                if response.status_code != 503:
                    break
                time.sleep(min(float(response.headers.get("retry-after", "1")), 10.0))
                response = client.post("/api/v1/sessions", json=body)
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])
        return ids


SESSIONS = _session_ids()
KNOWN = {"scenario_id": SCENARIOS, "replay_id": REPLAYS, "session_id": SESSIONS}


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """Real ids most of the time, the generated ones otherwise."""
    if not path_parameters:
        return st.just(path_parameters)
    choices = {}
    for name, value in path_parameters.items():
        known = KNOWN.get(name)
        choices[name] = st.sampled_from([*known, value]) if known else st.just(value)
    return st.fixed_dictionaries(choices)


@schema.hook
def map_body(context, body):
    """Checks of at most a tenth of a second: the fuzzer waits for each answer."""
    if isinstance(body, dict) and context.operation.path.startswith("/api/v1/check"):
        body = {**body, "timeout_s": 0.1, "max_states": 5_000}
    return body


@schema.hook
def map_query(context, query):
    """Streams that end soon: the fuzzer reads each answer to its end (an SSE stream of a long
    run at 0.1 steps a second is a valid request that lasts for hours)."""
    path = context.operation.path
    if isinstance(query, dict) and path == "/api/v1/check/stream":
        query = {**query, "timeout_s": 0.1, "max_states": 5_000}
    if isinstance(query, dict) and path.endswith("/events"):
        query = {**query, "steps_per_s": 240}
    return query


REQUESTS = {"count": 0, "by_status": {}}


@schema.hook
def after_call(context, case, response):
    REQUESTS["count"] += 1
    status = response.status_code
    REQUESTS["by_status"][status] = REQUESTS["by_status"].get(status, 0) + 1


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_every_operation(case):
    case.call_and_validate()


def test_enough_requests_were_made():
    """`make fuzz` asks for at least MBI_FUZZ_MIN_REQUESTS (10,000) over every operation."""
    wanted = int(os.environ.get("MBI_FUZZ_MIN_REQUESTS", "0"))
    print(f"schemathesis: {REQUESTS['count']} requests, by status {REQUESTS['by_status']}")  # noqa: T201
    assert REQUESTS["count"] >= wanted
    assert 500 not in REQUESTS["by_status"]
