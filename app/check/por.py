"""Partial-order reduction: persistent (stubborn) sets from a static independence relation that
the compiled program gives.

Every move touches *resources*: a barrier (its phase, counts, tx ledger, held bytes, the
knowledge its phases carry, its reuse flag), a stage (its chunks, tile, the barriers its loads
complete on, the owed entries of its tiles, the knowledge bits of its chunks), an agent (its
registers, knowledge, wait history), a CTA's naming of its in-flight copies, and a CTA's exit
(read by every remote access into it, written by the move that ends one of its agents). Two
moves whose resources are disjoint commute, neither enables or disables the other, and each
raises the same diagnostics in either order; CTAs interact only through remote arrives,
expect-tx and complete-tx, multicast loads and their exits. `Independence` computes each
line's resources once per program (every element an operand can name, every CTA a multicast can
reach), and per state the resources of each mover's current move (its operands evaluated).

`Independence.persistent` picks, in a state, a set of movers closed under the stubborn-set rules
(Valmari; Godefroid's persistent sets):

- for an enabled member, every mover that can touch what its move touches, now or later (its
  own current move or any line reachable from its program counter, the copies its load lines
  issue included), is a member;
- for a member blocked in a wait on barrier `b`, every mover that can touch `b` is a member
  (only a barrier operation on `b` can let the wait return: a necessary enabling set).

Then no sequence of moves of non-members can touch what a member's move touches, so the
members' enabled moves form a persistent set. The search tries only those (the smallest set over
every enabled seed). Used only where every line kind of the program is one this module knows
(`SUPPORTED`) and the program cannot come back to a state (`app.sim.livelock.can_cycle`: the
graph is acyclic, so the cycle proviso holds trivially and no livelock can exist); anywhere else
the search expands every move, as before. A move that stops the run with undefined behaviour
stops every other mover: where a chosen move does, the state is expanded fully.

What it preserves (docs/checker.md, "Reduction 4"): every reachable deadlock state, and every
diagnostic kind some move can raise. Not the length of a shortest schedule: the engine answers
lengths by a second, bounded search without this reduction (`passes.two_passes`).
"""

from __future__ import annotations

from app.sim.core import OP_AGENT, OP_BAR, OP_STAGE, OP_TILE
from app.sim.machine import PC, Machine
from app.sim.program import Branch, Jump, Line, Ref

from .model import _may_end_after
from .por_lookahead import AHEAD_CACHE, ARRIVES, TX_LINES, WAITS, Lookahead, _eval, _reads, _refs
from .por_sets import PersistentSets

SUPPORTED = frozenset({
    "assign", "commit_group", "arrive", "arrive_drop", "arrive_expect_tx", "expect_tx",
    "complete_tx", "wait_parity", "wait_token", "load", "ld_shared", "st_shared",
    "proxy_fence",
})
"""Line kinds whose resources this module knows. `mbarrier.init`/`inval` (they reset what every
agent knows of a barrier), bulk stores and global memory, and the tensor core are left out: a
program with any of them is searched without this reduction."""

NAME_BUCKETS = 8


def applies(machine: Machine, cyclic: bool, cycles: bool = False) -> bool:
    """Whether the reduction may be used on this program (one that can cycle only with
    `cycles`: see `Explorer`)."""
    if cyclic and not cycles:
        return False
    return all(kind is None or kind in SUPPORTED for code in machine.code for kind in code.kinds)


