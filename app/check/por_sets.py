"""The persistent (stubborn) set of movers in one state, from the footprints that
`por.Independence` computes (docs/checker.md, "Reduction 4"). A mixin of `Independence`."""

from __future__ import annotations

from app.sim.core import LOAD, OP_AGENT, OP_BAR, OP_DIR, OP_END, OP_NEXT, OP_STAGE, OP_TILE
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
        landings = self.landings(m)
        key = (regs, bar_shape, tma_shape, landings, tuple(ready))
        hit = sets.get(key, sets)
        if hit is sets:
            if len(sets) > AHEAD_CACHE:
                sets.clear()
            if len(shapes) > AHEAD_CACHE:
                shapes.clear()
            hit = sets[key] = self.persistent(m, landings)
        return hit

    def landings(self, m: Machine) -> tuple:
        """What the state says of its loads in flight beyond their shape: per copy, whether
        its landings only add (`adds`, `own_chunks`, as `Independence.copy` takes them), and
        per barrier whether its phase needs every copy in flight on it to land (`exact`).

        A barrier is *exact* where it is valid, no thread's `complete_tx` can name it, and
        the bytes it still owes (its tx-count less the bytes held) are at least the bytes of
        the copies in flight on it. Then no landing overshoots the count, no landing may
        hold (`copies.can_hold` needs it to reach zero with a later chunk on the barrier), and
        while two copies have bytes left, neither's landing brings the count to zero: the
        phase completes with the last byte in flight, whatever the order. Only a move on the
        barrier itself (an arrive, an expect-tx, a new load; every one conflicts with a
        landing's add bit) can change that. So on an exact barrier a landing adds, unless it
        is the last chunk of the only copy left with arrivals all in (it completes the
        phase); and with arrivals all in, any copy in flight is a necessary enabling set of
        a wait on it."""
        tma = m.tma
        if not tma:
            return ()
        chunk_bytes = m.chunk_bytes
        owed: dict[int, int] = {}
        count: dict[int, int] = {}
        for op in tma:
            if op[OP_DIR] != LOAD:
                return ()
            b = op[OP_BAR]
            owed[b] = owed.get(b, 0) + (op[OP_END] - op[OP_NEXT]) * chunk_bytes[op[OP_STAGE]]
            count[b] = count.get(b, 0) + 1
        barriers, held, thread_tx = m.barriers, m.held, self.thread_tx
        exact = {}
        for b, nbytes in owed.items():
            barrier = barriers[b]
            exact[b] = (barrier.valid and not thread_tx >> b & 1
                        and barrier.tx_count - held[b] >= nbytes)
        out = []
        plain = m.aliased
        for k, op in enumerate(tma):
            b = op[OP_BAR]
            adds = exact[b] and (barriers[b].pending_arrivals > 0 or count[b] > 1
                                 or op[OP_NEXT] + 1 < op[OP_END])
            own = adds and not plain and not any(
                j != k and other[OP_STAGE] == op[OP_STAGE] and other[OP_NEXT] < op[OP_END]
                and op[OP_NEXT] < other[OP_END] for j, other in enumerate(tma))
            out.append((adds, own))
        return (tuple(out), tuple(sorted(b for b, e in exact.items() if e)))

    def persistent(self, m: Machine, landings: tuple | None = None,
                   seeds: list[int] | None = None,
                   depths: tuple[bool, ...] = (False, True)) -> list[int] | None:
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
        its boundary (`behind`), c cannot exit before the member moves (`_exit_guard`).

        Each seed's set is grown twice (`depths`): keeping a mover behind its first cut,
        then behind the deepest cut whose prefix keeps clear of the members (the second is
        taken only where strictly smaller: measured, the first sets on ties store fewer
        states, docs/checker.md). `seeds`: grow the set from these movers only (the tests
        check each seed's sets)."""
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
        # per mover: what it touches before each of its cuts (flipped), arrives on and
        # completes on there, and what it can touch at all (the same three); each cut's
        # (barrier, how)
        before: dict[int, tuple[tuple[int, int, int], ...]] = {}
        whole: dict[int, tuple[int, int, int]] = {}
        cuts: dict[int, tuple[tuple[int, int], ...]] = {}
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
            blocking = [point for point in points if not point[5]
                        and barriers[point[0]].valid
                        and (barriers[point[0]].phase & 1) == point[1]]
            if not enabled and (not blocking or blocking[0] is not points[0]
                                or blocking[0][6] != pc):
                return None  # blocked, but not on a wait the lookahead names as its boundary
            whole[a] = (flip(f), arrive, tx)
            before[a] = tuple((flip(pre), pre_arrive, pre_tx)
                              for _b, _p, pre, pre_arrive, pre_tx, _t, _at in blocking)
            cuts[a] = tuple((b, 0 if barriers[b].pending_arrivals > 0 else
                             1 if barriers[b].tx_count > 0 else 2)
                            for b, *_rest in blocking)
        if landings is None:
            landings = self.landings(m)
        flags, exact = landings or ((), ())
        copies_on: dict[int, list[int]] = {}
        for k, op in enumerate(tma):
            if op[OP_DIR] != LOAD:
                return None
            x = n + k
            cur[x] = f = self.copy(op, *flags[k])
            whole[x] = (flip(f), 0, 1 << op[OP_BAR])
            before[x] = ()
            cuts[x] = ()
            if op[OP_BAR] in exact and x in moves_of:
                copies_on.setdefault(op[OP_BAR], []).append(x)
        # per slot (touches, arrives on, completes on): each mover, what it touches before
        # each cut, all it can touch, and whether it can move now
        tables: list = [None, None, None]
        exits = self.exit_mask
        best: list[int] | None = None
        best_size = len(ready)
        grown = list(moves_of) if seeds is None else [x for x in seeds if x in moves_of]
        for deep, seed in [(deep, x) for deep in depths for x in grown]:
            if best_size == 1:
                break  # no set is smaller
            members = {seed}
            behind: dict[int, int] = {}
            """Movers kept behind a cut (by its index): they cannot pass it before a member
            moves, and do not touch a member's move before it."""
            work: list[tuple[int, int]] = [(seed, 0)]
            size = len(moves_of[seed])
            guarded: set[tuple[int, int]] = set()
            while work and size < best_size:
                while work and size < best_size:
                    y, virtual = work.pop()
                    if virtual == 2:  # a guard of a CTA's exit failed: its conflicts, plainly
                        bit, slot = cur[y] & exits, 0
                    elif virtual:  # the movers that can let y's cut wait return
                        b, how = cuts[y][behind[y]]
                        on_b = copies_on.get(b) if how == 1 else None
                        if on_b:  # an exact barrier (`landings`): one copy on it will do
                            if not any(x in members for x in on_b):
                                x = min(on_b, key=lambda x: len(moves_of[x]))
                                members.add(x)
                                work.append((x, 0))
                                size += len(moves_of[x])
                            continue
                        bit, slot = 1 << b, (1, 2, 0)[how]
                        if how == 2:
                            bit = self.flip(bit)
                    else:
                        bit, slot = cur[y] & ~exits, 0
                    table = tables[slot]
                    if table is None:
                        table = tables[slot] = [
                            (z, tuple(cut[slot] for cut in before[z]), whole[z][slot],
                             z in moves_of) for z in whole]
                    for z, pres, reach, enabled in table:
                        if not reach & bit or z in members:
                            continue
                        level = 0
                        while level < len(pres) and not pres[level] & bit:
                            level += 1
                        if not level:  # it can touch the move before any cut
                            if enabled or not pres:
                                members.add(z)
                                work.append((z, 0))
                                size += len(moves_of.get(z, ()))
                            continue
                        if not deep:
                            level = 1
                        if behind.get(z, len(pres)) > level - 1:
                            behind[z] = level - 1
                            work.append((z, 1))
                if size >= best_size:
                    break
                work = self._exit_guard(members, behind, cur, cuts, moves_of,
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

    def _exit_guard(self, members: set, behind: dict, cur: dict, cuts: dict,
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
                stand = [x for x in unfinished[c] if x != y and x not in moves_of and cuts[x]]
                if stand:
                    behind[stand[0]] = 0
                    work.append((stand[0], 1))
                else:
                    work.append((y, 2))
        return work
