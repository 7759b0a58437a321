"""Any JSON body sent to the session and check endpoints gets an answer below 500."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=3),
    max_leaves=8)
keys = st.sampled_from(["scenario", "params", "bugs", "schedule", "seed", "moves", "picks", "step",
                        "agent", "stages", "max_states", "timeout_s", "x"])
endpoints = st.sampled_from(["create", "step", "back", "reset", "seek", "check"])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(keys, values, max_size=5), endpoint=endpoints)
def test_no_body_gives_a_server_error(client, body, endpoint):
    session = client.post("/api/v1/sessions", json={"scenario": "single_barrier"}).json()["id"]
    if endpoint == "create":
        body.setdefault("scenario", "double_buffer_tma")
        response = client.post("/api/v1/sessions", json=body)
    elif endpoint == "check":
        body.setdefault("scenario", "single_barrier")
        body["max_states"] = 500
        response = client.post("/api/v1/check", json=body)
    else:
        response = client.post(f"/api/v1/sessions/{session}/{endpoint}", json=body)
    assert response.status_code < 500, (endpoint, body, response.text[:300])
    if response.status_code == 422:
        assert response.json()["detail"][0]["loc"]
