"""The shipped GPU traces under traces/: listing them, loading one, and refusing corrupt files.

A replay is one trace file captured on a GPU (`source.kind = "gpu"`, docs/gpu-capture.md). Loading
checks the file before anyone renders it: its size, that it is JSON, its structure as
docs/trace-format.md describes it (and the published JSON Schema, app/sim/trace_schema.json, when
present), and that steps are numbered in order. Every refusal is a `ReplayError` that names the
field at fault, so a hand-edited file fails with a sentence, not a stack trace.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from app.resources import traces_dir
from app.sim import SCHEMA_PATH

MAX_BYTES = 2 * 1024 * 1024
"""Largest trace file served (the shipped ones stay under 1 MB)."""

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,99}$")
NOT_TRACES = {"bandwidth", "probes"}

EVENT_KINDS = {
    "init", "arrive", "expect_tx", "complete_tx", "phase_completed", "wait_returned",
    "wait_timeout", "tma_issued", "chunk_landed", "chunk_stored", "smem_read", "smem_write",
    "proxy_fence", "bulk_commit", "bulk_wait_returned", "mma_issued", "mma_done", "mma_commit",
    "register", "tmem_read", "trap", "store_complete", "tx_held", "wait_pending", "inval",
}
DIAGNOSTIC_KINDS = {
    "stale_wait", "partial_read", "stale_read", "overwrite", "deadlock", "tx_overflow",
    "tx_underflow", "over_arrival", "proxy_fence_missing", "tx_mismatch", "reuse_before_wait",
    "store_not_visible", "tcgen05_ld_race", "stale_token", "undefined_behavior",
    "hardware_trap", "divergence",
}
"""The event and diagnostic kinds of the trace schema (app/sim/trace_schema.json), which the
engine's traces use; tests/replay/test_gpu_order.py keeps them equal."""
STATUSES = {"running", "done", "deadlock", "undefined_behavior", "step_limit", "hardware_trap"}


