"""The FastAPI application: the JSON API under /api/v1, the pages, and the static UI."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI

from app.api import errors
from app.api.routes import mbarrier, scenarios, schema, traces

ROOT = Path(__file__).resolve().parent.parent


def api_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")
    for module in (scenarios, traces, mbarrier, schema):
        router.include_router(module.router)
    for module in _optional_routers():
        router.include_router(module.router)
    return router


def _optional_routers() -> list:
    """Routers of the subsystems that live in their own packages (sessions, check, replays)."""
    import importlib

    found = []
    for name in ("app.api.routes.sessions", "app.api.routes.check", "app.replay.routes"):
        if _exists(name):
            found.append(importlib.import_module(name))
    return found


def _exists(module: str) -> bool:
    """True when `module` is installed (its parent packages may be missing altogether)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def create_app() -> FastAPI:
    app = FastAPI(
        title="mbarrier-inspector",
        version="0.1.0",
        description="An inspector of GPU asynchronous pipelines: mbarriers, TMA copies and "
                    "producer/consumer rings, as deterministic step traces.",
    )
    errors.install(app)
    app.include_router(api_router())
    try:
        from app.web import pages
    except ImportError:
        pages = None
    if pages is not None and hasattr(pages, "install"):
        pages.install(app)
    return app


app = create_app()
