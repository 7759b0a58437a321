"""Turning user input into run keys: the path lookup of a scenario (over the one scenario lookup,
`app.api.runstore.find_scenario`) and the request models; the schedule parser is
`app.scenarios.schedules.parse_schedule`, which the command line shares without the web
stack."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from app.api.errors import fail
from app.api.runstore import find_scenario
from app.scenarios import PARAM_NAMES, ParamError, Scenario, catalogue


def scenario_or_404(scenario_id: str) -> Scenario:
    try:
        return find_scenario(scenario_id, "scenario_id")
    except ParamError as err:
        raise fail(404, "path", "scenario_id", err.message) from None


def _ranges() -> dict[str, tuple[int, int]]:
    """Each parameter's widest range over the catalogue (a scenario may allow less, and some
    rules join fields: a chunk divides its tile), so the OpenAPI bounds say what can pass."""
    out: dict[str, tuple[int, int]] = {}
    for scenario in catalogue().values():
        for name, spec in scenario.parameters.items():
            lo, hi = out.get(name, (spec["min"], spec["max"]))
            out[name] = (min(lo, spec["min"]), max(hi, spec["max"]))
    return out


PARAM_RANGES = _ranges()


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


Params = create_model(
    "Params", __base__=_Forbid,
    **{name: (Annotated[StrictInt, Field(ge=PARAM_RANGES[name][0], le=PARAM_RANGES[name][1])]
              | None, None) for name in PARAM_NAMES})
"""A scenario's parameters in a JSON body (absent or null: the scenario's default)."""


def param_query(name: str):
    lo, hi = PARAM_RANGES[name]
    return Annotated[int | None, Query(ge=lo, le=hi)]


def params_dict(params: BaseModel | dict) -> dict:
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if v is not None}
    return params.model_dump(exclude_none=True)
