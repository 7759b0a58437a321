"""Per-thread asynchronous copies (PTX 9.1 sections 9.7.9.25.3 and 9.7.13.15.15): `cp.async`,
`cp.async.commit_group`, `cp.async.wait_group N` / `cp.async.wait_all`, and
`cp.async.mbarrier.arrive{.noinc}`.

A `cp.async` copies 4, 8 or 16 bytes from global into shared memory; it is a weak write of the
generic proxy (9.7.9.25.3.1). The engine writes the stage's chunks at the issue and lets no one
know the write yet: the issuing thread learns it when a `cp.async.wait_group` (or `wait_all`)
covers the copy's group (9.7.9.25.3.3), and the threads of an mbarrier learn it when a wait
returns on the phase that a `cp.async.mbarrier.arrive` tracking the copy completed. A read
before either is a read of a write it is not ordered after (`ordering_race`): the copy may not
have landed. The groups complete on their own, so `wait_group` never blocks.

`cp.async.mbarrier.arrive` makes the system arrive on the barrier once every prior `cp.async`
of the thread has completed (9.7.13.15.15): the arrive is a mover of its own (`cp.async:...`)
that the schedule places anywhere after the instruction. Without `.noinc` the instruction first
adds one to the pending count, so the asynchronous arrive changes nothing net in the current
phase; with `.noinc` the arrive is one of the arrivals the barrier was initialized to expect.

The family's state is the issuing agent's (hidden registers): the chunks (knowledge bits,
ordering.py) its uncommitted copies wrote, its committed groups' chunks (packed, oldest
lowest), every chunk its copies wrote whose write is still current, and its asynchronous
arrives not yet made (packed: a serial, the barrier, the chunks it releases). A later write
into a chunk by anyone takes the chunk out of all of them (`_forget`).
"""

from __future__ import annotations

from .. import ordering
from ..barrier import COUNT_LIMIT, UndefinedBehavior
from ..core import W_GENERIC, arrival, barrier_op, tile_index, tile_word
from ..detectors import Diagnostic
from ..family import Family, Movers
from ..isa import Form, Slot
from ..program import ProgramError
from . import smem

REGISTERS = OPEN, GROUPS, MASKS, ISSUED, ARRIVES, QUEUE = (
    "%cp_async_open", "%cp_async_groups", "%cp_async_masks", "%cp_async_issued",
    "%cp_async_arrives", "%cp_async_queue")
GROUP_LIMIT = 64
"""Committed groups (and asynchronous arrives) an agent may have pending."""
SERIAL_BITS, BAR_BITS = 8, 16


# ---------------------------------------------------------------------------- the copies

def copy_chunks(m, stage: int, start: int, nbytes: int) -> tuple[int, int]:
    """The chunks `nbytes` at byte `start` of `stage` cover; the run stops with `copy_shape`
    unless they are whole chunks inside the stage (the engine tracks chunks)."""
    decl = m.program.stages[stage]
    chunk = decl.chunk_bytes
    if start < 0 or start + nbytes > decl.bytes:
        raise ProgramError("copy_shape", f"a copy of {nbytes} bytes at offset {start} does not "
                                         f"fit {decl.name} ({decl.bytes} bytes)")
    if start % chunk or nbytes % chunk:
        raise ProgramError("copy_shape", f"a copy of {nbytes} bytes at offset {start} does not "
                                         f"cover whole {chunk}-byte chunks of {decl.name}: the "
                                         "engine tracks which tile each chunk holds")
    return start // chunk, (start + nbytes) // chunk


