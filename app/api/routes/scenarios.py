"""The scenario catalogue: ids, lessons, parameters with ranges and defaults, bug toggles."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.runs import scenario_or_404
from app.scenarios import catalogue

router = APIRouter(prefix="/scenarios", tags=["scenarios"])


@router.get("")
def list_scenarios() -> dict:
    return {"scenarios": [s.as_dict() for s in catalogue().values()]}


@router.get("/{scenario_id}")
def get_scenario(scenario_id: str) -> dict:
    return scenario_or_404(scenario_id).as_dict()
