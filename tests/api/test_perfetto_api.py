"""GET /api/v1/traces/{id}/perfetto and /api/v1/replays/{id}/perfetto."""

from __future__ import annotations

import pytest

from tests.export.perfetto_checks import check_export, step_events

QUERY = "stages=2&tiles=4&bugs=forget_phase_toggle&schedule=random&seed=3"


def test_a_trace_as_perfetto_matches_the_same_query_as_json(client):
    doc = client.get(f"/api/v1/traces/double_buffer_tma?{QUERY}").json()
    response = client.get(f"/api/v1/traces/double_buffer_tma/perfetto?{QUERY}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-disposition"] == \
        'attachment; filename="double_buffer_tma-forget_phase_toggle-random3.perfetto.json"'
    check_export(doc, response.json())


@pytest.mark.parametrize("query, name", [
    ("", "double_buffer_tma"),
    ("bugs=forget_phase_toggle", "double_buffer_tma-forget_phase_toggle"),
    ("bugs=expect_tx_short,forget_phase_toggle",
     "double_buffer_tma-expect_tx_short-forget_phase_toggle"),
    ("schedule=manual&moves=producer", "double_buffer_tma-manual"),
])
def test_the_download_names_the_toggles_of_the_run(client, query, name):
    """A buggy run's file is never named as the correct run's: the toggles (and a schedule
    other than round-robin) are in the file name and in `otherData`."""
    response = client.get(f"/api/v1/traces/double_buffer_tma/perfetto?{query}")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == \
        f'attachment; filename="{name}.perfetto.json"'
    other = response.json()["otherData"]
    assert other["run"] == name
    assert other["bugs"] == sorted(b for b in name.split("-")[1:] if b != "manual")


def test_a_window(client):
    chrome = client.get("/api/v1/traces/double_buffer_tma/perfetto?tiles=8&from=10&to=30").json()
    assert [e["args"]["step"] for e in step_events(chrome)] == list(range(10, 31))


@pytest.mark.parametrize("query, field", [
    ("stages=99", "stages"),
    ("bugs=not_a_bug", "bugs"),
    ("schedule=sideways", "schedule"),
    ("from=10&to=3", "to"),
    ("from=x", "from"),
    ("colour=red", "colour"),
])
def test_bad_queries_name_the_field(client, query, field):
    response = client.get(f"/api/v1/traces/double_buffer_tma/perfetto?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == field


def test_an_unknown_scenario_is_a_404(client):
    assert client.get("/api/v1/traces/no_such_thing/perfetto").status_code == 404


def test_a_replay_as_perfetto(client):
    doc = client.get("/api/v1/replays/double_buffer_tma_1stage_forget_phase_toggle").json()
    response = client.get("/api/v1/replays/double_buffer_tma_1stage_forget_phase_toggle/perfetto")
    assert response.status_code == 200
    chrome = response.json()
    check_export(doc, chrome)
    logged = {s["step"]: s["time_ns"] for s in doc["steps"]}
    assert all(round(e["ts"] * 1000) == logged[e["args"]["step"]] for e in step_events(chrome))


@pytest.mark.parametrize("replay_id", ["no_such_replay", "probes", "bandwidth"])
def test_unknown_replays_are_404s_naming_the_id(client, replay_id):
    response = client.get(f"/api/v1/replays/{replay_id}/perfetto")
    assert response.status_code == 404
    assert response.json()["detail"][0]["loc"] == ["path", "replay_id"]
