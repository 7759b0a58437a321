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


# ------------------------------------------------------------------ the POST form of the query

def movers(doc: dict) -> list[str]:
    """Each step's mover, as a manual schedule names it (static/js/trace.js `moverOf`)."""
    return [f"tma:{s['operands']['op']}" if s["agent"] == "tma" else s["agent"]
            for s in doc["steps"]]


def test_a_manual_schedule_too_long_for_a_url_is_posted(client):
    """A student's picks in a 200-tile run become a manual schedule of every mover (what the
    inspector's download sends): its GET URL is past the server's 64 KiB limit; the POST form
    answers the same run."""
    from urllib.parse import urlencode

    from app.core.config import settings

    plain = client.get("/api/v1/traces/double_buffer_tma?tiles=200&snapshots=false&to=4000")
    moves = movers(plain.json())
    url = "/api/v1/traces/double_buffer_tma/perfetto?" + urlencode(
        {"tiles": 200, "schedule": "manual", "moves": ",".join(moves), "snapshots": "false"})
    assert len(url) > settings.max_url_bytes
    posted = client.post("/api/v1/traces/double_buffer_tma/perfetto", json={
        "tiles": 200, "schedule": "manual", "moves": moves, "snapshots": False})
    assert posted.status_code == 200, posted.text
    assert posted.headers["content-disposition"] == \
        'attachment; filename="double_buffer_tma-manual.perfetto.json"'
    got = [(e["name"], e["args"]["step"]) for e in step_events(posted.json())]
    chrome = client.get("/api/v1/traces/double_buffer_tma/perfetto?tiles=200&snapshots=false"
                        "&to=4000").json()
    assert got == [(e["name"], e["args"]["step"]) for e in step_events(chrome)]
    assert len(got) == len(moves) and posted.json()["otherData"]["schedule"] == \
        {"kind": "manual", "moves": len(moves)}


def test_the_post_form_matches_the_get_form(client):
    query = "stages=2&tiles=4&bugs=forget_phase_toggle&schedule=random&seed=3&from=2&to=9"
    body = {"stages": 2, "tiles": 4, "bugs": ["forget_phase_toggle"], "schedule": "random",
            "seed": 3, "from": 2, "to": 9}
    got = client.post("/api/v1/traces/double_buffer_tma/perfetto", json=body)
    want = client.get(f"/api/v1/traces/double_buffer_tma/perfetto?{query}")
    assert got.status_code == want.status_code == 200
    assert got.json() == want.json()
    assert got.headers["content-disposition"] == want.headers["content-disposition"]


def test_the_post_form_takes_the_get_forms_names_in_its_schema(client):
    """The body's fields are the GET query's names (`from`/`to` included), no others."""
    from app.api.routes.traces import QUERY_NAMES

    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/api/v1/traces/{scenario_id}/perfetto"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(schema["properties"]) == QUERY_NAMES
    assert schema["additionalProperties"] is False
    assert schema["properties"]["moves"]["type"] == "array"
    get_names = {p["name"] for p in spec["paths"]["/api/v1/traces/{scenario_id}/perfetto"]["get"]
                 ["parameters"] if p["in"] == "query"}
    assert get_names == QUERY_NAMES


@pytest.mark.parametrize("body, field", [
    ({"stages": 99}, "stages"),
    ({"bugs": ["not_a_bug"]}, "bugs"),
    ({"schedule": "sideways"}, "schedule"),
    ({"from": 10, "to": 3}, "to"),
    ({"schedule": "manual", "moves": ["nobody"]}, "moves"),
    ({"colour": "red"}, "colour"),
    ({"moves": "producer"}, "moves"),
])
def test_bad_bodies_name_the_field(client, body, field):
    response = client.post("/api/v1/traces/double_buffer_tma/perfetto", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", field]


def test_the_post_form_of_an_unknown_scenario_is_a_404(client):
    response = client.post("/api/v1/traces/no_such_thing/perfetto", json={})
    assert response.status_code == 404


def test_every_parameter_name_reaches_the_run(client):
    """`k_blocks` (the real-bug lessons' parameter) is a query parameter like the others."""
    doc = client.get("/api/v1/traces/tilelang_2674_persistent_phase?k_blocks=3&snapshots=false"
                     "&to=1").json()
    assert doc["scenario"]["params"]["k_blocks"] == 3
    chrome = client.post("/api/v1/traces/tilelang_2674_persistent_phase/perfetto",
                         json={"k_blocks": 3, "to": 1}).json()
    assert chrome["otherData"]["params"]["k_blocks"] == 3
