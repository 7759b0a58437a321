"""`GET /api/v1/replays...`: the GPU replays captured on real hardware, served like any trace.

Thin handlers over `app.replay.store`. Files are read and validated once per change of the
traces/ folder (keyed by modification times), and answers are JSON-encoded here in one pass. A
replay's verdict is its own `source.conformance`, computed when it was shipped
(`app.capture.ship`), not recomputed per request.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from app.api.encode import compact_json, json_response
from app.api.responses import errors
from app.export.perfetto import to_chrome_trace
from app.replay.catalogue import (
    list_replays,
    load_bandwidth,
    load_kernel,
    load_probes,
    load_replay,
)
from app.replay.store import NOT_TRACES, ReplayError
from app.resources import traces_dir

router = APIRouter(prefix="/replays", tags=["replays"])
logger = logging.getLogger(__name__)


def _http(exc: ReplayError) -> HTTPException:
    loc = ["path", "replay_id"] if exc.field == "replay_id" else ["file", exc.field]
    return HTTPException(status_code=exc.status,
                         detail=[{"loc": loc, "msg": exc.message, "type": "value_error"}])


@lru_cache(maxsize=32)
def _cached(replay_id: str, mtime_ns: int) -> dict:
    return load_replay(replay_id)


def _known(replay_id: str) -> bool:
    """Matched against the catalogue before any file access (a 300-byte id is a 404)."""
    if len(replay_id) > 100 or replay_id in NOT_TRACES:
        return False
    return any(p.stem == replay_id for p in traces_dir().glob("*.json"))


def _replay(replay_id: str) -> dict:
    if not _known(replay_id):
        raise HTTPException(404, [{"loc": ["path", "replay_id"], "type": "value_error",
                                   "msg": f"no replay {replay_id[:80]!r}"}])
    path = traces_dir() / f"{replay_id}.json"
    return _loaded(lambda: _cached(replay_id, max(_mtime(path), 0)))


@lru_cache(maxsize=2)
def _catalogue(stamp: tuple) -> bytes:
    return compact_json({"replays": list_replays()})


@router.get("", responses=errors())
def get_replays() -> Response:
    """The catalogue: one entry per shipped GPU trace (id, scenario, status, device, lesson)."""
    stamp = tuple((p.name, _mtime(p)) for p in sorted(traces_dir().glob("*.json")))
    return json_response(_catalogue(stamp))


def _mtime(path) -> int:
    """A file's modification time, or -1 for one removed since the folder was listed."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _loaded(load):
    """`load()`, a damaged file's surprise (a list where an object belongs) as a 422."""
    try:
        return load()
    except ReplayError as exc:
        raise _http(exc) from exc
    except Exception as exc:  # noqa: BLE001 - a corrupt file, named, never a 500
        logger.warning("a data file could not be served: %s", exc)
        raise _http(ReplayError("file", f"the file is corrupt ({type(exc).__name__})")) from exc


@router.get("/bandwidth", responses=errors(404, 422))
def get_bandwidth() -> dict:
    """GB/s of the TMA ring over stages x tile sizes beside cudaMemcpy ("why pipelining")."""
    return _loaded(load_bandwidth)


@router.get("/probes", responses=errors(404, 413, 422))
def get_probes() -> dict:
    """The tx-count probes measured on the GPU (traces/probes.json): single-thread probes, their
    rates over a whole launch beside the outcomes the model can reach, the piece size."""
    return _loaded(load_probes)


@router.get("/{replay_id}", responses=errors(404, 422))
def get_replay(
    replay_id: str,
    first: Annotated[int, Query(alias="from", ge=1)] = 1,
    last: Annotated[int | None, Query(alias="to", ge=0)] = None,
    snapshots: bool = True,
) -> Response:
    """One GPU trace (docs/trace-format.md), optionally a window of its steps."""
    doc = _replay(replay_id)
    total = doc["total_steps"]
    last = total if last is None else min(last, total)
    if first == 1 and last == total and snapshots:
        return json_response(doc)
    steps = doc["steps"][first - 1:last]
    if not snapshots:
        steps = [{k: v for k, v in s.items() if k != "snapshot"} for s in steps]
    window = {"from": first, "to": max(first - 1, last)}
    return json_response({**doc, "steps": steps, "window": window})


@router.get("/{replay_id}/conformance", responses=errors(404, 422))
def get_conformance(replay_id: str) -> dict:
    """The replay's verdict: does the engine, driven in the GPU's order, explain every
    observation (`matches`), and if not, the first step where it does not."""
    return _replay(replay_id)["source"]["conformance"]


@router.get("/{replay_id}/kernel", response_class=Response,
            responses=errors(404, 413, ok_body="the kernel's CUDA source", ok_type="text"))
def get_kernel(replay_id: str) -> Response:
    """The CUDA source of the kernel that ran (generated from the pipeline), as text."""
    if not _known(replay_id):
        raise HTTPException(404, [{"loc": ["path", "replay_id"], "type": "value_error",
                                   "msg": f"no replay {replay_id[:80]!r}"}])
    text = _loaded(lambda: load_kernel(replay_id))
    return Response(text, media_type="text/plain; charset=utf-8")


@router.get("/{replay_id}/perfetto", response_class=Response, responses=errors(404, 422))
def get_replay_perfetto(replay_id: str) -> Response:
    """The GPU trace in the Chrome Trace Event Format (docs/perfetto.md): steps at their
    %globaltimer nanoseconds, what the log does not time flagged `reconstructed`."""
    body = compact_json(to_chrome_trace(_replay(replay_id)))
    return Response(body, media_type="application/json", headers={
        "content-disposition": f'attachment; filename="{replay_id}.perfetto.json"'})
