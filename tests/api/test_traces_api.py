import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.scenarios import get
from app.sim import SCHEMA_PATH

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def field_of(response):
    detail = response.json()["detail"]
    return detail[0]["loc"][-1]


def test_whole_trace_validates_and_names_the_failure(client):
    response = client.get("/api/v1/traces/double_buffer_tma",
                          params={"stages": 2, "tiles": 4, "bugs": "forget_phase_toggle"})
    assert response.status_code == 200
    trace = response.json()
    jsonschema.validate(trace, SCHEMA)
    assert trace["scenario"] == {
        "id": "double_buffer_tma",
        "params": {"stages": 2, "tiles": 4, "tile_bytes": 4096, "chunk_bytes": 1024,
                   "consumers": 1},
        "bugs": ["forget_phase_toggle"], "schedule": {"kind": "round_robin"},
        "source_sha256": get("double_buffer_tma").source_sha256}
    assert trace["status"] == "deadlock"
    assert [d["kind"] for d in trace["diagnostics"]] == ["deadlock"]
    assert len(trace["steps"]) == trace["total_steps"]


def test_window_from_to(client):
    params = {"tiles": 50, "schedule": "random", "seed": 3}
    whole = client.get("/api/v1/traces/double_buffer_tma",
                       params={**params, "snapshots": "false"}).json()
    window = client.get("/api/v1/traces/double_buffer_tma",
                        params={**params, "from": 100, "to": 109}).json()
    assert window["window"] == {"from": 100, "to": 109}
    assert [s["step"] for s in window["steps"]] == list(range(100, 110))
    assert all("snapshot" in s for s in window["steps"])
    assert all("snapshot" not in s for s in whole["steps"])
    stripped = [{k: v for k, v in s.items() if k != "snapshot"} for s in window["steps"]]
    assert stripped == whole["steps"][99:109]


def test_long_trace_is_paged(client):
    trace = client.get("/api/v1/traces/double_buffer_tma", params={"tiles": 2000}).json()
    assert trace["total_steps"] > 2000
    assert trace["window"] == {"from": 1, "to": 2000}
    response = client.get("/api/v1/traces/double_buffer_tma",
                          params={"tiles": 2000, "from": 1, "to": 5000})
    assert response.status_code == 422 and field_of(response) == "to"


def test_manual_schedule_and_blocked_move(client):
    ok = client.get("/api/v1/traces/single_barrier",
                    params={"schedule": "manual", "moves": "thread,thread,thread,tma"})
    assert ok.status_code == 200
    assert [s["agent"] for s in ok.json()["steps"]] == ["thread", "thread", "thread", "tma"]
    blocked = client.get("/api/v1/traces/single_barrier",
                         params={"schedule": "manual", "moves": "thread,thread,thread,thread"})
    assert blocked.status_code == 422 and field_of(blocked) == "moves"
    assert "waiting on bar parity 0" in blocked.json()["detail"][0]["msg"]


@pytest.mark.parametrize(("params", "field"), [
    ({"stages": 0}, "stages"),
    ({"stages": 17}, "stages"),
    ({"tiles": 100_001}, "tiles"),
    ({"consumers": 5}, "consumers"),
    ({"tile_bytes": 4104}, "tile_bytes"),
    ({"chunk_bytes": 48}, "chunk_bytes"),
    ({"tile_bytes": 8192, "chunk_bytes": 16}, "chunk_bytes"),
    ({"tile_bytes": 2**21}, "tile_bytes"),
    ({"stages": "two"}, "stages"),
    ({"bugs": "missing_mma_commit"}, "bugs"),
    ({"bugs": "no_such_bug"}, "bugs"),
    ({"bugs": "expect_tx_short,expect_tx_long"}, "bugs"),
    ({"schedule": "fastest"}, "schedule"),
    ({"schedule": "random", "seed": -1}, "seed"),
    ({"schedule": "manual", "moves": "ghost"}, "moves"),
    ({"from": -3}, "from"),
    ({"stagse": 2}, "stagse"),
])
def test_bad_input_is_a_422_naming_the_field(client, params, field):
    response = client.get("/api/v1/traces/double_buffer_tma", params=params)
    assert response.status_code == 422, response.text
    assert field_of(response) == field


def test_parameter_a_scenario_does_not_take(client):
    response = client.get("/api/v1/traces/single_barrier", params={"consumers": 2})
    assert response.status_code == 422 and field_of(response) == "consumers"


def test_unknown_scenario_is_404(client):
    assert client.get("/api/v1/traces/nope").status_code == 404


def test_schema_is_served(client):
    schema = client.get("/api/v1/schema/trace.json").json()
    assert schema["properties"]["format"] == {"const": "mbarrier-inspector/trace"}
    jsonschema.Draft202012Validator.check_schema(schema)


query_values = st.one_of(st.integers(-10**20, 10**20).map(str), st.text(max_size=12),
                         st.sampled_from(["", "1", "0", "true", "round_robin", "random"]))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(
    st.sampled_from(["stages", "tiles", "tile_bytes", "chunk_bytes", "consumers", "bugs",
                     "schedule", "seed", "from", "to", "snapshots", "moves", "x"]),
    query_values, max_size=5))
def test_no_query_ever_gives_a_server_error(client, params):
    tiles = params.get("tiles", "")
    if tiles.isdigit() and int(tiles) > 200:
        params["tiles"] = "200"
    response = client.get("/api/v1/traces/double_buffer_tma", params=params)
    assert response.status_code < 500, (params, response.text)
    if response.status_code == 422:
        assert response.json()["detail"][0]["loc"]


def test_non_finite_numbers_in_a_body_are_a_422_not_a_500(client):
    for body in (b'{"scenario": "double_buffer_tma", "timeout_s": NaN}',
                 b'{"scenario": "double_buffer_tma", "timeout_s": Infinity}',
                 b'{"ops": [{"op": "expect_tx", "bytes": NaN}]}'):
        url = "/api/v1/mbarrier/run" if b"ops" in body else "/api/v1/check"
        response = client.post(url, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text


def test_pages_for_unknown_things_are_404(client):
    assert client.get("/replays/no-such-trace").status_code == 404
    assert client.get("/replays/bandwidth").status_code == 404
    assert client.get("/replays/single_barrier").status_code == 200
    assert client.get("/scenarios/nope").status_code == 404


def test_the_served_pages_offer_replays_the_bandwidth_plot_and_the_checker(client):
    """The pages show what the real app answers: no subsystem is hidden as missing."""
    home = client.get("/").text
    for section in ("replays", "why-pipelining"):
        tag = re.search(rf'<section[^>]*id="{section}"[^>]*>', home)
        assert tag and "hidden" not in tag.group(0), section
    assert 'id="check-button"' in client.get("/scenarios/double_buffer_tma").text
