"""A pipeline text, its parameters and its bug toggles.

`load(source, bugs)` parses the text, checks every bug toggle's patches and applies the chosen
ones (a toggle is an edit of the text, so the UI shows students the very code that fails);
`resolve_params` and `check_requires` check the values a run asks for.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache

from . import syntax
from .errors import ParamError, PipelineError
from .exprs import Scope, constant, text_of
from .limits import MAX_SOURCE_BYTES, PARAM_LIMIT
from .syntax import Agent, Bug, Param

BUILTIN_CONSTANTS = ("rank", "cta", "cluster_size")


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A checked pipeline text with its chosen bug toggles applied."""

    source: str
    sha256: str
    text: str
    """The text the engine runs: `source` with the chosen toggles' patches applied."""
    module: syntax.Module
    params: dict
    bugs: dict
    chosen: frozenset
    broken: dict = field(default_factory=dict)
    """Toggles whose patches do not find their text (say, after the same edit was made by
    hand): choosing one is an error; the rest of the pipeline runs."""
    element_edits: tuple = ()
    """The chosen patches scoped to one agent of an array (`in consumer[1]`): (bug, agent,
    index expression, start, end, new text) in `source`. They are not in `text`: that agent
    alone is compiled from `source` with them applied (`element_variant`)."""
    edits: tuple = ()
    """The chosen patches that apply everywhere: (start, end, new text) in `source`."""
    deleted: tuple = ()
    """(line in `text`, the original text, the comment) of each line a chosen toggle turned into
    a comment only: the engine never sees it, the UI shows it struck through."""

    def parameters(self) -> dict:
        """Each parameter's default, range and doc, as the API's catalogue shows them."""
        return {p.name: {"default": p.default, "min": p.low, "max": p.high, "doc": p.doc}
                for p in self.params.values()}

    def toggles(self) -> list[dict]:
        out = []
        for bug in self.bugs.values():
            entry = {"name": bug.name, "description": bug.doc}
            if bug.name in self.broken:
                entry["error"] = self.broken[bug.name].as_dict()
            out.append(entry)
        return out



def sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@lru_cache(maxsize=128)
def load(source: str, bugs: frozenset = frozenset()) -> Pipeline:
    """Parse `source`, check every toggle's patches, apply the chosen ones and parse again."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise PipelineError(f"the pipeline text is over {MAX_SOURCE_BYTES // 1024} KiB",
                            limit="source")
    module = syntax.parse(source)
    params = _params(module)
    toggles: dict[str, Bug] = {}
    edits: dict[str, list] = {}
    broken: dict[str, PipelineError] = {}
    for item in module.items:
        if isinstance(item, Bug):
            if item.name in toggles:
                raise PipelineError(f"bug toggle `{item.name}` is declared twice",
                                    item.pos.line, item.pos.column)
            toggles[item.name] = item
            try:
                edits[item.name] = _locate(source, module, item)
            except PipelineError as err:
                broken[item.name] = err
    for name in bugs:
        if name not in toggles:
            known = ", ".join(toggles) or "none"
            raise ParamError("bugs", f"unknown bug toggle {name[:60]!r}; this pipeline takes "
                                     f"{known}")
        if name in broken:
            raise broken[name]
    every = [(name, e) for name in sorted(bugs) for e in edits[name]]
    chosen = [e[:3] for _, e in every if e[3] is None]
    scoped = tuple((name, *e[3], *e[:3]) for name, e in every if e[3] is not None)
    _no_overlap(chosen + [e[3:] for e in scoped], bugs, elements=[e[3:] for e in scoped])
    text = _apply(source, chosen)
    patched = syntax.parse(text) if chosen else module
    return Pipeline(source, sha256(source), text, patched, params, toggles, frozenset(bugs),
                    broken, element_edits=scoped, edits=tuple(chosen),
                    deleted=_deleted_lines(source, text, sorted(chosen)))


def _no_overlap(spans: list, bugs, elements: list = ()) -> None:
    """Two chosen patches may not edit the same text (two patches of one agent's different
    elements may: each element gets its own)."""
    spans = sorted(spans, key=lambda e: e[0])
    for a, b in zip(spans, spans[1:], strict=False):
        if b[0] < a[1] and not (a in elements and b in elements):
            raise ParamError("bugs", "these bug toggles edit the same text: "
                                     f"{', '.join(sorted(bugs))}")


def _apply(source: str, edits) -> str:
    text = source
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text


def element_variant(pipeline: Pipeline, agent: str, count: int, rank: int, scope: Scope):
    """The text and syntax of agent `agent`'s element `rank` (of `count`) where chosen
    patches are scoped to it (`in agent[rank]`), else None."""
    mine = []
    for bug, name, index, start, end, new in pipeline.element_edits:
        if name != agent:
            continue
        k = constant(index, scope, "an agent's index")
        if not 0 <= k < count:
            raise ParamError("bugs", f"{bug} patches `{agent}[{k}]`, but `{agent}` has {count} "
                                     "agent(s)")
        if k == rank:
            mine.append((start, end, new))
    if not mine:
        return None
    _no_overlap([*pipeline.edits, *mine], pipeline.chosen)
    text = _apply(pipeline.source, [*pipeline.edits, *mine])
    module = _parse_variant(text)
    return text, next(a for a in module.items if isinstance(a, Agent) and a.name == agent)


@lru_cache(maxsize=64)
def _parse_variant(text: str) -> syntax.Module:
    return syntax.parse(text)


def _deleted_lines(source: str, text: str, chosen: list) -> tuple:
    """The lines of `text` that a patch left holding only a comment (`// BUG: ...`)."""
    out, shift = [], 0
    for start, end, new in chosen:
        at = start + shift
        shift += len(new) - (end - start)
        first = text.rfind("\n", 0, at) + 1
        last = text.find("\n", at + len(new))
        line = text[first:len(text) if last == -1 else last].strip()
        if not line.startswith("//"):
            continue
        o_first = source.rfind("\n", 0, start) + 1
        o_last = source.find("\n", max(end - 1, start))
        original = " ".join(part.strip() for part in
                            source[o_first:len(source) if o_last == -1 else o_last].splitlines()
                            if part.strip())
        out.append((text.count("\n", 0, at) + 1, original, line))
    return tuple(out)


def _params(module) -> dict[str, Param]:
    params: dict[str, Param] = {}
    for item in module.items:
        if not isinstance(item, Param):
            continue
        where = (item.pos.line, item.pos.column)
        if item.name in params:
            raise PipelineError(f"parameter `{item.name}` is declared twice", *where)
        if item.name in BUILTIN_CONSTANTS:
            raise PipelineError(f"`{item.name}` is a built-in name", *where)
        for value in (item.default, item.low, item.high):
            if abs(value) > PARAM_LIMIT:
                raise PipelineError(f"parameter values stay within ±{PARAM_LIMIT}", *where)
        if not item.low <= item.default <= item.high:
            raise PipelineError(f"the default {item.default} of `{item.name}` is outside "
                                f"{item.low}..{item.high}", *where)
        params[item.name] = item
    return params


def _locate(source: str, module, bug: Bug) -> list[tuple[int, int, str]]:
    """Where each patch of `bug` applies: exactly one occurrence in its scope, outside bugs."""
    fenced = [(b.pos.start, b.pos.end) for b in module.items if isinstance(b, Bug)]
    agents = {a.name: a for a in module.items if isinstance(a, Agent)}
    out = []
    for patch in bug.patches:
        where = (patch.pos.line, patch.pos.column)
        if not patch.old:
            raise PipelineError(f"bug `{bug.name}`: a patch needs text to find", *where)
        low, high = 0, len(source)
        element = None
        if patch.scope is not None:
            if patch.scope not in agents:
                raise PipelineError(f"bug `{bug.name}`: no agent `{patch.scope}`", *where)
            agent = agents[patch.scope]
            low, high = agent.pos.start, agent.pos.end
            if patch.element is not None:
                if agent.dim is None:
                    pos = patch.element.pos
                    raise PipelineError(f"bug `{bug.name}`: `{patch.scope}` is one agent, not "
                                        "an array", pos.line, pos.column,
                                        hint=f"write `in {patch.scope} replace ...`")
                element = (patch.scope, patch.element)
        found, at = [], source.find(patch.old, low)
        while at != -1 and at + len(patch.old) <= high:
            if not any(s <= at < e for s, e in fenced):
                found.append(at)
            at = source.find(patch.old, at + 1)
        if len(found) != 1:
            scope = f" in agent {patch.scope}" if patch.scope else ""
            if element is not None:
                scope = f" in agent {patch.scope}[{text_of(patch.element)}]"
            raise PipelineError(
                f"bug `{bug.name}`: {patch.old[:50]!r} occurs {len(found)} times{scope}; a "
                "patch must find its text exactly once", *where,
                hint="make the text longer, or scope it with `in AGENT replace ...`")
        out.append((found[0], found[0] + len(patch.old), patch.new, element))
    return out


def resolve_params(pipeline: Pipeline, raw: dict | None) -> dict[str, int]:
    """Every declared parameter's value: `raw` checked against its range, defaults elsewhere."""
    values = {name: p.default for name, p in pipeline.params.items()}
    for name, value in (raw or {}).items():
        if value is None:
            continue
        spec = pipeline.params.get(name)
        if spec is None:
            raise ParamError(name, f"unknown parameter {str(name)[:60]!r}; this pipeline takes "
                                   f"{', '.join(pipeline.params) or 'none'}")
        values[name] = _integer(name, value, spec)
    return values


def _integer(name: str, raw, spec: Param) -> int:
    if isinstance(raw, bool):
        raise ParamError(name, f"{name} must be an integer")
    if isinstance(raw, str):
        text = raw.strip()
        if not text.lstrip("-").isdigit() or len(text) > 12:
            raise ParamError(name, f"{name} must be an integer; got {raw[:40]!r}")
        raw = int(text)
    if not isinstance(raw, int):
        raise ParamError(name, f"{name} must be an integer")
    if not spec.low <= raw <= spec.high:
        raise ParamError(name, f"{name} must be in {spec.low}..{spec.high}; got {raw}")
    return raw


def check_requires(pipeline: Pipeline, values: dict[str, int]) -> None:
    """A chosen toggle whose `requires` does not hold for these parameters is refused."""
    scope = Scope(values, {})
    for name in sorted(pipeline.chosen):
        bug = pipeline.bugs[name]
        if bug.requires is not None and not constant(bug.requires, scope, "a requirement"):
            why = bug.requires_doc or f"it needs {text_of(bug.requires)}"
            raise ParamError("bugs", f"{name} cannot apply here: {why}")