class Independence(Lookahead, PersistentSets):
    """Resource footprints of one program's moves (see the module docstring).

    A footprint is an int: one bit per barrier, stage, agent and CTA naming (touched: read or
    written, all conflict), then a run of CTA-exit-read bits and a run of CTA-exit-write bits
    (a read conflicts with a write only). `conflicts(f, g)` is `f & _flip(g)`."""

    def __init__(self, machine: Machine, cyclic: bool = False):
        program = machine.program
        self.machine = machine
        self.cut_loops = cyclic
        """A program that can cycle: `_walk` stops at a loop round that touched nothing new
        (a `while (1)` that counts would be followed LOOKAHEAD_LIMIT lines in every state)."""
        self.n_agents = machine.n_agents
        nb, ns, na = machine.n_bars, machine.n_stages, machine.n_agents
        ctas = max(1, program.cluster)
        self.ctas = ctas
        self.stage_base = nb
        self.agent_base = nb + ns
        self.name_base = nb + ns + na
        self.rw_bits = nb + ns + na + ctas * NAME_BUCKETS
        self.xr_base = self.rw_bits
        self.xw_base = self.rw_bits + ctas
        self.rw_mask = (1 << self.rw_bits) - 1
        self.x_mask = (1 << ctas) - 1
        self.exit_mask = ((1 << (2 * ctas)) - 1) << self.xr_base
        self.inc_base = self.xw_base + ctas
        self.bar_mask = (1 << nb) - 1
        """After the exit bits, one *add* bit per resource of the first run: a write that
        commutes with every other add of that resource and conflicts with any other touch of
        it. A barrier's add bit (its *tx* bit) is a `complete_tx` that cannot complete the
        phase (a thread's, with arrivals pending; a landing, see `PersistentSets.landings`):
        the tx-count and the knowledge only add. A stage's and a naming's add bits are a
        landing's write of chunks no other copy in flight writes, and the end of its copy."""
        self.agent_cta = machine.agent_cta
        self.barrier_arrays = {b.array for b in program.barriers}
        self.stage_arrays = {s.array for s in program.stages}
        self.thread_tx = 0
        """The barriers some thread's `mbarrier.complete_tx` line can name: there a phase may
        complete with bytes no copy brings, so `PersistentSets.landings` keeps to the plain rule."""
        for a in range(na):
            for f in self._barrier_lines(a, frozenset({"complete_tx"})):
                self.thread_tx |= f
        self.barrier_cta = tuple(b.cta for b in program.barriers)
        self.stage_cta = tuple(s.cta for s in program.stages)
        self.stage_bit = tuple(i if s.alias is None else s.alias[0]
                               for i, s in enumerate(program.stages))
        """Views of one region (`smem ... at`) are one resource: a write through one is a
        write of the other's bytes (families/smem.py, `alias_write`)."""
        self.release = [0] * nb
        for i, stage in enumerate(program.stages):
            if stage.release is not None:
                self.release[stage.release] |= self._stage(i)
        self.cta_stages = [0] * ctas
        for i, stage in enumerate(program.stages):
            self.cta_stages[stage.cta] |= self._stage(i)
        self.stages_of = [0] * nb
        """Per barrier, the stages a load completing on it can write (a wait that returns on
        it takes their tiles)."""
        for a, code in enumerate(machine.code):
            for node in code.nodes:
                if isinstance(node, Line) and node.kind == "load":
                    for s, b in self._load_targets(node, None, machine.agent_cta[a]):
                        self.stages_of[b] |= self._stage(s)
        self.holdable = [self._holdable(a) for a in range(na)]
        """Per agent, the stages whose tiles it can come to hold (a wait that returns on a
        stage's barrier, or its `ld.shared`): only those can its arrive release (discharging
        an agent that holds nothing there changes nothing)."""
        self.line_fp = [tuple(self._line(a, pc, None) for pc in range(code.end))
                        for a, code in enumerate(machine.code)]
        self.future = [self._future(a, self.line_fp[a]) for a in range(na)]
        """Per agent, per program counter: every resource a line reachable from there (that
        line included) can touch."""
        self._reads = [tuple(_reads(node) for node in code.nodes) for code in machine.code]
        """Per agent, per node: the registers (as a set) its expressions read."""
        self._ahead: dict[tuple, tuple] = {}
        self._current: dict[tuple, int] = {}
        self._flips: dict[int, int] = {}
        self._sets: dict[tuple, list[int] | None] = {}
        self._shapes: dict[tuple, tuple] = {}
        self.future_arrive = [self._future(a, self._barrier_lines(a, ARRIVES))
                              for a in range(na)]
        """Per agent, per program counter: the barriers it can arrive on from there."""
        self.future_tx = [self._future(a, self._barrier_lines(a, TX_LINES)) for a in range(na)]
        """Per agent, per program counter: the barriers it can complete bytes on from there
        (a thread's complete-tx, or a load it issues)."""

    # ------------------------------------------------------------------ resources

    def _stage(self, s: int) -> int:
        return 1 << (self.stage_base + self.stage_bit[s])

    def _name(self, c: int, tile: int) -> int:
        """A copy's name (its serial) depends on the copies in flight of the same tile into
        the same CTA: one resource per CTA and tile (tiles folded into `NAME_BUCKETS`)."""
        return 1 << (self.name_base + c * NAME_BUCKETS + tile % NAME_BUCKETS)

    def _xr(self, c: int) -> int:
        return 1 << (self.xr_base + c)

    def _xw(self, c: int) -> int:
        return 1 << (self.xw_base + c)

    def current(self, a: int, r) -> int:
        """What agent `a`'s current line touches, its operands evaluated (cached)."""
        key = (a, tuple(r))
        f = self._current.get(key)
        if f is None:
            if len(self._current) > AHEAD_CACHE:
                self._current.clear()
            f = self._current[key] = self._line(a, r[PC], r)
        return f

    def flipped(self, f: int) -> int:
        """`flip`, cached."""
        g = self._flips.get(f)
        if g is None:
            if len(self._flips) > AHEAD_CACHE:
                self._flips.clear()
            g = self._flips[f] = self.flip(f)
        return g

    def flip(self, f: int) -> int:
        """`f` with its exit reads and writes swapped, and its barrier bits and tx bits
        swapped: `g & flip(f)` is a conflict (a tx bit conflicts with its barrier's bit, not
        with another tx bit)."""
        rw = f & self.rw_mask
        xr = (f >> self.xr_base) & self.x_mask
        xw = (f >> self.xw_base) & self.x_mask
        inc = (f >> self.inc_base) & self.rw_mask
        return rw | (xw << self.xr_base) | (xr << self.xw_base) | (rw << self.inc_base) | inc

    @staticmethod
    def _values(ref: Ref, r) -> list[int]:
        """The flat indices `ref` can name: exactly, with registers `r`; else every one."""
        if r is not None:
            try:
                index = _eval(ref.index, r)
                if ref.cta is None:
                    if not 0 <= index < ref.size:
                        return []
                    return [ref.base + index]
                c = _eval(ref.cta, r)
                if not (0 <= index < ref.size and 0 <= c < ref.ctas):
                    return []
                return [ref.base + index + c * ref.size]
            except Exception:  # noqa: BLE001 (an operand the move itself will refuse)
                r = None
        indices = [ref.index.const] if ref.index.const is not None else range(ref.size)
        if ref.cta is None:
            return [ref.base + i for i in indices]
        ctas = [ref.cta.const] if ref.cta.const is not None else range(ref.ctas)
        return [ref.base + i + c * ref.size for c in ctas for i in indices]

    def _load_targets(self, line: Line, r, own: int) -> list[tuple[int, int]]:
        """The (stage, barrier) pairs a load line can write and complete on. Where the stage
        and the barrier are indexed by the same expression (`smem[i]`, `full_barrier[i]`),
        they take the same value in every state, so they pair index by index."""
        dst, _offset, _src, _size, bar, multicast = line.args[:6]
        if r is None and _same_index(dst, bar):
            pairs = list(zip(self._values(dst, None), self._values(bar, None), strict=True))
        else:
            pairs = [(s, b) for s in self._values(dst, r) for b in self._values(bar, r)]
        if multicast is None:
            return pairs
        _mask, _own, stage_size, bar_size = multicast
        return [(s + (c - _own) * stage_size, b + (c - _own) * bar_size)
                for c in range(self.ctas) for s, b in pairs
                if 0 <= s + (c - _own) * stage_size < len(self.stage_cta)
                and 0 <= b + (c - _own) * bar_size < len(self.barrier_cta)]

    def _line_barriers(self, a: int, pc: int, r, kinds: frozenset) -> int:
        """The barriers (a bit each) agent `a`'s line at `pc` touches if its kind is one of
        `kinds`."""
        node = self.machine.code[a].nodes[pc]
        if not isinstance(node, Line) or node.kind not in kinds:
            return 0
        if node.kind == "load":
            return sum({1 << b for _, b in self._load_targets(node, r,
                                                              self.machine.agent_cta[a])})
        return sum({1 << b for ref in _refs(node.args) if ref.array in self.barrier_arrays
                    for b in self._values(ref, r)})

    def _line(self, a: int, pc: int, r) -> int:
        """What agent `a`'s line at `pc` can touch (with registers `r`: what it touches)."""
        machine = self.machine
        code = machine.code[a]
        node = code.nodes[pc]
        own = machine.agent_cta[a]
        f = 1 << (self.agent_base + a)
        if not isinstance(node, Line):
            return f
        kind = node.kind
        barriers, stages = [], []
        if kind == "load":
            tiles = self._values(node.args[2], r)
            for s, b in self._load_targets(node, r, own):
                stages.append(s)
                barriers.append(b)
                c = self.stage_cta[s]
                for t in tiles:
                    f |= self._name(c, t)
                if c != own:
                    f |= self._xr(c)
        else:
            for ref in _refs(node.args):
                if ref.array in self.barrier_arrays:
                    barriers.extend(self._values(ref, r))
                elif ref.array in self.stage_arrays:
                    stages.extend(self._values(ref, r))
        for b in barriers:
            f |= 1 << (self.inc_base + b if kind == "complete_tx" else b)
            if kind in WAITS:
                f |= self.stages_of[b]
            if kind in ARRIVES:
                f |= self.release[b] & self.holdable[a]
            if self.barrier_cta[b] != own:
                f |= self._xr(self.barrier_cta[b])
        for s in stages:
            f |= self._stage(s)
            if self.stage_cta[s] != own:
                f |= self._xr(self.stage_cta[s])
        if kind == "proxy_fence":
            f |= self.cta_stages[own]
        if _may_end_after(code, pc):
            f |= self._xw(own)
        return f

    def _holdable(self, a: int) -> int:
        out = 0
        for node in self.machine.code[a].nodes:
            if not isinstance(node, Line):
                continue
            for ref in _refs(node.args):
                if node.kind in WAITS and ref.array in self.barrier_arrays:
                    for b in self._values(ref, None):
                        out |= self.stages_of[b]
                elif node.kind == "ld_shared" and ref.array in self.stage_arrays:
                    for st in self._values(ref, None):
                        out |= self._stage(st)
        return out

    def _barrier_lines(self, a: int, kinds: frozenset) -> tuple[int, ...]:
        """Per line of agent `a`: the barriers it touches if its kind is one of `kinds`."""
        code = self.machine.code[a]
        out = []
        for node in code.nodes:
            f = 0
            if isinstance(node, Line) and node.kind in kinds:
                if node.kind == "load":
                    targets = self._load_targets(node, None, self.machine.agent_cta[a])
                    f = sum({1 << b for _, b in targets})
                else:
                    f = sum({1 << b for ref in _refs(node.args)
                             if ref.array in self.barrier_arrays for b in self._values(ref, None)})
            out.append(f)
        return tuple(out)

    def _future(self, a: int, fp: tuple[int, ...]) -> tuple[int, ...]:
        code = self.machine.code[a]
        end = code.end
        succ = []
        for pc, node in enumerate(code.nodes):
            if isinstance(node, Jump):
                succ.append((node.target,))
            elif isinstance(node, Branch):
                succ.append((pc + 1, node.target))
            else:  # a line or an Assign
                succ.append((pc + 1,))
        future = list(fp)
        changed = True
        while changed:
            changed = False
            for pc in range(end - 1, -1, -1):
                f = future[pc]
                for nxt in succ[pc]:
                    if nxt < end:
                        f |= future[nxt]
                if f != future[pc]:
                    future[pc] = f
                    changed = True
        return (*future, 0)

    def copy(self, op, adds: bool = False, own_chunks: bool = False) -> int:
        """What an in-flight load's moves (its landings and holds) touch. `adds`: its
        landings cannot complete the barrier's phase (`PersistentSets.landings`), so they
        only add to the barrier and to the naming; `own_chunks` as well: no other copy in
        flight writes the chunks it has left, so its writes add to the stage."""
        s, b = op[OP_STAGE], op[OP_BAR]
        c = self.stage_cta[s]
        f = 1 << b | self._name(c, op[OP_TILE])
        if adds:
            f <<= self.inc_base
            f |= self._stage(s) << self.inc_base if own_chunks else self._stage(s)
        else:
            f |= self._stage(s)
        if self.machine.agent_cta[op[OP_AGENT]] != c:
            f |= self._xr(c)
        return f


def _same_index(x: Ref, y: Ref) -> bool:
    """Whether `x` and `y` name the same index (and CTA) in every state: the same
    expression, over arrays of one size (`_values` lists both in the same order)."""
    if x.size != y.size or x.index.const is not None or x.index.code != y.index.code:
        return False
    if x.cta is None or y.cta is None:
        return x.cta is None and y.cta is None
    return x.ctas == y.ctas and x.cta.const is None and x.cta.code == y.cta.code


__all__ = ["SUPPORTED", "Independence", "applies"]
