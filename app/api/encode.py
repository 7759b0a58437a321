"""JSON answers encoded in one pass: FastAPI's generic encoder costs far more than a run does."""

from __future__ import annotations

import json
import os

from fastapi import Response


def compact_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


WORKER = f"{os.getpid():x}"
"""This process's name in the `X-Worker` header: shows which worker answered (tests, ops)."""

IMMUTABLE = "public, max-age=86400, immutable"
"""A document that its URL fixes (a built-in's run and window: the engine is a pure function),
for as long as one server version runs: a day, never revalidated meanwhile."""
PRIVATE_IMMUTABLE = "private, max-age=86400, immutable"
"""The same for a session id's documents: fixed by the id, but the id is one user's."""


def json_response(body: dict | bytes, cache: str | None = None) -> Response:
    """A fresh response around `body` (a value, or bytes already encoded by `compact_json`),
    with `cache` as its Cache-Control."""
    content = body if isinstance(body, bytes) else compact_json(body)
    headers = {"Cache-Control": cache} if cache else None
    return Response(content, media_type="application/json", headers=headers)
