"""The FastAPI application: the JSON API under /api/v1, the pages, and the static UI."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from app.api import errors
from app.api.routes import check, mbarrier, pipelines, scenarios, schema, sessions, traces
from app.replay import routes as replays
from app.web import pages


def api_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")
    for module in (scenarios, traces, pipelines, mbarrier, schema, sessions, check, replays):
        router.include_router(module.router)
    return router


def create_app() -> FastAPI:
    app = FastAPI(
        title="mbarrier-inspector",
        version="0.1.0",
        description="An inspector of GPU asynchronous pipelines: mbarriers, TMA copies and "
                    "producer/consumer rings, as deterministic step traces.",
    )
    errors.install(app)
    app.include_router(api_router())
    pages.install(app)
    return app


app = create_app()
