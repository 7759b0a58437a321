"""The status codes each route can answer with, and their bodies, for the OpenAPI document: every
error is `{"detail": [{"loc", "msg", "type"}]}` (FastAPI's 422 shape), or text for a route that
does not exist."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    detail: list[ErrorItem] | str


WHY = {
    400: "A malformed request (a header that is not a number)",
    404: "No such thing: an unknown scenario, replay or session id (a forged id too)",
    409: "The move is not possible now (the agent is blocked, the run has ended)",
    410: "The session expired (idle too long); a permalink recreates it",
    413: "The body is larger than 1 MiB",
    415: "A POST with a body must be application/json; a body-less POST may not be a form",
    422: "A field is wrong: `loc` names it, `msg` says why",
    429: "Past this client's share (requests, build time, checks or streams): retry after "
         "`Retry-After` seconds",
    503: "Busy: every worker is taken; retry after `Retry-After` seconds",
}


def errors(*codes: int, ok: int = 200, ok_body: str = "the answer",
           ok_type: str = "json") -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: the success (`ok`) and each error code with its body."""
    media = {"sse": "text/event-stream", "text": "text/plain"}.get(ok_type, "application/json")
    schema = ({"type": "object", "properties": {k: {"type": "string"} for k in
                                               ("event", "data", "id", "retry")}}
              if ok_type == "sse" else {"type": "string"} if ok_type == "text"
              else {"type": "object"})
    out: dict[int | str, dict[str, Any]] = {
        ok: {"description": ok_body, "content": {media: {"schema": schema}}}}
    for code in codes:
        entry: dict[str, Any] = {"description": WHY[code], "model": ErrorBody}
        if code in (429, 503):
            entry["headers"] = {"Retry-After": {"schema": {"type": "integer"},
                                                "description": "seconds to wait"}}
        out[code] = entry
    return out


SESSION_ERRORS = errors(404, 410, 422, 503, ok_body="a session view")
JSON_ONLY = errors(400, 413, 415)
"""What any route with a JSON body can also answer (app.core.security.Guard)."""


def add_common_responses(app) -> None:
    """Every POST may also answer 400, 413 and 415, and every API route 429
    (`app.core.security.Guard`, `app.core.clients`)."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        ref = {"$ref": "#/components/schemas/ErrorBody"}
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values() if path.startswith("/api/") else ():
                operation["responses"].setdefault("429", {
                    "description": WHY[429], "content": {"application/json": {"schema": ref}},
                    "headers": {"Retry-After": {"schema": {"type": "integer"},
                                                "description": "seconds to wait"}}})
            post = operations.get("post")
            if post is None:
                continue
            for code in (400, 413, 415):
                post["responses"].setdefault(str(code), {
                    "description": WHY[code], "content": {"application/json": {"schema": ref}}})
        return schema

    app.openapi = openapi
