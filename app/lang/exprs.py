"""Expressions of the pipeline language: folded to constants over parameters, or turned into
Python code over the agent's register list `r` (C's integer semantics: `/` and `%` truncate toward
zero, comparisons and `&&`/`||` give 0 or 1)."""

from __future__ import annotations

import difflib

from app.sim.program import Expr, function

from .errors import PipelineError
from .syntax import BinOp, Cond, Ctor, Field, Func, Index, Name, Num, UnOp

INT_LIMIT = 2**62
STATE_FIELDS = ("index", "phase", "count")

_PY_OPS = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|", "^": "^"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
FUNCTIONS = ("min", "max")
"""The functions an expression may call (C's `min`/`max` of two integers, as CUDA has them)."""


class Scope:
    """What names mean inside one agent: parameters and constants fold, registers are `r[i]`."""

    def __init__(self, constants: dict[str, int], arrays: dict[str, str]):
        self.constants = dict(constants)
        self.arrays = arrays
        """Array name -> its kind (`barrier`, `smem`, `tensor`, `tmem`), for error messages."""
        self.registers: dict[str, int] = {}
        self.states: dict[str, int] = {}
        """PipelineState register name -> its stage count."""
        self.reg_arrays: dict[str, tuple[int, int]] = {}
        """Register array name -> (register of element 0, elements)."""
        self.dead = 0
        """Above 0 while compiling code that never runs (the side of a constant `?:` or `if`
        not taken): what would only fail if it ran (a constant division by zero, `mapa` to a
        CTA the cluster lacks) is left to run time, where it never happens."""

    def known(self) -> list[str]:
        return [*self.constants, *self.registers, *self.states, *self.arrays,
                *self.reg_arrays]

    def unknown(self, name: str, pos) -> PipelineError:
        close = difflib.get_close_matches(name, self.known(), n=1)
        hint = f"did you mean `{close[0]}`?" if close else None
        if name == "%laneid":
            hint = ("each lane of an agent declared `lanes N` has its own `%laneid`; an agent "
                    "without lanes is a whole warp")
        return PipelineError(f"`{name}` is not declared here", pos.line, pos.column, hint=hint)


