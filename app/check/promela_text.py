"""The Promela text of the export: its numbering (kinds, status, copy fields), a compiled
expression written as Promela, and a move's statements with their undefined-behaviour guards
(app.check.promela writes the model from these)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

RUNNING, DONE, DEADLOCK, UNDEFINED = 0, 1, 2, 3
STATUS = {"running": RUNNING, "done": DONE, "deadlock": DEADLOCK, "undefined_behavior": UNDEFINED}
KINDS = ("overwrite", "partial_read", "stale_read", "stale_wait", "reuse_before_wait",
         "tx_mismatch", "ordering_race", "proxy_fence_missing", "store_not_visible",
         "over_arrival", "tx_overflow", "tx_underflow", "remote_after_exit",
         "undefined_behavior", "deadlock")
"""Every kind the export can raise, numbered from 1 for `-DQUERY=n` (`livelock` is the
non-progress cycle of the LIVELOCK variant)."""
UB_OWN = {"over_arrival", "tx_overflow", "tx_underflow", "stale_token", "remote_after_exit"}
EXPORTED = {"init", "inval", "arrive", "arrive_drop", "arrive_expect_tx", "expect_tx",
            "complete_tx", "wait_parity", "assign", "load", "store", "commit_group",
            "wait_group", "proxy_fence", "ld_shared", "st_shared", "ld_global"}
NF = 11
"""Fields of an in-flight copy (app.sim.core: OP_DIR .. OP_SERIAL)."""
(F_DIR, F_TILE, F_STAGE, F_BAR, F_NEXT, F_END, F_AGENT, F_GROUP, F_FLAGGED, F_WRITING,
 F_SERIAL) = range(NF)
WORD = 30
"""Bits per word of a bit set (knowledge, stage barriers, generic reads)."""
CONTROL_LIMIT = 10_000
MAX_OPS = 64
ANY = 255
"""`MBI_QUERY=255`: every kind armed (the first diagnostic of any kind stops pan)."""
COUNT = 254
"""`MBI_QUERY=254`: the COUNT variant at run time (no settling move), in the same pan."""


class NotExported(ValueError):
    """A program the Promela export does not cover (said where, and why)."""


@dataclass
class Model:
    text: str
    kinds: tuple[str, ...] = KINDS
    max_ops: int = 0
    header: dict = field(default_factory=dict)

    def query(self, kind: str) -> int:
        return self.kinds.index(kind) + 1


def n_words(bits: int) -> int:
    return max(1, -(-bits // WORD))


class Expr(ast.NodeVisitor):
    """A compiled expression (Python over `r`) as a Promela expression over R[], with the
    conditions under which evaluating it is undefined behaviour (a zero divisor, a shift out of
    0..62)."""

    BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
    CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

    def __init__(self, reg):
        self.reg = reg
        self.ub: list[str] = []

    def run(self, code: str) -> str:
        return self.visit(ast.parse(code, mode="eval").body)

    def visit_Constant(self, node):
        value = int(node.value)
        if not -2**31 < value < 2**31:
            raise NotExported(f"the constant {value} does not fit Promela's 32-bit int")
        return str(value)

    def visit_Subscript(self, node):
        return self.reg(int(node.slice.value))

    def visit_UnaryOp(self, node):
        inner = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return f"(!({inner}))"
        return {ast.USub: f"(-{inner})", ast.UAdd: inner, ast.Invert: f"(~{inner})"}[
            type(node.op)]

    def visit_BinOp(self, node):
        a, b = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Mod):  # the compiler's own `%`, on non-negative values
            return f"(({a}) % ({b}))"
        if isinstance(node.op, ast.FloorDiv):
            return f"(({a}) / ({b}))"
        return f"({a} {self.BIN[type(node.op)]} {b})"

    def visit_Compare(self, node):
        parts, left = [], self.visit(node.left)
        for op, right in zip(node.ops, node.comparators, strict=True):
            r = self.visit(right)
            parts.append(f"({left} {self.CMP[type(op)]} {r})")
            left = r
        return "(" + " && ".join(parts) + ")"

    def visit_BoolOp(self, node):
        op = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + op.join(f"({self.visit(v)} != 0)" for v in node.values) + ")"

    def visit_IfExp(self, node):
        """C's `?:` evaluates only the side it takes: so a side's undefined behaviour (a
        division by zero, an index out of range) counts only where the test takes it."""
        test = self.visit(node.test)
        outer, self.ub = self.ub, []
        body = self.visit(node.body)
        body_ub, self.ub = self.ub, []
        orelse = self.visit(node.orelse)
        else_ub, self.ub = self.ub, outer
        if body_ub:
            self.ub.append(f"(({test}) && ({' || '.join(body_ub)}))")
        if else_ub:
            self.ub.append(f"(!({test}) && ({' || '.join(else_ub)}))")
        return f"(({test}) -> ({body}) : ({orelse}))"

    def visit_Call(self, node):
        name = node.func.id
        if name == "_oob":  # a register array indexed outside itself: the run stops
            self.ub.append("1")
            return "0"
        args = [self.visit(a) for a in node.args]
        if name == "_uint":
            self.ub.append(f"(({args[0]}) < 0)")
            return f"({args[0]})"
        if name in ("min", "max"):
            a, b = args
            return f"((({a}) {'<' if name == 'min' else '>'} ({b})) -> ({a}) : ({b}))"
        if name == "int":
            return f"({args[0]})"
        if name == "bool":
            return f"(({args[0]}) != 0)"
        a, b = args
        if name in ("_div", "_mod"):
            self.ub.append(f"(({b}) == 0)")
            return f"(({a}) {'/' if name == '_div' else '%'} ({b}))"
        self.ub.append(f"(({b}) < 0 || ({b}) >= 63)")
        return f"(({a}) {'<<' if name == '_shl' else '>>'} ({b}))"

    def generic_visit(self, node):
        raise NotExported(f"an expression the export cannot write: {ast.dump(node)[:80]}")


class Code:
    """Promela statements with undefined-behaviour guards: after `ub(...)` the rest of the
    move runs only while the status is still RUNNING (the engine's exception stops the move
    where it is, keeping what it changed before)."""

    def __init__(self):
        self.lines: list[str] = []
        self.open = 0

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def ub(self, cond: str, kind: str) -> None:
        self.add(f"if :: ({cond}) -> DIAG({kind.upper()}); ST = {UNDEFINED} :: else -> skip fi;",
                 f"if :: ST == {RUNNING} ->")
        self.open += 1

    def done(self) -> list[str]:
        return self.lines + [":: else -> skip fi;"] * self.open
