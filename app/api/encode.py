"""JSON answers encoded in one pass: FastAPI's generic encoder costs far more than a run does."""

from __future__ import annotations

import json

from fastapi import Response


def compact_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def json_response(body: dict | bytes) -> Response:
    """A fresh response around `body` (a value, or bytes already encoded by `compact_json`)."""
    content = body if isinstance(body, bytes) else compact_json(body)
    return Response(content, media_type="application/json")
