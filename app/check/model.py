"""The checker's view of one engine state: which moves are purely local (and may be made at once),
and the canonical key under which states are deduplicated (TMA copies in any order, identical
agents in any order).

Nothing here changes what a move does: moves are always made by `Machine.step`. This module only
knows *which parts of the state* a kind of program line touches (see `LOCAL_KINDS`) and how the
frozen state (`Machine.freeze()`) names agents, so that it can rename identical ones. Both facts
are checked against the engine by tests/check/test_reduction.py on every reachable state of small
configurations.
"""

from __future__ import annotations

import marshal
import struct

from app.sim.families import FAMILIES
from app.sim.machine import Machine
from app.sim.program import Jump

from .closure import EXIT_SENSITIVE, close  # noqa: F401  (close: re-exported for the search)
from .layout import F_TMA
from .symmetry import Symmetry

LOCAL_KINDS = frozenset({"assign", "commit_group", "wait_group", "tc_fence", "tc_wait_ld"})
"""Program lines whose move touches only the moving agent's own registers and program counter.

Register updates (`++pipe_state`, `phase ^= 1`, and the loop bookkeeping the engine follows after
them), `cp.async.bulk.commit_group` (the agent's own group counter, read only by its own later
lines), `cp.async.bulk.wait_group[.read]` once it can return (it only moves the program counter,
and it stays able to return: other movers only ever finish bulk stores), and the tcgen05 ordering
lines (`tcgen05.fence::after_thread_sync`, `tcgen05.wait::ld`: the agent's own flags). Such a move
never emits a diagnostic other than `deadlock`, never enables or disables another mover, and
commutes with every other move. Bulk copies and `tcgen05.mma`/`commit` are left out on purpose:
they create work another mover (the TMA engine, the tensor core) later performs, so they are not
purely local; `st.global` is left out because it may report a `tcgen05_ld_race`.
"""

KEY_FORMAT = 2
"""marshal format 2: it writes equal values as equal bytes. Formats 3 and later write an object
seen before as a back-reference, so the bytes would depend on which tuples happen to be shared.
(Used only to estimate what an interned part takes.)"""
PARTS = 11
"""A key's parts: the ten of `Machine.freeze()`, then the pending-move counts."""
PACK = struct.Struct(f"<{PARTS}I")
PART_OVERHEAD = 2
"""An interned part takes about this many times its marshal length as Python objects."""



def local_lines(machine: Machine, reduce: bool = True) -> tuple[tuple[int, ...], ...]:
    """Per agent, per program counter: is the line there purely local? (One past the end: no.)
    0: no; 1: yes; EXIT_SENSITIVE: yes unless its move ends the agent (cluster programs).

    Where store reads are invisible (`store_reads_invisible`), a bulk store's issue is local
    too: it only appends its own copy, which no other agent's line and no load looks at (the
    deadlock report looks at loads only), and the copy's reads are made at once. `close` makes
    it only when its operands are in range (`copies.store_fits`): a store that would stop the
    run with undefined behaviour stays an ordinary move."""
    kinds = LOCAL_KINDS | ({"store"} if store_reads_invisible(machine, reduce) else set())
    exits = machine.program.cluster > 1 or machine.exit_sensitive
    return tuple(
        tuple(0 if not (reduce and kind in kinds) else
              EXIT_SENSITIVE if exits and _may_end_after(code, pc) else 1
              for pc, kind in enumerate(code.kinds)) + (0,)
        for code in machine.code
    )


def _may_end_after(code, pc: int) -> bool:
    """Whether control can reach the end of the agent's code from line `pc` without another
    line (following jumps and both sides of branches)."""
    todo, seen = [pc + 1], set()
    while todo:
        at = todo.pop()
        if at >= code.end:
            return True
        if at in seen or code.is_line[at]:
            continue
        seen.add(at)
        node = code.nodes[at]
        target = getattr(node, "target", None)
        if target is not None:
            todo.append(target)
        if not isinstance(node, Jump):
            todo.append(at + 1)
    return False


