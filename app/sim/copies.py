"""Bulk copies: the TMA engine's loads (`cp.async.bulk.shared::cluster.global.mbarrier::
complete_tx::bytes`) and stores (`cp.async.bulk.global.shared::cta.bulk_group`), and the bulk
groups of `cp.async.bulk.commit_group` / `wait_group[.read] N`.

A load lands chunk by chunk; each landing writes its chunk of SMEM and performs complete-tx on the
load's barrier, either at once or *held* until a later landing on the same barrier applies the
held bytes with its own (the hardware does not fix how a copy's bytes are grouped: SEMANTICS.md).
A store reads SMEM chunk by chunk (after which `wait_group.read` lets the stage be reused), then
its writes land in global memory in one more move (after which plain `wait_group` returns).
"""

from __future__ import annotations

from . import smem
from .barrier import TX_LIMIT
from .detectors import Diagnostic
from .program import ProgramError
from .sync import ISSUED, barrier_op, tx_check

LOAD, STORE = 0, 1
# An in-flight copy: [direction, tile, stage, barrier, next_chunk, end_chunk, agent, group,
#                     flagged, writing, serial]
(OP_DIR, OP_TILE, OP_STAGE, OP_BAR, OP_NEXT, OP_END, OP_AGENT, OP_GROUP, OP_FLAGGED, OP_WRITING,
 OP_SERIAL) = range(11)


def op_name(m, op: list) -> str:
    """A copy's name, unique among the copies in flight and fixed for its life: `load:t3`,
    `load:t3@cta1` in a cluster, `store:consumer0:t3`; a copy issued while another of the same
    name is in flight gets the lowest free suffix (`load:t3#2@cta1`)."""
    serial = "" if op[OP_SERIAL] == 1 else f"#{op[OP_SERIAL]}"
    if op[OP_DIR] == LOAD:
        where = f"@cta{m.program.stages[op[OP_STAGE]].cta}" if m.program.cluster > 1 else ""
        return f"load:{smem.tile_tag(m, op[OP_TILE])}{serial}{where}"
    return f"store:{m.agents[op[OP_AGENT]].name}:{smem.tile_tag(m, op[OP_TILE])}{serial}"


def _same_name(m, a: list, b: list) -> bool:
    if a[OP_DIR] != b[OP_DIR] or a[OP_TILE] != b[OP_TILE]:
        return False
    if a[OP_DIR] == LOAD:
        stages = m.program.stages
        return stages[a[OP_STAGE]].cta == stages[b[OP_STAGE]].cta
    return a[OP_AGENT] == b[OP_AGENT]


def _issue(m, op: list) -> None:
    """Put a new copy in flight with the lowest serial its name leaves free."""
    taken = {other[OP_SERIAL] for other in m.tma if _same_name(m, op, other)}
    serial = 1
    while serial in taken:
        serial += 1
    op.append(serial)
    m.tma.append(op)


def _chunks(m, stage: int, offset, nbytes: int, r) -> tuple[int, int]:
    decl = m.program.stages[stage]
    start = 0 if offset is None else offset(r)
    chunk = decl.chunk_bytes
    if nbytes <= 0 or start < 0 or start + nbytes > decl.bytes:
        raise ProgramError("copy_shape", f"a copy of {nbytes} bytes at offset {start} does not "
                                         f"fit {decl.name} ({decl.bytes} bytes)")
    if start % chunk or nbytes % chunk:
        raise ProgramError("copy_shape", f"a copy of {nbytes} bytes at offset {start} does not "
                                         f"cover whole {chunk}-byte chunks of {decl.name}")
    return start // chunk, (start + nbytes) // chunk


