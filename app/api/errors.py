"""Every bad input becomes a 4xx whose body names the field, in FastAPI's own 422 shape."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.scenarios import ParamError
from app.sim.machine import MoveError


def field_error(location: str, field: str, message: str, status: int = 422) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"detail": [{"loc": [location, field], "msg": message, "type": "value_error"}]},
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(ParamError)
    async def _param_error(request: Request, exc: ParamError) -> JSONResponse:
        location = "body" if request.method in ("POST", "PUT") else "query"
        return field_error(location, exc.field, exc.message)

    @app.exception_handler(MoveError)
    async def _move_error(request: Request, exc: MoveError) -> JSONResponse:
        return field_error("body", "agent", str(exc), status=409)
