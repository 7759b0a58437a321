"""Sessions: create, step (the schedule's move or a named mover), back, seek, reset, snapshots;
ids that any process can read; bad input is a 4xx that names the field, never a 500."""

from __future__ import annotations

import time

import pytest

from app.api import runstore as sessions
from app.api.runstore import RunKey
from app.api.token import SessionToken
from app.sim.schedule import Schedule

API = "/api/v1"


def create(client, **body):
    response = client.post(f"{API}/sessions", json={"scenario": "single_barrier", **body})
    assert response.status_code == 201, response.text
    return response.json()


def step(client, sid, agent=None, status=200):
    response = client.post(f"{API}/sessions/{sid}/step",
                           json={"agent": agent} if agent else None)
    assert response.status_code == status, response.text
    return response.json()


def field_of(response) -> str:
    return response.json()["detail"][0]["loc"][-1]


def test_create_answers_layout_snapshot_and_ready_movers(client):
    view = create(client)
    assert view["step"] == 0 and view["record"] is None
    assert view["total_steps"] == 28 and view["status"] == "done"
    assert view["ready"] == ["thread"]
    assert view["layout"]["barriers"] == [{"name": "bar", "role": "bar", "stage": None,
                                          "array": "bar", "cta": 0}]
    assert view["snapshot"]["barriers"][0]["valid"] is False
    assert view["scenario"]["schedule"] == {"kind": "round_robin"}


def test_steps_follow_the_trace_and_back_returns_the_same_state(client):
    trace = client.get(f"{API}/traces/double_buffer_tma?schedule=random&seed=3").json()
    view = create(client, scenario="double_buffer_tma", schedule="random", seed=3)
    sid = view["id"]
    seen = {}
    for k in range(1, 31):
        view = step(client, sid)
        sid = view["id"]
        assert view["step"] == k
        assert view["snapshot"] == trace["steps"][k - 1]["snapshot"]
        assert view["record"]["op"] == trace["steps"][k - 1]["op"]
        seen[k] = view["snapshot"]
    for k in range(29, 19, -1):
        response = client.post(f"{API}/sessions/{sid}/back")
        assert response.status_code == 200
        view = response.json()
        sid = view["id"]
        assert view["step"] == k and view["snapshot"] == seen[k]


def test_old_ids_stay_valid_and_snapshots_do_not_move_the_cursor(client):
    first = create(client)
    later = step(client, step(client, first["id"])["id"])
    again = step(client, first["id"])  # the id of step 0 still steps to 1
    assert again["step"] == 1
    snap = client.get(f"{API}/sessions/{later['id']}/snapshots/7").json()
    assert snap["step"] == 7 and snap["snapshot"]["barriers"][0]["phase"] == 1
    assert client.get(f"{API}/sessions/{later['id']}").json()["step"] == 2


def test_naming_a_mover_forks_the_run_and_reset_forgets_it(client):
    view = create(client, scenario="double_buffer_tma", step=4)
    assert view["ready"][:1] == ["producer"]
    movers = view["ready"]
    tma = next(m for m in movers if m.startswith("tma:"))
    natural = client.get(f"{API}/sessions/{view['id']}/snapshots/5").json()["record"]
    picked = step(client, view["id"], tma)
    assert picked["record"]["agent"] == "tma"
    if natural["agent"] != "tma":
        full = client.get(f"{API}/sessions/{picked['id']}").json()
        assert full["picks"] == [{"step": 5, "agent": tma}]
        doc = client.get(f"{API}/sessions/{picked['id']}/trace?snapshots=false").json()
        assert doc["scenario"]["schedule"]["picks"] == [{"step": 5, "agent": tma}]
    reset = client.post(f"{API}/sessions/{picked['id']}/reset").json()
    assert reset["step"] == 0 and reset["picks"] == []


def test_picks_from_a_permalink_recreate_the_same_state(client):
    view = create(client, scenario="double_buffer_tma", step=4)
    tma = next(m for m in view["ready"] if m.startswith("tma:"))
    forked = step(client, view["id"], tma)
    full = client.get(f"{API}/sessions/{forked['id']}").json()
    again = create(client, scenario="double_buffer_tma", picks=full["picks"], step=5)
    assert again["snapshot"] == forked["snapshot"]


def test_manual_schedule_moves_only_named_movers(client):
    view = create(client, schedule="manual")
    assert view["total_steps"] == 0 and view["status"] == "running"
    refused = client.post(f"{API}/sessions/{view['id']}/step")
    assert refused.status_code == 409 and field_of(refused) == "agent"
    assert "ready now: thread" in refused.json()["detail"][0]["msg"]
    sid = view["id"]
    for mover in ("thread", "thread", "thread", "tma", "tma:load:t0"):
        sid = step(client, sid, mover)["id"]
    view = client.get(f"{API}/sessions/{sid}").json()
    assert view["step"] == 5 and view["snapshot"]["barriers"][0]["tx_count"] == 2048
    moves = [p["agent"] for p in view["picks"]]
    again = create(client, schedule="manual", moves=moves, step=5)
    assert again["snapshot"] == view["snapshot"]


def test_a_blocked_agent_is_a_409_that_says_what_it_waits_on(client):
    view = create(client, step=3)
    response = client.post(f"{API}/sessions/{view['id']}/step", json={"agent": "thread"})
    assert response.status_code == 409
    assert field_of(response) == "agent"
    assert response.json()["detail"][0]["msg"] == "thread is waiting on bar parity 0"


