"""Asynchronous stores and reductions into another CTA's shared memory (PTX 9.1 sections 9.7.9.12
and 9.7.13.7): `st.async` and `red.async` with `.mbarrier::complete_tx::bytes`.

The instruction returns at once; later the store (or the reduction) is performed in the target
CTA's shared memory and a complete-tx of its bytes is performed on the mbarrier named with it, a
release at cluster scope of that write alone (the write itself is weak, or relaxed for
`red.async`). The destination and the barrier are in one CTA of the cluster (for `red.async`,
not the executing thread's). Each pending operation is a mover of its own, so the schedule
decides when it lands, as for a bulk copy's chunk; no ordering holds between two of them.

A store writes the tile named by its value operand into whole chunks; a reduction changes the
values of the chunk it touches, not which tile it holds, and races with any agent that still
holds that tile (`overwrite`). The family's state is the issuing agent's queue of pending
operations (hidden registers: a count and the packed entries).
"""

from __future__ import annotations

from .. import ordering
from ..barrier import UndefinedBehavior
from ..core import (
    ISSUED,
    NO_TILE,
    W_GENERIC,
    barrier_op,
    remote_access,
    tile_index,
    tile_tag,
    tile_word,
    tx_check,
)
from ..detectors import Diagnostic
from ..family import Family, Movers
from ..isa import Form, Slot
from ..program import ProgramError
from .cp_async import copy_chunks, write_chunks
from .smem import alias_write

REGISTERS = COUNT, QUEUE = ("%st_async_count", "%st_async_queue")
LIMIT = 64
"""Pending asynchronous stores an agent may have."""
FIELDS = (("serial", 8), ("red", 1), ("stage", 12), ("first", 9), ("end", 9), ("barrier", 16),
          ("bytes", 21), ("tile", 48))
ENTRY_BITS = sum(w for _, w in FIELDS)


def _pack(values: dict) -> int:
    out, shift = 0, 0
    for name, width in FIELDS:
        out |= values[name] << shift
        shift += width
    return out


def _unpack(entry: int) -> dict:
    out, shift = {}, 0
    for name, width in FIELDS:
        out[name] = entry >> shift & ((1 << width) - 1)
        shift += width
    return out


def _entry(r, h, k: int) -> dict:
    return _unpack(r[h[QUEUE]] >> (k * ENTRY_BITS) & ((1 << ENTRY_BITS) - 1))


def _issue(m, a, r, args, record, red: bool) -> None:
    dst, offset, value, bar, nbytes = args
    stage, b = dst(r), bar(r)
    start = 0 if offset is None else offset(r)
    name = m.agents[a].name
    decl = m.program.stages[stage]
    what = "red.async" if red else "st.async"
    if decl.cta != m.barrier_cta[b]:
        raise UndefinedBehavior("async_store_cta", f"{what} into {decl.name} (CTA {decl.cta}) "
                                f"with {m.barrier_names[b]} (CTA {m.barrier_cta[b]}): the "
                                "destination and the mbarrier must be in the same CTA")
    if red and decl.cta == m.agent_cta[a]:
        raise UndefinedBehavior("async_store_cta", f"red.async into {decl.name}, in the "
                                "executing thread's own CTA: PTX 9.7.13.7 requires another "
                                "CTA of the cluster")
    m.barriers[b]._require_valid(what)
    if red:
        chunk = decl.chunk_bytes
        if not 0 <= start <= decl.bytes - nbytes:
            raise ProgramError("copy_shape", f"a reduction of {nbytes} bytes at offset {start} "
                                             f"does not fit {decl.name} ({decl.bytes} bytes)")
        first, end, tile = start // chunk, start // chunk + 1, NO_TILE
    else:
        first, end = copy_chunks(m, stage, start, nbytes)
        tile = value(r)
    h = m.hidden
    count = r[h[COUNT]]
    if count >= LIMIT:
        raise ProgramError("pending_limit", f"{name} has {LIMIT} asynchronous stores pending")
    def same_name(e: dict) -> bool:  # what `_name` shows: the stage, or the tile and its CTA
        if e["red"] != red:
            return False
        if red:
            return e["stage"] == stage
        return e["tile"] - 1 == tile and m.program.stages[e["stage"]].cta == decl.cta

    taken = {e["serial"] for e in (_entry(r, h, k) for k in range(count)) if same_name(e)}
    serial = 1
    while serial in taken:
        serial += 1
    entry = _pack({"serial": serial, "red": int(red), "stage": stage, "first": first,
                   "end": end, "barrier": b, "bytes": nbytes, "tile": tile + 1})
    r[h[QUEUE]] |= entry << (count * ENTRY_BITS)
    r[h[COUNT]] = count + 1
    m.tx_ledger[b][ISSUED] += nbytes
    ordering.forget(m, ordering.chunk_range(m, stage, first, end))
    record["operands"] = {"op": _name(m, a, count), "stage": decl.name,
                          "barrier": m.barrier_names[b], "bytes": nbytes}
    if not red:
        record["operands"]["tile"] = tile_index(tile)
    record["events"].append({"kind": "async_store_issued", "op": _name(m, a, count),
                             "stage": decl.name, "barrier": m.barrier_names[b],
                             "bytes": nbytes})
    tx_check(m, b, record)


