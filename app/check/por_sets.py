"""The persistent (stubborn) set of movers in one state, from the footprints that
`por.Independence` computes (docs/checker.md, "Reduction 4"). A mixin of `Independence`."""

from __future__ import annotations

from app.sim.core import LOAD, OP_AGENT, OP_BAR, OP_DIR, OP_STAGE, OP_TILE
from app.sim.machine import PC, Machine

from .por_lookahead import AHEAD_CACHE, WAITS

BARRIERS, REGS, TMA = 0, 4, 5
"""Where `Machine.freeze()` keeps the parts `persistent` reads."""


class PersistentSets:
    """`Independence.persistent` and the rules it closes a set under."""

    def persistent_of(self, m: Machine, frozen: tuple, ready, numbers: tuple | None = None):
        """`persistent(m)` for `m` thawed from `frozen`, whose moves are `ready`, remembered
        by what it reads: the registers, each barrier's validity, phase parity and whether
        arrivals or bytes are pending, each copy's direction, tile, stage, barrier and agent
        (not its chunk cursor), and the moves. States differ mostly in what it does not read
        (chunks, counts, cursors): on `cluster_multicast` one in ten states needs its own.
        `numbers`: the state's part numbers in the search's table (model.Canonical.pack),
        whose projections are remembered by number, unhashed."""
        sets, shapes = self._sets, self._shapes
        if numbers is None:
            bars, copies, regs = frozen[BARRIERS], frozen[TMA], frozen[REGS]
        else:
            bars, copies, regs = numbers[BARRIERS], numbers[TMA], numbers[REGS]
        bar_shape = shapes.get(("b", bars))
        if bar_shape is None:
            bar_shape = shapes[("b", bars)] = tuple(
                (b[4], b[0] & 1, b[1] > 0, b[1] == 0, b[3] > 0) for b in frozen[BARRIERS])
        tma_shape = shapes.get(("t", copies))
        if tma_shape is None:
            tma_shape = shapes[("t", copies)] = tuple(
                (op[OP_DIR], op[OP_TILE], op[OP_STAGE], op[OP_BAR], op[OP_AGENT])
                for op in frozen[TMA])
        key = (regs, bar_shape, tma_shape, tuple(ready))
        hit = sets.get(key, sets)
        if hit is sets:
            if len(sets) > AHEAD_CACHE:
                sets.clear()
            if len(shapes) > AHEAD_CACHE:
                shapes.clear()
            hit = sets[key] = self.persistent(m)
        return hit

    def persistent(self, m: Machine) -> list[int] | None:
        """The moves of a smallest stubborn set of movers in `m`'s state, in move order; None
        where it is every enabled move.

        A mover's later moves are split at its *boundary*: the first wait on its way that
        blocks now (its barrier's phase must complete first) on a barrier its own earlier
        lines do not touch. What it does before counts as its own (a member's dependent line
        there makes it a member); what it does after can only follow that completion, so the
        movers that can let the wait return (a necessary enabling set) stand for it. With an
        arrival pending only an arrive can complete a phase; with none pending and bytes owed,
        only a complete-tx (a thread's, or a load's landing). A blocked mover's boundary is
        the wait it stands on (else the state is expanded fully: it may return and move on).

        A CTA's exit is one event, the end of the last of its agents. A member's move that
        reaches into CTA c (or may end c's last agent) conflicts with it only while every
        other agent of c can end meanwhile: where one of them is a member or stands behind
        its boundary (`behind`), c cannot exit before the member moves (`_exit_guard`)."""
        ready = m.ready
        if len(ready) <= 1:
            return None
        n = self.n_agents
        regs, code = m.regs, m.code
        tma = m.tma
        n_tma = len(tma)
        hold = n + 1 + n_tma
        moves_of: dict[int, list[int]] = {}
        for move in ready:
            if move < n:
                moves_of[move] = [move]
            elif move == n:
                return None  # the tensor core: not modelled here
            else:
                k = move - n - 1 if move < hold else move - hold
                moves_of.setdefault(n + k, []).append(move)
        barriers = m.barriers
        cur: dict[int, int] = {}
        # per mover: (touches before its boundary (flipped), arrives on, completes on) and
        # after it (the same three), its boundary (barrier, how) or None
        near: dict[int, tuple[int, int, int]] = {}
        far: dict[int, tuple[int, int, int]] = {}
        boundary: dict[int, tuple[int, int]] = {}
        flip = self.flipped
        unfinished: list[list[int]] = [[] for _ in range(self.ctas)]
        for a in range(n):
            r = regs[a]
            pc = r[PC]
            if pc >= code[a].end:
                continue
            unfinished[self.agent_cta[a]].append(a)
            f, arrive, tx, points = self.lookahead(a, r)
            enabled = a in moves_of
            if enabled:
                cur[a] = self._completing(self.current(a, r), barriers)
            elif code[a].nodes[pc].kind not in WAITS:
                return None
            cut = None
            for point in points:
                b, parity, pre, pre_arrive, pre_tx, touched, _at = point
                barrier = barriers[b]
                if not touched and barrier.valid and (barrier.phase & 1) == parity:
                    cut = point
                    break
            if not enabled and (cut is None or cut is not points[0] or cut[6] != pc):
                return None  # blocked, but not on a wait the lookahead names as its boundary
            if cut is None:
                near[a] = (flip(f), arrive, tx)
                far[a] = (0, 0, 0)
                continue
            b, _parity, pre, pre_arrive, pre_tx, _touched, _at = cut
            barrier = barriers[b]
            boundary[a] = (b, 0 if barrier.pending_arrivals > 0 else
                           1 if barrier.tx_count > 0 else 2)
            near[a] = (flip(pre), pre_arrive, pre_tx)
            far[a] = (flip(f), arrive, tx)
        for k, op in enumerate(tma):
            if op[OP_DIR] != LOAD:
                return None
            x = n + k
            cur[x] = f = self.copy(op)
            near[x] = (flip(f), 0, 1 << op[OP_BAR])
            far[x] = (0, 0, 0)
        # per slot (touches, arrives on, completes on): each mover, what it touches before its
        # boundary, all it can touch, and whether it can move now
        tables: list = [None, None, None]
        exits = self.exit_mask
        best: list[int] | None = None
        best_size = len(ready)
        for seed in moves_of:
            if best_size == 1:
                break  # no set is smaller
            members = {seed}
            behind: set[int] = set()
            work: list[tuple[int, int]] = [(seed, 0)]
            size = len(moves_of[seed])
            guarded: set[tuple[int, int]] = set()
            while work and size < best_size:
                while work and size < best_size:
                    y, virtual = work.pop()
                    if virtual == 2:  # a guard of a CTA's exit failed: its conflicts, plainly
                        bit, slot = cur[y] & exits, 0
                    elif virtual:  # the movers that can let y's boundary wait return
                        b, how = boundary[y]
                        bit, slot = 1 << b, (1, 2, 0)[how]
                        if how == 2:
                            bit = self.flip(bit)
                    else:
                        bit, slot = cur[y] & ~exits, 0
                    table = tables[slot]
                    if table is None:
                        table = tables[slot] = [
                            (z, near[z][slot], near[z][slot] | far[z][slot], z in moves_of)
                            for z in near]
                    for z, before, whole, enabled in table:
                        if not whole & bit or z in members:
                            continue
                        if before & bit and enabled:
                            members.add(z)
                            work.append((z, 0))
                            size += len(moves_of[z])
                        elif z not in behind:
                            behind.add(z)
                            work.append((z, 1))
                if size >= best_size:
                    break
                work = self._exit_guard(members, behind, cur, boundary, moves_of,
                                        unfinished, guarded)
            if size < best_size:
                best_size = size
                best = sorted(move for x in members for move in moves_of.get(x, ()))
        return best

    def _completing(self, f: int, barriers) -> int:
        """A move's footprint in this state: a `complete_tx` on a barrier with no arrival
        pending may complete its phase, so it touches the barrier itself."""
        inc = (f >> self.inc_base) & self.bar_mask
        while inc:
            low = inc & -inc
            b = low.bit_length() - 1
            if barriers[b].pending_arrivals == 0 or not barriers[b].valid:
                f |= low
            inc ^= low
        return f

    def _exit_guard(self, members: set, behind: set, cur: dict, boundary: dict,
                    moves_of: dict, unfinished: list, guarded: set) -> list[tuple[int, int]]:
        """Work that keeps every CTA whose exit a member's move reads or writes from exiting
        before it: for each, some other unfinished agent of that CTA must be a member or behind
        its boundary. Where none is, one blocked on its boundary now is put behind it (the
        movers that can let its wait return join); failing that, the member's exit conflicts
        are taken as they are (every mover that can end or reach into that CTA)."""
        work: list[tuple[int, int]] = []
        for y in sorted(members):
            f = cur[y]
            for c in range(self.ctas):
                if not (f >> (self.xr_base + c)) & 1 and not (f >> (self.xw_base + c)) & 1:
                    continue
                if (y, c) in guarded:
                    continue
                if any(x != y and (x in members or x in behind) for x in unfinished[c]):
                    continue
                guarded.add((y, c))
                stand = [x for x in unfinished[c] if x != y and x not in moves_of
                         and x in boundary]
                if stand:
                    behind.add(stand[0])
                    work.append((stand[0], 1))
                else:
                    work.append((y, 2))
        return work