def _load(m, a, r, args, record) -> None:
    dst, offset, src, size, bar, multicast = args
    stage, tile, b = dst(r), src(r), bar(r)
    nbytes = size(r)
    if nbytes > TX_LIMIT:
        raise ProgramError("operand_range", f"a bulk copy moves at most {TX_LIMIT} bytes")
    first, end = _chunks(m, stage, offset, nbytes, r)
    targets = [(stage, b)]
    if multicast is not None:
        mask_fn, own, stage_size, bar_size = multicast
        mask = mask_fn(r)
        ctas = m.program.cluster
        if not 0 < mask < (1 << ctas):
            raise ProgramError("operand_range", f"ctaMask {mask:#x} names no CTA or one outside "
                                                f"the cluster of {ctas}")
        targets = [(stage + (c - own) * stage_size, b + (c - own) * bar_size)
                   for c in range(ctas) if mask >> c & 1]
    names = []
    for stage, b in targets:
        _issue(m, [LOAD, tile, stage, b, first, end, a, 0, False, False])
        m.stage_tile[stage] = tile
        readers = m.program.readers[stage]
        if readers:
            m.owed[(stage, tile)] = readers
        name = op_name(m, m.tma[-1])
        names.append(name)
        stage_name, bar_name = m.stage_names[stage], m.barrier_names[b]
        record["events"].append({"kind": "tma_issued", "op": name, "direction": "load",
                                 "tile": smem.tile_index(tile), "stage": stage_name,
                                 "bytes": nbytes, "barrier": bar_name})
        m.tx_ledger[b][ISSUED] += nbytes
    stage, b = targets[0]
    record["operands"] = {"op": names[0], "tile": smem.tile_index(tile),
                          "stage": m.stage_names[stage], "bytes": nbytes,
                          "barrier": m.barrier_names[b]}
    if len(names) > 1:
        record["operands"]["multicast"] = [m.stage_names[s] for s, _ in targets]
    for _, b in targets:
        tx_check(m, b, record)


def _store(m, a, r, args, record) -> None:
    dst, src, offset, size = args
    tile, stage = dst(r), src(r)
    nbytes = size(r)
    first, end = _chunks(m, stage, offset, nbytes, r)
    _issue(m, [STORE, tile, stage, -1, first, end, a, m.bulk_committed[a], False, False])
    name = op_name(m, m.tma[-1])
    stage_name = m.stage_names[stage]
    record["operands"] = {"op": name, "tile": smem.tile_index(tile), "stage": stage_name,
                          "bytes": nbytes}
    record["events"].append({"kind": "tma_issued", "op": name, "direction": "store",
                             "tile": smem.tile_index(tile), "stage": stage_name,
                             "bytes": nbytes, "barrier": None})


def store_fits(m, a, r, args) -> bool:
    """Whether `_store` with these registers issues its copy without undefined behaviour (its
    operands in range, whole chunks): the checker makes such a store at once (app/check)."""
    dst, src, offset, size = args
    try:
        dst(r)
        _chunks(m, src(r), offset, size(r), r)
    except ProgramError:
        return False
    return True


def _commit_group(m, a, r, args, record) -> None:
    group = m.bulk_committed[a]
    m.bulk_committed[a] = group + 1
    record["operands"] = {"group": group}
    record["events"].append({"kind": "bulk_commit", "agent": m.agents[a].name, "group": group})


def pending_groups(m, a: int, reading: bool) -> int:
    """Committed groups of agent `a` with a store still reading SMEM (or, with `reading`
    False, whose writes have not all landed)."""
    committed = m.bulk_committed[a]
    return len({op[OP_GROUP] for op in m.tma
                if op[OP_DIR] == STORE and op[OP_AGENT] == a and op[OP_GROUP] < committed
                and not (reading and op[OP_WRITING])})


def _wait_group(m, a, r, args, record) -> None:
    n, read = args
    allowed = n(r)
    record["operands"] = {"pending": allowed}
    record["events"].append({"kind": "bulk_wait_returned", "agent": m.agents[a].name,
                             "pending": pending_groups(m, a, read)})


def _group_ready(m, a, r, args) -> bool:
    """PTX: every group but the N most recent has finished (reading, with `.read`)."""
    n, read = args
    oldest_allowed = m.bulk_committed[a] - n(r)
    for op in m.tma:
        if op[OP_DIR] == STORE and op[OP_AGENT] == a and op[OP_GROUP] < oldest_allowed:
            if not (read and op[OP_WRITING]):
                return False
    return True


