"""The FastAPI application: the JSON API under /api/v1, the pages, and the static UI."""

from __future__ import annotations

import gc
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI
from starlette_compress import CompressMiddleware, remove_compress_type

from app.api import docs, errors, work
from app.api.errors import known_query
from app.api.responses import add_common_responses
from app.api.routes import (
    check,
    health,
    mbarrier,
    pipelines,
    scenarios,
    schema,
    sessions,
    traces,
)
from app.core.security import Guard, SessionKeyError
from app.replay import routes as replays
from app.web import pages


def api_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1", dependencies=[Depends(known_query)])
    for module in (scenarios, traces, pipelines, mbarrier, schema, sessions, check, replays,
                   health):
        router.include_router(module.router)
    return router


@asynccontextmanager
async def lifespan(app: FastAPI):
    """The session key is read (or made) first: a server that cannot sign ids does not start.
    Worker pools start on first use; at shutdown their processes are stopped. What was
    imported until now lives as long as the process: frozen out of the cyclic collector, so that a
    full collection (which stops every stream) scans only what requests created."""
    from app.api.token import _key

    try:
        _key()  # a data folder or key file that stands in the way stops the start, named
    except SessionKeyError as err:
        raise RuntimeError(f"mbarrier-inspector cannot start: {err}") from None
    gc.collect()
    gc.freeze()
    yield
    work.shutdown()


remove_compress_type("text/event-stream")
"""Streams stay plain: a played frame is small, and its compressor's CPU is the server's
scarcest resource with a class playing; static assets and JSON answers are compressed."""


def create_app() -> FastAPI:
    app = FastAPI(
        title="mbarrier-inspector",
        version="0.1.0",
        description="An inspector of GPU asynchronous pipelines: mbarriers, TMA copies and "
                    "producer/consumer rings, as deterministic step traces.",
        docs_url=None, redoc_url=None, lifespan=lifespan,
    )
    errors.install(app)
    app.include_router(api_router())
    docs.install(app)
    pages.install(app)
    app.add_middleware(CompressMiddleware, minimum_size=1024)
    app.add_middleware(Guard)
    add_common_responses(app)
    return app


app = create_app()
