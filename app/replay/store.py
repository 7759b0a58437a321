"""Checking the shipped GPU replays under traces/ (app.replay.catalogue lists and loads them).

A replay is a generated kernel's GPU log replayed through the engine in the GPU's order
(`app.capture.ship`, docs/gpu-capture.md): a trace document with `source.kind = "gpu"` whose
`source.conformance` says whether the engine explains every observation. Loading checks the file
before anyone renders it: its size, that it is JSON, its structure as docs/trace-format.md
describes it (and the published JSON Schema, app/sim/trace_schema.json), that steps
are numbered in order, and the replay's own fields (conformance, launch figures, lesson). Every
refusal is a `ReplayError` that names the field at fault, so a hand-edited file fails with a
sentence, not a stack trace. The tx-count probes (traces/probes.json) are checked the same way.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from app.sim import SCHEMA_PATH

MAX_BYTES = 2 * 1024 * 1024
"""Largest trace file served (the shipped ones stay under 750 KB)."""
KERNEL_MAX_BYTES = 512 * 1024
"""Largest kernel text served beside a replay (the generated ones are about 33 KB)."""
PROBES_FORMAT = "mbarrier-inspector/tx-probes"

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,99}$")
NOT_TRACES = {"bandwidth", "probes"}


@lru_cache(maxsize=1)
def trace_schema() -> dict:
    """The published trace schema (app/sim/trace_schema.json), which the engine ships."""
    return json.loads(SCHEMA_PATH.read_text())


def _schema_enum(*path: str) -> frozenset[str]:
    """The names an `enum` of the trace schema lists, at `$defs` / `path`."""
    node = trace_schema()["$defs"]
    for key in path:
        node = node[key]
    return frozenset(node["enum"])


EVENT_KINDS = _schema_enum("event", "properties", "kind")
DIAGNOSTIC_KINDS = _schema_enum("diagnostic", "properties", "kind")
STATUSES = _schema_enum("status")
"""The event and diagnostic kinds and the run statuses the trace schema names: derived from it,
so a kind the engine gains is known here once the schema lists it."""


class ReplayError(ValueError):
    """A replay that cannot be served; `field` names where the file is wrong."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


# ------------------------------------------------------------------------------- structure


MOVERS = {"tma", "tensor_core", "cp.async", "st.async", "red.async"}
"""The engine's movers that are no agent of the program (app/sim/families: copies, the tensor
core, the cp.async copies' arrive, st.async / red.async landings)."""

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
    agents = {a.get("name") for a in doc["layout"]["agents"]} | MOVERS
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
    errors = schema_errors(doc, trace_schema())
    if errors:
        raise ReplayError(errors[0][0], errors[0][1])
    return doc


def _text(value, field: str) -> str:
    _need(isinstance(value, str), field, "must be text")
    return value


def validate_replay(doc) -> dict:
    """A GPU replay: a valid trace whose `source` carries the replay's verdict
    (`conformance.matches`, `first_divergence`, its figures) and, where present, the launch
    figures, the pipeline text, the title and the lesson."""
    validate_trace(doc)
    source = doc["source"]
    _need(source["kind"] == "gpu", "source.kind", "is not gpu")
    c = _obj(source.get("conformance"), "source.conformance",
             ("matches", "first_divergence", "observations_checked"))
    _need(isinstance(c["matches"], bool), "source.conformance.matches", "must be true or false")
    first = c["first_divergence"]
    if first is not None:
        _obj(first, "source.conformance.first_divergence", ("step", "why"))
        _int(first["step"], "source.conformance.first_divergence.step", 1)
        _text(first["why"], "source.conformance.first_divergence.why")
    _need(c["matches"] == (first is None), "source.conformance.first_divergence",
          "must be null exactly when matches is true")
    for key in ("observations_checked", "landings_inferred", "landings_held", "reordered",
                "gpu_records"):
        if key in c:
            _int(c[key], f"source.conformance.{key}", 0)
    for key in ("pipeline", "title", "lesson", "id"):
        if source.get(key) is not None:
            _text(source[key], f"source.{key}")
    if source.get("ctas") is not None:
        ctas = _obj(source["ctas"], "source.ctas", ("launched", "outcomes", "agents"))
        _int(ctas["launched"], "source.ctas.launched", 0)
        for key, value in _obj(ctas["outcomes"], "source.ctas.outcomes").items():
            _int(value, f"source.ctas.outcomes.{key}", 0)
        _need(isinstance(ctas["agents"], list), "source.ctas.agents", "must be a list")
    if source.get("device") is not None:
        _obj(source["device"], "source.device")
    return doc


