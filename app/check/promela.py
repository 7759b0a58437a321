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

import json

from app.check.promela_agents import Agents
from app.check.promela_inlines import Inlines
from app.check.promela_lines import Lines
from app.check.promela_text import (
    ANY,
    COUNT,
    DONE,
    EXPORTED,
    KINDS,
    MAX_OPS,
    NF,
    RUNNING,
    STATUS,
    UNDEFINED,
    WORD,
    Code,
    Expr,
    Model,
    NotExported,
    n_words,
)
from app.sim.config import PipelineConfig
from app.sim.core import TILE_SPAN
from app.sim.machine import Machine
from app.sim.program import SINK, Line, Ref


class Exporter(Agents, Inlines, Lines):
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
        self.wk = n_words(self.kbits)
        self.wb = n_words(self.nb)
        self.ws = n_words(self.ns)
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

    def expr(self, code: Code, a: int, e) -> str:
        if e.const is not None:
            return str(e.const)
        ev = Expr(lambda i: self.reg(a, i))
        text = ev.run(e.code)
        for cond in ev.ub:
            code.ub(cond, "undefined_behavior")
        return text

    def index(self, code: Code, a: int, ref: Ref) -> str:
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

    # ------------------------------------------------------------------------ processes

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
