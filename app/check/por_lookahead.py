"""What an agent can touch from its state on, for the partial-order reduction (app/check/por.py):
its control flow followed exactly while its registers are its own, the blocking parity waits on
its way (the boundaries `PersistentSets` cuts at), and every line reachable beyond. A mixin of
`por.Independence`, which gives the per-line footprints (`_line`, `future`) it reads."""

from __future__ import annotations

import re

from app.sim.machine import PC
from app.sim.program import SINK, TC_FENCED, Assign, Branch, Expr, Jump, Line, Ref

WAITS = frozenset({"wait_parity", "wait_token"})
ARRIVES = frozenset({"arrive", "arrive_drop", "arrive_expect_tx"})
TX_LINES = frozenset({"complete_tx", "load"})
LOOKAHEAD_LIMIT = 100_000
"""Nodes `lookahead` follows before it counts every line reachable instead."""
AHEAD_CACHE = 200_000


class Lookahead:
    """`Independence.lookahead` and the walk behind it."""

    def lookahead(self, a: int, r) -> tuple:
        """What agent `a` can touch from its state `r` on (its registers, the program counter
        first): (every resource, the barriers it can arrive on, those it can complete bytes
        on, its blocking parity waits on the way). Its registers change only by its own lines,
        so its control flow is followed exactly, every wait taken as returning; from a branch
        or an operand that reads a register another mover sets (a wait's result, a token),
        every line reachable is counted (`future`). A wait is (barrier, parity, what the agent
        touches before that wait, arrives on, completes bytes on, whether its earlier
        lines touch that barrier, its program counter). What the agent touches up to a wait
        leaves the wait out: it moves only once the phase completed, so it belongs with what
        follows (the wait returns only after a necessary enabling set moved). Cached per state
        of the agent."""
        key = (a, tuple(r))
        hit = self._ahead.get(key)
        if hit is not None:
            return hit
        try:
            out = self._walk(a, r)
        except Exception:  # noqa: BLE001 (a register update the move itself will refuse)
            pc = r[PC]
            out = (self.future[a][pc], self.future_arrive[a][pc], self.future_tx[a][pc], ())
        if len(self._ahead) > AHEAD_CACHE:
            self._ahead.clear()
        self._ahead[key] = out
        return out

    def _walk(self, a: int, r) -> tuple[int, int, int]:
        code = self.machine.code[a]
        nodes, end = code.nodes, code.end
        reads = self._reads[a]
        regs = list(r)
        unknown: set[int] = set()
        f = arrive = tx = 0
        points = []
        rounds: dict[int, tuple] = {}
        pc = regs[PC]
        for _ in range(LOOKAHEAD_LIMIT):
            if pc >= end:
                break
            node = nodes[pc]
            if unknown and reads[pc] & unknown:
                if isinstance(node, Line) and node.kind != "assign":
                    f |= self.line_fp[a][pc]
                    arrive |= self._line_barriers(a, pc, None, ARRIVES)
                    tx |= self._line_barriers(a, pc, None, TX_LINES)
                    pc += 1
                    continue
                f |= self.future[a][pc]
                arrive |= self.future_arrive[a][pc]
                tx |= self.future_tx[a][pc]
                break
            if isinstance(node, Line):
                line = self._line(a, pc, regs)
                if node.kind == "wait_parity" and node.args[3]:
                    bars = self._values(node.args[1], regs)
                    if len(bars) == 1:
                        b = bars[0]
                        points.append((b, _eval(node.args[2], regs), f, arrive, tx,
                                       (f >> b | tx >> b) & 1, pc))
                f |= line
                arrive |= self._line_barriers(a, pc, regs, ARRIVES)
                tx |= self._line_barriers(a, pc, regs, TX_LINES)
                if node.kind == "assign":
                    for reg, fn in code.prepared[pc][0]:
                        regs[reg] = fn(regs)
                else:
                    if node.args and isinstance(node.args[0], int) and node.args[0] != SINK:
                        unknown.add(node.args[0])
                    if node.kind in WAITS:
                        unknown.add(TC_FENCED)
                pc += 1
            elif isinstance(node, (Jump, Branch)):
                back = pc
                pc = (node.target if isinstance(node, Jump) or not code.prepared[pc](regs)
                      else pc + 1)
                if self.cut_loops and pc <= back:
                    now = (f, arrive, tx, len(points))
                    if rounds.get(back) == now:  # the rest: all the static future holds
                        f |= self.future[a][pc]
                        arrive |= self.future_arrive[a][pc]
                        tx |= self.future_tx[a][pc]
                        break
                    rounds[back] = now
            else:
                for reg, fn in code.prepared[pc]:
                    regs[reg] = fn(regs)
                pc += 1
        else:
            f |= self.future[a][pc]
            arrive |= self.future_arrive[a][pc]
            tx |= self.future_tx[a][pc]
        return f, arrive, tx, tuple(points)


def _reads(node) -> frozenset[int]:
    """The registers a node's expressions read (from their code text: `r[i]`)."""
    codes: list[str] = []

    def walk(x) -> None:
        if isinstance(x, Expr):
            codes.append(x.code)
        elif isinstance(x, Ref):
            walk(x.index)
            if x.cta is not None:
                walk(x.cta)
        elif isinstance(x, tuple):
            for y in x:
                walk(y)

    if isinstance(node, Line):
        walk(node.args)
    elif isinstance(node, Branch):
        walk(node.cond)
    elif isinstance(node, Assign):
        walk(node.updates)
    return frozenset(int(i) for code in codes for i in _REGISTER.findall(code))


_REGISTER = re.compile(r"r\[(\d+)\]")


def _eval(expr: Expr, r) -> int:
    if expr.const is not None:
        return expr.const
    fn = _FNS.get(expr.code)
    if fn is None:
        from app.sim.program import function

        fn = _FNS[expr.code] = function(expr)
    return fn(r)


_FNS: dict[str, object] = {}


def _refs(args) -> list[Ref]:
    out: list[Ref] = []
    for x in args:
        if isinstance(x, Ref):
            out.append(x)
        elif isinstance(x, tuple):
            out.extend(_refs(x))
    return out