@pytest.mark.parametrize(("body", "field"), [
    ({"scenario": "nope"}, "scenario"),
    ({"scenario": "single_barrier", "params": {"tiles": 10**30}}, "tiles"),
    ({"scenario": "single_barrier", "params": {"stages": 2}}, "stages"),
    ({"scenario": "single_barrier", "bugs": ["forget_producer_phase_toggle"]}, "bugs"),
    ({"scenario": "single_barrier", "schedule": "sometimes"}, "schedule"),
    ({"scenario": "single_barrier", "schedule": "random", "seed": 2**64}, "seed"),
    ({"scenario": "single_barrier", "step": 10**12}, "step"),
    ({"scenario": "single_barrier", "step": 29}, "step"),
    ({"scenario": "single_barrier", "picks": [{"step": 4, "agent": "thread"}]}, "picks"),
    ({"scenario": "single_barrier", "picks": [{"step": 1, "agent": "ghost"}]}, "picks"),
    ({"scenario": "single_barrier", "moves": ["thread"]}, "moves"),
    ({"scenario": "single_barrier", "colour": "red"}, "colour"),
    ({"scenario": "single_barrier", "picks": [{"step": "x", "agent": "t"}] * 2}, "step"),
])
def test_bad_create_bodies_name_the_field(client, body, field):
    response = client.post(f"{API}/sessions", json=body)
    assert response.status_code == 422, response.text
    assert field_of(response) == field


def test_malformed_json_is_a_422(client):
    response = client.post(f"{API}/sessions", content=b"{not json",
                           headers={"content-type": "application/json"})
    assert response.status_code == 422
    view = create(client)
    response = client.post(f"{API}/sessions/{view['id']}/step", content=b"[1,2",
                           headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_unknown_damaged_and_oversized_ids_are_refused(client):
    good = create(client)["id"]
    for sid in ("nope", "abc.def", good[:-2] + "xx", good.replace(".", "x.", 1)):
        response = client.post(f"{API}/sessions/{sid}/step")
        assert response.status_code == 404, sid
        assert field_of(response) == "session_id"
    response = client.get(f"{API}/sessions/{'a' * 20000}")
    assert response.status_code == 422 and field_of(response) == "session_id"


def test_idle_ids_expire_with_a_410(client):
    key = RunKey("single_barrier", (("chunk_bytes", 1024), ("tile_bytes", 4096), ("tiles", 3)),
                 (), Schedule("round_robin"))
    stale = SessionToken(key, 2).encode(now=time.time() - sessions.settings.session_idle_s - 5)
    response = client.post(f"{API}/sessions/{stale}/step")
    assert response.status_code == 410 and field_of(response) == "session_id"
    fresh = SessionToken(key, 2).encode()
    assert step(client, fresh)["step"] == 3


def test_cursor_limits_are_4xx(client):
    view = create(client, step=28)
    response = client.post(f"{API}/sessions/{view['id']}/step")
    assert response.status_code == 409 and field_of(response) == "step"
    assert "ended" in response.json()["detail"][0]["msg"]
    zero = create(client)
    response = client.post(f"{API}/sessions/{zero['id']}/back")
    assert response.status_code == 409 and field_of(response) == "step"
    response = client.get(f"{API}/sessions/{zero['id']}/snapshots/29")
    assert response.status_code == 422 and field_of(response) == "step"
    response = client.get(f"{API}/sessions/{zero['id']}/snapshots/{10**20}")
    assert response.status_code == 422 and field_of(response) == "step"
    response = client.post(f"{API}/sessions/{zero['id']}/seek", json={"step": -1})
    assert response.status_code == 422 and field_of(response) == "step"
    response = client.post(f"{API}/sessions/{zero['id']}/step", json={"agent": "x" * 81})
    assert response.status_code == 422 and field_of(response) == "agent"
    response = client.post(f"{API}/sessions/{zero['id']}/step", json={"agent": "ghost"})
    assert response.status_code == 422 and field_of(response) == "agent"
    response = client.get(f"{API}/sessions/{zero['id']}/trace?from=5&to=2")
    assert response.status_code == 422 and field_of(response) == "to"


def test_session_trace_is_the_trace_document(client):
    view = create(client, scenario="double_buffer_tma", bugs=["forget_phase_toggle"],
                  schedule="random", seed=3)
    doc = client.get(f"{API}/sessions/{view['id']}/trace").json()
    direct = client.get(f"{API}/traces/double_buffer_tma?bugs=forget_phase_toggle"
                        "&schedule=random&seed=3").json()
    assert doc == direct


def test_the_store_is_bounded_and_drops_idle_runs(monkeypatch):
    store = sessions.RunStore()
    monkeypatch.setattr(sessions, "settings",
                        sessions.settings.__class__(max_sessions=3, session_idle_s=60))
    keys = []
    for tiles in range(1, 6):
        key = RunKey("single_barrier", (("chunk_bytes", 1024), ("tile_bytes", 4096),
                                        ("tiles", tiles)), (), Schedule("round_robin"))
        run, key = sessions.build_run(key)
        store.put(key, run)
        keys.append(key)
    assert list(store.entries) == keys[2:]
    assert store.steps == sum(e.run.total_steps for e in store.entries.values())
    for entry in store.entries.values():
        entry.used -= 61
    store.put(keys[0], sessions.build_run(keys[0])[0])
    assert list(store.entries) == [keys[0]]


def test_positions_bound_per_run(client):
    view = create(client, scenario="double_buffer_tma", params={"tiles": 40})
    sid = view["id"]
    for _ in range(sessions.POSITIONS_PER_RUN + 20):
        sid = step(client, sid)["id"]
    entry = next(e for e in sessions.store.entries.values() if e.run.cfg.param("tiles") == 40)
    assert len(entry.positions) <= sessions.POSITIONS_PER_RUN
