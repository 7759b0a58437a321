"""From a pipeline text to the program the engine runs.

`load(source, bugs)` parses the text, checks every bug toggle's patches and applies the chosen
ones (a toggle is an edit of the text, so the UI shows students the very code that fails).
`instantiate(pipeline, params)` folds the parameters in and compiles each agent to a flat list of
engine lines and control nodes (`app.sim.program`). Errors carry the line and column.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace
from functools import cache, lru_cache

from app.sim.barrier import COUNT_LIMIT
from app.sim.program import (
    Assign,
    BarrierDecl,
    Branch,
    Expr,
    Jump,
    Line,
    Program,
    StageDecl,
)
from app.sim.smem import TILE_SPAN

from . import syntax
from .errors import ParamError, PipelineError
from .exprs import Scope, compile_expr, constant, text_of
from .instructions import build
from .syntax import (
    Agent,
    Array,
    BinOp,
    Bug,
    Call,
    Ctor,
    Decl,
    Field,
    For,
    Helper,
    If,
    Index,
    Instr,
    Name,
    Num,
    Param,
    Simple,
    While,
)

MAX_SOURCE_BYTES = 64 * 1024
MAX_AGENTS = 16
MAX_BARRIERS = 256
MAX_STAGES = 64
MAX_CHUNKS = 256
MAX_LINES = 1024
MAX_NODES = 4096
MAX_REGISTERS = 64
MAX_ELEMENTS = 1_000_000
MAX_HELPER_DEPTH = 8
MAX_CLUSTER = 8
PARAM_LIMIT = 2**31 - 1
BUILTIN_CONSTANTS = ("rank", "cta", "cluster_size")
START_STATES = {"make_producer_start_state": 1, "make_consumer_start_state": 0,
                "PipelineState": 0}


@dataclass(frozen=True)
class ArrayDecl:
    kind: str
    name: str
    base: int
    """Flat index of element 0 in CTA 0 (tensors: the tile id of element 0)."""
    size: int
    """Elements per CTA."""
    indexed: bool
    ctas: int = 1
    """Copies in the cluster: barriers and stages exist once per CTA, tensors once."""


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


@cache
def prelude() -> tuple[str, dict[str, Helper]]:
    from pathlib import Path

    text = Path(__file__).with_name("prelude.pipe").read_text()
    return text, {h.name: h for h in syntax.parse(text).items if isinstance(h, Helper)}


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
    chosen = sorted((e for name in bugs for e in edits[name]), key=lambda e: e[0])
    for (_, e1, _), (s2, _, _) in zip(chosen, chosen[1:], strict=False):
        if s2 < e1:
            raise ParamError("bugs", "these bug toggles edit the same text: "
                                     f"{', '.join(sorted(bugs))}")
    text = source
    for start, end, new in reversed(chosen):
        text = text[:start] + new + text[end:]
    patched = syntax.parse(text) if chosen else module
    return Pipeline(source, sha256(source), text, patched, params, toggles, frozenset(bugs),
                    broken, _deleted_lines(source, text, chosen))


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
    agents = {a.name: (a.pos.start, a.pos.end) for a in module.items if isinstance(a, Agent)}
    out = []
    for patch in bug.patches:
        where = (patch.pos.line, patch.pos.column)
        if not patch.old:
            raise PipelineError(f"bug `{bug.name}`: a patch needs text to find", *where)
        low, high = 0, len(source)
        if patch.scope is not None:
            if patch.scope not in agents:
                raise PipelineError(f"bug `{bug.name}`: no agent `{patch.scope}`", *where)
            low, high = agents[patch.scope]
        found, at = [], source.find(patch.old, low)
        while at != -1 and at + len(patch.old) <= high:
            if not any(s <= at < e for s, e in fenced):
                found.append(at)
            at = source.find(patch.old, at + 1)
        if len(found) != 1:
            scope = f" in agent {patch.scope}" if patch.scope else ""
            raise PipelineError(
                f"bug `{bug.name}`: {patch.old[:50]!r} occurs {len(found)} times{scope}; a "
                "patch must find its text exactly once", *where,
                hint="make the text longer, or scope it with `in AGENT replace ...`")
        out.append((found[0], found[0] + len(patch.old), patch.new))
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


@lru_cache(maxsize=256)
def instantiate(pipeline: Pipeline, values: tuple[tuple[str, int], ...]) -> Program:
    """The engine program for these parameter values (`resolve_params` checked them)."""
    constants = dict(values)
    ctas = cluster_size(pipeline)
    arrays, barriers, stages, tensors, tmems = _declarations(pipeline, constants, ctas)
    kinds = {name: decl.kind for name, decl in arrays.items()}
    user_helpers = {h.name: h for h in pipeline.module.items if isinstance(h, Helper)}
    agents = []
    for cta in range(ctas):
        for item in pipeline.module.items:
            if not isinstance(item, Agent):
                continue
            count = 1 if item.dim is None else constant(item.dim, Scope(constants, kinds),
                                                         "an agent array's size")
            if count < 1 or len(agents) + count > MAX_AGENTS:
                raise PipelineError(f"a pipeline has 1 to {MAX_AGENTS} agents; `{item.name}` "
                                    f"makes it {len(agents) + count}", item.pos.line,
                                    item.pos.column, limit="agents")
            for rank in range(count):
                name = item.name if item.dim is None else f"{item.name}{rank}"
                if ctas > 1:
                    name = f"cta{cta}.{name}"
                here = {**constants, "rank": rank, "cta": cta, "cluster_size": ctas}
                builder = AgentBuilder(pipeline.text, arrays, here, user_helpers)
                agents.append(_with_deleted(builder.build(name, item), item, pipeline))
    if not agents:
        raise PipelineError("a pipeline needs at least one `agent { ... }`",
                            len(pipeline.text.splitlines()) or 1, 1)
    return Program(tuple(barriers), tuple(stages), tuple(tensors), tuple(tmems), tuple(agents),
                   ctas)


def _with_deleted(program, item: Agent, pipeline: Pipeline):
    """`program` with the deleted lines of its agent's body, each placed before the first
    listed line below it."""
    low = item.pos.line
    high = pipeline.text.count("\n", 0, item.pos.end) + 1
    lines = [program.nodes[n].source_line for n in program.listing]
    deleted = []
    for line, original, comment in pipeline.deleted:
        if low <= line <= high:
            before = next((i for i, at in enumerate(lines) if at > line), len(lines))
            deleted.append((before, line, original, comment))
    return replace(program, deleted=tuple(deleted)) if deleted else program


def cluster_size(pipeline: Pipeline) -> int:
    sizes = [c for c in pipeline.module.items if isinstance(c, syntax.Cluster)]
    if len(sizes) > 1:
        raise PipelineError("`cluster` is declared twice", sizes[1].pos.line,
                            sizes[1].pos.column)
    if sizes and not 1 <= sizes[0].size <= MAX_CLUSTER:
        raise PipelineError(f"a cluster has 1 to {MAX_CLUSTER} CTAs here", sizes[0].pos.line,
                            sizes[0].pos.column, limit="cluster")
    return sizes[0].size if sizes else 1


def _declarations(pipeline: Pipeline, constants: dict, ctas: int):
    arrays: dict[str, ArrayDecl] = {}
    barriers: list[BarrierDecl] = []
    stages: list[StageDecl] = []
    tensors: list[tuple[str, int, int]] = []
    tmems: list[str] = []
    decls = [d for d in pipeline.module.items if isinstance(d, Array)]
    scope = Scope(constants, {})
    order = {"barrier": 0, "smem": 1, "tensor": 2, "tmem": 3}
    for decl in sorted(decls, key=lambda d: order[d.kind]):
        where = (decl.pos.line, decl.pos.column)
        if decl.name in arrays or decl.name in constants:
            raise PipelineError(f"`{decl.name}` is declared twice", *where)
        size = 1 if decl.dim is None else constant(decl.dim, scope, "an array's size")
        copies = ctas if decl.kind in ("barrier", "smem") else 1
        limit = {"barrier": (MAX_BARRIERS - len(barriers)) // copies,
                 "smem": (MAX_STAGES - len(stages)) // copies,
                 "tensor": MAX_ELEMENTS, "tmem": 1}[decl.kind]
        if not 1 <= size <= limit:
            raise _limit(decl.dim, f"`{decl.name}` has {size} elements; the limit here is "
                                   f"{limit}", where, decl.kind)
        base = {"barrier": len(barriers), "smem": len(stages),
                "tensor": len(tensors) * TILE_SPAN, "tmem": len(tmems)}[decl.kind]
        arrays[decl.name] = ArrayDecl(decl.kind, decl.name, base, size, decl.dim is not None,
                                      copies)
        for cta in range(copies):
            prefix = f"cta{cta}." if copies > 1 else ""
            names = ([prefix + decl.name] if decl.dim is None
                     else [f"{prefix}{decl.name}[{i}]" for i in range(size)])
            if decl.kind == "barrier":
                count = None
                if decl.init is not None:
                    count = constant(decl.init, scope, "an init count")
                    if not 1 <= count <= COUNT_LIMIT:
                        raise _limit(decl.init, f"an mbarrier's init count is 1..{COUNT_LIMIT}; "
                                                f"`{decl.name}` gets {count}", where, "count")
                barriers.extend(BarrierDecl(n, decl.name, count, cta) for n in names)
            elif decl.kind == "smem":
                stages.extend(_stages(decl, names, scope, arrays, where, cta))
        if decl.kind == "tensor":
            nbytes = constant(decl.bytes, scope, "a tensor's element size")
            tensors.append((decl.name, size, nbytes))
        elif decl.kind == "tmem":
            tmems.append(decl.name)
    return arrays, barriers, stages, tensors, tmems


def _stages(decl: Array, names, scope, arrays, where, cta: int) -> list[StageDecl]:
    nbytes = constant(decl.bytes, scope, "a stage's size")
    chunk = constant(decl.chunk, scope, "a stage's chunk size")
    for node, value in ((decl.bytes, nbytes), (decl.chunk, chunk)):
        if value < 16 or value % 16:
            raise _limit(node, f"sizes must be positive multiples of 16 bytes (TMA copies move "
                               f"16-byte units); got {value}", where, "bytes")
    if nbytes % chunk:
        raise _limit(decl.chunk, f"the chunk ({chunk}) must divide the stage's {nbytes} bytes",
                     where, "chunk")
    if nbytes // chunk > MAX_CHUNKS:
        raise _limit(decl.chunk, f"a stage has at most {MAX_CHUNKS} chunks; {nbytes} / {chunk} "
                                 f"= {nbytes // chunk}", where, "chunk")
    release = None
    if decl.release is not None:
        guard = arrays.get(decl.release)
        if guard is None or guard.kind != "barrier":
            raise PipelineError(f"`release {decl.release}`: no barrier array of that name",
                                *where)
        if guard.size != len(names):
            raise PipelineError(f"`{decl.release}` has {guard.size} barriers for "
                                f"{len(names)} stages", *where)
        release = guard.base + cta * guard.size
    return [StageDecl(n, decl.name, i, nbytes, chunk, None if release is None else release + i,
                      cta) for i, n in enumerate(names)]


def _limit(node, message: str, where, field: str) -> Exception:
    """A size error: a `ParamError` naming the parameter when the size is one, else a
    `PipelineError` at the declaration."""
    if isinstance(node, Name):
        return ParamError(node.name, message)
    return PipelineError(message, *where, limit=field)


class AgentBuilder:
    """Compiles one agent instance (one element of an agent array) to engine nodes."""

    def __init__(self, text: str, arrays: dict, constants: dict, helpers: dict):
        self.text = text
        self.arrays = arrays
        self.scope = Scope(constants, {n: d.kind for n, d in arrays.items()})
        self.helpers = helpers
        self.nodes: list = []
        self.listing: list[int] = []
        self.initial: list[int] = []
        self.names: list[str] = []
        self.hidden: set[str] = set()
        self.iteration: int | None = None

    # ------------------------------------------------------------------------------ registers

    def register(self, name: str, value: int, pos, hidden: bool = False) -> int:
        if name in self.scope.registers or name in self.scope.constants:
            raise PipelineError(f"`{name}` is declared twice", pos.line, pos.column)
        if len(self.names) >= MAX_REGISTERS:
            raise PipelineError(f"an agent has at most {MAX_REGISTERS} registers", pos.line,
                                pos.column, limit="registers")
        self.names.append(name)
        self.initial.append(value)
        if hidden:
            self.hidden.add(name)
        self.scope.registers[name] = len(self.names)
        return len(self.names)

    def build(self, name: str, agent: Agent):
        from app.sim.program import AgentProgram

        self.register("%tc_fenced", 0, agent.pos, hidden=True)
        self.register("%tc_pending", 0, agent.pos, hidden=True)
        self.block(agent.body, None, top=True)
        lines = sum(1 for n in self.nodes if isinstance(n, Line))
        if lines > MAX_LINES or len(self.nodes) > MAX_NODES:
            raise PipelineError(f"agent `{name}` has {lines} lines; the limit is {MAX_LINES}",
                                agent.pos.line, agent.pos.column, limit="lines")
        shown = tuple(n for n in self.names if n not in self.hidden)
        return AgentProgram(name, agent.name, tuple(self.nodes), tuple(self.listing),
                            tuple(self.names), tuple(self.initial), shown, self.iteration,
                            self.scope.constants["cta"])

    # ----------------------------------------------------------------------------- statements

    def emit(self, node) -> int:
        if isinstance(node, Line):
            self.listing.append(len(self.nodes))
        self.nodes.append(node)
        return len(self.nodes) - 1

    def block(self, stmts, ctx, top: bool = False) -> None:
        i = 0
        while i < len(stmts):
            stmt = stmts[i]
            if isinstance(stmt, Simple):
                group = [stmt]
                while (i + 1 < len(stmts) and isinstance(stmts[i + 1], Simple)
                       and stmts[i + 1].pos.line == stmt.pos.line):
                    i += 1
                    group.append(stmts[i])
                self.simple_line(group, ctx)
            else:
                self.statement(stmt, ctx, top)
            i += 1

    def statement(self, stmt, ctx, top: bool) -> None:
        if isinstance(stmt, Decl):
            if not top or ctx is not None:
                raise PipelineError("declare registers at the top level of the agent",
                                    stmt.pos.line, stmt.pos.column)
            self.declare(stmt)
        elif isinstance(stmt, Instr):
            line = build(stmt, self.scope, self.arrays, self.display(stmt, ctx))
            self.emit(line if ctx is None else replace(line, source_line=ctx.line))
        elif isinstance(stmt, Call):
            self.call(stmt, ctx)
        elif isinstance(stmt, For):
            self.for_loop(stmt, ctx, top)
        elif isinstance(stmt, While):
            top_node = len(self.nodes)
            branch = self.emit(None)
            self.loop_body(stmt.body, ctx, stmt.pos)
            self.emit(Jump(top_node))
            self.nodes[branch] = Branch(compile_expr(stmt.cond, self.scope), len(self.nodes))
        elif isinstance(stmt, If):
            branch = self.emit(None)
            self.block(stmt.then, ctx)
            if stmt.orelse:
                jump = self.emit(None)
                self.nodes[branch] = Branch(compile_expr(stmt.cond, self.scope), len(self.nodes))
                self.block(stmt.orelse, ctx)
                self.nodes[jump] = Jump(len(self.nodes))
            else:
                self.nodes[branch] = Branch(compile_expr(stmt.cond, self.scope), len(self.nodes))
        else:
            raise PipelineError("this statement cannot stand here", stmt.pos.line,
                                stmt.pos.column)

    def declare(self, stmt: Decl) -> None:
        if stmt.type == "int":
            value = 0 if stmt.init is None else constant(stmt.init, self.scope,
                                                         "a register's initial value")
            self.register(stmt.name, value, stmt.pos)
            return
        stages = constant(stmt.stages, self.scope, "a PipelineState's stage count")
        if not 1 <= stages <= MAX_STAGES:
            raise PipelineError(f"a PipelineState has 1..{MAX_STAGES} stages; got {stages}",
                                stmt.pos.line, stmt.pos.column)
        phase = 0
        if stmt.init is not None:
            if not isinstance(stmt.init, Ctor) or stmt.init.name not in START_STATES:
                raise PipelineError("a PipelineState starts as `make_producer_start_state()` "
                                    "or `make_consumer_start_state()`", stmt.pos.line,
                                    stmt.pos.column)
            phase = START_STATES[stmt.init.name]
        for part, value in (("index", 0), ("phase", phase), ("count", 0)):
            self.register(f"{stmt.name}.{part}", value, stmt.pos)
        self.scope.states[stmt.name] = stages

    def for_loop(self, stmt: For, ctx, top: bool) -> None:
        if stmt.var not in self.scope.registers:
            reg = self.register(stmt.var, 0, stmt.pos)
        else:
            reg = self.scope.registers[stmt.var]
        if top and self.iteration is None and ctx is None:
            self.iteration = reg
        self.emit(Assign(((reg, compile_expr(stmt.init, self.scope)),)))
        top_node = len(self.nodes)
        branch = self.emit(None)
        self.loop_body(stmt.body, ctx, stmt.pos)
        counted = self.counted(stmt, reg, self.nodes[branch + 1:])
        self.emit(Assign(self.updates(stmt.update)))
        self.emit(Jump(top_node, counted=counted))
        self.nodes[branch] = Branch(compile_expr(stmt.cond, self.scope), len(self.nodes))

    def counted(self, stmt: For, reg: int, body: list) -> bool:
        """Whether a `for` loop can never bring its agent back to an earlier state: it steps
        its variable up (`++k`, `k += c` with c > 0) to a constant bound (`k < n`, `k <= n`)
        and nothing in its body writes the variable (no register destination, no update, in
        any node of the body: a conservative test, a loop it misses only costs the schedule
        checker its cycle search)."""
        update, cond = stmt.update, stmt.cond
        if update.target != (stmt.var, None):
            return False
        if update.op == "+=":
            step = compile_expr(update.value, self.scope).const
            if step is None or step <= 0:
                return False
        elif update.op != "++":
            return False
        if not (isinstance(cond, BinOp) and cond.op in ("<", "<=")
                and isinstance(cond.left, Name) and cond.left.name == stmt.var
                and compile_expr(cond.right, self.scope).const is not None):
            return False
        return not any(_mentions(node, reg) for node in body)

    def loop_body(self, body, ctx, pos) -> None:
        before = len(self.listing)
        self.block(body, ctx)
        if len(self.listing) == before:
            raise PipelineError("a loop needs at least one instruction in its body", pos.line,
                                pos.column, hint="loops only repeat steps; bookkeeping alone "
                                                 "would never let another agent move")

    def simple_line(self, group: list[Simple], ctx) -> None:
        updates = []
        for stmt in group:
            updates.extend(self.updates(stmt))
        text = self.display(group[0], ctx)
        op = "; ".join(_simple_text(s) for s in group)
        line = ctx.line if ctx else group[0].pos.line
        self.emit(Line("assign", op, text, line, (tuple(updates),)))

    def updates(self, stmt: Simple) -> tuple:
        name, field = stmt.target
        pos = stmt.pos
        if field is None and name in self.scope.states and stmt.op == "++":
            stages = self.scope.states[name]
            i, p, c = (self.scope.registers[f"{name}.{f}"] for f in ("index", "phase", "count"))
            return ((p, Expr(f"++{name}", f"(r[{p}] ^ int(r[{i}] + 1 == {stages}))")),
                    (i, Expr(f"++{name}", f"((r[{i}] + 1) % {stages})")),
                    (c, Expr(f"++{name}", f"(r[{c}] + 1)")))
        target = name if field is None else f"{name}.{field}"
        if target not in self.scope.registers or target in self.hidden:
            if name in self.scope.constants:
                raise PipelineError(f"`{name}` is a parameter; it cannot change", pos.line,
                                    pos.column)
            if field is None and name in self.scope.states:
                raise PipelineError(f"`{name}` is a PipelineState: advance it with `++{name}` "
                                    "or assign one of its fields", pos.line, pos.column)
            raise self.scope.unknown(target, pos)
        ref = Name(target, pos) if field is None else Field(Name(name, pos), field, pos)
        if stmt.op == "++":
            value = BinOp("+", ref, Num(1, pos), pos)
        elif stmt.op == "=":
            value = stmt.value
        else:
            value = BinOp(stmt.op[:-1], ref, stmt.value, pos)
        return ((self.scope.registers[target], compile_expr(value, self.scope)),)

    # -------------------------------------------------------------------------------- helpers

    def call(self, stmt: Call, ctx) -> None:
        from .errors import PipelineError as Err

        depth = 0 if ctx is None else ctx.depth + 1
        helper = self.helpers.get(stmt.name) or prelude()[1].get(stmt.name)
        if helper is None:
            known = sorted({*self.helpers, *prelude()[1]})
            raise Err(f"`{stmt.name}` is not a helper", stmt.pos.line, stmt.pos.column,
                      hint=f"the helpers are {', '.join(known)}")
        if depth >= MAX_HELPER_DEPTH:
            raise Err(f"helpers call each other more than {MAX_HELPER_DEPTH} deep",
                      stmt.pos.line, stmt.pos.column)
        if len(stmt.args) != len(helper.params):
            raise Err(f"`{stmt.name}` takes {len(helper.params)} argument(s) "
                      f"({', '.join(helper.params)}); got {len(stmt.args)}",
                      stmt.pos.line, stmt.pos.column)
        source = self.text if stmt.name in self.helpers else prelude()[0]
        outer_text = self.text if ctx is None else ctx.source
        args_text = [outer_text[a.pos.start:a.pos.end] if a.pos.end else text_of(a)
                     for a in stmt.args]
        context = Expansion(
            name=stmt.name, source=source, depth=depth,
            line=ctx.line if ctx else stmt.pos.line,
            mapping=dict(zip(helper.params, stmt.args, strict=True)),
            words=dict(zip(helper.params, args_text, strict=True)),
            comment=_comment(self.text, stmt.pos) if ctx is None else ctx.comment,
            outer=ctx)
        body = tuple(substitute(s, context.mapping) for s in helper.body)
        try:
            self.block(body, context)
        except PipelineError as err:
            if ctx is None and not err.message.startswith(f"in `{stmt.name}`"):
                raise PipelineError(f"in `{stmt.name}(...)`: {err.message}", stmt.pos.line,
                                    stmt.pos.column, hint=err.hint, limit=err.limit) from None
            raise

    def display(self, stmt, ctx) -> str:
        """What the UI shows for a step: its source line, or `helper: line` inside a call."""
        if ctx is None:
            return _line_text(self.text, stmt.pos)
        own = ctx.source[stmt.pos.start:stmt.pos.end] if stmt.pos.end else ""
        own = _substitute_words(own, ctx.words)
        text = f"{ctx.name}: {own}"
        return f"{text}  {ctx.comment}" if ctx.comment else text


@dataclass(frozen=True)
class Expansion:
    """Where a helper's lines come from while its call is compiled."""

    name: str
    source: str
    depth: int
    line: int
    mapping: dict
    words: dict
    comment: str
    outer: object