class ReplayError(ValueError):
    """A replay that cannot be served; `field` names where the file is wrong."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


# ------------------------------------------------------------------------------- structure


def _need(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise ReplayError(field, message)


def _obj(value, field: str, keys: tuple[str, ...] = ()) -> dict:
    _need(isinstance(value, dict), field, "must be an object")
    for key in keys:
        _need(key in value, f"{field}.{key}", "is missing")
    return value


def _int(value, field: str, minimum: int | None = None) -> int:
    _need(isinstance(value, int) and not isinstance(value, bool), field, "must be an integer")
    if minimum is not None:
        _need(value >= minimum, field, f"must be at least {minimum}")
    return value


def _diagnostic(d, field: str) -> None:
    _obj(d, field, ("kind", "step", "agents", "message"))
    _need(d["kind"] in DIAGNOSTIC_KINDS, f"{field}.kind", f"unknown diagnostic {d['kind']!r}")
    _int(d["step"], f"{field}.step", 0)
    _need(isinstance(d["message"], str) and d["message"], f"{field}.message", "must be text")


def _snapshot(s, field: str) -> None:
    _obj(s, field, ("step", "status", "barriers", "stages", "agents", "tma", "bulk_groups",
                    "tensor_core"))
    _need(s["status"] in STATUSES, f"{field}.status", f"unknown status {s['status']!r}")
    for i, b in enumerate(s["barriers"]):
        f = f"{field}.barriers[{i}]"
        _obj(b, f, ("name", "phase", "parity", "pending_arrivals", "expected_arrivals",
                    "tx_count", "valid"))
        _int(b["phase"], f"{f}.phase", 0)
        _need(b["parity"] in (0, 1), f"{f}.parity", "must be 0 or 1")
        _need(b["parity"] == b["phase"] % 2, f"{f}.parity", "must be phase mod 2")
    for i, a in enumerate(s["agents"]):
        f = f"{field}.agents[{i}]"
        _obj(a, f, ("name", "pc", "line", "iteration", "registers", "status", "waiting_on"))
        _need(a["status"] in ("running", "waiting", "done"), f"{f}.status", "unknown status")


def validate_trace(doc) -> dict:
    """Check a trace document's structure (docs/trace-format.md); returns it or raises."""
    _obj(doc, "trace", ("format", "version", "source", "scenario", "layout", "initial", "steps",
                        "window", "total_steps", "status", "diagnostics"))
    _need(doc["format"] == "mbarrier-inspector/trace", "format", "not an mbarrier-inspector trace")
    _need(doc["version"] == 1, "version", f"version {doc['version']!r} is not 1")
    source = _obj(doc["source"], "source", ("kind",))
    _need(source["kind"] in ("gpu", "simulation"), "source.kind", "must be gpu or simulation")
    scenario = _obj(doc["scenario"], "scenario", ("id", "params", "bugs", "schedule"))
    for key, value in _obj(scenario["params"], "scenario.params").items():
        _int(value, f"scenario.params.{key}")
    _obj(doc["layout"], "layout", ("barriers", "stages", "agents"))
    _snapshot(doc["initial"], "initial")
    _need(doc["status"] in STATUSES, "status", f"unknown status {doc['status']!r}")
    steps = doc["steps"]
    _need(isinstance(steps, list), "steps", "must be a list")
    window = _obj(doc["window"], "window", ("from", "to"))
    first = _int(window["from"], "window.from", 1)
    total = _int(doc["total_steps"], "total_steps", 0)
    _need(window["to"] <= total, "window.to", "is past total_steps")
    agents = {a.get("name") for a in doc["layout"]["agents"]} | {"tma", "tensor_core"}
    for i, step in enumerate(steps):
        f = f"steps[{i}]"
        _obj(step, f, ("step", "agent", "op", "line", "operands", "events", "diagnostics"))
        _need(step["step"] == first + i, f"{f}.step", f"expected step {first + i}")
        _need(step["agent"] in agents, f"{f}.agent", f"unknown agent {step['agent']!r}")
        _need(isinstance(step["op"], str), f"{f}.op", "must be text")
        _obj(step["operands"], f"{f}.operands")
        for k, e in enumerate(step["events"]):
            _obj(e, f"{f}.events[{k}]", ("kind",))
            _need(e["kind"] in EVENT_KINDS, f"{f}.events[{k}].kind",
                  f"unknown event {e['kind']!r}")
        for k, d in enumerate(step["diagnostics"]):
            _diagnostic(d, f"{f}.diagnostics[{k}]")
        if "snapshot" in step:
            _snapshot(step["snapshot"], f"{f}.snapshot")
        if source["kind"] == "gpu":
            _int(step.get("time_ns"), f"{f}.time_ns")
    for i, d in enumerate(doc["diagnostics"]):
        _diagnostic(d, f"diagnostics[{i}]")
    schema = trace_schema()
    if schema is not None:
        errors = schema_errors(doc, schema)
        if errors:
            raise ReplayError(errors[0][0], errors[0][1])
    return doc


# ------------------------------------------------------------------------ the JSON Schema


@lru_cache(maxsize=1)
def trace_schema() -> dict | None:
    """The published trace schema, if the engine ships one."""
    if not SCHEMA_PATH.exists():
        return None
    return json.loads(SCHEMA_PATH.read_text())


_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
    "number": (int, float),
}


