"""Reduction 2's renaming of identical agents (docs/checker.md): the sort of each group by its
agents' full signatures, the twins of a state, and the state renamed. A mixin of
`model.Canonical`, which sets `groups`, `identity` and the tables these read."""

from __future__ import annotations

from app.sim.core import OP_AGENT

from .layout import F_BULK, F_META, F_OWED, F_REGS, F_TC, F_TMA, TC_AGENT


class Symmetry:
    """Canonical's renaming (a mixin)."""

    def _sorting_renaming(self, frozen: tuple, pend: list) -> tuple[int, ...]:
        """The renaming that sorts each group of identical agents by its *full* signature
        (`self.identity` when each group already is sorted).

        The full signature is everything the state says about one agent, with its name left
        out: its registers, bulk groups, pending moves, wait history, the owed entries that
        carry its bit, its in-flight copies and its tensor-core entries (with their places in
        the queue). Agents with equal full signatures are interchangeable: swapping them leaves
        every owed mask, the sorted copy list and the queue unchanged, so the renamed state is
        the same whichever order the tie is given. Hence one sort is a canonical form for any
        number of identical agents (4 consumers: one sort, not 4! = 24 renamings)."""
        regs = frozen[F_REGS]
        for x, y in self.pairs:
            if not regs[x] < regs[y]:
                break
        else:
            return self.identity  # each group is sorted by its signatures' first part
        bulk = frozen[F_BULK]
        n = self.n_agents
        waits = None
        perm = self.identity
        for group in self.groups:
            first = [regs[a] for a in group]
            if len(set(first)) == len(group):
                # distinct first parts decide the whole order: no more of it is read
                if all(first[i] < first[i + 1] for i in range(len(group) - 1)):
                    continue
                order = sorted(group, key=regs.__getitem__)
            else:
                if waits is None:
                    waits = _waits_by_agent(frozen)
                # The signature starts with what is cheap to read; the rest is read only for
                # ties (a full signature sorts as its first part does where that part differs).
                signatures = {a: (regs[a], bulk[a], pend[a], pend[n + a], waits.get(a, ()))
                              for a in group}
                order = sorted(group, key=signatures.__getitem__)
                if any(signatures[x] == signatures[y]
                       for x, y in zip(order, order[1:], strict=False)):
                    order = sorted(group, key=self._full_signatures(frozen, group,
                                                                    signatures).__getitem__)
            if order != list(group):
                if perm is self.identity:
                    perm = list(perm)
                for slot, a in zip(group, order, strict=True):
                    perm[a] = slot
        return perm if perm is self.identity else tuple(perm)

    def twins(self, frozen: tuple, pend: list) -> set[int]:
        """Agents whose move need not be tried: each has a twin, an identical agent of lower
        number with the same full signature (see `_sorting_renaming`).

        Swapping two twins leaves the state as it is, and the engine treats identical agents
        alike, so the twin's move leads to the swap of the state the first one's move leads
        to: the same key, at the same cost (their pending counts are equal), raising the same
        diagnostic kinds. Trying it would only find that key again."""
        if not self.groups:
            return set()
        regs, bulk = frozen[F_REGS], frozen[F_BULK]
        if all(len({regs[a] for a in group}) == len(group) for group in self.groups):
            return set()  # twins have equal registers
        n = self.n_agents
        waits = _waits_by_agent(frozen)
        out: set[int] = set()
        for group in self.groups:
            signatures = {a: (regs[a], bulk[a], pend[a], pend[n + a], tuple(waits.get(a, ())))
                          for a in group}
            if len(set(signatures.values())) == len(group):
                continue
            full = self._full_signatures(frozen, group, signatures)
            first: dict[tuple, int] = {}
            for a in group:
                if full[a] in first:
                    out.add(a)
                else:
                    first[full[a]] = a
        return out

    def _full_signatures(self, frozen: tuple, group: tuple, signatures: dict) -> dict:
        """Each agent's signature with its owed entries, copies and tensor-core entries."""
        owed, tma, tensor_core = frozen[F_OWED], frozen[F_TMA], frozen[F_TC]
        copies: dict[int, list] = {}
        for op in tma:
            if op[OP_AGENT] in signatures:
                copies.setdefault(op[OP_AGENT], []).append((*op[:OP_AGENT], *op[OP_AGENT + 1:]))
        queue: dict[int, list] = {}
        for place, entry in enumerate(tensor_core):
            if entry[TC_AGENT] in signatures:
                queue.setdefault(entry[TC_AGENT], []).append(
                    (place, entry[:TC_AGENT], entry[TC_AGENT + 1:]))
        meta = frozen[F_META]
        acc_dirty, know, generic_reads = meta[5], meta[7], meta[9]
        full = {}
        for a in group:
            mine = self.bit[a]
            full[a] = (signatures[a], tuple(key for key, mask in owed if mask & mine),
                       tuple(sorted(copies.get(a, ()))), tuple(queue.get(a, ())),
                       bool(acc_dirty & mine), know[a], generic_reads[a])
        return full

    def _mask_table(self, perm: tuple[int, ...]) -> list[int]:
        """Owed masks under a renaming: table[mask] is the mask with each agent's bit moved."""
        table = self._tables.get(perm)
        if table is None:
            bit = self.bit
            table = []
            for mask in range(self.mask_limit):
                moved = mask & ~self.all_bits
                for a, to in enumerate(perm):
                    if bit[a] and mask & bit[a]:
                        moved |= bit[to]
                table.append(moved)
            self._tables[perm] = table
        return table

    def _renamed(self, frozen: tuple, pend: list[int], perm: tuple[int, ...]) -> tuple:
        """The state with agent `a` renamed `perm[a]` (owed masks and store copies follow)."""
        barriers, chunks, stage_tile, owed, regs, tma, bulk, tensor_core, meta, status = frozen
        n = self.n_agents
        new_regs, new_bulk, new_pend = [None] * n, [0] * n, [0] * (2 * n)
        for a, to in enumerate(perm):
            new_regs[to], new_bulk[to], new_pend[to] = regs[a], bulk[a], pend[a]
            new_pend[n + to] = pend[n + a]
        table = self._mask_table(perm)
        new_owed = tuple(sorted((key, table[mask]) for key, mask in owed))
        new_tma = tuple(sorted(
            (*op[:OP_AGENT], perm[op[OP_AGENT]], *op[OP_AGENT + 1:]) for op in tma
        ))
        new_tc = tuple((*e[:TC_AGENT], perm[e[TC_AGENT]], *e[TC_AGENT + 1:])
                       for e in tensor_core)
        (observed, ledger, held, waits, stage_bars, acc_dirty, acc_cover, know, carried,
         generic_reads) = meta
        new_waits = tuple(sorted(((perm[a], b), v) for (a, b), v in waits))
        new_know, new_reads = [0] * n, [0] * n
        for a, to in enumerate(perm):
            new_know[to], new_reads[to] = know[a], generic_reads[a]
        new_meta = (observed, ledger, held, new_waits, stage_bars, table[acc_dirty], acc_cover,
                    tuple(new_know), carried, tuple(new_reads))
        return ((barriers, chunks, stage_tile, new_owed, tuple(new_regs), new_tma,
                 tuple(new_bulk), new_tc, new_meta, status),
                tuple(new_pend))


def _waits_by_agent(frozen: tuple) -> dict[int, tuple]:
    """Each agent's wait history ((barrier, first parity, waits returned), ...)."""
    out: dict[int, list] = {}
    for (a, b), value in frozen[F_META][3]:
        if a in out:
            out[a].append((b, value))
        else:
            out[a] = [(b, value)]
    return out