def _line_text(text: str, pos) -> str:
    start = text.rfind("\n", 0, pos.start) + 1
    end = text.find("\n", max(pos.end - 1, pos.start))
    end = len(text) if end == -1 else end
    return " ".join(part.strip() for part in text[start:end].splitlines() if part.strip())


def _comment(text: str, pos) -> str:
    end = text.find("\n", pos.end)
    rest = text[pos.end:len(text) if end == -1 else end]
    at = rest.find("//")
    return rest[at:].strip() if at != -1 else ""


def _substitute_words(text: str, words: dict) -> str:
    import re

    head, _, tail = text.partition(" ")
    for name, value in words.items():
        tail = re.sub(rf"\b{re.escape(name)}\b(?!\s*=[^=])", value, tail)
    return f"{head} {tail}" if tail else head


def _simple_text(stmt: Simple) -> str:
    name, field = stmt.target
    target = name if field is None else f"{name}.{field}"
    if stmt.op == "++":
        return f"++{target}"
    return f"{target} {stmt.op} {text_of(stmt.value)}"


def substitute(node, mapping: dict):
    """A copy of a helper's statement or expression with its parameters replaced."""
    if isinstance(node, Name):
        return mapping.get(node.name, node)
    if isinstance(node, Simple):
        name, field = node.target
        if name in mapping and isinstance(mapping[name], Name):
            node = replace(node, target=(mapping[name].name, field))
        value = None if node.value is None else substitute(node.value, mapping)
        return replace(node, value=value)
    if isinstance(node, tuple):
        return tuple(substitute(n, mapping) for n in node)
    if hasattr(node, "__dataclass_fields__") and not isinstance(node, syntax.Pos):
        changes = {f.name: substitute(getattr(node, f.name), mapping) for f in fields(node)
                   if f.name not in ("pos", "opcode", "name", "var", "op", "type")}
        return replace(node, **changes)
    return node


__all__ = ["Pipeline", "load", "instantiate", "resolve_params", "check_requires", "sha256",
           "ParamError", "PipelineError", "Index"]


def _mentions(node, reg: int) -> bool:
    """Whether a node's operands hold the register number `reg` anywhere (destinations and
    update targets are plain ints; expressions and array references are not looked into)."""
    if isinstance(node, Assign):
        return any(target == reg for target, _ in node.updates)
    if not isinstance(node, Line):
        return False
    stack = list(node.args)
    while stack:
        arg = stack.pop()
        if type(arg) is int and arg == reg:
            return True
        if isinstance(arg, tuple):
            stack.extend(arg)
    return False
