"""The catalogue of shipped GPU replays under traces/: listing them, loading one (a replay, its
kernel's CUDA text, the tx-count probes, the bandwidth figures), each file read within its byte
limit and checked by app.replay.store before anyone renders it; a corrupt file is skipped from the
list (and logged) while the catalogue stays up."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from app.replay.store import (
    ID_PATTERN,
    KERNEL_MAX_BYTES,
    MAX_BYTES,
    NOT_TRACES,
    ReplayError,
    _need,
    validate_probes,
    validate_replay,
    validate_trace,
)
from app.resources import traces_dir

logger = logging.getLogger(__name__)


def _trace_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.json") if p.stem not in NOT_TRACES)


def _read_json(path: Path):
    """A JSON file of at most MAX_BYTES, or a ReplayError naming the file."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ReplayError("file", f"{path.name} is {size} bytes; the limit is {MAX_BYTES}", 413)
    try:
        return json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ReplayError("file", f"{path.name} is not valid JSON ({str(exc)[:200]})") from exc


def read_trace_file(path: Path) -> dict:
    """Read and validate one trace file, refusing oversized or malformed ones."""
    return _guarded(path, lambda: validate_trace(_read_json(path)))


def _guarded(path: Path, work):
    """`work()`, with anything a damaged file makes the checks trip over (a list where an
    object belongs, a file gone between listing and reading) as a `ReplayError` naming it."""
    try:
        return work()
    except ReplayError:
        raise
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - a corrupt file, not a bug here
        raise ReplayError("file", f"{path.name} is corrupt ({type(exc).__name__}: "
                                  f"{str(exc)[:200]})") from exc


def summary(replay_id: str, doc: dict) -> dict:
    """What the catalogue shows for one replay: `status` is how the GPU's run ended."""
    source = doc["source"]
    c = source["conformance"]
    kinds: dict[str, int] = {}
    for d in doc["diagnostics"]:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    device = source.get("device") or {}
    return {
        "id": replay_id,
        "title": source.get("title") or replay_id,
        "pipeline": doc["scenario"]["id"],
        "params": doc["scenario"]["params"],
        "bugs": doc["scenario"]["bugs"],
        "status": (c.get("status") or {}).get("gpu") or doc["status"],
        "engine_status": doc["status"],
        "matches": c["matches"],
        "first_divergence": c["first_divergence"],
        "total_steps": doc["total_steps"],
        "diagnostics": kinds,
        "device": device.get("device"),
        "driver": device.get("driver"),
        "captured_at": source.get("captured_at"),
        "ctas": (source.get("ctas") or {}).get("launched"),
        "lesson": source.get("lesson"),
    }


def list_replays(directory: Path | None = None) -> list[dict]:
    """Every valid GPU trace under traces/, as catalogue entries sorted by id.

    A file that fails validation is listed with its error instead of hiding it.
    """
    out = []
    for path in _trace_files(directory or traces_dir()):
        try:
            doc = read_trace_file(path)
            if not isinstance(doc.get("source"), dict) or doc["source"].get("kind") != "gpu":
                continue
            out.append(_guarded(path, lambda d=doc, p=path: summary(p.stem, validate_replay(d))))
        except ReplayError as exc:
            logger.warning("replay %s not served: %s", path.name, exc)
            out.append({"id": path.stem, "error": str(exc)})
    return out


def _check_id(replay_id) -> None:
    """A replay id as the catalogue names files (404 otherwise: no path is built from it)."""
    if not isinstance(replay_id, str) or not ID_PATTERN.match(replay_id) \
            or replay_id in NOT_TRACES:
        raise ReplayError("replay_id", f"{str(replay_id)[:40]!r} is not a replay id", 404)


def load_replay(replay_id: str, directory: Path | None = None) -> dict:
    """The whole trace document of one replay; ReplayError (404 when unknown) otherwise."""
    _check_id(replay_id)
    path = (directory or traces_dir()) / f"{replay_id}.json"
    if not path.is_file():
        raise ReplayError("replay_id", f"no replay {replay_id!r}", 404)
    doc = read_trace_file(path)
    if not isinstance(doc.get("source"), dict) or doc["source"].get("kind") != "gpu":
        raise ReplayError("source.kind", f"{replay_id} is not a GPU trace", 404)
    return _guarded(path, lambda: validate_replay(doc))


def load_kernel(replay_id: str, directory: Path | None = None) -> str:
    """The CUDA source of the kernel that ran (traces/raw/gen_<id>.cu), bounded."""
    _check_id(replay_id)
    path = (directory or traces_dir()) / "raw" / f"gen_{replay_id}.cu"
    if not path.is_file():
        raise ReplayError("replay_id", f"no kernel text for {replay_id!r}", 404)
    size = path.stat().st_size
    if size > KERNEL_MAX_BYTES:
        raise ReplayError("file", f"{path.name} is {size} bytes; the limit is "
                                  f"{KERNEL_MAX_BYTES}", 413)
    return path.read_text(errors="replace")


def load_probes(directory: Path | None = None) -> dict:
    """The tx-count probes measured on the GPU (traces/probes.json), validated."""
    path = (directory or traces_dir()) / "probes.json"
    if not path.is_file():
        raise ReplayError("probes", "no tx-count probes shipped", 404)
    return validate_probes(_read_json(path))


def load_bandwidth(directory: Path | None = None) -> dict:
    """The shipped bandwidth measurements (traces/bandwidth.json)."""
    path = (directory or traces_dir()) / "bandwidth.json"
    if not path.is_file():
        raise ReplayError("bandwidth", "no bandwidth measurements shipped", 404)
    doc = json.loads(path.read_text())
    _need(doc.get("format") == "mbarrier-inspector/bandwidth", "format",
          "not a bandwidth document")
    return doc
