"""Pages for learning by doing: lesson callouts, the standalone lesson export, one barrier by hand.

- `GET /lessons/{scenario_id}`: the built-in lesson's callouts (Markdown pinned to steps), from
  `app/web/lessons/<scenario_id>.json`; the browser renders the Markdown (static/js/callouts.js).
- `GET /export/{scenario_id}?<the embed's query>` (the built-in lesson's callouts) and
  `POST /export` (the same as JSON, with the instructor's own callouts; `source` in place of
  `scenario` for a pipeline text, as /author sends it): one self-contained `.html`
  file (attachment) holding the trace (gzip, base64; the page inflates it with
  `DecompressionStream`), the CSS, the ES modules (turned into blob: URLs by a small loader,
  since `file://` pages cannot import files) and the callouts. It opens from `file://` with no
  network: its own CSP says `connect-src 'none'`.
- `GET /barrier`: drive one mbarrier by hand through `POST /api/v1/mbarrier/run`.
"""

from __future__ import annotations

import base64
import gzip
import json
import posixpath
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from app.api.routes.pipelines import check_size, source_key
from app.api.runstore import build_run, scenario_of
from app.api.work import builds
from app.scenarios import PARAM_NAMES, ParamError, Scenario
from app.scenarios import get as get_scenario
from app.scenarios.schedules import parse_schedule

HERE = Path(__file__).resolve().parent
LESSONS = HERE / "lessons"
EXPORT_ENTRY = "export.js"
EXPORT_MAX_STEPS = 20_000
"""The longest run an export holds (a 500-step lesson is about 60 KB of gzip)."""
PANELS = ("agents", "barriers", "stages", "timeline", "diagnostics", "controls")
EXPORT_QUERY = set(PARAM_NAMES) | {"bugs", "schedule", "seed", "moves", "panels", "step",
                                   "theme", "predict", "callouts"}
IMPORT = re.compile(r"""(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.{1,2}/[^"']+)\2""")


class Callout(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: Annotated[int, Field(ge=0, le=EXPORT_MAX_STEPS)]
    text: Annotated[str, Field(max_length=8_000)]


class ExportRequest(BaseModel):
    """`POST /export`: what `GET /export/{id}` takes, as JSON, plus the callouts."""
    model_config = ConfigDict(extra="forbid")
    scenario: Annotated[str, Field(max_length=80)] | None = None
    source: str | None = None
    """A pipeline text in place of `scenario` (what /author shares); at most 64 KiB."""
    title: Annotated[str, Field(max_length=120)] | None = None
    params: dict[str, StrictInt] = Field(default_factory=dict, max_length=64)
    bugs: Annotated[list[Annotated[str, Field(max_length=60)]], Field(max_length=16)] = []
    schedule: Literal["round_robin", "random", "manual"] = "round_robin"
    seed: Annotated[int, Field(ge=0)] = 0
    moves: Annotated[list[Annotated[str, Field(max_length=80)]], Field(max_length=10_000)] = []
    step: Annotated[int, Field(ge=0)] = 0
    panels: Annotated[list[str], Field(max_length=6)] = []
    predict: bool = False
    theme: Literal["light", "dark"] | None = None
    callouts: Annotated[list[Callout], Field(max_length=500)] = []


def lesson(scenario_id: str) -> dict:
    """The built-in lesson of a scenario: `{"callouts": [{"step", "text", "bugs"?}]}`."""
    path = LESSONS / f"{scenario_id}.json"
    if not re.fullmatch(r"[a-z0-9_]{1,80}", scenario_id) or not path.is_file():
        return {"callouts": []}
    return json.loads(path.read_text(encoding="utf-8"))


def module_graph(static: Path, entry: str) -> list[tuple[str, str]]:
    """`(path, source)` of `entry` and every module it imports (statically or with `import()`),
    dependencies first; each relative specifier rewritten to `"@mod:<path>"` for the loader."""
    order: list[tuple[str, str]] = []
    seen: set[str] = set()

    def visit(path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        source = (static / path).read_text(encoding="utf-8")
        deps = []

        def rewrite(match: re.Match) -> str:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), match.group(3)))
            deps.append(target)
            return f"{match.group(1)}{match.group(2)}@mod:{target}{match.group(2)}"

        source = IMPORT.sub(rewrite, source)
        for dep in deps:
            visit(dep)
        order.append((path, source))

    visit(entry)
    return order


def script_json(value) -> str:
    return (json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
            .replace(">", "\\u003e").replace("&", "\\u0026"))


@lru_cache(maxsize=4)
def _assets(static: Path, stamp: float) -> dict:
    del stamp
    return {"css": (static / "css" / "inspector.css").read_text(encoding="utf-8"),
            "theme": (static / "js" / "theme.js").read_text(encoding="utf-8"),
            "modules": module_graph(static / "js", EXPORT_ENTRY)}


def export_assets(static: Path) -> dict:
    """The CSS and ES modules an exported page inlines (read again when a module changes)."""
    return _assets(static, max(p.stat().st_mtime for p in (static / "js").rglob("*.js")))


