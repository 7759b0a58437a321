"""Pages for pipelines written in the browser, with no server-side store (issue 9, items 1-3).

- `GET /author`: the source editor (validated as you type, `POST /api/v1/pipelines/validate`),
  the parameter form and toggles its declarations generate, the inspector of its run
  (`POST /api/v1/traces`, played in memory) and the lesson-note editor beside the timeline.
- `GET /p` and `GET /embed/p?panels=...`: the inspector and the embed of an authored pipeline.
- `POST /author/validate`: what the editor asks as you type. The same answer as
  `POST /api/v1/pipelines/validate`, but a text that does not compile is a 200 with
  `{"valid": false, "detail": [...]}` (the same detail): a half-typed pipeline is the normal
  state of an editor, not a failed request, and Chromium logs every 4xx to the console.

The pipeline itself (source, parameters, toggles, schedule, step, notes) travels in the URL
fragment, deflated and base64url-encoded by static/js/share.js: the server never sees it, so
these routes only serve the page.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from app.api.encode import json_response
from app.api.routes.pipelines import SourceBody, check_size, describe_source
from app.api.work import builds
from app.scenarios import ParamError, PipelineError, catalogue

PANELS = ("agents", "barriers", "stages", "timeline", "diagnostics", "controls")


def install(app: FastAPI, page) -> None:
    """Mount /author, /p and /embed/p (`page` renders a template with its boot)."""

    @app.get("/author", response_class=HTMLResponse, include_in_schema=False)
    def author_page(request: Request) -> HTMLResponse:
        scenarios = [{"id": s.id, "title": s.title} for s in catalogue().values()]
        return page(request, "author.html", scenarios=scenarios, panels=PANELS,
                    boot={"page": "author", "start": scenarios[0]["id"] if scenarios else None})

    @app.post("/author/validate", include_in_schema=False)
    async def author_validate(body: SourceBody):
        check_size(body.source)
        try:
            return json_response(await builds.run(describe_source, body.source))
        except PipelineError as err:
            detail = {"loc": ["body", "source"], "msg": err.message, "type": "pipeline_error",
                      **err.as_dict()}
            if err.limit:
                detail["limit"] = err.limit
        except ParamError as err:
            detail = {"loc": ["body", err.field], "msg": err.message, "type": "value_error"}
        return JSONResponse({"valid": False, "detail": [detail]})

    @app.get("/p", response_class=HTMLResponse, include_in_schema=False)
    def pipeline_page(request: Request) -> HTMLResponse:
        return page(request, "pipeline.html", embed=False, panels=PANELS,
                    boot={"page": "pipeline", "panels": list(PANELS)})

    @app.get("/embed/p", response_class=HTMLResponse, include_in_schema=False)
    def pipeline_embed(request: Request, panels: str = "") -> HTMLResponse:
        shown = tuple(p for p in panels.split(",") if p in PANELS) or PANELS
        return page(request, "pipeline.html", embed=True, panels=shown,
                    boot={"page": "pipeline-embed", "panels": list(shown)})