def _st_async(m, a, r, args, record) -> None:
    _issue(m, a, r, args, record, red=False)


def _red_async(m, a, r, args, record) -> None:
    _issue(m, a, r, args, record, red=True)


# ------------------------------------------------------------------------------ landing

def _pending(m) -> list[tuple[int, int]]:
    if COUNT not in m.hidden:
        return []
    i = m.hidden[COUNT]
    return [(a, k) for a, r in enumerate(m.regs) for k in range(r[i])]


def _name(m, a: int, k: int) -> str:
    e = _entry(m.regs[a], m.hidden, k)
    serial = "" if e["serial"] == 1 else f"#{e['serial']}"
    stage = m.program.stages[e["stage"]]
    if e["red"]:
        return f"red.async:{m.agents[a].name}:{stage.name}{serial}"
    return f"st.async:{m.agents[a].name}:{tile_tag(m, e['tile'] - 1)}{serial}@cta{stage.cta}"


def _names(m) -> list[str]:
    return [_name(m, a, k) for a, k in _pending(m)]


def _ready(m) -> range:
    return range(len(_pending(m)))


def _land(m, index: int, record: dict) -> None:
    """The store (or reduction) is performed in the target CTA and completes its bytes on the
    barrier, releasing that write at cluster scope (PTX 9.7.9.12, 9.7.13.7)."""
    a, k = _pending(m)[index]
    r, h = m.regs[a], m.hidden
    e = _entry(r, h, k)
    name = _name(m, a, k)
    packed = r[h[QUEUE]]
    low = packed & ((1 << (k * ENTRY_BITS)) - 1)
    r[h[QUEUE]] = low | (packed >> ((k + 1) * ENTRY_BITS)) << (k * ENTRY_BITS)
    r[h[COUNT]] -= 1
    stage, b, first, end = e["stage"], e["barrier"], e["first"], e["end"]
    red = bool(e["red"])
    record["agent"] = "red.async" if red else "st.async"
    record["op"] = f"{record['agent']} (lands)"
    record["operands"] = {"op": name, "stage": m.stage_names[stage],
                          "barrier": m.barrier_names[b]}
    what = "reduced into" if red else "stored into"
    remote_access(m, m.agent_cta[a], m.program.stages[stage].cta,
                  f"{record['agent']} of {m.agents[a].name} {what} {m.stage_names[stage]}")
    if red:
        bits = _reduce(m, m.agents[a].name, stage, first, record)
    else:
        tile = e["tile"] - 1
        bits = write_chunks(m, m.agents[a].name, stage, first, end, tile, W_GENERIC, record)
        same = m.stage_bars[stage]
        m.stage_bars[stage] = same | 1 << b
    m.carried[b] |= bits
    barrier_op(m, record, b, "complete_tx", e["bytes"])


