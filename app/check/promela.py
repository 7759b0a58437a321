"""A Promela model of a compiled pipeline, for SPIN (docs/checker.md, "SPIN").

The model is the engine's machine written out in Promela, move for move: one `d_step` per move
the engine numbers (an agent's line, a TMA copy's next chunk, a landing that holds its
complete-tx), over variables that hold exactly what `Machine.freeze()` holds (barriers, chunks,
stage tiles, owed masks, registers, the copies in flight in their order, bulk groups, and the
detectors' bookkeeping: observed phases, tx ledgers, held bytes, wait history, stage barriers,
ordering knowledge, generic reads, status). So SPIN's stored states are the unreduced search's
states, one for one (`COUNT` mode). Diagnostics are assertions, asked one kind at a time
(`-DQUERY=n`, pan stops at its first error); `deadlock` is pan's invalid end state (done and
undefined-behaviour states leave the loop, a deadlocked one cannot); `livelock` is a
non-progress cycle of the `LIVELOCK` variant (`-l -f`: every agent, and the TMA engine, is its
own process, so SPIN's weak fairness is per mover).

Only the compiled program is read (`PipelineConfig.program`) and the initial state a fresh
`Machine` settles in; nothing of the checker's search. What is not exported is refused with
`NotExported`, naming the line: tcgen05, state tokens, `st.global`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field

from app.sim.barrier import COUNT_LIMIT, TX_LIMIT
from app.sim.config import PipelineConfig
from app.sim.core import NO_TILE, TILE_SPAN, W_ASYNC, W_GENERIC, W_GENERIC_FENCED
from app.sim.machine import Machine
from app.sim.program import SINK, TC_FENCED, WAIT_BLOCKS, Branch, Jump, Line, Ref

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
COUNT = 254
"""`MBI_QUERY=254`: the COUNT variant at run time (no settling move), in the same pan."""
"""`MBI_QUERY=255`: every kind armed (the first diagnostic of any kind stops pan)."""


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


def _words(bits: int) -> int:
    return max(1, -(-bits // WORD))


class _Expr(ast.NodeVisitor):
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


class _Code:
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


class Exporter:
    def __init__(self, cfg: PipelineConfig, max_ops: int | None = None):
        self.cfg = cfg
        self.program = p = cfg.program
        self.m = Machine(cfg)
        m = self.m
        for agent in p.agents:
            for node in agent.nodes:
                if isinstance(node, Line):
                    self._refuse(agent, node)
        if any(s.alias is not None for s in p.stages):
            raise NotExported("views of shared memory (`smem ... at`) are not exported to "
                              "Promela yet")
        self.na, self.nb, self.ns = m.n_agents, m.n_bars, m.n_stages
        self.nch = m.n_chunk_bits
        self.kbits = m.n_chunk_bits + 2 * self.nb
        """Knowledge bits (app/sim/ordering.py): chunks, then per barrier its phase 0 begun,
        then per barrier its last `mbarrier.init` known (`init_bit`)."""
        self.stores_read = any(isinstance(n, Line) and n.kind == "store"
                               for a in p.agents for n in a.nodes)
        self.wk = _words(self.kbits)
        self.wb = _words(self.nb)
        self.ws = _words(self.ns)
        self.toff, off = [], 0
        for _, n, _ in p.tensors:
            self.toff.append(off)
            off += n
        self.nt = max(off, 1)
        self.roff, off = [], 0
        for agent in p.agents:
            self.roff.append(off)
            off += 1 + len(agent.registers)
        self.nr = max(off, 1)
        storers = sum(1 for a in p.agents if any(isinstance(n, Line) and n.kind == "store"
                                                 for n in a.nodes))
        multicast = any(isinstance(n, Line) and n.kind == "load" and n.args[5] is not None
                        for a in p.agents for n in a.nodes)
        self.max_ops = max_ops or max(2, min(MAX_OPS, self.ns * (p.cluster if multicast else 1)
                                             + storers))
        """Room for copies in flight (every stage loading, a store of each storer); pan stops
        at `assert(NOPS < NOPSMAX)` past it and the runner doubles it (each slot is two
        options of pan's loop, so a tight table keeps pan.c small)."""
        self.tmp = 0
        self.options: dict[int, list[str]] = {}

    # -------------------------------------------------------------------------- helpers

    def _refuse(self, agent, node: Line) -> None:
        where = f"{agent.name}, line {node.source_line} (`{node.text.strip()[:60]}`)"
        if node.kind not in EXPORTED:
            raise NotExported(f"{where}: `{node.op}` is not exported to Promela yet "
                              "(tcgen05, state-token waits and st.global are not)")
        if node.kind in ("arrive", "arrive_drop", "arrive_expect_tx") and node.args[0] != SINK:
            raise NotExported(f"{where}: an arrive that returns a state token (64 bits) is not "
                              "exported; write `_` as its destination")

    def t(self) -> str:
        """A hidden scratch variable of the move being written (t30, t31: the inlines')."""
        self.tmp += 1
        if self.tmp >= 30:
            raise NotExported("a line needs more scratch variables than the export has")
        return f"t{self.tmp}"

    def reg(self, a: int, i: int) -> str:
        return f"R[{self.roff[a] + i}]"

    def expr(self, code: _Code, a: int, e) -> str:
        if e.const is not None:
            return str(e.const)
        ev = _Expr(lambda i: self.reg(a, i))
        text = ev.run(e.code)
        for cond in ev.ub:
            code.ub(cond, "undefined_behavior")
        return text

    def index(self, code: _Code, a: int, ref: Ref) -> str:
        """A Ref's flat index into a hidden temporary, bounds checked as `_index` does."""
        if ref.cta is None and ref.index.const is not None:
            return str(ref.base + ref.index.const)
        v = self.expr(code, a, ref.index)
        t = self.t()
        code.add(f"{t} = {v};")
        code.ub(f"!(0 <= {t} && {t} < {ref.size})", "undefined_behavior")
        if ref.cta is not None:
            c = self.expr(code, a, ref.cta)
            tc = self.t()
            code.add(f"{tc} = {c};")
            code.ub(f"!(0 <= {tc} && {tc} < {ref.ctas})", "undefined_behavior")
            code.add(f"{t} = {ref.base} + {t} + {tc} * {ref.size};")
        else:
            code.add(f"{t} = {ref.base} + {t};")
        return t

    def table(self, name: str, values: list[int], arg: str = "x") -> str:
        """A constant table as a macro: a chain of conditional expressions."""
        if not values:
            return f"#define {name}({arg}) 0"
        body = str(values[-1])
        for i in range(len(values) - 2, -1, -1):
            if values[i] != values[-1] or body != str(values[-1]):
                body = f"(({arg}) == {i} -> {values[i]} : {body})"
        return f"#define {name}({arg}) {body}"

    # ------------------------------------------------------------------------ the model

    def export(self) -> Model:
        if self.nt * max(self.ns, 1) > 1 << 16:
            raise NotExported("too many (stage, tile) pairs for the export's owed table")
        out = [f"/* mbarrier-inspector Promela export (app/check/promela.py): {self._title()}",
               "   spin -a [-DCOUNT | -DQUERY=n | -DLIVELOCK] model.pml; see docs/checker.md."
               " */"]
        out += [f"#define {k.upper()} {i + 1}" for i, k in enumerate(KINDS)]
        out += ["byte QV;  /* the kind asked: QUERY, or MBI_QUERY when pan starts */",
                "#ifdef QUERY", "#define READ_QUERY QV = QUERY;", "#else",
                "#define READ_QUERY c_code { now.QV = getenv(\"MBI_QUERY\") ? "
                "atoi(getenv(\"MBI_QUERY\")) : 0; };",
                "#endif", f"#define DIAG(k) assert(QV != k && QV != {ANY})",
                f"#define NA {self.na}", f"#define NB {max(self.nb, 1)}",
                f"#define NOPSMAX {self.max_ops}"]
        out += self._tables()
        out += self._state()
        out += self._inlines()
        for a in range(self.na):
            out += self._agent(a)
        out += self._settle()
        out += self._processes()
        return Model("\n".join(out) + "\n", KINDS, self.max_ops, self._header())

    def _title(self) -> str:
        cfg = self.cfg
        params = json.dumps(dict(cfg.params), sort_keys=True)
        return f"{cfg.source_sha256[:12]} {params} bugs={sorted(cfg.bugs)}"

    def _header(self) -> dict:
        cfg = self.cfg
        return {"sha256": cfg.source_sha256, "params": dict(cfg.params), "bugs": sorted(cfg.bugs)}

    def _tables(self) -> list[str]:
        m, p = self.m, self.program
        stages = p.stages
        lines = [
            self.table("CHUNK_BASE", m.chunk_base),
            self.table("NCHUNKS", [s.chunks for s in stages]),
            self.table("CHUNK_BYTES", [s.chunk_bytes for s in stages]),
            self.table("STAGE_BYTES", [s.bytes for s in stages]),
            self.table("STAGE_CTA", [s.cta for s in stages]),
            self.table("RELEASABLE", [int(s.release is not None) for s in stages]),
            self.table("BAR_CTA", [b.cta for b in p.barriers]),
            self.table("INIT_BY_LINE", [int(b.init_count is None) for b in p.barriers]),
            self.table("TOFF", self.toff),
            self.table("AGENT_CTA", [a.cta for a in p.agents]),
            f"#define DENSE(t) (((t) % {TILE_SPAN}) + TOFF((t) / {TILE_SPAN}))",
            f"#define BITW(i) ((i) / {WORD})",
            f"#define BITM(i) (1 << ((i) % {WORD}))",
        ]
        ends = [len(a.nodes) for a in p.agents]
        for c in range(p.cluster):
            members = [a for a in range(self.na) if p.agents[a].cta == c]
            cond = " && ".join(f"({self.reg(a, 0)} >= {ends[a]})" for a in members) or "1"
            lines.append(f"#define EXITED_{c} ({cond})")
        exited = "0"
        for c in range(p.cluster - 1, -1, -1):
            exited = f"((c) == {c} -> EXITED_{c} : {exited})" if c < p.cluster - 1 \
                else f"EXITED_{c}"
        lines.append(f"#define EXITED(c) ({exited})")
        return lines

    def _state(self) -> list[str]:
        """The state, in freeze()'s order, initialised to the state a new machine settles in."""
        m = self.m
        fz = m.freeze()
        barriers, chunks, stage_tile, owed, regs, tma, bulk, tensor_core, meta, status = fz
        (observed, ledger, held, waits, stage_bars, _acc_dirty, _cover, know, carried,
         generic_reads) = meta
        if tma or tensor_core:
            raise NotExported("a machine with copies in flight before its first move")
        nb = max(self.nb, 1)
        decl = []

        def arr(kind: str, name: str, values: list[int]) -> None:
            values = values or [0]
            decl.append(f"{kind} {name}[{len(values)}];")
            init.extend(f"{name}[{i}] = {v};" for i, v in enumerate(values) if v)

        init: list[str] = []
        arr("int", "B_phase", [b[0] for b in barriers] or [0] * nb)
        arr("int", "B_pend", [b[1] for b in barriers] or [0] * nb)
        arr("int", "B_exp", [b[2] for b in barriers] or [0] * nb)
        arr("int", "B_tx", [b[3] for b in barriers] or [0] * nb)
        arr("bit", "B_valid", [int(b[4]) for b in barriers] or [0] * nb)
        flat = [c for stage in chunks for c in stage]
        arr("int", "CH_tile", [t for t, _ in flat])
        arr("byte", "CH_w", [w for _, w in flat])
        arr("int", "ST_tile", list(stage_tile))
        owed_vals = [0] * (max(self.ns, 1) * self.nt)
        for (s, tile), mask in owed:
            owed_vals[s * self.nt + self._dense(tile)] = mask
        arr("byte" if self.na <= 8 else "short", "OWED", owed_vals)
        arr("int", "R", [v for r in regs for v in r])
        arr("int", "OP", [0] * (self.max_ops * NF))
        decl.append("byte NOPS;")
        arr("int", "BULK", list(bulk))
        pad = 0 if self.nb else 1  # a program without barriers: arrays of one unused barrier
        arr("bit", "OBS", list(observed) + [0] * pad)
        arr("int", "LED", [v for x in ledger for v in x] + [0] * (3 * pad))
        arr("int", "HELD", list(held) + [0] * pad)
        has, par, ph = [0] * (self.na * nb), [0] * (self.na * nb), [0] * (self.na * nb)
        for (a, b), (parity, phase) in waits:
            has[a * nb + b], par[a * nb + b], ph[a * nb + b] = 1, parity, phase
        arr("bit", "W_has", has)
        arr("bit", "W_par", par)
        arr("int", "W_ph", ph)
        arr("int", "SB", [w for mask in stage_bars for w in self._split(mask, self.wb)])
        arr("int", "KN", [w for mask in know for w in self._split(mask, self.wk)])
        arr("int", "CAR", [w for mask in carried for w in self._split(mask, self.wk)]
            + [0] * (4 * pad * self.wk))
        arr("int", "GR", [w for mask in generic_reads for w in self._split(mask, self.ws)])
        decl.append("byte ST;")
        if STATUS[status]:
            init.append(f"ST = {STATUS[status]};")
        hidden = [f"hidden int t{i};" for i in range(1, 33)] + \
                 ["hidden int i1, i2, i3, i4, i5;", "hidden byte ok, found;"]
        self.init = init
        return decl + hidden

    def _dense(self, tile: int) -> int:
        return tile % TILE_SPAN + self.toff[tile // TILE_SPAN]

    @staticmethod
    def _split(mask: int, words: int) -> list[int]:
        return [(mask >> (WORD * w)) & ((1 << WORD) - 1) for w in range(words)]

    # ---------------------------------------------------------------- shared procedures

    def _inlines(self) -> list[str]:
        nb = max(self.nb, 1)
        wk, na = self.wk, self.na
        ncar = 4 * nb
        return [
            # Clear knowledge bit `i` everywhere (ordering.forget of one bit).
            "inline forget_bit(i) {",
            f"  i5 = 0; do :: i5 < {na} -> KN[i5 * {wk} + BITW(i)] = KN[i5 * {wk} + BITW(i)]"
            " & ~BITM(i); i5++ :: else -> break od;",
            f"  i5 = 0; do :: i5 < {ncar} -> CAR[i5 * {wk} + BITW(i)] = "
            f"CAR[i5 * {wk} + BITW(i)] & ~BITM(i); i5++ :: else -> break od",
            "}",
            # barrier b: the phase completes (barrier_op's `done`).
            "inline complete_if_done(b) {",
            "  if :: B_pend[b] == 0 && B_tx[b] == 0 ->",
            "    B_phase[b] = B_phase[b] + 1; B_pend[b] = B_exp[b];",
            "    OBS[b] = 0; LED[b * 3] = 0; LED[b * 3 + 1] = 0; LED[b * 3 + 2] = 0;",
            *[f"    CAR[({2 * nb} + b) * {wk} + {w}] = CAR[b * {wk} + {w}]; "
              f"CAR[({3 * nb} + b) * {wk} + {w}] = CAR[({nb} + b) * {wk} + {w}]; "
              f"CAR[b * {wk} + {w}] = 0; CAR[({nb} + b) * {wk} + {w}] = 0;" for w in range(wk)],
            "    found = 1",
            "  :: else -> found = 0",
            "  fi",
            "}",
            # tx_check (sync.py)
            "inline tx_check(b) {",
            "  if :: !LED[b * 3 + 2] && B_pend[b] == 0 && LED[b * 3 + 1] > LED[b * 3] ->",
            "    LED[b * 3 + 2] = 1; DIAG(TX_MISMATCH)",
            "  :: else -> skip fi",
            "}",
            # ordering.touch and release
            "inline touch(a, b) {",
            f"  if :: B_phase[b] == 0 -> KN[a * {wk} + BITW({self.nch} + b)] = "
            f"KN[a * {wk} + BITW({self.nch} + b)] | BITM({self.nch} + b) :: else -> skip fi",
            "}",
            "inline order_release(a, b, relaxed, cluster) {",
            "  if :: relaxed -> skip",
            "  :: !relaxed && AGENT_CTA(a) == BAR_CTA(b) ->",
            *[f"    CAR[b * {wk} + {w}] = CAR[b * {wk} + {w}] | KN[a * {wk} + {w}];"
              for w in range(wk)],
            "    skip",
            "  :: !relaxed && AGENT_CTA(a) != BAR_CTA(b) && cluster ->",
            *[f"    CAR[({nb} + b) * {wk} + {w}] = CAR[({nb} + b) * {wk} + {w}] | "
              f"KN[a * {wk} + {w}];" for w in range(wk)],
            "    skip",
            "  :: else -> skip fi",
            "}",
            "inline order_acquire(a, b, relaxed, cluster) {",
            "  if :: !relaxed ->",
            *[f"    KN[a * {wk} + {w}] = KN[a * {wk} + {w}] | CAR[({2 * nb} + b) * {wk} + {w}]"
              f" | (cluster -> CAR[({3 * nb} + b) * {wk} + {w}] : 0);" for w in range(wk)],
            "    skip",
            "  :: else -> skip fi",
            "}",
            # take (sync.py): agent a holds tile of stage s.
            "inline take(a, s, tile) {",
            f"  if :: RELEASABLE(s) && tile >= 0 -> OWED[s * {self.nt} + DENSE(tile)] = "
            f"OWED[s * {self.nt} + DENSE(tile)] | (1 << a) :: else -> skip fi",
            "}",
            # discharge every (stage, tile) of stage s of agent bit `bits`.
            "inline discharge(s, bits) {",
            f"  i4 = 0; do :: i4 < {self.nt} -> OWED[s * {self.nt} + i4] = "
            f"OWED[s * {self.nt} + i4] & ~(bits); i4++ :: else -> break od",
            "}",
            self._release_inline(),
            # core.init_known: an access ordered after a program's own mbarrier.init
            "inline init_known(a, b) {",
            f"  if :: INIT_BY_LINE(b) && !(KN[a * {wk} + BITW({self.nch + nb} + b)] & "
            f"BITM({self.nch + nb} + b)) ->",
            f"    KN[a * {wk} + BITW({self.nch + nb} + b)] = KN[a * {wk} + BITW({self.nch + nb}"
            f" + b)] | BITM({self.nch + nb} + b); DIAG(ORDERING_RACE)",
            "  :: else -> skip fi",
            "}",
            # core.unread_by_store: a write over chunks [first, end) a store has not read
            "inline unread_by_store(s, first, end) {",
            "  i2 = 0; ok = 0;",
            "  do :: i2 < NOPS && !ok -> if :: OP[i2 * 11] == 1 && OP[i2 * 11 + 2] == s && "
            "!OP[i2 * 11 + 9] && OP[i2 * 11 + 4] < end && OP[i2 * 11 + 5] > first -> ok = 1; "
            "DIAG(OVERWRITE) :: else -> skip fi; i2++",
            "  :: else -> break od",
            "}",
            # remote_access(from, to)
            "inline remote_access(from, to) {",
            "  if :: from != to && EXITED(to) -> DIAG(REMOTE_AFTER_EXIT); ST = 3"
            " :: else -> skip fi",
            "}",
            # delete copy k, keeping the order of the others
            "inline del_op(k) {",
            "  i3 = k;",
            f"  do :: i3 < NOPS - 1 -> i2 = 0; do :: i2 < {NF} -> OP[i3 * {NF} + i2] = "
            f"OP[(i3 + 1) * {NF} + i2]; i2++ :: else -> break od; i3++",
            "  :: else -> break od;",
            f"  i2 = 0; do :: i2 < {NF} -> OP[(NOPS - 1) * {NF} + i2] = 0; i2++"
            " :: else -> break od;",
            "  NOPS--",
            "}",
            self._issue_inline(),
            *self._tma_inlines(),
        ]

    def _release_inline(self) -> str:
        """sync.release: an arrive on a release barrier discharges its stages."""
        body = []
        for b, stages in sorted(self.m.release_stages.items()):
            body.append(f"  :: b == {b} -> " + "; ".join(f"discharge({s}, 1 << a)"
                                                         for s in stages))
        if not body:
            return "inline release(a, b) { skip }"
        return "inline release(a, b) {\n  if\n" + "\n".join(body) + \
            "\n  :: else -> skip fi\n}"

    def _issue_inline(self) -> str:
        """copies._issue: the lowest serial the copy's name leaves free, then append."""
        same_name = ("(dir == 0 && STAGE_CTA(OP[i1 * 11 + 2]) == STAGE_CTA(stage)) || "
                     "(dir == 1 && OP[i1 * 11 + 6] == agent)")
        return "\n".join([
            "inline issue(dir, tile, stage, bar, first, end, agent, group) {",
            "  assert(NOPS < NOPSMAX);",
            "  t30 = 1;",
            "  do",
            "  :: found = 0; i1 = 0;",
            "     do :: i1 < NOPS -> if :: OP[i1 * 11 + 1] == tile && OP[i1 * 11] == dir && "
            f"({same_name}) && OP[i1 * 11 + 10] == t30 -> found = 1 :: else -> skip fi; i1++",
            "     :: else -> break od;",
            "     if :: found -> t30++ :: else -> break fi",
            "  od;",
            "  OP[NOPS * 11] = dir; OP[NOPS * 11 + 1] = tile; OP[NOPS * 11 + 2] = stage;",
            "  OP[NOPS * 11 + 3] = bar; OP[NOPS * 11 + 4] = first; OP[NOPS * 11 + 5] = end;",
            "  OP[NOPS * 11 + 6] = agent; OP[NOPS * 11 + 7] = group; OP[NOPS * 11 + 8] = 0;",
            "  OP[NOPS * 11 + 9] = 0; OP[NOPS * 11 + 10] = t30; NOPS++",
            "}"])

    def _tma_inlines(self) -> list[str]:
        wk = self.wk
        clustered = self.program.cluster > 1
        writes_observed = int(self.m.writes_observed)
        owed_old = f"OWED[t2 * {self.nt} + DENSE(t4)]"
        return [
            # copies.tma_step(k, hold)
            "inline tma_step(k, hold) {",
            "  if :: OP[k * 11] == 1 && OP[k * 11 + 9] -> del_op(k)",
            "  :: else ->",
            "    t2 = OP[k * 11 + 2]; t3 = OP[k * 11 + 4]; t1 = OP[k * 11 + 3];",
            "    t5 = CHUNK_BASE(t2) + t3;",
            "    if :: OP[k * 11] == 0 ->",
            "      t4 = CH_tile[t5];",
            *(["      remote_access(AGENT_CTA(OP[k * 11 + 6]), STAGE_CTA(t2));"]
              if clustered else []),
            "      if :: ST == 0 ->",
            f"        if :: t4 != OP[k * 11 + 1] && t4 >= 0 && {owed_old} != 0 && "
            "!(OP[k * 11 + 8] & 1) -> OP[k * 11 + 8] = OP[k * 11 + 8] | 1; DIAG(OVERWRITE)",
            "        :: else -> skip fi;",
            *(["        unread_by_store(t2, t3, t3 + 1);"] if self.stores_read else []),
            f"        CH_tile[t5] = OP[k * 11 + 1]; CH_w[t5] = {W_ASYNC};",
            f"        CAR[t1 * {wk} + BITW(t5)] = CAR[t1 * {wk} + BITW(t5)] | BITM(t5);",
            "        if :: hold -> HELD[t1] = HELD[t1] + CHUNK_BYTES(t2)",
            "        :: else ->",
            "          t6 = HELD[t1] + CHUNK_BYTES(t2); HELD[t1] = 0;",
            "          if :: !B_valid[t1] -> DIAG(UNDEFINED_BEHAVIOR); ST = 3",
            f"          :: B_valid[t1] && B_tx[t1] - t6 < -{TX_LIMIT} -> DIAG(TX_UNDERFLOW);"
            " ST = 3",
            "          :: else -> B_tx[t1] = B_tx[t1] - t6; complete_if_done(t1)",
            "          fi",
            "        fi",
            "      :: else -> skip fi",
            "    :: else ->",
            f"      if :: CH_w[t5] == {W_GENERIC} && !(OP[k * 11 + 8] & 2) -> "
            "OP[k * 11 + 8] = OP[k * 11 + 8] | 2; DIAG(PROXY_FENCE_MISSING) :: else -> skip fi",
            "    fi;",
            "    if :: ST == 0 ->",
            "      OP[k * 11 + 4] = t3 + 1;",
            "      if :: t3 + 1 == OP[k * 11 + 5] ->",
            f"        if :: OP[k * 11] == 0 || !{writes_observed} -> del_op(k)",
            "        :: else -> OP[k * 11 + 9] = 1 fi",
            "      :: else -> skip fi",
            "    :: else -> skip fi",
            "  fi",
            "}",
        ]

    # ------------------------------------------------------------------------- agents

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
            code = _Code()
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
                code = _Code()
                cond = self.expr(code, a, node.cond)
                code.add(f"if :: ({cond}) != 0 -> {pc} = {i + 1} :: else -> "
                         f"{pc} = {node.target} fi")
                opts.append(f"  :: {pc} == {i} ->\n     " + "\n     ".join(code.done()))
            else:
                code = _Code()
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
        ev = _Expr(lambda i: self.reg(a, i))
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

    # -------------------------------------------------------------------------- lines

    def _line(self, code: _Code, a: int, pc: int, node: Line) -> None:
        getattr(self, f"_l_{node.kind}")(code, a, node)

    def _valid(self, code: _Code, b: str) -> None:
        code.ub(f"!B_valid[{b}]", "undefined_behavior")

    def _barrier_op_arrive(self, code: _Code, b: str, n: str) -> None:
        code.ub(f"{n} > B_pend[{b}]", "over_arrival")
        code.add(f"B_pend[{b}] = B_pend[{b}] - {n}; complete_if_done({b});")

    def _arrival(self, code: _Code, a: int, b: str) -> None:
        """sync.arrival: the remote check, then `reuse_before_wait`."""
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, BAR_CTA({b}));")
            code.add(f"if :: ST == {RUNNING} ->")
            code.open += 1
        code.add(f"if :: !OBS[{b}] && B_valid[{b}] && B_phase[{b}] > 0 -> OBS[{b}] = 1; "
                 "DIAG(REUSE_BEFORE_WAIT) :: else -> skip fi;")

    def _order_flags(self, node: Line) -> str:
        return f"{int(node.sem == 'relaxed')}, {int(node.scope == 'cluster')}"

    def _l_init(self, code, a, node):
        bar, count = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, count)};")
        code.ub(f"!(1 <= {n} && {n} <= {COUNT_LIMIT})", "undefined_behavior")
        code.ub(f"B_valid[{b}]", "undefined_behavior")
        code.add(f"B_phase[{b}] = 0; B_pend[{b}] = {n}; B_exp[{b}] = {n}; B_tx[{b}] = 0; "
                 f"B_valid[{b}] = 1;",
                 f"OBS[{b}] = 1; LED[{b} * 3] = 0; LED[{b} * 3 + 1] = 0; LED[{b} * 3 + 2] = 0;",
                 f"forget_bit({self.nch} + {b});",
                 *[f"CAR[({side * max(self.nb, 1)} + {b}) * {self.wk} + {w}] = 0;"
                   for side in range(4) for w in range(self.wk)],
                 f"forget_bit({self.nch + self.nb} + {b});",
                 f"KN[{a} * {self.wk} + BITW({self.nch + self.nb} + {b})] = KN[{a} * {self.wk} "
                 f"+ BITW({self.nch + self.nb} + {b})] | BITM({self.nch + self.nb} + {b});")

    def _l_inval(self, code, a, node):
        (bar,) = node.args
        b = self.index(code, a, bar)
        self._valid(code, b)
        code.add(f"B_valid[{b}] = 0;")

    def _l_arrive(self, code, a, node, drop: bool = False):
        dest, bar, count = node.args
        b = self.index(code, a, bar)
        n = self.t()
        if count is None:
            code.add(f"{n} = 1;")
        else:
            code.add(f"{n} = {self.expr(code, a, count)};")
            code.ub(f"!(1 <= {n} && {n} <= {COUNT_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        self._arrival(code, a, b)
        code.add(f"release({a}, {b});", f"touch({a}, {b});",
                 f"order_release({a}, {b}, {self._order_flags(node)});")
        if "noComplete" in node.flags:
            code.ub(f"{n} == B_pend[{b}] && B_tx[{b}] == 0", "undefined_behavior")
        if drop:
            code.ub(f"B_exp[{b}] - {n} < 1", "undefined_behavior")
            code.ub(f"{n} > B_pend[{b}]", "over_arrival")
            code.add(f"B_exp[{b}] = B_exp[{b}] - {n}; B_pend[{b}] = B_pend[{b}] - {n}; "
                     f"complete_if_done({b});")
        else:
            self._barrier_op_arrive(code, b, n)

    def _l_arrive_drop(self, code, a, node):
        self._l_arrive(code, a, node, drop=True)

    def _l_arrive_expect_tx(self, code, a, node):
        dest, bar, nbytes = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, nbytes)};")
        code.ub(f"!(0 <= {n} && {n} <= {TX_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        code.ub(f"B_pend[{b}] < 1", "over_arrival")
        self._arrival(code, a, b)
        code.add(f"release({a}, {b});", f"touch({a}, {b});",
                 f"order_release({a}, {b}, {self._order_flags(node)});",
                 f"LED[{b} * 3] = LED[{b} * 3] + {n};")
        code.ub(f"B_tx[{b}] + {n} > {TX_LIMIT}", "tx_overflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] + {n}; complete_if_done({b});",
                 f"B_pend[{b}] = B_pend[{b}] - 1; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_expect_tx(self, code, a, node):
        bar, nbytes = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, nbytes)};")
        code.ub(f"!(0 <= {n} && {n} <= {TX_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, BAR_CTA({b}));",
                     f"if :: ST == {RUNNING} ->")
            code.open += 1
        code.add(f"touch({a}, {b});", f"LED[{b} * 3] = LED[{b} * 3] + {n};")
        code.ub(f"B_tx[{b}] + {n} > {TX_LIMIT}", "tx_overflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] + {n}; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_complete_tx(self, code, a, node):
        bar, nbytes = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, nbytes)};")
        code.ub(f"!(0 <= {n} && {n} <= {TX_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, BAR_CTA({b}));",
                     f"if :: ST == {RUNNING} ->")
            code.open += 1
        code.add(f"LED[{b} * 3 + 1] = LED[{b} * 3 + 1] + {n};")
        code.ub(f"B_tx[{b}] - {n} < -{TX_LIMIT}", "tx_underflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] - {n}; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_wait_parity(self, code, a, node):
        dest, bar, parity_fn, blocking, _hint = node.args
        b = self.index(code, a, bar)
        par = self.t()
        code.add(f"{par} = {self.expr(code, a, parity_fn)};")
        code.ub(f"{par} != 0 && {par} != 1", "undefined_behavior")
        self._valid(code, b)
        nb = max(self.nb, 1)
        w = f"{a * nb} + {b}"
        okv = self.t()
        code.add(f"{okv} = ((B_phase[{b}] & 1) != {par});", f"init_known({a}, {b});")
        if dest != SINK:
            code.add(f"{self.reg(a, dest)} = {okv};")
        kbit = f"{self.nch} + {b}"
        code.add(
            f"if :: {okv} ->",
            f"  OBS[{b}] = 1; {self.reg(a, TC_FENCED)} = 0;",
            f"  if :: W_has[{w}] && B_phase[{b}] <= W_ph[{w}] -> ok = 1",
            f"  :: !(W_has[{w}] && B_phase[{b}] <= W_ph[{w}]) && B_phase[{b}] == 0 && "
            f"(KN[{a} * {self.wk} + BITW({kbit})] & BITM({kbit})) -> ok = 1",
            "  :: else -> ok = 0 fi;",
            f"  if :: !W_has[{w}] -> W_has[{w}] = 1; W_par[{w}] = {par}; W_ph[{w}] = "
            f"B_phase[{b}]",
            f"  :: else -> W_ph[{w}] = (B_phase[{b}] > W_ph[{w}] -> B_phase[{b}] : W_ph[{w}])"
            " fi;",
            f"  order_acquire({a}, {b}, {self._order_flags(node)});",
            "  if :: !ok ->",
            *[f"    if :: (SB[{s} * {self.wb} + BITW({b})] & BITM({b})) -> "
              f"take({a}, {s}, ST_tile[{s}]) :: else -> skip fi;" for s in range(self.ns)],
            "    skip",
            "  :: else -> DIAG(STALE_WAIT) fi",
            ":: else -> skip fi;")

    def _l_assign(self, code, a, node):
        (updates,) = node.args
        for r, e in updates:
            code.add(f"{self.reg(a, r)} = {self.expr(code, a, e)};")

    def _chunks(self, code: _Code, a: int, stage: str, offset, nbytes: str) -> tuple[str, str]:
        start = self.t()
        code.add(f"{start} = {'0' if offset is None else self.expr(code, a, offset)};")
        code.ub(f"{nbytes} <= 0 || {start} < 0 || {start} + {nbytes} > STAGE_BYTES({stage})",
                "undefined_behavior")
        code.ub(f"{start} % CHUNK_BYTES({stage}) != 0 || {nbytes} % CHUNK_BYTES({stage}) != 0",
                "undefined_behavior")
        first, end = self.t(), self.t()
        code.add(f"{first} = {start} / CHUNK_BYTES({stage}); "
                 f"{end} = ({start} + {nbytes}) / CHUNK_BYTES({stage});")
        return first, end

    def _l_load(self, code, a, node):
        dst, offset, src, size, bar, multicast, src_offset = node.args
        if src_offset is not None:
            raise NotExported(f"`{node.op}`: a copy of part of a tile (`[tile[k] + off]`) is "
                              "not exported to Promela yet")
        stage = self.index(code, a, dst)
        tile = self.index(code, a, src)
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, size)};")
        code.ub(f"{n} > {TX_LIMIT}", "undefined_behavior")
        first, end = self._chunks(code, a, stage, offset, n)
        targets = []
        if multicast is None:
            targets.append((stage, b, None))
        else:
            mask_e, own, stage_size, bar_size = multicast
            mask = self.t()
            code.add(f"{mask} = {self.expr(code, a, mask_e)};")
            ctas = self.program.cluster
            code.ub(f"!(0 < {mask} && {mask} < {1 << ctas})", "undefined_behavior")
            for c in range(ctas):
                targets.append((f"({stage} + {(c - own) * stage_size})",
                                f"({b} + {(c - own) * bar_size})", f"(({mask} >> {c}) & 1)"))
        for _, bb, cond in targets:
            code.add(f"init_known({a}, {bb});" if cond is None else
                     f"if :: {cond} -> init_known({a}, {bb}) :: else -> skip fi;")
        for s, bb, cond in targets:
            body = [f"issue(0, {tile}, {s}, {bb}, {first}, {end}, {a}, 0);",
                    f"i3 = {first}; do :: i3 < {end} -> forget_bit(CHUNK_BASE({s}) + i3); i3++"
                    " :: else -> break od;",
                    f"if :: ST_tile[{s}] == {tile} -> skip :: else -> "
                    + " ".join(f"SB[{s} * {self.wb} + {w}] = 0;" for w in range(self.wb))
                    + " fi;",
                    f"ST_tile[{s}] = {tile};",
                    f"SB[{s} * {self.wb} + BITW({bb})] = SB[{s} * {self.wb} + BITW({bb})] | "
                    f"BITM({bb});",
                    f"LED[{bb} * 3 + 1] = LED[{bb} * 3 + 1] + {n};"]
            if cond is None:
                code.add(*body)
            else:
                code.add(f"if :: {cond} ->", *["  " + x for x in body], "  skip",
                         ":: else -> skip fi;")
        for _, bb, cond in targets:
            if cond is None:
                code.add(f"tx_check({bb});")
            else:
                code.add(f"if :: {cond} -> tx_check({bb}) :: else -> skip fi;")

    def _l_store(self, code, a, node):
        dst, src, offset, size, dst_offset = node.args
        if dst_offset is not None:
            raise NotExported(f"`{node.op}`: a store into part of a tile (`[tile[k] + off]`) "
                              "is not exported to Promela yet")
        tile = self.index(code, a, dst)
        stage = self.index(code, a, src)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, size)};")
        first, end = self._chunks(code, a, stage, offset, n)
        code.add(f"issue(1, {tile}, {stage}, -1, {first}, {end}, {a}, BULK[{a}]);")
        code.add("t31 = 0;",
                 f"i3 = {first}; do :: i3 < {end} -> "
                 f"if :: CH_tile[CHUNK_BASE({stage}) + i3] != {NO_TILE} && "
                 f"!(KN[{a} * {self.wk} + BITW(CHUNK_BASE({stage}) + i3)] & "
                 f"BITM(CHUNK_BASE({stage}) + i3)) -> t31++ :: else -> skip fi; i3++"
                 " :: else -> break od;",
                 "if :: t31 > 0 -> DIAG(ORDERING_RACE) :: else -> skip fi;")

    def _l_commit_group(self, code, a, node):
        code.add(f"BULK[{a}] = BULK[{a}] + 1;")

    def _l_wait_group(self, code, a, node):
        n, read = node.args
        code.add(f"t1 = {self.expr(code, a, n)};")

    def _l_proxy_fence(self, code, a, node):
        cta = self.program.agents[a].cta
        code.add(*[f"GR[{a} * {self.ws} + {w}] = 0;" for w in range(self.ws)])
        for s, stage in enumerate(self.program.stages):
            if stage.cta == cta:
                base = self.m.chunk_base[s]
                for c in range(stage.chunks):
                    code.add(f"if :: CH_w[{base + c}] == {W_GENERIC} -> CH_w[{base + c}] = "
                             f"{W_GENERIC_FENCED} :: else -> skip fi;")

    def _l_ld_shared(self, code, a, node):
        dest, stage_ref, tile_ref = node.args
        s = self.index(code, a, stage_ref)
        tile = self.index(code, a, tile_ref)
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, STAGE_CTA({s}));",
                     f"if :: ST == {RUNNING} ->")
            code.open += 1
        okc, other, empty, unordered = self.t(), self.t(), self.t(), self.t()
        wk = self.wk
        code.add(f"{okc} = 0; {other} = 0; {empty} = 0; {unordered} = 0;",
                 f"i3 = 0; do :: i3 < NCHUNKS({s}) ->",
                 f"  if :: CH_tile[CHUNK_BASE({s}) + i3] == {tile} -> {okc}++;",
                 f"     if :: !(KN[{a} * {wk} + BITW(CHUNK_BASE({s}) + i3)] & "
                 f"BITM(CHUNK_BASE({s}) + i3)) -> {unordered}++ :: else -> skip fi",
                 f"  :: CH_tile[CHUNK_BASE({s}) + i3] == {NO_TILE} && {tile} != {NO_TILE} ->"
                 f" {empty}++",
                 f"  :: else -> {other}++ fi; i3++",
                 ":: else -> break od;",
                 f"if :: {okc} == NCHUNKS({s}) -> if :: {unordered} > 0 -> DIAG(ORDERING_RACE)"
                 " :: else -> skip fi",
                 f":: {okc} < NCHUNKS({s}) && ({okc} > 0 || {other} == 0) -> DIAG(PARTIAL_READ)",
                 ":: else -> DIAG(STALE_READ) fi;",
                 f"if :: ST_tile[{s}] == {tile} -> take({a}, {s}, {tile}) :: else -> skip fi;",
                 f"GR[{a} * {self.ws} + BITW({s})] = GR[{a} * {self.ws} + BITW({s})] | "
                 f"BITM({s});")

    def _l_st_shared(self, code, a, node):
        stage_ref, tile_ref = node.args
        s = self.index(code, a, stage_ref)
        tile = self.index(code, a, tile_ref)
        nt = self.nt
        code.add(f"i3 = 0; do :: i3 < {nt} -> if :: OWED[{s} * {nt} + i3] != 0 && "
                 f"i3 != DENSE({tile}) -> DIAG(OVERWRITE); OWED[{s} * {nt} + i3] = 0 "
                 ":: else -> skip fi; i3++ :: else -> break od;")
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, STAGE_CTA({s}));",
                     f"if :: ST == {RUNNING} ->")
            code.open += 1
        if self.stores_read:
            code.add(f"unread_by_store({s}, 0, NCHUNKS({s}));")
        code.add(f"i3 = 0; do :: i3 < NCHUNKS({s}) -> CH_tile[CHUNK_BASE({s}) + i3] = {tile};"
                 f" CH_w[CHUNK_BASE({s}) + i3] = {W_GENERIC};",
                 f"  forget_bit(CHUNK_BASE({s}) + i3); KN[{a} * {self.wk} + "
                 f"BITW(CHUNK_BASE({s}) + i3)] = KN[{a} * {self.wk} + BITW(CHUNK_BASE({s}) + i3)]"
                 f" | BITM(CHUNK_BASE({s}) + i3); i3++ :: else -> break od;",
                 f"ST_tile[{s}] = {tile};",
                 *[f"SB[{s} * {self.wb} + {w}] = 0;" for w in range(self.wb)])

    def _l_ld_global(self, code, a, node):
        dest, tensor = node.args
        tile = self.index(code, a, tensor)
        code.add("ok = 0;",
                 f"i3 = 0; do :: i3 < NOPS -> if :: OP[i3 * 11] == 1 && OP[i3 * 11 + 1] == "
                 f"{tile} -> ok = 1 :: else -> skip fi; i3++ :: else -> break od;",
                 "if :: ok -> DIAG(STORE_NOT_VISIBLE) :: else -> skip fi;")

    # ------------------------------------------------------------------------ settling

    def _settle(self) -> list[str]:
        """Machine._settle after a move: no move left is done or a deadlock (with the
        deadlock's diagnostics: the long side of `tx_mismatch`, then `deadlock`)."""
        any_en = " || ".join(["NOPS > 0", *(f"EN_{a}" for a in range(self.na))])
        nb = max(self.nb, 1)
        return [
            f"#define ANY_ENABLED ({any_en})",
            "inline settle() {",
            "    if :: " + " && ".join(
                [f"{self.reg(a, 0)} >= {len(self.program.agents[a].nodes)}"
                 for a in range(self.na)] or ["1"]) + f" -> ST = {DONE}",
            f"    :: else -> ST = {DEADLOCK};",
            f"      i2 = 0; do :: i2 < {nb} ->",
            "        if :: B_valid[i2] && !LED[i2 * 3 + 2] && LED[i2 * 3] > LED[i2 * 3 + 1] && "
            "B_pend[i2] == 0 && B_tx[i2] > 0 -> DIAG(TX_MISMATCH) :: else -> skip fi; i2++",
            "      :: else -> break od;",
            "      DIAG(DEADLOCK)",
            "    fi",
            "}",
        ]

    def _can_hold(self, k: int) -> str:
        """copies.can_hold(k) as one expression (a guard must be exact: a move offered that
        does nothing would be a self-loop, a false livelock)."""
        f = k * NF
        bar = f"OP[{f + F_BAR}]"
        others = " || ".join(
            f"({j} < NOPS && OP[{j * NF + F_DIR}] == 0 && OP[{j * NF + F_BAR}] == {bar})"
            for j in range(self.max_ops) if j != k) or "0"
        return (f"({k} < NOPS && OP[{f + F_DIR}] == 0 && B_tx[{bar}] - HELD[{bar}] - "
                f"CHUNK_BYTES(OP[{f + F_STAGE}]) <= 0 && (OP[{f + F_NEXT}] + 1 < "
                f"OP[{f + F_END}] || {others}))")

    def _processes(self) -> list[str]:
        """COUNT and the kind queries: one process whose loop offers every enabled move (SPIN's
        states are then exactly the machine's); LIVELOCK: a process per agent and one for the
        TMA engine (SPIN's weak fairness is per process)."""
        moves = [opt for a in range(self.na) for opt in self.options[a]]
        tma = []
        for k in range(self.max_ops):
            tma.append(f":: d_step {{ ST == {RUNNING} && {k} < NOPS -> "
                       f"printf(\"MOVE t {k}\\n\"); tma_step({k}, 0) }}")
            tma.append(f":: d_step {{ ST == {RUNNING} && {self._can_hold(k)} -> "
                       f"printf(\"MOVE h {k}\\n\"); tma_step({k}, 1) }}")
        init = "  d_step { READ_QUERY INIT_DONE = 1; " + " ".join(self.init) + " };"
        out = ["bit INIT_DONE;", "#ifndef LIVELOCK", "active proctype machine() {", init,
               "  do", *["  " + x for x in moves + tma],
               # Machine._settle as a move of its own (a function of the state, so COUNT leaves
               # it out and SPIN's states stay the engine's): done, or a deadlock (pan's invalid
               # end state) with its diagnostics.
               "#ifndef COUNT",
               f"  :: d_step {{ QV != {COUNT} && ST == {RUNNING} && !ANY_ENABLED -> "
               "settle() }",
               f"  :: QV != {COUNT} && (ST == {DONE} || ST == {UNDEFINED}) -> break", "#endif",
               "  od", "}", "#else"]
        # LIVELOCK: a process per agent and one for the TMA engine; the first initialises.
        for a in range(self.na):
            out += [f"active proctype agent{a}() {{", init if a == 0 else "  (INIT_DONE);",
                    "  do", *["  " + x for x in self.options[a]], "  od", "}"]
        out += ["active proctype tma() {", "  (INIT_DONE);", "  do",
                *["  " + x for x in tma], "  od", "}", "#endif"]
        text_init = "\n".join(out)
        return [text_init]


def export(cfg: PipelineConfig, max_ops: int | None = None) -> Model:
    """The Promela model of one configuration (see the module docstring)."""
    return Exporter(cfg, max_ops).export()
