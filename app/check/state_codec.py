"""The search's cheap moves between states: a machine stepped from a stored state is put back
into it by rebuilding only the parts its move changed (`restore`), and the state it reached
shares, object for object, every part it did not change with the state it came from (`share`),
so that keying it (model.Canonical.pack) names those parts by the numbers the parent's key
already has, without hashing them again.

Nothing here changes what a move does: moves are made by `Machine.step`, and a state is still
`Machine.freeze()`'s value. `restore` knows the layout of `Machine.freeze()` and mirrors
`Machine.thaw` part by part; tests/check/test_state_codec.py checks, on every reachable state of
small configurations of every family, that a restored machine freezes to the state and makes
every move as a thawed one does. `fits` turns the fast path off (a plain `thaw`) for a machine
whose frozen layout is not the one known here.
"""

from __future__ import annotations

from app.sim.barrier import Mbarrier
from app.sim.machine import Machine

PARTS = 10
"""The parts of `Machine.freeze()`: barriers, chunks, stage tiles, owed, registers, TMA copies,
bulk groups, tensor-core queue, the meta part, status."""
META_PARTS = 10
(BARRIERS, CHUNKS, STAGE_TILE, OWED, REGS, TMA, BULK, TENSOR_CORE, META, STATUS) = range(PARTS)


THAW_NAMES = frozenset({
    "barriers", "chunks", "stage_tile", "owed", "regs", "tma", "bulk_committed", "tensor_core",
    "acc_dirty", "know", "carried", "generic_reads", "observed", "tx_ledger", "held", "waits",
    "stage_bars", "acc_cover", "status", "step_no", "_ready", "_picked", "Mbarrier", "thaw",
    "list", "dict", "map"})
"""Every name `Machine.thaw` uses: one it uses beyond these (a new part of the state) means
`restore` does not know the layout."""


def fits(machine: Machine) -> bool:
    """Whether `restore` knows this machine's frozen layout (else the search thaws)."""
    frozen = machine.freeze()
    return (len(frozen) == PARTS and len(frozen[META]) == META_PARTS
            and set(Machine.thaw.__code__.co_names) <= THAW_NAMES)


def share(now: tuple, frozen: tuple) -> tuple:
    """`now` (a state a move from `frozen` reached) with each part equal to `frozen`'s replaced
    by `frozen`'s own object: identity then says "unchanged" to `restore` and to the keying."""
    return tuple(p if (c is p or c == p) else c for c, p in zip(now, frozen, strict=True))


def restore(machine: Machine, frozen: tuple, now: tuple) -> None:
    """Put `machine`, whose state is `now` (its `freeze()`), into the state `frozen`, as
    `machine.thaw(frozen)` does (step number 0), rebuilding only the parts that differ: a part
    that is the same object (see `share`) or equal is left as it stands."""
    for i in range(PARTS):
        want = frozen[i]
        have = now[i]
        if want is have:
            continue
        if i == REGS:
            regs = machine.regs
            for a, r in enumerate(want):
                if r != have[a]:
                    regs[a] = list(r)
        elif i == BARRIERS:
            barriers = machine.barriers
            for b, value in enumerate(want):
                if value != have[b]:
                    barriers[b] = Mbarrier.thaw(value)
        elif i == META:
            if want != have:
                _restore_meta(machine, want, have)
        elif want == have:
            continue
        elif i == CHUNKS:
            chunks = machine.chunks
            for s, c in enumerate(want):
                if c != have[s]:
                    chunks[s] = list(c)
        elif i == STAGE_TILE:
            machine.stage_tile = list(want)
        elif i == OWED:
            machine.owed = dict(want)
        elif i == TMA:
            machine.tma = [list(op) for op in want]
        elif i == BULK:
            machine.bulk_committed = list(want)
        elif i == TENSOR_CORE:
            machine.tensor_core = list(want)
        else:
            machine.status = want
    machine.step_no = 0
    machine._ready = None
    machine._picked = -1


def _restore_meta(machine: Machine, want: tuple, have: tuple) -> None:
    (observed, ledger, held, waits, stage_bars, acc_dirty, cover, know, carried,
     generic_reads) = want
    if observed != have[0]:
        machine.observed = list(observed)
    if ledger != have[1]:
        machine.tx_ledger = [list(x) for x in ledger]
    if held != have[2]:
        machine.held = list(held)
    if waits != have[3]:
        machine.waits = {k: list(v) for k, v in waits}
    if stage_bars != have[4]:
        machine.stage_bars = list(stage_bars)
    machine.acc_dirty = acc_dirty
    if cover != have[6]:
        machine.acc_cover = list(cover)
    if know != have[7]:
        machine.know = list(know)
    if carried != have[8]:
        machine.carried = list(carried)
    if generic_reads != have[9]:
        machine.generic_reads = list(generic_reads)