def write_chunks(m, writer: str, stage: int, first: int, end: int, tile: int, writer_kind: int,
                 record: dict) -> int:
    """A write of `tile` into chunks `first..end-1` of `stage` that no reader knows yet:
    `overwrite` where another tile of the stage is still owed; returns the chunks' knowledge
    bits (ordering.py)."""
    stage_name = m.stage_names[stage]
    for (s, old), mask in list(m.owed.items()):
        if s == stage and old != tile:
            holders = [x.name for i, x in enumerate(m.agents) if mask >> i & 1]
            record["diagnostics"].append(Diagnostic.make(
                "overwrite", m.step_no,
                f"{writer} wrote {stage_name} while {tile_word(m, old)} was still in use: "
                f"{', '.join(holders)} had not released it.", agents=[writer, *holders],
                stage=stage_name))
            del m.owed[(s, old)]
    chunks = m.chunks[stage]
    for c in range(first, end):
        chunks[c] = (tile, writer_kind)
        if m.aliased:
            smem.alias_write(m, stage, c, [writer], record)
    if m.stage_tile[stage] != tile:
        m.stage_bars[stage] = 0
    m.stage_tile[stage] = tile
    bits = ordering.chunk_range(m, stage, first, end)
    ordering.forget(m, bits)
    record["events"].append({"kind": "smem_write", "stage": stage_name,
                             "tile": tile_index(tile)})
    return bits


def _cp_async(m, a, r, args, record) -> None:
    dst, offset, src, size = args
    stage, tile, nbytes = dst(r), src(r), size(r)
    start = 0 if offset is None else offset(r)
    first, end = copy_chunks(m, stage, start, nbytes)
    name = m.agents[a].name
    bits = write_chunks(m, name, stage, first, end, tile, W_GENERIC, record)
    h = m.hidden
    r[h[OPEN]] |= bits
    r[h[ISSUED]] |= bits
    record["operands"] = {"stage": m.stage_names[stage], "tile": tile_index(tile),
                          "bytes": nbytes}
    record["events"].append({"kind": "cp_async_issued", "agent": name,
                             "stage": m.stage_names[stage], "tile": tile_index(tile),
                             "bytes": nbytes})


def _commit(m, a, r, args, record) -> None:
    h = m.hidden
    count = r[h[GROUPS]]
    if count >= GROUP_LIMIT:
        raise ProgramError("pending_limit", f"{m.agents[a].name} has {GROUP_LIMIT} cp.async "
                                            "groups committed and none waited for")
    r[h[MASKS]] |= r[h[OPEN]] << (count * m.n_chunk_bits)
    r[h[OPEN]] = 0
    r[h[GROUPS]] = count + 1
    record["operands"] = {"group": count}
    record["events"].append({"kind": "cp_async_commit", "agent": m.agents[a].name,
                             "pending": count + 1})


def _wait(m, a, r, args, record) -> None:
    """Every group but the N most recent completes; the thread now knows their writes. With
    `wait_all` (N None) the uncommitted copies are committed first."""
    (n,) = args
    h = m.hidden
    width = m.n_chunk_bits
    learned = 0
    if n is None:
        learned, r[h[OPEN]] = r[h[OPEN]], 0
        allowed = 0
    else:
        allowed = n(r)
    count = r[h[GROUPS]]
    done = max(0, count - allowed)
    packed = r[h[MASKS]]
    learned |= packed & ((1 << (done * width)) - 1)
    full = (1 << width) - 1
    while learned > full:
        learned = (learned & full) | (learned >> width)
    r[h[MASKS]] = packed >> (done * width)
    r[h[GROUPS]] = count - done
    m.know[a] |= learned
    record["operands"] = {"pending": allowed}
    record["events"].append({"kind": "cp_async_wait_returned", "agent": m.agents[a].name,
                             "completed": done, "pending": count - done})


def _mbarrier_arrive(m, a, r, args, record) -> None:
    bar, noinc = args
    b = bar(r)
    barrier = m.barriers[b]
    name = m.barrier_names[b]
    barrier._require_valid("cp.async.mbarrier.arrive")
    h = m.hidden
    count = r[h[ARRIVES]]
    if count >= GROUP_LIMIT:
        raise ProgramError("pending_limit", f"{m.agents[a].name} has {GROUP_LIMIT} "
                                            "asynchronous arrives pending")
    if not noinc:
        if barrier.pending_arrivals + 1 > COUNT_LIMIT:
            raise UndefinedBehavior("over_arrival", f"cp.async.mbarrier.arrive on {name} "
                                                    f"would raise its pending count past "
                                                    f"{COUNT_LIMIT} (PTX 9.7.13.15.15)")
        barrier.pending_arrivals += 1
        record["events"].append({"kind": "pending_increment", "barrier": name, "count": 1})
    serials = {_entry(m, r[h[QUEUE]], k)[0] for k in range(count)
               if _entry(m, r[h[QUEUE]], k)[1] == b}
    serial = 1
    while serial in serials:
        serial += 1
    entry = serial | b << SERIAL_BITS | r[h[ISSUED]] << (SERIAL_BITS + BAR_BITS)
    r[h[QUEUE]] |= entry << (count * _entry_width(m))
    r[h[ARRIVES]] = count + 1
    record["operands"] = {"barrier": name, "noinc": noinc}
    record["events"].append({"kind": "cp_async_arrive_issued", "agent": m.agents[a].name,
                             "barrier": name})