def store_reads_invisible(machine: Machine, reduce: bool = True) -> bool:
    """Whether a bulk store's chunk reads may be made at once, like local moves.

    A store's chunk read moves its own copy's cursor and nothing else; it can raise only
    `proxy_fence_missing`, and only on a chunk written with `st.shared`; and a write to a chunk
    before the store read it is an `overwrite` (core.unread_by_store). So in a program where no
    line writes shared memory (`WRITES_NO_SMEM`), and with no line that can tell a store's
    writes from its reads (plain `wait_group`, `ld.global`: `Machine.writes_observed`), a read
    raises nothing, stays enabled until made, disables nothing, and commutes with every other
    move; the only move it enables is its agent's `wait_group`. Its cost is charged when a
    `wait_group` of that agent needs its group (see `close` and docs/checker.md)."""
    if not reduce or machine.writes_observed:
        return False
    kinds = set().union(*(code.kinds for code in machine.code)) - {None}
    return kinds <= WRITES_NO_SMEM


WRITES_NO_SMEM = frozenset(kind for family in FAMILIES if family.writes_smem is not None
                           for kind in family.handlers if kind not in family.writes_smem)
"""Line kinds that never write shared memory, as their families declare them
(`Family.writes_smem`; a family that declares nothing counts as writing with every kind). A
write (a TMA load landing, `st.shared`, or a kind of an undeclared family) while a bulk store
has not read its chunks is an `overwrite` (core.unread_by_store) that only a read left for
later shows, so where a program has one the reads are ordinary moves."""


def new_pend(n_agents: int) -> list:
    """The search's uncharged moves: per agent, its local moves since its last other move
    (`pend[a]`), then per agent the store reads made at once and not yet charged
    (`pend[n + a]`: sorted ((bulk group, reads), ...))."""
    return [0] * n_agents + [()] * n_agents


def pending_total(pend: list, n_agents: int) -> int:
    """Every uncharged move (a deadlock needs them all)."""
    return sum(pend[:n_agents]) + sum(c for groups in pend[n_agents:] for _, c in groups)


