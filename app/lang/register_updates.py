"""Register updates of an agent body (`++w`, `phase ^= 1`, `a[i] += 1`, `++pipe_state`,
`pipe_state.advance(n)`, `t = s`): each statement becomes the (register, expression) pairs of one
`assign` line (app/sim/families/registers.py runs them)."""

from __future__ import annotations

from app.sim.program import Expr

from . import syntax
from .errors import PipelineError
from .exprs import STATE_FIELDS, compile_expr, out_of_range, text_of
from .syntax import BinOp, Field, Name, Num, Simple


class RegisterUpdates:
    """The update statements of `AgentBuilder` (which gives `scope`, `hidden` and
    `same_stages`)."""

    def updates(self, stmt: Simple) -> tuple:
        name, field = stmt.target
        pos = stmt.pos
        if stmt.index is not None or name in self.scope.reg_arrays:
            return self.element_updates(stmt)
        if field is None and name in self.scope.states and stmt.op == "++":
            stages = self.scope.states[name]
            i, p, c = (self.scope.registers[f"{name}.{f}"] for f in ("index", "phase", "count"))
            return ((p, Expr(f"++{name}", f"(r[{p}] ^ int(r[{i}] + 1 == {stages}))")),
                    (i, Expr(f"++{name}", f"((r[{i}] + 1) % {stages})")),
                    (c, Expr(f"++{name}", f"(r[{c}] + 1)")))
        if field is None and name in self.scope.states and stmt.op in (".advance", "+="):
            return self.advance(name, stmt)
        if field is None and name in self.scope.states and stmt.op == "=":
            return self.copy(name, stmt)
        if stmt.op.startswith("."):
            if name not in self.scope.states:
                raise PipelineError(f"`{name}{stmt.op}(...)`: only a PipelineState has methods",
                                    pos.line, pos.column)
            raise PipelineError(f"a PipelineState has no method `{stmt.op[1:]}`", pos.line,
                                pos.column, hint=f"`++{name}` or `{name}.advance(n)`")
        target = name if field is None else f"{name}.{field}"
        if target not in self.scope.registers or target in self.hidden:
            if name in self.scope.constants:
                raise PipelineError(f"`{name}` is a parameter; it cannot change", pos.line,
                                    pos.column)
            if field is None and name in self.scope.states and stmt.op == "--":
                raise PipelineError(f"`--{name}`: a PipelineState only moves forward",
                                    pos.line, pos.column,
                                    hint=f"CUTLASS's PipelineState has `++{name}` and "
                                         f"`{name}.advance(n)`, no `--`")
            if field is None and name in self.scope.states:
                raise PipelineError(f"`{name}` is a PipelineState: advance it with `++{name}` "
                                    "or assign one of its fields", pos.line, pos.column)
            raise self.scope.unknown(target, pos)
        ref = Name(target, pos) if field is None else Field(Name(name, pos), field, pos)
        value = new_value(stmt, ref)
        return ((self.scope.registers[target], compile_expr(value, self.scope)),)

    def element_updates(self, stmt: Simple) -> tuple:
        """`a[i] op= e` on a register array. A constant `i` updates its register; a register
        `i` updates every element, each keeping its value unless it is the one `i` names (so
        `e` reads the array as it was), the first element's update stopping the run when `i`
        is outside the array."""
        name, field = stmt.target
        pos = stmt.pos
        if name not in self.scope.reg_arrays:
            if name in self.scope.registers or name in self.scope.states:
                raise PipelineError(f"`{name}` is not an array", pos.line, pos.column)
            raise self.scope.unknown(name, pos)
        if stmt.index is None:
            raise PipelineError(f"`{name}` is a register array; name one element", pos.line,
                                pos.column, hint=f"`{name}[i]`")
        if field is not None or stmt.op.startswith("."):
            raise PipelineError(f"`{name}[...]` is an integer; it has no fields", pos.line,
                                pos.column)
        ref = syntax.Index(Name(name, pos), stmt.index, pos)
        value = new_value(stmt, ref)
        first, size = self.scope.reg_arrays[name]
        index = compile_expr(stmt.index, self.scope)
        new = compile_expr(value, self.scope)
        if index.const is not None:
            if not 0 <= index.const < size:
                if not self.scope.dead:
                    raise PipelineError(f"`{name}[{index.const}]` is out of range: `{name}` has "
                                        f"{size} element(s)", stmt.index.pos.line,
                                        stmt.index.pos.column)
                return ((first, Expr(new.text, out_of_range(name, index.code, size))),)
            return ((first + index.const, new),)
        if any(f"r[{first + k}]" in index.code for k in range(size)):
            raise PipelineError(f"`{name}[...]`: the index reads `{name}` itself",
                                stmt.index.pos.line, stmt.index.pos.column,
                                hint="copy the index into a register first")
        i = index.code
        out = []
        for k in range(size):
            keep = f"r[{first + k}]"
            if k == 0:
                keep = (f"({keep} if 0 <= {i} and {i} < {size} else "
                        f"{out_of_range(name, i, size)})")
            out.append((first + k, Expr(new.text, f"({new.code} if {i} == {k} else {keep})")))
        return tuple(out)

    def advance(self, name: str, stmt: Simple) -> tuple:
        """CUTLASS's `PipelineState::advance(num_iterations)` (also `s += n`), as
        sm90_pipeline.hpp writes it: the phase flips when n < Stages and index + n reaches
        Stages, or when n >= Stages and (index + n) / Stages is odd; index = (index + n) %
        Stages; count += n. n is a `uint32_t` there: outside 0..2^32-1 the run stops."""
        stages = self.scope.states[name]
        i, p, c = (self.scope.registers[f"{name}.{f}"] for f in STATE_FIELDS)
        n = compile_expr(stmt.value, self.scope)
        if any(f"r[{reg}]" in n.code for reg in (i, p, c)):
            raise PipelineError(f"`{name}.advance(...)`: the count reads `{name}` itself",
                                stmt.value.pos.line, stmt.value.pos.column,
                                hint="copy what it needs into a register first")
        if n.const is not None and not 0 <= n.const < 2**32:
            raise PipelineError(f"a PipelineState advances by 0..2^32-1; got {n.const}",
                                stmt.value.pos.line, stmt.value.pos.column)
        u, text = f"_uint({n.code})", f"{name}.advance({n.text})"
        flip = (f"int(({u} < {stages} and r[{i}] + {u} >= {stages}) or ({u} >= {stages} and "
                f"_mod(_div(r[{i}] + {u}, {stages}), 2) == 1))")
        return ((p, Expr(text, f"(r[{p}] ^ {flip})")),
                (i, Expr(text, f"_mod(r[{i}] + {u}, {stages})")),
                (c, Expr(text, f"(r[{c}] + {u})")))

    def copy(self, name: str, stmt: Simple) -> tuple:
        """`t = s;`: CUTLASS's `PipelineState::operator=`, every field at once."""
        other = stmt.value
        if not isinstance(other, Name) or other.name not in self.scope.states:
            raise PipelineError(f"`{name}` is a PipelineState: assign it another one, or one "
                                "of its fields", stmt.pos.line, stmt.pos.column)
        self.same_stages(other, self.scope.states[name], name)
        regs = self.scope.registers
        return tuple((regs[f"{name}.{f}"],
                      Expr(f"{name} = {other.name}", f"r[{regs[f'{other.name}.{f}']}]"))
                     for f in STATE_FIELDS)


def simple_text(stmt: Simple) -> str:
    name, field = stmt.target
    target = name if field is None else f"{name}.{field}"
    if stmt.index is not None:
        target = f"{name}[{text_of(stmt.index)}]"
    if stmt.op in ("++", "--"):
        return f"{stmt.op}{target}"
    if stmt.op.startswith("."):
        return f"{target}{stmt.op}({text_of(stmt.value)})"
    return f"{target} {stmt.op} {text_of(stmt.value)}"


def new_value(stmt: Simple, ref):
    """The expression an update gives its target `ref`: `ref + 1` for `++`, `ref op e` for
    `op=`, `e` for `=`."""
    if stmt.op in ("++", "--"):
        return BinOp(stmt.op[0], ref, Num(1, stmt.pos), stmt.pos)
    if stmt.op == "=":
        return stmt.value
    return BinOp(stmt.op[:-1], ref, stmt.value, stmt.pos)
