"""The body of one agent: its registers, statements, loops and helper calls compiled to the
engine's flat list of lines and control nodes (`app.sim.program`).

An instruction statement becomes one `Line` through `instructions.build` (its operands are read
by the reader of its line kind, `instructions.READERS`); everything else here is the language's
own control; register updates are in `register_updates.py`, helper expansion in
`expansion.py`, and what compiled nodes read in `node_reads.py`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from app.sim.program import Assign, Branch, Jump, Line

from . import syntax
from .errors import PipelineError
from .expansion import Expansion, line_text, substitute, substitute_words, trailing_comment
from .exprs import STATE_FIELDS, Scope, compile_expr, constant, text_of
from .instructions import build
from .limits import MAX_HELPER_DEPTH, MAX_LINES, MAX_NODES, MAX_REGISTERS, MAX_STAGES
from .node_reads import mentions, waits_that_may_fail
from .register_updates import RegisterUpdates, simple_text
from .syntax import (
    Agent,
    ArrayInit,
    BinOp,
    Call,
    Ctor,
    Decl,
    For,
    Helper,
    If,
    Instr,
    Name,
    Simple,
    While,
)

START_STATES = {"make_producer_start_state": 1, "make_consumer_start_state": 0,
                "PipelineState": 0}


@cache
def prelude() -> tuple[str, dict[str, Helper]]:
    from pathlib import Path

    text = Path(__file__).with_name("prelude.pipe").read_text()
    return text, {h.name: h for h in syntax.parse(text).items if isinstance(h, Helper)}



class AgentBuilder(RegisterUpdates):
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
        waits_that_may_fail(self.nodes)
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
            cond = compile_expr(stmt.cond, self.scope)
            branch = self.emit(None)
            self.dead_block(stmt.then, ctx, cond.const == 0)
            if stmt.orelse:
                jump = self.emit(None)
                self.nodes[branch] = Branch(cond, len(self.nodes))
                self.dead_block(stmt.orelse, ctx, cond.const not in (None, 0))
                self.nodes[jump] = Jump(len(self.nodes))
            else:
                self.nodes[branch] = Branch(cond, len(self.nodes))
        else:
            raise PipelineError("this statement cannot stand here", stmt.pos.line,
                                stmt.pos.column)

    def dead_block(self, stmts, ctx, dead: bool) -> None:
        """A branch's block; `dead` when a constant condition means it never runs."""
        self.scope.dead += dead
        try:
            self.block(stmts, ctx)
        finally:
            self.scope.dead -= dead

    def declare(self, stmt: Decl) -> None:
        if stmt.dim is not None:
            self.declare_array(stmt)
            return
        if isinstance(stmt.init, ArrayInit):
            raise PipelineError(f"`{stmt.name}` is one register: `{{...}}` initializes an "
                                "array", stmt.init.pos.line, stmt.init.pos.column,
                                hint=f"`int {stmt.name}[N] = {{...}};`")
        if stmt.type == "int":
            value = 0 if stmt.init is None else constant(stmt.init, self.scope,
                                                         "a register's initial value")
            self.register(stmt.name, value, stmt.pos)
            return
        stages = constant(stmt.stages, self.scope, "a PipelineState's stage count")
        if not 1 <= stages <= MAX_STAGES:
            raise PipelineError(f"a PipelineState has 1..{MAX_STAGES} stages; got {stages}",
                                stmt.pos.line, stmt.pos.column)
        start = (0, 0, 0)
        if isinstance(stmt.init, Name) and stmt.init.name in self.scope.states:
            self.same_stages(stmt.init, stages, stmt.name)
            start = tuple(self.initial[self.scope.registers[f"{stmt.init.name}.{part}"] - 1]
                          for part in STATE_FIELDS)  # a copy of its value at launch
        elif stmt.init is not None:
            if not isinstance(stmt.init, Ctor) or stmt.init.name not in START_STATES:
                raise PipelineError("a PipelineState starts as `make_producer_start_state()`, "
                                    "`make_consumer_start_state()` or a copy of another",
                                    stmt.pos.line, stmt.pos.column)
            start = (0, START_STATES[stmt.init.name], 0)
        for part, value in zip(STATE_FIELDS, start, strict=True):
            self.register(f"{stmt.name}.{part}", value, stmt.pos)
        self.scope.states[stmt.name] = stages

    def declare_array(self, stmt: Decl) -> None:
        """`int a[N] = {...};`: N registers `a[0]`.. (those not written start at 0, as in C)."""
        pos = stmt.pos
        if stmt.type != "int":
            raise PipelineError("an array of PipelineStates is not modelled: declare each "
                                "state", pos.line, pos.column)
        size = constant(stmt.dim, self.scope, "a register array's size")
        if size < 1:
            raise PipelineError(f"a register array has at least 1 element; got {size}",
                                stmt.dim.pos.line, stmt.dim.pos.column)
        values = ()
        if isinstance(stmt.init, ArrayInit):
            values = tuple(constant(v, self.scope, "a register's initial value")
                           for v in stmt.init.values)
            if len(values) > size:
                extra = stmt.init.values[size]
                raise PipelineError(f"`{stmt.name}` has {size} element(s); {len(values)} "
                                    "values initialize it", extra.pos.line, extra.pos.column)
        elif stmt.init is not None:
            raise PipelineError(f"`{stmt.name}` is an array: initialize it with `{{...}}`",
                                stmt.init.pos.line, stmt.init.pos.column,
                                hint=f"`int {stmt.name}[{size}] = {{1, 2}};`")
        if stmt.name in self.scope.registers or stmt.name in self.scope.constants:
            raise PipelineError(f"`{stmt.name}` is declared twice", pos.line, pos.column)
        first = len(self.names) + 1
        for k in range(size):
            self.register(f"{stmt.name}[{k}]", values[k] if k < len(values) else 0, pos)
        self.scope.reg_arrays[stmt.name] = (first, size)

    def same_stages(self, other: Name, stages: int, name: str) -> None:
        theirs = self.scope.states[other.name]
        if theirs != stages:
            raise PipelineError(f"`{other.name}` is a PipelineState<{theirs}>; `{name}` is a "
                                f"PipelineState<{stages}>", other.pos.line, other.pos.column,
                                hint="a copy keeps its stage count, as C++ does its type")

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
        return not any(mentions(node, reg) for node in body)

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
        op = "; ".join(simple_text(s) for s in group)
        line = ctx.line if ctx else group[0].pos.line
        self.emit(Line("assign", op, text, line, (tuple(updates),)))

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
            comment=trailing_comment(self.text, stmt.pos) if ctx is None else ctx.comment,
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
            return line_text(self.text, stmt.pos)
        own = ctx.source[stmt.pos.start:stmt.pos.end] if stmt.pos.end else ""
        own = substitute_words(own, ctx.words)
        text = f"{ctx.name}: {own}"
        return f"{text}  {ctx.comment}" if ctx.comment else text
