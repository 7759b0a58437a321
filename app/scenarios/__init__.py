"""The built-in scenarios: data files (one JSON per scenario) and the validator that turns a user's
parameters and bug toggles into a `PipelineConfig`, naming the offending field on bad input.

Every size has a limit; the limits are in the data files, except the ones that follow from the
hardware (TMA sizes are multiples of 16 bytes, a tile is at most `MAX_CHUNKS` chunks so a snapshot
stays small).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.sim.config import BUG_TOGGLES, PipelineConfig

HERE = Path(__file__).parent
MAX_CHUNKS = 64
PARAM_NAMES = ("stages", "tiles", "tile_bytes", "chunk_bytes", "consumers")


class ParamError(ValueError):
    """Bad user input; `field` names what was wrong (e.g. `stages` or `bugs`)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    summary: str
    lesson: str
    pipeline: str
    parameters: dict
    bugs: tuple[str, ...]
    gpu: bool

    def as_dict(self) -> dict:
        return {
            "id": self.id, "title": self.title, "summary": self.summary, "lesson": self.lesson,
            "parameters": self.parameters, "bugs": list(self.bugs), "gpu": self.gpu,
        }

    def defaults(self) -> dict[str, int]:
        return {name: spec["default"] for name, spec in self.parameters.items()}

    def resolve(self, params: dict | None = None, bugs=()) -> PipelineConfig:
        """Validate `params` (missing ones take their default) and `bugs`; a `PipelineConfig`."""
        values = self.defaults()
        for name, raw in (params or {}).items():
            if raw is None:
                continue
            if name not in self.parameters:
                if name in PARAM_NAMES:
                    raise ParamError(name, f"{self.id} has no parameter {name!r}; it takes "
                                           f"{', '.join(self.parameters)}")
                raise ParamError(name, f"unknown parameter {name!r}")
            values[name] = _integer(name, raw, self.parameters[name])
        tile, chunk = values["tile_bytes"], values["chunk_bytes"]
        for name in ("tile_bytes", "chunk_bytes"):
            if values[name] % 16:
                raise ParamError(name, f"{name} must be a multiple of 16 (TMA copies move "
                                       f"16-byte units); got {values[name]}")
        if tile % chunk:
            raise ParamError("chunk_bytes", f"chunk_bytes ({chunk}) must divide tile_bytes "
                                            f"({tile})")
        if tile // chunk > MAX_CHUNKS:
            raise ParamError("chunk_bytes", f"a tile may have at most {MAX_CHUNKS} chunks; "
                                            f"{tile} / {chunk} = {tile // chunk}")
        bug_set = _bugs(self, bugs)
        return PipelineConfig(
            pipeline=self.pipeline,
            stages=values.get("stages", 1),
            tiles=values["tiles"],
            tile_bytes=tile,
            chunk_bytes=chunk,
            consumers=values.get("consumers", 1),
            bugs=bug_set,
        )

    def describe(self, cfg: PipelineConfig) -> dict:
        """The trace's `scenario` block (without the schedule) for a resolved configuration."""
        params = {"stages": cfg.stages, "tiles": cfg.tiles, "tile_bytes": cfg.tile_bytes,
                  "chunk_bytes": cfg.chunk_bytes, "consumers": cfg.consumers}
        return {"id": self.id, "params": {k: v for k, v in params.items() if k in self.parameters},
                "bugs": sorted(cfg.bugs)}


def _integer(name: str, raw, spec: dict) -> int:
    if isinstance(raw, bool):
        raise ParamError(name, f"{name} must be an integer")
    if isinstance(raw, str):
        if not raw.strip().lstrip("-").isdigit() or len(raw) > 12:
            raise ParamError(name, f"{name} must be an integer; got {raw[:40]!r}")
        raw = int(raw)
    if not isinstance(raw, int):
        raise ParamError(name, f"{name} must be an integer")
    if not spec["min"] <= raw <= spec["max"]:
        raise ParamError(name, f"{name} must be in {spec['min']}..{spec['max']}; got {raw}")
    return raw


def _bugs(scenario: Scenario, bugs) -> frozenset[str]:
    if isinstance(bugs, str):
        bugs = [b for b in bugs.split(",") if b.strip()]
    chosen = set()
    for bug in bugs:
        bug = bug.strip()
        if bug not in BUG_TOGGLES:
            raise ParamError("bugs", f"unknown bug toggle {bug[:60]!r}; known toggles: "
                                     f"{', '.join(BUG_TOGGLES)}")
        if bug not in scenario.bugs:
            raise ParamError("bugs", f"{scenario.id} has no use for {bug}; it takes "
                                     f"{', '.join(scenario.bugs)}")
        chosen.add(bug)
    if {"expect_tx_short", "expect_tx_long"} <= chosen:
        raise ParamError("bugs", "expect_tx_short and expect_tx_long exclude each other")
    return frozenset(chosen)


@cache
def catalogue() -> dict[str, Scenario]:
    """Every built-in scenario by id, in a stable order."""
    out = {}
    for path in sorted(HERE.glob("*.json")):
        data = json.loads(path.read_text())
        out[data["id"]] = Scenario(
            id=data["id"], title=data["title"], summary=data["summary"], lesson=data["lesson"],
            pipeline=data["pipeline"], parameters=data["parameters"], bugs=tuple(data["bugs"]),
            gpu=data.get("gpu", False),
        )
    order = ("single_barrier", "double_buffer_tma", "kloop_tma_mma", "proxy_fence_store")
    return {k: out[k] for k in sorted(out, key=lambda k: (order.index(k) if k in order else 99, k))}


def get(scenario_id: str) -> Scenario:
    try:
        return catalogue()[scenario_id]
    except KeyError:
        raise KeyError(scenario_id) from None
