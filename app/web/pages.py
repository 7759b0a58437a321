"""The browser pages: Jinja2 templates around the ES modules in static/, which render traces.

Pages carry only what the server knows before any run exists (the scenario, its parameters and bug
toggles, which optional subsystems answer); every state the student sees comes from the JSON API.
Their Content-Security-Policy (the page's own scripts, styles and sockets only; framable under
/embed/ alone) is added by `app.core.security.Guard`.
"""

from __future__ import annotations

import json
import re

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from app.replay.store import NOT_TRACES
from app.resources import static_dir, templates_dir, traces_dir
from app.scenarios import catalogue
from app.scenarios import get as get_scenario
from app.web import author, learning, reference

templates = Jinja2Templates(directory=templates_dir())

PANELS = ("agents", "barriers", "stages", "timeline", "diagnostics", "controls")
"""What an embed may show (`/embed/{id}?panels=barriers,timeline`); all by default."""

def script_json(value) -> str:
    """JSON safe inside a <script type="application/json"> element."""
    return (json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))


def features(app: FastAPI) -> dict:
    """Which optional subsystems this server answers (the UI hides what is missing)."""
    paths = app.openapi().get("paths", {})
    return {"check": "/api/v1/check" in paths, "replays": "/api/v1/replays" in paths,
            "perfetto": "/api/v1/traces/{scenario_id}/perfetto" in paths,
            "replay_perfetto": "/api/v1/replays/{replay_id}/perfetto" in paths}


BOOT_FIELDS = ("id", "title", "parameters", "bugs", "gpu", "source_sha256")


def boot_scenario(scenario) -> dict:
    """What a page's script reads of a scenario: not its source, lesson or toggle texts (the
    template renders those; /api/v1/scenarios/{id} has them all), which would count against
    the page's weight twice."""
    whole = scenario.as_dict()
    return {name: whole[name] for name in BOOT_FIELDS}


def scenario_or_404(scenario_id: str):
    try:
        return get_scenario(scenario_id)
    except KeyError:
        raise HTTPException(404, f"no scenario {scenario_id[:80]!r}") from None


def install(app: FastAPI) -> None:
    """Mount /static and the page routes on `app` (headers and CSP: app.core.security)."""
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")

    def page(request: Request, name: str, status_code: int = 200, **context) -> HTMLResponse:
        boot = {"features": features(app), **context.pop("boot", {})}
        return templates.TemplateResponse(
            request, name, {"boot_json": script_json(boot), "features": boot["features"],
                            **context}, status_code=status_code)

    author.install(app, page)  # before /embed/{scenario_id}: /embed/p is an authored pipeline

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def catalogue_page(request: Request) -> HTMLResponse:
        scenarios = [s.as_dict() for s in catalogue().values()]
        return page(request, "catalogue.html", scenarios=scenarios,
                    boot={"page": "catalogue"})

    @app.get("/scenarios/{scenario_id}", response_class=HTMLResponse, include_in_schema=False)
    def inspector_page(request: Request, scenario_id: str) -> HTMLResponse:
        scenario = scenario_or_404(scenario_id)
        return page(request, "inspector.html", scenario=scenario.as_dict(), embed=False,
                    panels=PANELS, boot={"page": "inspector", "scenario": boot_scenario(scenario)})

    @app.get("/embed/{scenario_id}", response_class=HTMLResponse, include_in_schema=False)
    def embed_page(request: Request, scenario_id: str, panels: str = "") -> HTMLResponse:
        scenario = scenario_or_404(scenario_id)
        shown = tuple(p for p in panels.split(",") if p in PANELS) or PANELS
        return page(request, "inspector.html", scenario=scenario.as_dict(), embed=True,
                    panels=shown, boot={"page": "embed", "scenario": boot_scenario(scenario),
                                        "panels": list(shown)})

    @app.get("/compare/{scenario_id}", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(request: Request, scenario_id: str) -> HTMLResponse:
        scenario = scenario_or_404(scenario_id)
        return page(request, "compare.html", scenario=scenario.as_dict(),
                    boot={"page": "compare", "scenario": boot_scenario(scenario)})

    @app.get("/replays/{replay_id}", response_class=HTMLResponse, include_in_schema=False)
    def replay_page(request: Request, replay_id: str) -> HTMLResponse:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,120}", replay_id):
            raise HTTPException(404, "no such replay")
        known = replay_id not in NOT_TRACES and (traces_dir() / f"{replay_id}.json").is_file()
        scenarios = {s.id: boot_scenario(s) for s in catalogue().values()}
        return page(request, "replay.html", status_code=200 if known else 404,
                    replay_id=replay_id,
                    boot={"page": "replay", "replay": replay_id, "scenarios": scenarios})

    learning.install(app, page, static_dir(), templates)
    reference.install(app, page)