def validate_probes(doc) -> dict:
    """traces/probes.json: the format and version, and the shape of what it holds where present
    (single-thread probes, the rows measured at scale, the granularity, reuse before a wait)."""
    _obj(doc, "probes", ("format", "version"))
    _need(doc["format"] == PROBES_FORMAT, "format", "not a tx-probes document")
    _need(doc["version"] in (1, 2, 3), "version",
          f"version {doc['version']!r} is not 1, 2 or 3")
    if doc.get("probes") is not None:
        _need(isinstance(doc["probes"], list), "probes", "must be a list")
        for i, probe in enumerate(doc["probes"]):
            _obj(probe, f"probes[{i}]", ("probe",))
            _text(probe["probe"], f"probes[{i}].probe")
    scale = doc.get("scale")
    if scale is not None:
        _obj(scale, "scale", ("rows",))
        _need(isinstance(scale["rows"], list), "scale.rows", "must be a list")
        for i, row in enumerate(scale["rows"]):
            f = f"scale.rows[{i}]"
            _obj(row, f, ("probe",))
            _text(row["probe"], f"{f}.probe")
            for key in ("phases", "completed", "early", "hung", "trapped", "announced"):
                if row.get(key) is not None:
                    _int(row[key], f"{f}.{key}", 0)
            if row.get("rates") is not None:
                for key, value in _obj(row["rates"], f"{f}.rates").items():
                    _need(isinstance(value, (int, float)) and not isinstance(value, bool)
                          and 0 <= value <= 1, f"{f}.rates.{key}", "must be a fraction")
            if row.get("model") is not None:
                model = _obj(row["model"], f"{f}.model")
                if model.get("reachable") is not None:
                    _need(isinstance(model["reachable"], list)
                          and all(isinstance(k, str) for k in model["reachable"]),
                          f"{f}.model.reachable", "must be a list of outcome names")
    for key in ("granularity", "reuse_before_wait", "device"):
        if doc.get(key) is not None:
            _obj(doc[key], key)
    for key in ("no_complete", "remote_after_exit"):  # version 3
        if doc.get(key) is None:
            continue
        part = _obj(doc[key], key, ("rows",))
        _need(isinstance(part["rows"], list), f"{key}.rows", "must be a list")
        for i, row in enumerate(part["rows"]):
            f = f"{key}.rows[{i}]"
            _obj(row, f, ("probe",))
            _text(row["probe"], f"{f}.probe")
            for name in ("silicon",):
                if row.get(name) is not None:
                    _need(isinstance(row[name], list)
                          and all(isinstance(k, str) for k in row[name]),
                          f"{f}.{name}", "must be a list of outcome names")
            if row.get("endings") is not None:
                for name, value in _obj(row["endings"], f"{f}.endings").items():
                    _int(value, f"{f}.endings.{name}", 0)
            if row.get("model") is not None:
                model = _obj(row["model"], f"{f}.model")
                if model.get("reachable") is not None:
                    _need(isinstance(model["reachable"], list)
                          and all(isinstance(k, str) for k in model["reachable"]),
                          f"{f}.model.reachable", "must be a list of outcome names")
    return doc


# ------------------------------------------------------------------------ the JSON Schema


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
    """A small JSON Schema check (the keywords our schema uses): [(path, message), ...].

    Not jsonschema: on the shipped replays it took 0.26 s of CPU a file against this walk's
    0.05 s (measured 2026-12-02), and every server process checks all of them when it lists
    the catalogue. tests/replay holds this walk to jsonschema on every shipped file."""
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
