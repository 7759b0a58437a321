"""Streaming a session: the WebSocket (play, pause, speed, step, back, seek, reset) and SSE for
read-only clients, whose event ids are steps so that a reconnect resumes where it stopped."""

from __future__ import annotations

import json

API = "/api/v1"


def create(client, **body):
    response = client.post(f"{API}/sessions", json={"scenario": "single_barrier", **body})
    assert response.status_code == 201, response.text
    return response.json()


def next_state(ws):
    while True:
        message = ws.receive_json()
        if message["type"] != "speed":
            return message


def test_socket_commands_move_the_cursor(client):
    trace = client.get(f"{API}/traces/single_barrier").json()
    view = create(client)
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        first = ws.receive_json()
        assert first["type"] == "state" and first["step"] == 0 and first["changed"]
        assert first["diagnostics"] == [] and first["id"]
        for k in range(1, 9):
            ws.send_json({"type": "step"})
            state = next_state(ws)
            assert state["step"] == k
            assert state["snapshot"] == trace["steps"][k - 1]["snapshot"]
        ws.send_json({"type": "back"})
        assert next_state(ws)["step"] == 7
        ws.send_json({"type": "seek", "step": 20})
        state = next_state(ws)
        assert state["step"] == 20 and state["snapshot"] == trace["steps"][19]["snapshot"]
        ws.send_json({"type": "seek", "step": 3})
        assert next_state(ws)["snapshot"] == trace["steps"][2]["snapshot"]
        ws.send_json({"type": "step", "agent": "tma:load:t0"})
        state = next_state(ws)
        assert state["step"] == 4 and state["record"]["agent"] == "tma"


def test_play_streams_steps_and_pause_stops(client):
    view = create(client)
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        ws.receive_json()
        ws.send_json({"type": "play", "steps_per_s": 200})
        steps = [next_state(ws)["step"] for _ in range(5)]
        assert steps == [1, 2, 3, 4, 5]
        ws.send_json({"type": "pause"})
        while True:
            state = next_state(ws)
            if not state["playing"]:
                break
        stopped = state["step"]
        ws.send_json({"type": "step"})
        assert next_state(ws)["step"] == stopped + 1


def test_play_runs_to_the_end_and_pauses_itself(client):
    view = create(client, step=20)
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        ws.receive_json()
        ws.send_json({"type": "speed", "steps_per_s": 240})
        assert ws.receive_json() == {"type": "speed", "speed": 240.0}
        ws.send_json({"type": "play"})
        while True:
            state = next_state(ws)
            if not state["playing"]:
                break
        assert state["step"] == 28 and state["status"] == "done" and state["id"]


def test_socket_refusals_are_messages_that_name_the_field(client):
    view = create(client, step=3)
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        ws.receive_json()
        for command, status, field in [
            ({"type": "step", "agent": "thread"}, 409, "agent"),
            ({"type": "step", "agent": "ghost"}, 422, "agent"),
            ({"type": "seek", "step": 10**30}, 422, "step"),
            ({"type": "seek", "step": "3"}, 422, "step"),
            ({"type": "speed", "steps_per_s": 1e9}, 422, "steps_per_s"),
            ({"type": "dance"}, 422, "type"),
            ([1, 2], 422, "type"),
        ]:
            ws.send_text(json.dumps(command))
            error = ws.receive_json()
            assert error["type"] == "error", command
            assert (error["status"], error["field"]) == (status, field), (command, error)
        ws.send_text("x" * 5000)
        assert ws.receive_json()["field"] == "type"
        ws.send_json({"type": "step"})
        assert next_state(ws)["step"] == 4  # still alive


def test_socket_for_an_unknown_session_closes_with_the_reason(client):
    with client.websocket_connect(f"{API}/sessions/nope/ws") as ws:
        error = ws.receive_json()
        assert error["type"] == "error" and error["status"] == 404
        assert error["field"] == "session_id"


def test_manual_picks_over_the_socket_report_the_new_run(client):
    view = create(client, scenario="double_buffer_tma", step=4)
    tma = next(m for m in view["ready"] if m.startswith("tma:"))
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        ws.receive_json()
        ws.send_json({"type": "step", "agent": "producer"})
        state = next_state(ws)
        assert state["step"] == 5
        ws.send_json({"type": "back"})
        next_state(ws)
        ws.send_json({"type": "step", "agent": tma})
        state = next_state(ws)
        assert state["record"]["agent"] == "tma"
        assert state.get("changed") and state["picks"] == [{"step": 5, "agent": tma}]
        ws.send_json({"type": "reset"})
        state = next_state(ws)
        assert state["step"] == 0 and state["picks"] == []


def parse_events(text: str) -> list[dict]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            fields[name] = value
        if "event" in fields:
            events.append(fields)
    return events


def test_sse_streams_every_step_with_its_id_and_resumes(client):
    view = create(client, step=20)
    url = f"{API}/sessions/{view['id']}/events?steps_per_s=240"
    response = client.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_events(response.text)
    states = [e for e in events if e["event"] == "state"]
    assert [int(e["id"]) for e in states] == list(range(20, 29))
    assert json.loads(states[-1]["data"])["snapshot"]["status"] == "done"
    assert events[-1]["event"] == "end"
    resumed = parse_events(client.get(url, headers={"Last-Event-ID": "25"}).text)
    assert [int(e["id"]) for e in resumed if e["event"] == "state"] == [26, 27, 28]
    finished = parse_events(client.get(url, headers={"Last-Event-ID": "28"}).text)
    assert [e["event"] for e in finished] == ["end"]
    bad = client.get(url, headers={"Last-Event-ID": "soon"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "last-event-id"
    assert client.get(f"{API}/sessions/{view['id']}/events?steps_per_s=0").status_code == 422


def apply_patch(snapshot: dict, patch: dict) -> dict:
    """What static/js/player.js does with a played frame's `patch`."""
    out = {**snapshot, **patch["set"]}
    for name, items in patch["items"].items():
        out[name] = list(out[name])
        for index, item in items.items():
            out[name][int(index)] = item
    return out


def test_played_patches_rebuild_every_snapshot(client):
    trace = client.get(f"{API}/traces/double_buffer_tma?schedule=random&seed=9").json()
    view = create(client, scenario="double_buffer_tma", schedule="random", seed=9, step=3)
    with client.websocket_connect(f"{API}/sessions/{view['id']}/ws") as ws:
        snapshot = ws.receive_json()["snapshot"]
        ws.send_json({"type": "play", "steps_per_s": 240, "patches": True})
        for k in range(4, 40):
            frame = next_state(ws)
            assert frame["step"] == k and "snapshot" not in frame
            snapshot = apply_patch(snapshot, frame["patch"])
            assert snapshot == trace["steps"][k - 1]["snapshot"]
            assert frame["record"]["step"] == k
        ws.send_json({"type": "pause"})
