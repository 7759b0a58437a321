"""The export of each agent: `EN_a` (it can move) and `inline step_a()` (its current line,
then the control nodes after it, as `Machine._follow` takes them), with the blockers written as
pure guards."""

from __future__ import annotations

from app.check.promela_text import (
    CONTROL_LIMIT,
    F_AGENT,
    F_DIR,
    F_GROUP,
    F_WRITING,
    NF,
    RUNNING,
    UNDEFINED,
    Code,
    Expr,
    NotExported,
)
from app.sim.program import WAIT_BLOCKS, Branch, Jump, Line, Ref


class Agents:
    """Exporter's agent procedures (a mixin: it uses the exporter's `reg`, `_line` and
    `options`)."""

    def _agent(self, a: int) -> list[str]:
        """`EN_a` (the agent can move) and `inline step_a()` (its current line, then the
        control nodes after it)."""
        agent = self.program.agents[a]
        nodes = agent.nodes
        end = len(nodes)
        pc = self.reg(a, 0)
        blocked = []
        bodies = []
        conds: dict[int, str] = {}
        for i, node in enumerate(nodes):
            if not isinstance(node, Line):
                continue
            cond = self._blocker(a, node)
            if cond is not None:
                blocked.append(f"!({pc} == {i} && !({cond}))")
                conds[i] = cond
            code = Code()
            self.tmp = 0
            self._line(code, a, i, node)
            code.add(f"if :: ST == {RUNNING} -> {pc} = {i + 1} :: else -> skip fi;")
            code.add(*self._follow(a, i + 1))
            bodies.append((i, code.done()))
        en = " && ".join([f"({pc} < {end})", *blocked])
        out = [f"#define EN_{a} ({en})"]
        self.options[a] = []
        for i, body in bodies:
            out += [f"inline step_{a}_{i}() {{", "    " + "\n    ".join(body), "}"]
            guard = f"{pc} == {i}" + (f" && ({conds[i]})" if i in conds else "")
            self.options[a].append(f":: d_step {{ ST == {RUNNING} && {guard} -> "
                                   f"printf(\"MOVE a {a}\\n\"); step_{a}_{i}() }}")
        return out

    def _follow(self, a: int, start: int) -> list[str]:
        """Machine._follow from node `start`: the control nodes reachable from there before a
        line (only those: the code of every line's move stays small)."""
        nodes = self.program.agents[a].nodes
        pc = self.reg(a, 0)
        todo, seen = [start], set()
        while todo:
            i = todo.pop()
            if i >= len(nodes) or i in seen or isinstance(nodes[i], Line):
                continue
            seen.add(i)
            node = nodes[i]
            if isinstance(node, Jump):
                todo.append(node.target)
            elif isinstance(node, Branch):
                todo += [i + 1, node.target]
            else:
                todo.append(i + 1)
        if not seen:
            return []
        opts = []
        for i in sorted(seen):
            node = nodes[i]
            if isinstance(node, Jump):
                opts.append(f"  :: {pc} == {i} -> {pc} = {node.target}")
            elif isinstance(node, Branch):
                code = Code()
                cond = self.expr(code, a, node.cond)
                code.add(f"if :: ({cond}) != 0 -> {pc} = {i + 1} :: else -> "
                         f"{pc} = {node.target} fi")
                opts.append(f"  :: {pc} == {i} ->\n     " + "\n     ".join(code.done()))
            else:
                code = Code()
                for r, e in node.updates:
                    code.add(f"{self.reg(a, r)} = {self.expr(code, a, e)};")
                code.add(f"{pc} = {i + 1}")
                opts.append(f"  :: {pc} == {i} ->\n     " + "\n     ".join(code.done()))
        inside = " || ".join(f"{pc} == {i}" for i in sorted(seen))
        return ["i1 = 0;", "do",
                f":: ST != {RUNNING} || !({inside}) -> break",
                f":: ST == {RUNNING} && i1 >= {CONTROL_LIMIT} -> DIAG(UNDEFINED_BEHAVIOR);"
                f" ST = {UNDEFINED}; break",
                f":: ST == {RUNNING} && i1 < {CONTROL_LIMIT} && ({inside}) -> i1++;",
                "   if", *opts, "   :: else -> skip", "   fi", "od;", "skip;"]

    def _blocker(self, a: int, node: Line) -> str | None:
        if node.kind == "wait_parity":
            dest, bar, parity, blocking, _hint = node.args
            if blocking != WAIT_BLOCKS:
                return None
            b = self._pure_index(a, bar)
            if b is None:
                return "1"
            idx, inb = b
            par = self._pure(a, parity)
            return f"!({inb}) || !B_valid[{idx}] || (B_phase[{idx}] & 1) != ({par})"
        if node.kind == "wait_group":
            n, read = node.args
            limit = f"BULK[{a}] - ({self._pure(a, n)})"
            checks = []
            for k in range(self.max_ops):
                f = f"OP[{k * NF}"
                cond = (f"{k} < NOPS && OP[{k * NF + F_DIR}] == 1 && OP[{k * NF + F_AGENT}] == "
                        f"{a} && OP[{k * NF + F_GROUP}] < {limit}")
                if read:
                    cond += f" && !OP[{k * NF + F_WRITING}]"
                checks.append(f"!({cond})")
                del f
            return " && ".join(checks) or "1"
        return None

    def _pure(self, a: int, e) -> str:
        """An expression in a guard (no undefined-behaviour checks: a guard only decides
        whether the move is offered; the move itself checks)."""
        if e.const is not None:
            return str(e.const)
        ev = Expr(lambda i: self.reg(a, i))
        text = ev.run(e.code)
        if ev.ub:
            raise NotExported(f"a wait's operand may stop the run ({e.text}: a division, a "
                              "shift, a register array's index): not exported")
        return text

    def _pure_index(self, a: int, ref: Ref):
        if ref.cta is None and ref.index.const is not None:
            return str(ref.base + ref.index.const), "1"
        if ref.cta is not None:
            raise NotExported("a wait on a `mapa` barrier")
        v = self._pure(a, ref.index)
        return f"({ref.base} + ({v}))", f"0 <= ({v}) && ({v}) < {ref.size}"