def text_of(node) -> str:
    """The expression written back as text (for messages and the trace)."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Field):
        return f"{text_of(node.base)}.{node.name}"
    if isinstance(node, Index):
        return f"{text_of(node.base)}[{text_of(node.index)}]"
    if isinstance(node, BinOp):
        return f"{_paren(node.left)} {node.op} {_paren(node.right)}"
    if isinstance(node, UnOp):
        return f"{node.op}{_paren(node.operand)}"
    if isinstance(node, Cond):
        return f"{_paren(node.test)} ? {_paren(node.then)} : {_paren(node.orelse)}"
    if isinstance(node, Func):
        return f"{node.name}({', '.join(text_of(a) for a in node.args)})"
    if isinstance(node, Ctor):
        return f"{node.name}()"
    return "?"


def _paren(node) -> str:
    text = text_of(node)
    return f"({text})" if isinstance(node, (BinOp, Cond)) else text


def compile_expr(node, scope: Scope) -> Expr:
    """An `Expr`; a `PipelineError` at the node for anything that is not an integer here."""
    text = text_of(node)
    if isinstance(node, Num):
        return _const(node.value, text, node.pos)
    if isinstance(node, Name):
        if node.name in scope.constants:
            return Expr(text, str(scope.constants[node.name]), scope.constants[node.name])
        if node.name in scope.registers:
            return Expr(text, f"r[{scope.registers[node.name]}]")
        if node.name in scope.reg_arrays:
            raise PipelineError(f"`{node.name}` is a register array; name one element",
                                node.pos.line, node.pos.column,
                                hint=f"`{node.name}[i]`")
        if node.name in scope.states:
            raise PipelineError(f"`{node.name}` is a PipelineState; use one of its fields",
                                node.pos.line, node.pos.column,
                                hint=f"`{node.name}.index`, `{node.name}.phase` or "
                                     f"`{node.name}.count`")
        if node.name in scope.arrays:
            raise PipelineError(f"`{node.name}` is a {scope.arrays[node.name]}, not a number",
                                node.pos.line, node.pos.column,
                                hint="barriers, stages and tensors go in `[...]` operands")
        raise scope.unknown(node.name, node.pos)
    if isinstance(node, Field):
        if isinstance(node.base, Name) and node.base.name in scope.states:
            if node.name not in STATE_FIELDS:
                raise PipelineError(f"a PipelineState has no field `{node.name}`",
                                    node.pos.line, node.pos.column,
                                    hint="its fields are index, phase and count")
            reg = scope.registers[f"{node.base.name}.{node.name}"]
            return Expr(text, f"r[{reg}]")
        raise PipelineError(f"`{text}`: only a PipelineState has fields", node.pos.line,
                            node.pos.column)
    if isinstance(node, BinOp):
        return _binop(node, scope, text)
    if isinstance(node, UnOp):
        inner = compile_expr(node.operand, scope)
        code = {"-": f"(-{inner.code})", "+": inner.code, "!": f"int(not {inner.code})",
                "~": f"(~{inner.code})"}[node.op]
        return _fold(Expr(text, code, None), inner.const is not None, node.pos, scope)
    if isinstance(node, Cond):
        return _cond(node, scope, text)
    if isinstance(node, Func):
        return _func(node, scope, text)
    if isinstance(node, Index) and isinstance(node.base, Name) \
            and node.base.name in scope.reg_arrays:
        return element(node.base.name, node.index, scope, node.pos)
    if isinstance(node, Index):
        raise PipelineError(f"`{text}` is an element of an array, not a number", node.pos.line,
                            node.pos.column, hint="write it as an operand in brackets: "
                                                  f"`[{text}]`")
    raise PipelineError(f"`{text}` is not a number", node.pos.line, node.pos.column)


def _binop(node: BinOp, scope: Scope, text: str) -> Expr:
    left = compile_expr(node.left, scope)
    right = compile_expr(node.right, scope)
    a, b, op = left.code, right.code, node.op
    if op in ("<<", ">>") and right.const is None:
        code = f"{'_shl' if op == '<<' else '_shr'}({a}, {b})"  # the amount is checked at run time
    elif op in _PY_OPS:
        if op in ("<<", ">>") and not 0 <= right.const < 63:
            raise PipelineError(f"shift by {right.const}: shifts must be 0..62", node.pos.line,
                                node.pos.column)
        code = f"({a} {_PY_OPS[op]} {b})"
    elif op == "/":
        code = f"_div({a}, {b})"
    elif op == "%":
        code = f"_mod({a}, {b})"
    elif op in _COMPARE:
        code = f"int({a} {op} {b})"
    elif op == "&&":
        code = f"int(bool({a}) and bool({b}))"
    elif op == "||":
        code = f"int(bool({a}) or bool({b}))"
    else:
        raise PipelineError(f"unknown operator `{op}`", node.pos.line, node.pos.column)
    both = left.const is not None and right.const is not None
    return _fold(Expr(text, code, None), both, node.pos, scope)


def element(name: str, index, scope: Scope, pos) -> Expr:
    """`a[i]` of a register array: its register where `i` is a constant, else a choice among
    the elements (C's `?:` chain, which the kernel spells as it is) that stops the run
    (`out_of_bounds`) on an index outside the array."""
    first, size = scope.reg_arrays[name]
    i = compile_expr(index, scope)
    text = f"{name}[{i.text}]"
    if i.const is not None:
        if 0 <= i.const < size:
            return Expr(text, f"r[{first + i.const}]")
        if not scope.dead:
            raise PipelineError(f"`{name}[{i.const}]` is out of range: `{name}` has {size} "
                                "element(s)", pos.line, pos.column)
        return Expr(text, out_of_range(name, i.code, size))
    code = out_of_range(name, i.code, size)
    for k in reversed(range(size)):
        code = f"(r[{first + k}] if {i.code} == {k} else {code})"
    return Expr(text, code)


def out_of_range(name: str, index_code: str, size: int) -> str:
    return f"_oob({name!r}, {index_code}, {size})"


def _cond(node: Cond, scope: Scope, text: str) -> Expr:
    """C's `?:`: only the chosen side is evaluated (Python's `a if c else b` is as lazy)."""
    test = compile_expr(node.test, scope)
    if test.const is not None:
        sides = [node.then, node.orelse] if test.const else [node.orelse, node.then]
        chosen = compile_expr(sides[0], scope)
        scope.dead += 1
        try:
            compile_expr(sides[1], scope)  # its names are still checked
        finally:
            scope.dead -= 1
        return Expr(text, chosen.code, chosen.const)
    then = compile_expr(node.then, scope)
    orelse = compile_expr(node.orelse, scope)
    return Expr(text, f"({then.code} if {test.code} else {orelse.code})", None)


def _func(node: Func, scope: Scope, text: str) -> Expr:
    if node.name not in FUNCTIONS:
        hint = ("`mapa(object, cta)` is an address: write it in a `[...]` operand"
                if node.name == "mapa" else None)
        raise PipelineError(f"`{node.name}(...)` is not a function of expressions; they are "
                            f"{' and '.join(FUNCTIONS)}", node.pos.line, node.pos.column,
                            hint=hint)
    if len(node.args) != 2:
        raise PipelineError(f"`{node.name}` takes two numbers; got {len(node.args)}",
                            node.pos.line, node.pos.column, hint=f"`{node.name}(a, b)`")
    left, right = (compile_expr(a, scope) for a in node.args)
    expr = Expr(text, f"{node.name}({left.code}, {right.code})", None)
    return _fold(expr, left.const is not None and right.const is not None, node.pos, scope)


def _fold(expr: Expr, constant: bool, pos, scope: Scope) -> Expr:
    if not constant:
        return expr
    from app.sim.program import ProgramError

    try:
        value = function(expr)(None)
    except ProgramError as err:
        if scope.dead:
            return expr
        raise PipelineError(f"`{expr.text}`: {err.message}", pos.line, pos.column) from None
    return _const(value, expr.text, pos)


def _const(value: int, text: str, pos) -> Expr:
    if not -INT_LIMIT <= value <= INT_LIMIT:
        raise PipelineError(f"`{text[:60]}` is too large (numbers stay within ±2^62)",
                            pos.line, pos.column)
    return Expr(text, str(value), value)


def constant(node, scope: Scope, what: str) -> int:
    """The value of an expression that must not depend on registers (sizes, initial values)."""
    expr = compile_expr(node, scope)
    if expr.const is None:
        raise PipelineError(f"{what} must be a constant (numbers and parameters only); "
                            f"`{expr.text}` reads a register", node.pos.line, node.pos.column)
    return expr.const
