"""Every bad input becomes a 4xx whose body names the field, in FastAPI's own 422 shape."""

from __future__ import annotations

import math

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import HTTPConnection
from starlette.routing import Match

from app.api.sources import NeedSource
from app.core.clients import TooMany
from app.core.pool import Busy
from app.scenarios import ParamError, PipelineError
from app.sim.machine import MoveError


def detail(location: str, field, message: str) -> list[dict]:
    """The API's one error body shape (FastAPI's 422): where, which field, what was wrong."""
    loc = [location, *field] if isinstance(field, tuple | list) else [location, field]
    return [{"loc": loc, "msg": message, "type": "value_error"}]


def field_error(location: str, field, message: str, status: int = 422) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail(location, field, message)})


def fail(status: int, location: str, field, message: str) -> HTTPException:
    """An HTTP error to raise, in the same shape as `field_error` (a 503 says when to retry)."""
    headers = {"Retry-After": "5"} if status == 503 else None
    return HTTPException(status, detail(location, field, message), headers=headers)


def too_many(exc: TooMany) -> JSONResponse:
    return JSONResponse(status_code=429, headers={"Retry-After": str(exc.retry_after)},
                        content={"detail": detail("server", "rate",
                                                  f"{exc.what}: past this server's share for "
                                                  f"one client; retry after {exc.retry_after} s")})


def _query_names(dependant) -> set[str]:
    names, stack = set(), [dependant]
    while stack:
        current = stack.pop()
        names |= {p.alias for p in current.query_params}
        stack.extend(current.dependencies)
    return names


async def known_query(connection: HTTPConnection) -> None:
    """A query parameter the route does not take is a 422 naming it (a misspelt `seed` would
    otherwise be silently ignored). Async: a plain function would cost a thread hop a request."""
    route = connection.scope.get("route")
    if connection.scope["type"] != "http" or not connection.query_params or route is None:
        return
    known = _query_names(route.dependant)
    for name in connection.query_params:
        if name not in known:
            raise fail(422, "query", name[:40], f"unknown query parameter {name[:40]!r}; known: "
                                                f"{', '.join(sorted(known)) or 'none'}")


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app, scope) -> list[str]:
    """Every method some route of the path takes, found by asking the routes with each method
    (an included router answers for its own routes)."""
    out = set()
    for route in app.router.routes:
        out |= {m for m in METHODS
                if route.matches({**scope, "method": m})[0] is Match.FULL}
    return sorted(out)


MAX_ERRORS = 20
"""Validation errors listed in one 422 (`errors_total` counts them all): a body of 10,000 bad
items is not answered with 10,000 errors."""
MAX_ECHO = 200
"""Longest `input` echoed back in a validation error; a 10,000-op body is not sent back whole."""


def _name_the_field(error: dict) -> dict:
    """Pydantic's tagged-union errors stop at the list item; name the tag field (`op`) too."""
    error = dict(error)
    if error.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        tag = str(error.get("ctx", {}).get("discriminator", "")).strip("'")
        if tag:
            error["loc"] = [*error["loc"], tag]
    if len(repr(error.get("input", ""))) > MAX_ECHO:
        error.pop("input", None)
    return error


def _json_safe(value):
    """NaN and infinities (JSON allows `NaN` in, but not out) echoed back as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        every = exc.errors()
        errors = [_name_the_field(e) for e in every[:MAX_ERRORS]]
        content = {"detail": _json_safe(jsonable_encoder(errors))}
        if len(every) > MAX_ERRORS:  # the first ones, and how many there were
            content["errors_total"] = len(every)
        return JSONResponse(status_code=422, content=content)

    @app.exception_handler(ParamError)
    async def _param_error(request: Request, exc: ParamError) -> JSONResponse:
        location = "body" if request.method in ("POST", "PUT") else "query"
        return field_error(location, exc.field, exc.message)

    @app.exception_handler(PipelineError)
    async def _pipeline_error(request: Request, exc: PipelineError) -> JSONResponse:
        location = "body" if request.method in ("POST", "PUT") else "query"
        detail = {"loc": [location, "source"], "msg": exc.message, "type": "pipeline_error",
                  **exc.as_dict()}
        if exc.limit:
            detail["limit"] = exc.limit
        return JSONResponse(status_code=422, content={"detail": [detail]})

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every route of the path, not only the one that refused
            given = {m.strip() for m in headers.get("Allow", "").split(",") if m.strip()}
            headers["Allow"] = ", ".join(sorted(given | set(
                allowed_methods(request.app, request.scope))))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=headers)

    @app.exception_handler(TooMany)
    async def _too_many(request: Request, exc: TooMany) -> JSONResponse:
        return too_many(exc)

    @app.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy) -> JSONResponse:
        return JSONResponse(status_code=503, headers={"Retry-After": str(exc.retry_after)},
                            content={"detail": detail("server", "busy", str(exc))})

    @app.exception_handler(NeedSource)
    async def _need_source(request: Request, exc: NeedSource) -> JSONResponse:
        return JSONResponse(status_code=409, content={
            "need_source": exc.sha256,
            "detail": [{"loc": ["path", "session_id"], "type": "need_source",
                        "msg": "this server does not have the session's pipeline text; post it "
                               "to /api/v1/pipelines/sources and try again"}]})

    @app.exception_handler(MoveError)
    async def _move_error(request: Request, exc: MoveError) -> JSONResponse:
        return field_error("body", "agent", str(exc), status=409)
