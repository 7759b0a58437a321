"""The scenario catalogue: ids, lessons, parameters with ranges and defaults, bug toggles."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Response

from app.api.encode import compact_json, json_response
from app.api.responses import errors
from app.api.runs import scenario_or_404
from app.scenarios import catalogue

router = APIRouter(prefix="/scenarios", tags=["scenarios"])


@cache
def _catalogue() -> bytes:
    return compact_json({"scenarios": [s.as_dict() for s in catalogue().values()]})


@router.get("", response_class=Response, responses=errors(ok_body="the catalogue"))
async def list_scenarios() -> Response:
    """Encoded once per process: it is what every page asks for first."""
    return json_response(_catalogue())


@router.get("/{scenario_id}", responses=errors(404))
async def get_scenario(scenario_id: str) -> dict:
    return scenario_or_404(scenario_id).as_dict()
