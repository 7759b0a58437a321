import pytest

URL = "/api/v1/mbarrier/run"
KEYS = {"op", "phase", "parity", "pending_arrivals", "expected_arrivals", "tx_count", "valid",
        "phase_completed", "wait_complete", "undefined_behavior"}


def run(client, ops):
    return client.post(URL, json={"ops": ops})


def test_semantics_example_one_state_per_op(client):
    response = run(client, [
        {"op": "init", "count": 2}, {"op": "arrive_expect_tx", "bytes": 4096},
        {"op": "complete_tx", "bytes": 1024}, {"op": "test_wait_parity", "parity": 0},
        {"op": "arrive"}, {"op": "complete_tx", "bytes": 3072},
        {"op": "test_wait_parity", "parity": 0}, {"op": "try_wait_parity", "parity": 1},
    ])
    assert response.status_code == 200
    states = response.json()["states"]
    assert all(set(s) == KEYS for s in states)
    assert [s["tx_count"] for s in states] == [0, 4096, 3072, 3072, 3072, 0, 0, 0]
    assert [s["pending_arrivals"] for s in states] == [2, 1, 1, 1, 0, 2, 2, 2]
    assert [s["phase_completed"] for s in states] == [False] * 5 + [True, False, False]
    assert [s["wait_complete"] for s in states] == [None, None, None, False, None, None, True,
                                                    False]
    assert states[-1]["phase"] == 1 and states[-1]["parity"] == 1


@pytest.mark.parametrize(("ops", "rule"), [
    ([{"op": "arrive"}], "uninitialized"),
    ([{"op": "init"}, {"op": "init"}], "reinit"),
    ([{"op": "init", "count": 1}, {"op": "arrive", "count": 2}], "over_arrival"),
    ([{"op": "init"}, {"op": "arrive_drop"}], "drop_to_zero"),
    ([{"op": "init"}, {"op": "expect_tx", "bytes": 1048575}, {"op": "expect_tx", "bytes": 1}],
     "tx_overflow"),
    ([{"op": "init"}, {"op": "complete_tx", "bytes": 1048575},
      {"op": "complete_tx", "bytes": 1}], "tx_underflow"),
    ([{"op": "init"}, {"op": "inval"}, {"op": "test_wait_parity", "parity": 0}],
     "uninitialized"),
])
def test_first_undefined_behaviour_is_the_last_entry(client, ops, rule):
    states = run(client, ops + [{"op": "init"}, {"op": "arrive"}]).json()["states"]
    assert len(states) == len(ops)
    assert states[-1]["undefined_behavior"] == rule
    assert all(s["undefined_behavior"] is None for s in states[:-1])


@pytest.mark.parametrize(("body", "field"), [
    ({"ops": [{"op": "jump"}]}, "op"),
    ({"ops": [{"op": "arrive_expect_tx"}]}, "bytes"),
    ({"ops": [{"op": "expect_tx", "bytes": -1}]}, "bytes"),
    ({"ops": [{"op": "expect_tx", "bytes": 2**20}]}, "bytes"),
    ({"ops": [{"op": "init", "count": 0}]}, "count"),
    ({"ops": [{"op": "init", "count": 2**20}]}, "count"),
    ({"ops": [{"op": "test_wait_parity", "parity": 2}]}, "parity"),
    ({"ops": [{"op": "test_wait_parity"}]}, "parity"),
    ({"ops": [{"op": "arrive", "count": "1"}]}, "count"),
    ({"ops": [{"op": "arrive", "cnt": 1}]}, "cnt"),
    ({"ops": "init"}, "ops"),
    ({}, "ops"),
])
def test_malformed_requests_are_422_naming_the_field(client, body, field):
    response = client.post(URL, json=body)
    assert response.status_code == 422
    locations = [e["loc"] for e in response.json()["detail"]]
    assert any(field in loc for loc in locations), locations


def test_too_many_ops(client):
    response = run(client, [{"op": "init"}] + [{"op": "test_wait_parity", "parity": 0}] * 10_000)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "ops"
    assert run(client, [{"op": "init"}] + [{"op": "arrive"}, {"op": "arrive"}] * 4999
               ).status_code == 200


def test_not_json(client):
    response = client.post(URL, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_state_tokens_wait_for_the_phase_they_arrived_in(client):
    states = run(client, [
        {"op": "init", "count": 2}, {"op": "arrive", "token": "a", "no_complete": True},
        {"op": "pending_count", "token": "a"}, {"op": "test_wait", "token": "a"},
        {"op": "arrive_expect_tx", "bytes": 16, "token": "b"}, {"op": "try_wait", "token": "a"},
        {"op": "complete_tx", "bytes": 16}, {"op": "test_wait", "token": "b"},
    ]).json()["states"]
    assert states[2]["pending_count"] == 2 and "pending_count" not in states[1]
    assert [s["wait_complete"] for s in states] == [None, None, None, False, None, False, None,
                                                    True]


def test_pending_count_is_the_count_prior_to_the_arrive(client):
    """PTX 9.7.13.15.17, and an H200: init 3, two `arrive.noComplete` tokens read 3, then 2."""
    states = run(client, [
        {"op": "init", "count": 3}, {"op": "arrive", "token": "a", "no_complete": True},
        {"op": "arrive", "token": "b", "no_complete": True},
        {"op": "pending_count", "token": "a"}, {"op": "pending_count", "token": "b"},
    ]).json()["states"]
    assert [s.get("pending_count") for s in states[3:]] == [3, 2]


def test_pending_count_of_a_plain_arrive_and_a_completing_no_complete_are_undefined(client):
    states = run(client, [{"op": "init", "count": 2}, {"op": "arrive", "token": "a"},
                          {"op": "pending_count", "token": "a"}]).json()["states"]
    assert states[-1]["undefined_behavior"] == "pending_count_token"
    states = run(client, [{"op": "init", "count": 1},
                          {"op": "arrive", "no_complete": True}]).json()["states"]
    assert states[-1]["undefined_behavior"] == "no_complete"
    assert states[-1]["phase"] == 0


def test_a_token_two_phases_old_is_stale(client):
    states = run(client, [
        {"op": "init", "count": 1}, {"op": "arrive", "token": "old"}, {"op": "arrive"},
        {"op": "test_wait", "token": "old"},
    ]).json()["states"]
    assert states[-1]["undefined_behavior"] == "stale_token"
    assert len(states) == 4


def test_an_unknown_token_is_a_422_naming_the_op(client):
    response = run(client, [{"op": "init"}, {"op": "test_wait", "token": "nope"}])
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "ops", 1, "token"]