# ------------------------------------------------------------------ asynchronous arrives

def _entry_width(m) -> int:
    return SERIAL_BITS + BAR_BITS + m.n_chunk_bits


def _entry(m, packed: int, k: int) -> tuple[int, int, int]:
    """The k-th pending arrive of a queue: (serial, barrier, chunks it releases)."""
    e = packed >> (k * _entry_width(m)) & ((1 << _entry_width(m)) - 1)
    return (e & ((1 << SERIAL_BITS) - 1), e >> SERIAL_BITS & ((1 << BAR_BITS) - 1),
            e >> (SERIAL_BITS + BAR_BITS))


def _pending(m) -> list[tuple[int, int]]:
    """Every asynchronous arrive not yet made, as (agent, place in its queue), in mover order."""
    if ARRIVES not in m.hidden:
        return []
    i = m.hidden[ARRIVES]
    return [(a, k) for a, r in enumerate(m.regs) for k in range(r[i])]


def _arrive_name(m, a: int, k: int) -> str:
    serial, b, _ = _entry(m, m.regs[a][m.hidden[QUEUE]], k)
    suffix = "" if serial == 1 else f"#{serial}"
    return f"cp.async:{m.agents[a].name}:arrive:{m.barrier_names[b]}{suffix}"


def _names(m) -> list[str]:
    return [_arrive_name(m, a, k) for a, k in _pending(m)]


def _ready(m) -> range:
    """Every pending arrive may be made: the copies it waits for completed at their issue."""
    return range(len(_pending(m)))


def _fire(m, index: int, record: dict) -> None:
    """The system's arrive-on for a `cp.async.mbarrier.arrive`: it releases the writes of the
    copies it tracked to the barrier's phase (PTX 9.7.9.25.1.2: once the phase completes, the
    threads of the barrier may access their results)."""
    a, k = _pending(m)[index]
    r = m.regs[a]
    h = m.hidden
    name = _arrive_name(m, a, k)
    _, b, bits = _entry(m, r[h[QUEUE]], k)
    width = _entry_width(m)
    packed = r[h[QUEUE]]
    low = packed & ((1 << (k * width)) - 1)
    r[h[QUEUE]] = low | (packed >> ((k + 1) * width)) << (k * width)
    r[h[ARRIVES]] -= 1
    record["agent"] = "cp.async"
    record["op"] = "cp.async.mbarrier.arrive (arrives)"
    record["operands"] = {"op": name, "barrier": m.barrier_names[b]}
    m.barriers[b]._require_valid("cp.async.mbarrier.arrive")
    arrival(m, m.agents[a].name, b, record, m.agent_cta[a])
    m.carried[b] |= bits
    for stage in range(m.n_stages):
        if bits & m.chunk_mask[stage]:
            m.stage_bars[stage] |= 1 << b
    barrier_op(m, record, b, "arrive", 1)


def _why_not(m, index: int) -> str:
    return "no such asynchronous arrive is pending"


def _forget(m, bits: int) -> None:
    """A new write into these chunks: no pending copy of any agent wrote them any more."""
    h = m.hidden
    keep = ~bits
    width, entry = m.n_chunk_bits, _entry_width(m)
    for r in m.regs:
        r[h[OPEN]] &= keep
        r[h[ISSUED]] &= keep
        groups = r[h[GROUPS]]
        if groups:
            spread = sum(bits << (g * width) for g in range(groups))
            r[h[MASKS]] &= ~spread
        arrives = r[h[ARRIVES]]
        if arrives:
            spread = sum(bits << (k * entry + SERIAL_BITS + BAR_BITS) for k in range(arrives))
            r[h[QUEUE]] &= ~spread


