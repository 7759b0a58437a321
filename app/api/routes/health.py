"""`GET /api/v1/health`: whether this process can serve, for a load balancer or a container's
health check. It signs with the session key it started with; the check reads the key again as a
new process would (the key file may have been removed or damaged since), and looks at the
worker pools and the shared memory they need."""

from __future__ import annotations

import os

from fastapi import APIRouter, Response

from app.api.encode import compact_json
from app.api.responses import errors
from app.api.work import builds, checks
from app.core.config import settings
from app.core.security import SessionKeyError, session_key

router = APIRouter(prefix="/health", tags=["health"])

SHM = "/dev/shm"
SHM_LOW_BYTES = 8 << 20
"""Free shared memory below which a worker pool may fail to start."""


def _session_store() -> tuple[bool, str]:
    from app.api.token import _key

    try:
        fresh = session_key(settings)
    except SessionKeyError as err:
        return False, str(err)
    if fresh != _key():
        return False, ("the session key changed since this process started (the key file was "
                       "replaced): ids it issues are refused by processes started since")
    return True, "ids are signed with the key every process reads"


def _pools() -> tuple[bool, str]:
    broken = [p.name for p in (checks, builds)
              if p.executor is not None and getattr(p.executor, "_broken", False)]
    if broken:
        return False, f"broken worker pool: {', '.join(broken)} (the next job restarts it)"
    return True, f"{checks.running} checks and {builds.running} builds running or queued"


def _shared_memory() -> tuple[bool, str]:
    try:
        stat = os.statvfs(SHM)
    except OSError:
        return True, f"no {SHM} (not Linux): nothing to check"
    free = stat.f_bavail * stat.f_frsize
    if free < SHM_LOW_BYTES:
        return False, f"{SHM} has {free >> 20} MiB free: worker pools may not start"
    return True, f"{SHM} has {free >> 20} MiB free"


@router.get("", response_class=Response, responses=errors(503, ok_body="every check passed"))
async def health() -> Response:
    """`{"status": "ok" | "failing", "checks": {name: {"ok", "detail"}}}`; 503 when failing."""
    results = {name: dict(zip(("ok", "detail"), check(), strict=True)) for name, check in
               (("session_store", _session_store), ("pools", _pools),
                ("shared_memory", _shared_memory))}
    ok = all(r["ok"] for r in results.values())
    body = compact_json({"status": "ok" if ok else "failing", "checks": results})
    return Response(body, 200 if ok else 503, media_type="application/json",
                    headers={"Cache-Control": "no-store"}
                    | ({} if ok else {"Retry-After": "30"}))
