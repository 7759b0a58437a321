"""The built-in scenarios, and scenarios made from a user's pipeline text.

A built-in is a pipeline file (`<id>.pipe`, run by the engine as written) beside a small JSON file
with its title, summary and lesson. Those of the group `real_bugs` reproduce a bug reported
upstream: the entry carries the report's `source_url` and its `summary` is one line about the
report (docs/lessons.md lists them). Nothing here knows what any scenario does: parameters, their
ranges and the bug toggles come from the pipeline text itself. `Scenario.resolve` validates a
user's parameters and toggles and names the offending field on bad input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.lang.compiler import (
    Pipeline,
    check_requires,
    instantiate,
    load,
    resolve_params,
)
from app.lang.errors import ParamError, PipelineError
from app.sim.config import BUG_TOGGLES, PipelineConfig

HERE = Path(__file__).parent

PARAM_NAMES = ("stages", "tiles", "tile_bytes", "chunk_bytes", "consumers", "k_blocks")
"""The built-ins' parameter names: what `GET /traces/{id}` accepts as query parameters
(tests/sim checks that it is the union of the catalogue's parameters)."""

GROUPS = ("scenarios", "real_bugs")
"""The catalogue's groups, in the order the home page shows them."""
SOURCE_URL = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/(issues|pull)/[0-9]+")
SUMMARY_MAX = 240

__all__ = ["GROUPS", "PARAM_NAMES", "ParamError", "PipelineError", "Scenario", "catalogue", "get",
           "from_source"]


@dataclass(frozen=True, eq=False)
class Scenario:
    id: str | None
    title: str
    summary: str
    lesson: str
    source: str
    gpu: bool = False
    gpu_note: str = ""
    """Why a simulation-only scenario has no real-GPU trace."""
    group: str = "scenarios"
    source_url: str = ""
    """The upstream report a `real_bugs` lesson reproduces."""

    @property
    def pipeline(self) -> Pipeline:
        return load(self.source)

    @property
    def parameters(self) -> dict:
        return self.pipeline.parameters()

    @property
    def bugs(self) -> tuple[str, ...]:
        return tuple(self.pipeline.bugs)

    @property
    def source_sha256(self) -> str:
        return self.pipeline.sha256

    def as_dict(self) -> dict:
        return {
            "id": self.id, "title": self.title, "summary": self.summary, "lesson": self.lesson,
            "parameters": self.parameters, "bugs": list(self.bugs),
            "toggles": self.pipeline.toggles(), "gpu": self.gpu, "gpu_note": self.gpu_note,
            "group": self.group, "source_url": self.source_url,
            "source_sha256": self.source_sha256, "source": self.source,
        }

    def defaults(self) -> dict[str, int]:
        return {name: spec["default"] for name, spec in self.parameters.items()}

    def resolve(self, params: dict | None = None, bugs=()) -> PipelineConfig:
        """Validate `params` (missing ones take their default) and `bugs`; a `PipelineConfig`.

        Raises `ParamError` naming the field, or `PipelineError` for a text that does not
        compile (with these parameters)."""
        chosen = self._bugs(bugs)
        pipeline = load(self.source, chosen)
        values = resolve_params(pipeline, params)
        check_requires(pipeline, values)
        key = tuple(sorted(values.items()))
        program = instantiate(pipeline, key)
        return PipelineConfig(program, pipeline.sha256, key, chosen)

    def _bugs(self, bugs) -> frozenset[str]:
        if isinstance(bugs, str):
            bugs = [b for b in bugs.split(",") if b.strip()]
        takes = self.bugs
        chosen = set()
        for bug in bugs:
            if not isinstance(bug, str):
                raise ParamError("bugs", "bug toggles are names")
            bug = bug.strip()
            if bug not in takes:
                who = self.id or "this pipeline"
                if bug in BUG_TOGGLES:
                    raise ParamError("bugs", f"{who} has no use for {bug}; it takes "
                                             f"{', '.join(takes) or 'none'}")
                raise ParamError("bugs", f"unknown bug toggle {bug[:60]!r}; {who} takes "
                                         f"{', '.join(takes) or 'none'}")
            chosen.add(bug)
        if {"expect_tx_short", "expect_tx_long"} <= chosen:
            raise ParamError("bugs", "expect_tx_short and expect_tx_long exclude each other")
        return frozenset(chosen)

    def describe(self, cfg: PipelineConfig) -> dict:
        """The trace's `scenario` block (without the schedule) for a resolved configuration."""
        values = dict(cfg.params)
        return {"id": self.id, "params": {name: values[name] for name in self.parameters},
                "bugs": sorted(cfg.bugs), "source_sha256": cfg.source_sha256}


def from_source(source: str) -> Scenario:
    """A scenario made from a user's pipeline text (checked: a `PipelineError` if it does not
    compile with its default parameters)."""
    scenario = Scenario(None, "Your pipeline", "", "", source)
    pipeline = scenario.pipeline
    instantiate(pipeline, tuple(sorted(resolve_params(pipeline, {}).items())))
    return scenario


def _entry(path: Path) -> Scenario:
    """One catalogue entry; a malformed one is the project's own error, named with its file."""
    data = json.loads(path.read_text())
    group = data.get("group", "scenarios")
    problems = []
    if group not in GROUPS:
        problems.append(f"group {group!r} is not one of {', '.join(GROUPS)}")
    url = data.get("source_url", "")
    if group == "real_bugs":
        if not SOURCE_URL.fullmatch(url):
            problems.append("a real bug names its upstream report: source_url "
                            "https://github.com/OWNER/REPO/issues/N (or /pull/N)")
        summary = data.get("summary", "")
        if not summary or "\n" in summary or len(summary) > SUMMARY_MAX:
            problems.append(f"summary is one line of at most {SUMMARY_MAX} characters")
    elif url:
        problems.append("source_url belongs to the real_bugs group")
    if problems:
        raise ValueError(f"{path.name}: {'; '.join(problems)}")
    return Scenario(
        id=data["id"], title=data["title"], summary=data["summary"], lesson=data["lesson"],
        source=(HERE / data["source"]).read_text(), gpu=data.get("gpu", False),
        gpu_note=data.get("gpu_note", ""), group=group, source_url=url,
    )


@cache
def catalogue() -> dict[str, Scenario]:
    """Every built-in scenario by id, in a stable order: each group in turn (GROUPS), then
    `order` within it."""
    out = []
    for path in sorted(HERE.glob("*.json")):
        scenario = _entry(path)
        order = json.loads(path.read_text()).get("order", 99)
        out.append((GROUPS.index(scenario.group), order, scenario.id, scenario))
    return {entry[2]: entry[3] for entry in sorted(out, key=lambda x: x[:3])}


def get(scenario_id: str) -> Scenario:
    try:
        return catalogue()[scenario_id]
    except KeyError:
        raise KeyError(scenario_id) from None