def standalone_page(scenario: Scenario, doc: dict, *, step: int = 0, panels=PANELS,
                    predict: bool = False, theme: str | None = None,
                    callouts: dict | None = None, title: str | None = None,
                    static: Path | None = None, templates: Jinja2Templates | None = None) -> str:
    """One self-contained HTML page that plays `doc` (a whole trace document) offline: what
    `GET /export` sends and what a notebook shows in an iframe (app.notebook)."""
    from app.resources import static_dir, templates_dir

    static = static or static_dir()
    templates = templates or Jinja2Templates(directory=templates_dir())
    packed = base64.b64encode(gzip.compress(
        json.dumps(doc, separators=(",", ":")).encode(), 9, mtime=0)).decode()
    shown = scenario.as_dict()
    if scenario.id is None:  # a pipeline text: named by its title, or its sha256
        shown = {**shown, "id": "", "title": title or "A pipeline"}
    boot = {"page": "export", "scenario": shown, "panels": list(panels), "step": step,
            "config": doc["scenario"], "predict": predict,
            "lesson": callouts or {"callouts": []}}
    a = export_assets(static)
    return templates.get_template("export.html").render(
        scenario=shown, panels=panels, embed=True, features={},
        boot_json=script_json(boot), trace_b64=packed, css=a["css"], theme_js=a["theme"],
        modules_json=script_json(a["modules"]), entry=EXPORT_ENTRY,
        theme=theme if theme in ("light", "dark") else None)


def export_page(key, options: dict) -> tuple[str, str, list[str]]:
    """The exported lesson page of run `key` (runs in a build worker): its HTML, the file name's
    stem and the run's bugs. A run past `EXPORT_MAX_STEPS` is a `ParamError`."""
    run, _ = build_run(key)
    if run.total_steps > EXPORT_MAX_STEPS:
        raise ParamError("tiles", f"this run has more than {EXPORT_MAX_STEPS:,} steps; an "
                                  f"exported lesson holds at most {EXPORT_MAX_STEPS:,}")
    scenario = scenario_of(key.scenario or None, key.source)
    doc = run.document(1, run.total_steps, True)
    html = standalone_page(scenario, doc, **options)
    stem = scenario.id or f"pipeline-{scenario.source_sha256[:12]}"
    return html, stem, sorted(doc["scenario"]["bugs"])


def install(app: FastAPI, page, static_dir: Path, templates: Jinja2Templates) -> None:
    """Mount the lesson, export and barrier routes (`page` renders a template with its boot)."""

    @app.get("/lessons/{scenario_id}", include_in_schema=False)
    def lesson_json(scenario_id: str) -> JSONResponse:
        try:
            get_scenario(scenario_id)
        except KeyError:
            raise HTTPException(404, f"no scenario {scenario_id[:80]!r}") from None
        return JSONResponse(lesson(scenario_id))

    @app.get("/barrier", response_class=HTMLResponse, include_in_schema=False)
    def barrier_page(request: Request) -> HTMLResponse:
        return page(request, "barrier.html", boot={"page": "barrier"})

    async def export(scenario_id: str | None, source: str | None, params: dict, bugs,
                     schedule, *, step: int, panels: tuple, predict: bool, theme: str | None,
                     callouts: dict, title: str | None = None) -> Response:
        if source is None:
            try:
                get_scenario(scenario_id)
            except KeyError:
                raise HTTPException(404, f"no scenario {scenario_id[:80]!r}") from None
        else:
            check_size(source)
        key = await builds.run(source_key, source, scenario_id, params, bugs, schedule,
                               EXPORT_MAX_STEPS + 1)
        options = {"step": step, "panels": panels, "predict": predict, "theme": theme,
                   "callouts": callouts, "title": title}
        html, stem, bug_names = await builds.run(export_page, key, options)
        name = "-".join([stem, *bug_names]) + ".html"
        return HTMLResponse(html, headers={"content-disposition": f'attachment; filename="{name}"',
                                           "cache-control": "no-store"})

    @app.get("/export/{scenario_id}", include_in_schema=False)
    async def export_lesson(request: Request, scenario_id: str) -> Response:
        """The embed's query; the built-in lesson's callouts (`callouts=0`: none)."""
        query = request.query_params
        for name in query:
            if name not in EXPORT_QUERY:
                raise ParamError(name, f"unknown query parameter {name[:40]!r}; known: "
                                       f"{', '.join(sorted(EXPORT_QUERY))}")
        params = {}
        for name in PARAM_NAMES:
            if name in query:
                if not re.fullmatch(r"\d{1,9}", query[name]):
                    raise ParamError(name, f"{name} must be a whole number")
                params[name] = int(query[name])
        schedule = parse_schedule(query.get("schedule"), query.get("seed"), query.get("moves"))
        step = query.get("step", "0")
        if not re.fullmatch(r"[0-9]{1,9}", step):  # str.isdigit takes "²"; int() refuses it
            raise ParamError("step", "step must be a whole number of at most 9 digits")
        panels = tuple(p for p in query.get("panels", "").split(",") if p in PANELS) or PANELS
        callouts = lesson(scenario_id) if query.get("callouts") != "0" else {"callouts": []}
        return await export(scenario_id, None, params, query.get("bugs", ""), schedule,
                            step=int(step), panels=panels,
                            predict=query.get("predict") == "1", theme=query.get("theme"),
                            callouts=callouts)

    @app.post("/export", include_in_schema=False)
    async def export_posted(body: ExportRequest) -> Response:
        """A lesson with the instructor's own callouts, pinned to this very run (a built-in,
        or a pipeline text)."""
        schedule = parse_schedule(body.schedule, body.seed, body.moves)
        panels = tuple(p for p in body.panels if p in PANELS) or PANELS
        if (body.source is None) == (body.scenario is None):
            raise ParamError("source", "give either `source` (a pipeline text) or `scenario` "
                                       "(a built-in id), not both")
        return await export(body.scenario, body.source, body.params, body.bugs, schedule,
                            step=body.step, panels=panels, predict=body.predict,
                            theme=body.theme, title=body.title,
                            callouts={"callouts": [c.model_dump() for c in body.callouts],
                                      "any_run": True})