def _snapshot(m) -> dict:
    """Per agent with `cp.async` lines, its groups and pending arrives (docs/trace-format.md)."""
    if OPEN not in m.hidden:
        return {}
    h = m.hidden
    out = []
    for a, r in enumerate(m.regs):
        if not any(k in KINDS for k in m.code[a].kinds):
            continue
        out.append({"agent": m.agents[a].name, "pending_groups": r[h[GROUPS]],
                    "uncommitted": bool(r[h[OPEN]]),
                    "arrives": [m.barrier_names[_entry(m, r[h[QUEUE]], k)[1]]
                                for k in range(r[h[ARRIVES]])]})
    return {"cp_async": out}


# ------------------------------------------------------------------- the instruction table

def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.9.25.3 and 9.7.13.15.15."""
    hints = Slot("level::cache_hint", ("L2::cache_hint",),
                 note="with its `cache-policy` operand: a performance hint only")
    prefetch = Slot("level::prefetch_size", ("L2::64B", "L2::128B", "L2::256B"),
                    note="a performance hint only (PTX 9.7.9.25.3.1)")
    cache = Slot("cop", ("ca", "cg"), required=True,
                 note="cache operators are performance hints (`.cg`: `cp-size` 16 only)")
    shared = Slot("dst", ("shared", "shared::cta"), required=True)
    src = Slot("src", ("global",), required=True)
    b64 = Slot("type", ("b64",), default="b64", required=True, may_omit=True)
    return (
        Form("cp.async", "cp_async", "[smem[i] (+ off)], [tensor[k]], cp-size {, cache-policy}",
             "9.7.9.25.3.1", "writes `cp-size` (4, 8, 16) bytes of the tile into the stage at "
             "once, in whole chunks; the write is known to the thread after a `wait_group` "
             "that covers it, to others through a `cp.async.mbarrier.arrive` phase",
             (cache, shared, src, hints, prefetch),
             remote="`cp.async` writes the executing CTA's shared memory (`.shared::cta`)"),
        Form("cp.async.commit_group", "cp_async_commit", "", "9.7.9.25.3.2",
             "batches the thread's uncommitted `cp.async` copies into a new group"),
        Form("cp.async.wait_group", "cp_async_wait", "N", "9.7.9.25.3.3",
             "every group but the N most recent completes (never blocks); their writes are "
             "now known to the thread"),
        Form("cp.async.wait_all", "cp_async_wait", "", "9.7.9.25.3.3",
             "`cp.async.commit_group` then `cp.async.wait_group 0`"),
        Form("cp.async.mbarrier.arrive", "cp_async_arrive", "[barrier]", "9.7.13.15.15",
             "the system arrives on the barrier once the thread's prior copies completed (a "
             "mover of its own); without `.noinc` the pending count is first incremented",
             (Slot("noinc", ("noinc",)), Slot("space", ("shared", "shared::cta")), b64),
             refuse=(("shared::cluster", "`cp.async.mbarrier.arrive` takes a barrier of the "
                                         "executing CTA", "PTX 9.7.13.15.15: `.shared{::cta}`"),),
             remote="PTX 9.7.13.15.15: the barrier is in the executing CTA (`.shared::cta`)"),
    )


KINDS = ("cp_async", "cp_async_commit", "cp_async_wait", "cp_async_arrive")

FAMILY = Family(
    "per-thread async copies (app/sim/families/cp_async.py)", 22,
    {"cp_async": _cp_async, "cp_async_commit": _commit, "cp_async_wait": _wait,
     "cp_async_arrive": _mbarrier_arrive},
    arrives=("cp_async_arrive",), snapshot=_snapshot, registers=REGISTERS,
    movers=Movers(_names, _ready, _fire, _why_not), forget=_forget, forms=_isa_forms())
