"""The app the browser tests serve: the real one, plus stand-ins for the GPU replays and the
schedule checker when their packages have not landed yet (the UI must work with both)."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException

from app.main import create_app
from app.scenarios import get as get_scenario
from app.sim.schedule import Schedule
from app.sim.trace import Run

FAKE_REPLAY = "fake-single-barrier-phase-bug"


def fake_replay() -> dict:
    """A simulated run dressed as a GPU trace: source.kind "gpu" and a time_ns on every step."""
    scenario = get_scenario("single_barrier")
    cfg = scenario.resolve({}, ["forget_phase_toggle"])
    doc = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg)).document()
    doc["source"] = {"kind": "gpu", "device": "NVIDIA H200 (test stand-in)", "driver": "0.0",
                     "cuda": "13.0", "captured_at": "2026-11-29T13:00:00Z"}
    clock = 1_000
    for step in doc["steps"]:
        clock += 60 + (step["step"] * 97) % 400
        step["time_ns"] = clock
    return doc


def fake_check(body: dict) -> dict:
    """Random schedules instead of an exhaustive search: enough to drive the UI's check button."""
    scenario = get_scenario(body["scenario"])
    cfg = scenario.resolve(body.get("params") or {}, body.get("bugs") or [])
    found: dict[str, dict] = {}
    for seed in range(60):
        run = Run.complete(cfg, Schedule("random", seed=seed), scenario.describe(cfg))
        for diagnostic in run.diagnostics:
            kind = diagnostic["kind"]
            if kind not in found or run.total_steps < found[kind]["steps"]:
                found[kind] = {"kind": kind, "steps": run.total_steps, "trace": run.document()}
    return {"verdict": "unsafe" if found else "safe", "violations": list(found.values()),
            "states_explored": 60, "elapsed_s": 0.01}


def create() -> FastAPI:
    app = create_app()
    paths = {getattr(route, "path", "") for route in app.routes}
    if "/api/v1/replays" not in paths:
        @app.get("/api/v1/replays")
        def replays() -> dict:
            return {"replays": [{"id": FAKE_REPLAY, "title": "Phase bug on one barrier",
                                 "scenario": "single_barrier", "status": "done",
                                 "device": "NVIDIA H200"}]}

        @app.get("/api/v1/replays/{replay_id}")
        def replay(replay_id: str) -> dict:
            if replay_id != FAKE_REPLAY:
                raise HTTPException(404, "no such replay")
            return fake_replay()
    if "/api/v1/check" not in paths:
        @app.post("/api/v1/check")
        def check(body: dict) -> dict:
            return fake_check(body)
    return app
