"""Shared-memory stage buffers with per-chunk provenance: which tile each chunk holds and which
proxy wrote it (the async proxy for TMA loads; the generic proxy for `st.shared`, fenced or not by
`fence.proxy.async.shared::cta`). Reads by threads (`ld.shared`) and by the tensor core are
classified against the tile the reader expects (`partial_read`, `stale_read`); a bulk store that
reads chunks written by threads with no proxy fence is `proxy_fence_missing`.
"""

from __future__ import annotations

from .. import ordering
from ..core import (
    FLAG_PROXY,
    NO_TILE,
    OP_AGENT,
    OP_DIR,
    OP_FLAGGED,
    OP_TILE,
    STORE,
    TILE_SPAN,
    W_GENERIC,
    W_GENERIC_FENCED,
    WRITER_NAMES,
    remote_access,
    shifted,
    take,
    tile_index,
    tile_word,
    unread_by_store,
    unshift,
)
from ..detectors import Diagnostic
from ..family import Family
from ..isa import Form, Gap, Slot
from ..program import TC_PENDING


def alias_map(program) -> tuple:
    """Per stage: None, or per chunk the (stage, chunk) pairs of the other views over its
    bytes (`StageDecl.alias`: views of one region share chunk sizes)."""
    by_place: dict[tuple[int, int], list] = {}
    for s, stage in enumerate(program.stages):
        if stage.alias is not None:
            region, offset, _ = stage.alias
            for c in range(stage.chunks):
                place = (region, offset // stage.chunk_bytes + c)
                by_place.setdefault(place, []).append((s, c))
    out = []
    for s, stage in enumerate(program.stages):
        if stage.alias is None:
            out.append(None)
            continue
        region, offset, _ = stage.alias
        out.append(tuple(tuple(x for x in by_place[(region, offset // stage.chunk_bytes + c)]
                               if x[0] != s) for c in range(stage.chunks)))
    return tuple(out)


def alias_write(m, stage: int, c: int, who: list[str], record: dict) -> None:
    """Chunk `c` of `stage` was just written: every other view over the same bytes now holds
    them (its tile's bytes, shifted where the views place them differently), and a tile some
    agent still owes in that view is overwritten."""
    views = m.aliases[stage]
    if views is None:
        return
    content, writer = m.chunks[stage][c]
    tile, delta = unshift(content)
    size = m.program.stages[stage].chunk_bytes
    for s2, c2 in views[c]:
        for (s, old), mask in list(m.owed.items()):
            if s != s2:
                continue
            holders = [x.name for i, x in enumerate(m.agents) if mask >> i & 1]
            record["diagnostics"].append(Diagnostic.make(
                "overwrite", m.step_no,
                f"{who[0]} wrote {m.stage_names[stage]}, which shares its bytes with "
                f"{m.stage_names[s2]}, while {tile_word(m, old)} was still in use there: "
                f"{', '.join(holders)} had not released it.",
                agents=[*who, *holders], stage=m.stage_names[s2]))
            del m.owed[(s, old)]
        m.chunks[s2][c2] = (shifted(tile, delta + (c - c2) * size), writer)
        m.stage_tile[s2] = NO_TILE
        m.stage_bars[s2] = 0


def check_read(m, agents: list[str], stage: int, tile: int, record: dict, reader: str) -> bool:
    """`partial_read` / `stale_read`; True when every chunk holds the wanted tile."""
    chunks = m.chunks[stage]
    ok = [t for t, _ in chunks].count(tile)
    n = len(chunks)
    stage_name = m.stage_names[stage]
    record["events"].append({"kind": "smem_read", "stage": stage_name,
                             "tile": tile_index(tile), "chunks_ok": ok, "chunks": n})
    if ok == n:
        return True
    others = sorted({t for t, _ in chunks if t != tile})
    what = tile_word(m, tile)
    if ok > 0 or others == [NO_TILE]:
        old = [tile_word(m, t) for t in others if t != NO_TILE]
        rest = f"; the other chunks still hold {', '.join(old)}" if old else ""
        missing = (n - ok) * m.program.stages[stage].chunk_bytes
        record["diagnostics"].append(Diagnostic.make(
            "partial_read", m.step_no,
            f"{reader} read {what} from {stage_name} with only {ok} of its {n} chunks landed "
            f"({missing} bytes missing{rest}).", agents=agents, stage=stage_name))
        return False
    held = ", ".join(tile_word(m, t) for t in others if t != NO_TILE)
    when = "an earlier" if all(unshift(t)[0] < tile for t in others) else "another"
    record["diagnostics"].append(Diagnostic.make(
        "stale_read", m.step_no,
        f"{reader} read {what} from {stage_name} but the buffer still holds {when} tile's data "
        f"({held}).", agents=agents, stage=stage_name))
    return False


def _ld_shared(m, a, r, args, record) -> None:
    dest, stage_fn, tile_fn = args
    stage, tile = stage_fn(r), tile_fn(r)
    name = m.agents[a].name
    record["operands"] = {"stage": m.stage_names[stage], "tile": tile_index(tile)}
    if m.clustered:
        _remote(m, a, stage, "read")
    if check_read(m, [name], stage, tile, record, name):
        ordering.check(m, [name], stage, tile, m.know[a], record, name, tile_word(m, tile))
    if m.stage_tile[stage] == tile:
        take(m, a, stage, tile)
    m.generic_reads[a] |= 1 << stage


def _remote(m, a: int, stage: int, what: str) -> None:
    """`ld.shared::cluster` / `st.shared::cluster` through `mapa` into a CTA that has exited."""
    remote_access(m, m.agent_cta[a], m.program.stages[stage].cta,
                  f"{what} {m.stage_names[stage]}")


def _st_shared(m, a, r, args, record) -> None:
    stage_fn, tile_fn = args
    stage, tile = stage_fn(r), tile_fn(r)
    stage_name = m.stage_names[stage]
    for (s, old), mask in list(m.owed.items()):
        if s == stage and old != tile:
            holders = [x.name for i, x in enumerate(m.agents) if mask >> i & 1]
            record["diagnostics"].append(Diagnostic.make(
                "overwrite", m.step_no,
                f"{m.agents[a].name} wrote {stage_name} while {tile_word(m, old)} was still in "
                f"use: {', '.join(holders)} had not released it.",
                agents=[m.agents[a].name, *holders], stage=stage_name))
            del m.owed[(s, old)]
    if m.clustered:
        _remote(m, a, stage, "wrote")
    if m.stores_read_smem:
        unread_by_store(m, stage, 0, len(m.chunks[stage]), m.agents[a].name, m.agents[a].name,
                        record)
    m.chunks[stage] = [(tile, W_GENERIC)] * len(m.chunks[stage])
    m.stage_tile[stage] = tile
    m.stage_bars[stage] = 0
    if m.aliased:
        for c in range(len(m.chunks[stage])):
            alias_write(m, stage, c, [m.agents[a].name], record)
    ordering.write(m, a, ordering.chunk_bits(m, stage))
    record["operands"] = {"stage": stage_name, "tile": tile_index(tile)}
    record["events"].append({"kind": "smem_write", "stage": stage_name,
                             "tile": tile_index(tile)})


def _proxy_fence(m, a, r, args, record) -> None:
    """`fence.proxy.async.shared::cta`: the executing CTA's shared memory only."""
    m.generic_reads[a] = 0
    fenced = []
    cta, stages = m.agent_cta[a], m.program.stages
    for s, chunks in enumerate(m.chunks):
        if stages[s].cta == cta and any(w == W_GENERIC for _, w in chunks):
            m.chunks[s] = [(t, W_GENERIC_FENCED if w == W_GENERIC else w) for t, w in chunks]
            fenced.append(m.stage_names[s])
    record["operands"] = {"stages": fenced}
    record["events"].append({"kind": "proxy_fence", "stages": fenced})


def async_read(m, agents: list[str], stage: int, record: dict, reader: str) -> None:
    """`proxy_fence_missing`: the async proxy (here `tcgen05.mma`) reads chunks threads wrote
    with `st.shared` and no `fence.proxy.async` since (PTX 9.7.9.25.2: tcgen05's shared-memory
    accesses are in the async proxy)."""
    if any(w == W_GENERIC for _, w in m.chunks[stage]):
        stage_name = m.stage_names[stage]
        record["diagnostics"].append(Diagnostic.make(
            "proxy_fence_missing", m.step_no,
            f"The {reader} (async proxy) read {stage_name}, which was written with st.shared "
            "(generic proxy) and no fence.proxy.async: it may read the old bytes.",
            agents=agents, stage=stage_name))


def store_read(m, op: list, name: str, record: dict, stage: int, c: int,
               stage_name: str) -> None:
    """A bulk store reads chunk `c` of its stage (the async proxy)."""
    record["op"] = "cp.async.bulk (chunk stored)"
    tile, written_by = m.chunks[stage][c]
    if written_by == W_GENERIC and not op[OP_FLAGGED] & FLAG_PROXY:
        op[OP_FLAGGED] |= FLAG_PROXY
        agent = m.agents[op[OP_AGENT]].name
        record["diagnostics"].append(Diagnostic.make(
            "proxy_fence_missing", m.step_no,
            f"The TMA store of {tile_word(m, op[OP_TILE])} (async proxy) read {stage_name}, "
            f"which was written with st.shared (generic proxy) and no fence.proxy.async: the "
            "store may read the old bytes.", agents=["tma", agent], stage=stage_name))
    record["events"].append({"kind": "chunk_stored", "op": name, "stage": stage_name, "chunk": c,
                             "tile": None if tile == NO_TILE else tile % TILE_SPAN})


def _ld_global(m, a, r, args, record) -> None:
    dest, tensor_fn = args
    tile = tensor_fn(r)
    record["operands"] = {"tile": tile_index(tile)}
    if any(op[OP_DIR] == STORE and op[OP_TILE] == tile for op in m.tma):
        name = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "store_not_visible", m.step_no,
            f"{name} read {tile_word(m, tile)} in global memory while a bulk store to it had "
            "not completed its writes: `cp.async.bulk.wait_group.read` only says the store has "
            "read shared memory; plain `wait_group` waits for the writes.", agents=[name]))


def _st_global(m, a, r, args, record) -> None:
    """`st.global` of registers: those of a `tcgen05.ld` are not there before its
    `tcgen05.wait::ld` (PTX 9.7.16.8.5), so using them earlier is a `tcgen05_ld_race`; a
    family may check a register it writes asynchronously (`Family.reads`: a `wgmma.mma_async`'s
    accumulator)."""
    tensor, value = args
    tile = tensor(r)
    record["operands"] = {"tile": tile_index(tile)}
    if value is not None:
        for hook in m.read_hooks:
            hook(m, a, r, value)
    if r[TC_PENDING]:
        name = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "tcgen05_ld_race", m.step_no,
            f"{name} used the registers of tcgen05.ld before tcgen05.wait::ld: they may not "
            "hold the accumulator yet.", agents=[name]))