def _is_type(value, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def schema_errors(value, schema: dict, root: dict | None = None, path: str = "trace",
                  limit: int = 5) -> list[tuple[str, str]]:
    """A small JSON Schema check (the keywords our schema uses): [(path, message), ...]."""
    root = root or schema
    errors: list[tuple[str, str]] = []

    def walk(v, s: dict, p: str) -> None:
        if len(errors) >= limit:
            return
        if "$ref" in s:
            ref = s["$ref"]
            node = root
            for part in ref.lstrip("#/").split("/"):
                node = node[part]
            walk(v, node, p)
            return
        if "const" in s and v != s["const"]:
            errors.append((p, f"must be {s['const']!r}"))
        if "enum" in s and v not in s["enum"]:
            errors.append((p, f"must be one of {s['enum']}"))
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(_is_type(v, t) for t in types):
                errors.append((p, f"must be of type {' or '.join(types)}"))
                return
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in s and v < s["minimum"]:
                errors.append((p, f"must be at least {s['minimum']}"))
            if "maximum" in s and v > s["maximum"]:
                errors.append((p, f"must be at most {s['maximum']}"))
        if isinstance(v, str) and "minLength" in s and len(v) < s["minLength"]:
            errors.append((p, "is too short"))
        if isinstance(v, dict):
            for key in s.get("required", []):
                if key not in v:
                    errors.append((f"{p}.{key}", "is missing"))
            props = s.get("properties", {})
            extra = s.get("additionalProperties", True)
            for key, item in v.items():
                if key in props:
                    walk(item, props[key], f"{p}.{key}")
                elif extra is False:
                    errors.append((f"{p}.{key}", "is not allowed"))
                elif isinstance(extra, dict):
                    walk(item, extra, f"{p}.{key}")
        if isinstance(v, list) and isinstance(s.get("items"), dict):
            for i, item in enumerate(v):
                walk(item, s["items"], f"{p}[{i}]")
        for key in ("allOf",):
            for sub in s.get(key, []):
                walk(v, sub, p)
        if "anyOf" in s or "oneOf" in s:
            options = s.get("anyOf", s.get("oneOf"))
            if not any(not schema_errors(v, sub, root, p, 1) for sub in options):
                errors.append((p, "matches none of the allowed shapes"))

    walk(value, schema, path)
    return errors


# ---------------------------------------------------------------------------- the catalogue


def _trace_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.json") if p.stem not in NOT_TRACES)


def read_trace_file(path: Path) -> dict:
    """Read and validate one trace file, refusing oversized or malformed ones."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ReplayError("file", f"{path.name} is {size} bytes; the limit is {MAX_BYTES}", 413)
    try:
        doc = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReplayError("file", f"{path.name} is not valid JSON ({exc})") from exc
    return validate_trace(doc)


def summary(replay_id: str, doc: dict) -> dict:
    """What the catalogue shows for one replay."""
    source = doc["source"]
    kinds: dict[str, int] = {}
    for d in doc["diagnostics"]:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    return {
        "id": replay_id,
        "scenario": doc["scenario"]["id"],
        "params": doc["scenario"]["params"],
        "bugs": doc["scenario"]["bugs"],
        "status": doc["status"],
        "total_steps": doc["total_steps"],
        "diagnostics": kinds,
        "device": source.get("device"),
        "driver": source.get("driver"),
        "cuda": source.get("cuda"),
        "captured_at": source.get("captured_at"),
        "logged_span_ns": source.get("logged_span_ns"),
        "conformance": source.get("conformance"),
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
        except ReplayError as exc:
            out.append({"id": path.stem, "error": str(exc)})
            continue
        if doc["source"].get("kind") == "gpu":
            out.append(summary(path.stem, doc))
    return out


def load_replay(replay_id: str, directory: Path | None = None) -> dict:
    """The whole trace document of one replay; ReplayError (404 when unknown) otherwise."""
    if not isinstance(replay_id, str) or not ID_PATTERN.match(replay_id) \
            or replay_id in NOT_TRACES:
        raise ReplayError("replay_id", f"{str(replay_id)[:40]!r} is not a replay id", 404)
    path = (directory or traces_dir()) / f"{replay_id}.json"
    if not path.is_file():
        raise ReplayError("replay_id", f"no replay {replay_id!r}", 404)
    doc = read_trace_file(path)
    if doc["source"].get("kind") != "gpu":
        raise ReplayError("source.kind", f"{replay_id} is not a GPU trace", 404)
    return doc


def load_bandwidth(directory: Path | None = None) -> dict:
    """The shipped bandwidth measurements (traces/bandwidth.json)."""
    path = (directory or traces_dir()) / "bandwidth.json"
    if not path.is_file():
        raise ReplayError("bandwidth", "no bandwidth measurements shipped", 404)
    doc = json.loads(path.read_text())
    _need(doc.get("format") == "mbarrier-inspector/bandwidth", "format",
          "not a bandwidth document")
    return doc