def _reduce(m, writer: str, stage: int, c: int, record: dict) -> int:
    """A reduction changes the chunk's values: whoever still holds the stage's tile races."""
    stage_name = m.stage_names[stage]
    for (s, old), mask in list(m.owed.items()):
        if s == stage:
            holders = [x.name for i, x in enumerate(m.agents) if mask >> i & 1]
            record["diagnostics"].append(Diagnostic.make(
                "overwrite", m.step_no,
                f"red.async of {writer} changed {stage_name} while {tile_word(m, old)} was "
                f"still in use: {', '.join(holders)} had not released it.",
                agents=[writer, *holders], stage=stage_name))
            del m.owed[(s, old)]
    tile, _ = m.chunks[stage][c]
    m.chunks[stage][c] = (tile, W_GENERIC)
    if m.aliased:
        alias_write(m, stage, c, [writer], record)
    bits = ordering.chunk_range(m, stage, c, c + 1)
    ordering.forget(m, bits)
    record["events"].append({"kind": "smem_write", "stage": stage_name,
                             "tile": tile_index(tile)})
    return bits


def _why_not(m, index: int) -> str:
    return "no such asynchronous store is pending"


def _snapshot(m) -> dict:
    if COUNT not in m.hidden:
        return {}
    return {"async_stores": [{"op": _name(m, a, k), "agent": m.agents[a].name,
                              "stage": m.stage_names[_entry(m.regs[a], m.hidden, k)["stage"]]}
                             for a, k in _pending(m)]}


# ------------------------------------------------------------------- the instruction table

TYPE_BYTES = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
              "s8": 1, "s16": 2, "s32": 4, "s64": 8, "f32": 4, "f64": 8}


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.9.12 (`st.async`) and 9.7.13.7 (`red.async`)."""
    to_global = ("the `.release` form into global memory (sm_100) is not modelled; the engine "
                 "models the `.mbarrier::complete_tx::bytes` form into another CTA's shared "
                 "memory")
    space = Slot("ss", ("shared::cluster", "global"), modelled=("shared::cluster",),
                 note=to_global)
    on_barrier = Slot("completion_mechanism", ("mbarrier::complete_tx::bytes",), required=True)
    st = (Slot("sem", ("weak", "release"), modelled=("weak",), default="weak", note=to_global),
          Slot("mmio", ("mmio",), modelled=(), note=to_global),
          Slot("scope", ("cluster", "gpu", "sys"), modelled=(), note=to_global),
          space, on_barrier, Slot("vec", ("v2", "v4")),
          Slot("type", ("b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"), required=True))
    red = (Slot("sem", ("relaxed", "release"), modelled=("relaxed",), required=True,
                note=to_global),
           Slot("scope", ("cluster", "gpu", "sys"), modelled=("cluster",), required=True,
                note=to_global),
           Slot("mmio", ("mmio",), modelled=(), note=to_global),
           space, Slot("completion_mechanism", ("mbarrier::complete_tx::bytes",),
                       default="mbarrier::complete_tx::bytes"),
           Slot("op", ("add", "inc", "dec", "min", "max", "and", "or", "xor"), required=True),
           Slot("type", ("u32", "s32", "b32", "u64", "s64"), required=True))
    return (
        Form("st.async", "st_async", "[mapa(smem[i], cta) (+ off)], tile[k], "
                                     "[mapa(barrier, cta)]", "9.7.9.12",
             "a store of the tile's bytes (`.vec` x `.type`, whole chunks) into a stage of a "
             "CTA of the cluster, performed later (a mover of its own), then complete-tx of "
             "those bytes on the barrier there (a release at cluster scope)", st),
        Form("red.async", "red_async", "[mapa(smem[i], cta) (+ off)], value, "
                                       "[mapa(barrier, cta)]", "9.7.13.7",
             "a reduction into another CTA's stage, performed later (a mover of its own), "
             "then complete-tx of its bytes on the barrier there", red),
    )


FAMILY = Family(
    "asynchronous stores into other CTAs (app/sim/families/st_async.py)", 27,
    {"st_async": _st_async, "red_async": _red_async}, snapshot=_snapshot,
    registers=REGISTERS, movers=Movers(_names, _ready, _land, _why_not), forms=_isa_forms())