def _snapshot(m) -> dict:
    return {"stages": [
        {"name": m.stage_names[s], "tile": tile_index(m.stage_tile[s]),
         "chunks": [{"tile": tile_index(t), "proxy": WRITER_NAMES[w],
                     "fenced": w == W_GENERIC_FENCED, **_shift(t)} for t, w in m.chunks[s]]}
        for s in range(m.n_stages)]}


def _shift(content: int) -> dict:
    """A chunk holding its tile's bytes from another position: how far (docs/engine.md)."""
    delta = unshift(content)[1]
    return {"shifted": delta} if delta else {}


# ------------------------------------------------------------------- the instruction table

def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.9.8 (`ld`), 9.7.9.11 (`st`) and 9.7.13.4 (`fence.proxy.async`)."""
    types = ("b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32",
             "s64", "f32", "f64")
    kind = Slot("type", types, required=True, may_omit=True,
                note="any: the engine tracks which tile a stage holds, not values")
    scoped = "scoped loads and stores (`.relaxed.scope`, `.acquire`, `.release`) are not " \
             "modelled yet"
    scope = Slot("scope", ("cta", "cluster", "gpu", "sys"), modelled=(), note=scoped)
    hints = "cache and eviction hints on `ld`/`st` are not modelled"
    evict1 = Slot("level1::eviction_priority", ("L1::evict_normal", "L1::evict_unchanged",
                                                "L1::evict_first", "L1::evict_last",
                                                "L1::no_allocate"), modelled=(), note=hints)
    evict2 = Slot("level2::eviction_priority", ("L2::evict_normal", "L2::evict_first",
                                                "L2::evict_last"), modelled=(), note=hints)
    cache = Slot("level::cache_hint", ("L2::cache_hint",), modelled=(), note=hints)
    vec = Slot("vec", ("v2", "v4", "v8"), modelled=(),
               note="vector operands (`{a, b}`) have no spelling in the language")
    shared = ("shared", "shared::cta", "shared::cluster")
    spaces = ("the engine models the stages (`.shared`; another CTA's with `.shared::cluster` "
              "and `[mapa(smem[i], cta)]`) and the tensors (`.global`) a pipeline declares")
    ld_slots = (
        Slot("sem", ("weak", "volatile", "relaxed", "acquire", "mmio"), modelled=("weak",),
             default="weak", note=scoped),
        scope,
        Slot("space", ("const", "global", "local", "param", "param::entry", "param::func",
                       *shared), modelled=("global", *shared),
             note=spaces),
        Slot("cop", ("ca", "cg", "cs", "lu", "cv"), modelled=(), note=hints),
        evict1, evict2, cache,
        Slot("level::prefetch_size", ("L2::64B", "L2::128B", "L2::256B"), modelled=(),
             note=hints),
        vec, kind)
    st_slots = (
        Slot("sem", ("weak", "volatile", "relaxed", "release", "mmio"), modelled=("weak",),
             default="weak", note=scoped),
        scope,
        Slot("space", ("global", "local", "param", "param::func", *shared),
             modelled=("global", *shared),
             note=spaces),
        Slot("cop", ("wb", "cg", "cs", "wt"), modelled=(), note=hints),
        evict1, evict2, cache, vec, kind)
    proxy = Slot("space", ("global", "shared::cta", "shared::cluster"),
                 modelled=("shared::cta",),
                 note="the engine tracks which proxy wrote the executing CTA's shared memory "
                      "(`.shared::cta`, or every state space when left out)")
    return (
        Form("ld", "ld_shared", "dest, [smem[i]], tile[k]", "9.7.9.8",
             "threads read the stage, expecting tile k: `partial_read` / `stale_read` "
             "otherwise", ld_slots, where=(("space", shared),)),
        Form("ld", "ld_global", "dest, [tensor[k]]", "9.7.9.8",
             "reading a bulk store's destination before its writes landed is "
             "`store_not_visible`", ld_slots, where=(("space", ("global",)),)),
        Form("st", "st_shared", "[smem[i]], tile[k]", "9.7.9.11",
             "threads write tile k into the stage (generic proxy)", st_slots,
             where=(("space", shared),)),
        Form("st", "st_global", "[tensor[k]], value", "9.7.9.11",
             "uses registers (after `tcgen05.ld`, needs `tcgen05.wait::ld`)", st_slots,
             where=(("space", ("global",)),)),
        Form("fence.proxy.async", "proxy_fence", "", "9.7.13.4",
             "threads' (generic-proxy) writes to shared memory become visible to the async "
             "proxy", (proxy,)),
        Gap("ld.global.nc", "9.7.9.9", "`ld.global.nc` is not modelled yet"),
        Gap("st.bulk", "9.7.9.13", "`st.bulk` is not modelled yet"),
        Gap("fence", "9.7.13.4", "thread fences (`fence.sc`, `fence.acq_rel`, ...) are not "
                                 "modelled yet", "the engine models `fence.proxy.async`"),
        Gap("fence.proxy", "9.7.13.4", "this proxy fence is not modelled yet",
            "the engine models `fence.proxy.async` (bi-directional, generic and async proxy)"),
        Gap("membar", "9.7.13.4", "`membar` is not modelled yet"),
    )


FAMILY = Family(
    "shared memory and proxies (app/sim/families/smem.py)", 30,
    {"ld_shared": _ld_shared, "st_shared": _st_shared, "proxy_fence": _proxy_fence,
     "ld_global": _ld_global, "st_global": _st_global}, snapshot=_snapshot,
    snapshot_inputs=lambda m: (list(m.stage_tile), [list(c) for c in m.chunks]),
    forms=_isa_forms(), writes_smem=frozenset({"st_shared"}))