def _waiting_group(m, a, r, args) -> dict:
    n, read = args
    return {"bulk_groups": pending_groups(m, a, read), "allowed": n(r)}


def can_hold(m, k: int) -> bool:
    """A landing may hold its complete-tx when a later chunk in flight targets the same
    barrier (that chunk's landing will apply both), and where holding can matter: applying now
    would bring the tx-count to zero or below, so the grouping decides whether the phase
    completes here, later, or never. Where applying now leaves a positive count, no phase can
    complete before the held bytes are applied with the next landing, and both orders reach the
    same state (docs/engine.md; thread-issued `mbarrier.complete_tx` is the one exception)."""
    op = m.tma[k]
    if op[OP_DIR] != LOAD:
        return False
    b = op[OP_BAR]
    nbytes = m.program.stages[op[OP_STAGE]].chunk_bytes
    if m.barriers[b].tx_count - m.held[b] - nbytes > 0:
        return False
    if op[OP_NEXT] + 1 < op[OP_END]:
        return True
    return any(other[OP_DIR] == LOAD and other[OP_BAR] == b for i, other in enumerate(m.tma)
               if i != k)


def tma_step(m, k: int, hold: bool, record: dict) -> None:
    op = m.tma[k]
    record["agent"] = "tma"
    stage, c = op[OP_STAGE], op[OP_NEXT]
    name = op_name(m, op)
    if op[OP_DIR] == STORE and op[OP_WRITING]:
        record["op"] = "cp.async.bulk (writes land)"
        record["operands"] = {"op": name, "tile": smem.tile_index(op[OP_TILE])}
        record["events"].append({"kind": "store_complete", "op": name,
                                 "tile": smem.tile_index(op[OP_TILE])})
        del m.tma[k]
        return
    record["operands"] = {"op": name, "chunk": c, "stage": m.stage_names[stage]}
    if op[OP_DIR] == LOAD:
        _land(m, op, name, hold, record)
    else:
        smem.store_read(m, op, name, record)
    op[OP_NEXT] = c + 1
    if c + 1 == op[OP_END]:
        if op[OP_DIR] == LOAD or not m.writes_observed:
            del m.tma[k]
        else:
            op[OP_WRITING] = True


def _land(m, op: list, name: str, hold: bool, record: dict) -> None:
    stage, tile, c, b = op[OP_STAGE], op[OP_TILE], op[OP_NEXT], op[OP_BAR]
    record["op"] = "cp.async.bulk (chunk lands)"
    old_tile = m.chunks[stage][c][0]
    if old_tile != tile and (stage, old_tile) in m.owed and not op[OP_FLAGGED]:
        op[OP_FLAGGED] = True
        holders = [a.name for i, a in enumerate(m.agents) if m.owed[(stage, old_tile)] >> i & 1]
        stage_name = m.stage_names[stage]
        record["diagnostics"].append(Diagnostic.make(
            "overwrite", m.step_no,
            f"The TMA load of {smem.tile_word(m, tile)} wrote {stage_name} while "
            f"{smem.tile_word(m, old_tile)} was still in use: {', '.join(holders)} had not "
            "released it.", agents=["tma", *holders], stage=stage_name))
    m.chunks[stage][c] = (tile, smem.W_ASYNC)
    record["events"].append({"kind": "chunk_landed", "op": name, "stage": m.stage_names[stage],
                             "chunk": c, "tile": smem.tile_index(tile)})
    bar_name = m.barrier_names[b]
    record["operands"]["barrier"] = bar_name
    nbytes = m.program.stages[stage].chunk_bytes
    if hold:
        m.held[b] += nbytes
        record["operands"]["held"] = True
        record["events"].append({"kind": "tx_held", "barrier": bar_name, "bytes": nbytes})
        return
    total = m.held[b] + nbytes
    m.held[b] = 0
    barrier_op(m, record, b, "complete_tx", total)


HANDLERS = {"load": _load, "store": _store, "commit_group": _commit_group,
            "wait_group": _wait_group}
BLOCKERS = {"wait_group": _group_ready}
WAITING = {"wait_group": _waiting_group}