class Canonical(Symmetry):
    """Turns a machine state plus the search's pending-move counts into a canonical key (bytes).

    Two states get the same key exactly when one is the other with its in-flight TMA copies
    listed in another order and/or its identical agents renamed. Both are behaviourally
    irrelevant: a copy's chunk moves depend only on that copy, and agents with the same program
    (the consumers of a ring) differ only in name and in the bit they clear in a tile's owed mask.
    Renamed states reach the same diagnostic kinds in the same number of steps, so the search may
    keep one of them. `decode` gives back a frozen state `thaw` accepts.
    """

    def __init__(self, machine: Machine, symmetry: bool = True):
        self.n_agents = machine.n_agents
        self.groups: list[tuple[int, ...]] = []
        if symmetry:
            seen: dict[tuple, list[int]] = {}
            for a, agent in enumerate(machine.agents):
                key = (agent.role, agent.nodes, agent.initial) if agent.lanes == 1 else a
                seen.setdefault(key, []).append(a)  # lanes differ (elect.sync: lane 0)
            self.groups = [tuple(g) for g in seen.values() if len(g) > 1]
        self.pairs = tuple((x, y) for group in self.groups for x, y in zip(group, group[1:],
                                                                             strict=False))
        """Neighbours within each group: where each is below the next, the state is sorted."""
        self.bit = [1 << a for a in range(machine.n_agents)]
        self.all_bits = sum(self.bit)
        self.mask_limit = 1 << self.n_agents
        self._tables: dict[tuple[int, ...], list[int]] = {}
        self.identity = tuple(range(self.n_agents))
        self._ids: dict[tuple, int] = {}
        self.parts: list[tuple] = []
        self.part_bytes = 0
        """An estimate of what the interned parts take (for the search's memory limit)."""

    def key(self, frozen: tuple, pend: list, parent: tuple | None = None,
            numbers: tuple | None = None) -> bytes:
        """`parent`, `numbers`: a stored state (as `decode_numbers` gave it) whose part objects
        `frozen` may share (state_codec.share): those are named by its numbers, unhashed."""
        frozen, pend = self.form(frozen, pend)
        return self.pack(frozen, pend, parent, numbers)

    def form(self, frozen: tuple, pend: list) -> tuple[tuple, list | tuple]:
        """The canonical representative of a state: what `key` packs (a helper process of a
        parallel search computes it, app/check/parallel.py, and the search packs it)."""
        if self.groups:
            perm = self._sorting_renaming(frozen, pend)
            if perm is not self.identity:
                return self._renamed(frozen, pend, perm)
        tma = frozen[F_TMA]
        if len(tma) > 1:
            ordered = tuple(sorted(tma))
            if ordered != tma:
                frozen = (*frozen[:F_TMA], ordered, *frozen[F_TMA + 1:])
        return frozen, pend

    def plain(self, frozen: tuple, pend: list, parent: tuple | None = None,
              numbers: tuple | None = None) -> bytes:
        """The key without reductions: the frozen state as it is (the unreduced search)."""
        return self.pack(frozen, pend, parent, numbers)

    def pack(self, frozen: tuple, pend, parent: tuple | None = None,
             numbers: tuple | None = None) -> bytes:
        """A state as 44 bytes: the number of each of its parts in this search's table of
        distinct parts (hash-consing). States share most parts (the same chunks, the same
        barriers), so a stored state costs its 44 bytes plus the parts no state had before;
        equal states give equal bytes because equal parts get equal numbers. A part that is
        `parent`'s own object gets `parent`'s number for it without a look-up (`numbers`:
        the parent's key's numbers)."""
        ids, parts = self._ids, self.parts
        out = []
        pend = tuple(pend)
        if parent is not None:
            for part, old, number in zip(frozen, parent, numbers, strict=False):
                if part is old:
                    out.append(number)
                    continue
                i = ids.get(part)
                if i is None:
                    i = self._intern(part)
                out.append(i)
            old = parts[numbers[-1]]
            if pend == old:
                out.append(numbers[-1])
                return PACK.pack(*out)
        else:
            for part in frozen:
                i = ids.get(part)
                if i is None:
                    i = self._intern(part)
                out.append(i)
        i = ids.get(pend)
        out.append(self._intern(pend) if i is None else i)
        return PACK.pack(*out)

    def pack_named(self, named: list) -> bytes:
        """`pack` of a state whose parts come as numbers of this table where known, else as
        the parts themselves (what a helper of a parallel search sends, app/check/parallel.py);
        new parts are numbered in the order given, as `pack` numbers them."""
        ids = self._ids
        out = []
        for part in named:
            if part.__class__ is int:
                out.append(part)
            else:
                i = ids.get(part)
                out.append(self._intern(part) if i is None else i)
        return PACK.pack(*out)

    def _intern(self, part: tuple) -> int:
        parts = self.parts
        i = self._ids[part] = len(parts)
        parts.append(part)
        self.part_bytes += PART_OVERHEAD * len(marshal.dumps(part, KEY_FORMAT)) + 100
        return i

    def decode(self, key: bytes) -> tuple[tuple, list]:
        """The frozen state and pending-move counts a key was made from."""
        parts = self.parts
        numbers = PACK.unpack(key)
        return tuple(parts[i] for i in numbers[:-1]), list(parts[numbers[-1]])

    def decode_numbers(self, key: bytes) -> tuple[tuple, list, tuple]:
        """`decode`, and the key's part numbers (for `key`'s `numbers`)."""
        parts = self.parts
        numbers = PACK.unpack(key)
        return tuple(parts[i] for i in numbers[:-1]), list(parts[numbers[-1]]), numbers
