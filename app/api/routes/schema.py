"""The published JSON Schema of trace format v1."""

from __future__ import annotations

import json
from functools import cache

from fastapi import APIRouter

from app.sim import SCHEMA_PATH

router = APIRouter(prefix="/schema", tags=["schema"])


@cache
def trace_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@router.get("/trace.json")
def get_trace_schema() -> dict:
    return trace_schema()
