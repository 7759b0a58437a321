"""The app the browser tests serve: exactly what `make run` serves (a factory, so the fixture can
start it in a uvicorn of its own)."""

from __future__ import annotations

from fastapi import FastAPI

from app.main import create_app


def create() -> FastAPI:
    return create_app()
