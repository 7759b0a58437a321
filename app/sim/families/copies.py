"""Bulk copies: the TMA engine's loads (`cp.async.bulk.shared::cluster.global.mbarrier::
complete_tx::bytes`) and stores (`cp.async.bulk.global.shared::cta.bulk_group`), and the bulk
groups of `cp.async.bulk.commit_group` / `wait_group[.read] N`.

A load lands chunk by chunk; each landing writes its chunk of SMEM and performs complete-tx on the
load's barrier, either at once or *held* until a later landing on the same barrier applies the
held bytes with its own (the hardware does not fix how a copy's bytes are grouped:
docs/semantics.md).
A store reads SMEM chunk by chunk (after which `wait_group.read` lets the stage be reused), then
its writes land in global memory in one more move (after which plain `wait_group` returns).
"""

from __future__ import annotations

from .. import ordering
from ..barrier import TX_LIMIT
from ..core import (
    FLAG_OVERWRITE,
    ISSUED,
    LOAD,
    NO_TILE,
    OP_AGENT,
    OP_BAR,
    OP_CONTENT,
    OP_DIR,
    OP_END,
    OP_FLAGGED,
    OP_NEXT,
    OP_SERIAL,
    OP_STAGE,
    OP_TILE,
    OP_WRITING,
    SHIFT_SPAN,
    STORE,
    TILE_SPAN,
    W_ASYNC,
    complete_tx,
    init_known,
    op_name,
    remote_access,
    shifted,
    tile_index,
    tile_word,
    tx_check,
    unread_by_store,
    unshift,
)
from ..detectors import Diagnostic
from ..family import Family
from ..program import ProgramError
from . import smem
from .bulk_groups import (
    commit_group,
    group_fused,
    group_ready,
    pending_groups,
    wait_group,
    waiting_group,
)
from .copies_forms import isa_forms as _isa_forms


def _same_name(m, a: list, b: list) -> bool:
    if a[OP_DIR] == LOAD:
        stages = m.program.stages
        return stages[a[OP_STAGE]].cta == stages[b[OP_STAGE]].cta
    return a[OP_AGENT] == b[OP_AGENT]


def _issue(m, op: list) -> None:
    """Put a new copy in flight with the lowest serial its name leaves free."""
    direction, tile = op[OP_DIR], op[OP_TILE]
    taken = []
    for other in m.tma:  # a loop, not a comprehension: mostly no copy in flight has the tile
        if other[OP_TILE] == tile and other[OP_DIR] == direction and _same_name(m, op, other):
            taken.append(other[OP_SERIAL])
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


def _global_offset(m, tile: int, offset, nbytes: int, r, own: int) -> int:
    """Where in its tile a copy starts: `[tile[k] + off]`, or where it starts in the stage
    when no global offset is written (the bytes keep their place)."""
    if offset is None:
        return own
    start = offset(r)
    name, _, tile_bytes = m.program.tensors[tile // TILE_SPAN]
    if start < 0 or start % 16 or start + nbytes > tile_bytes:
        raise ProgramError("copy_shape", f"a copy of {nbytes} bytes at offset {start} of a "
                                         f"{name} tile ({tile_bytes} bytes) is outside it or "
                                         "not 16-byte aligned")
    return start


def _load(m, a, r, args, record) -> None:
    dst, offset, src, size, bar, multicast, src_offset = args
    issue_load(m, a, r, dst(r), offset, src(r), size(r), bar(r), multicast, record, src_offset)


def issue_load(m, a, r, stage, offset, tile, nbytes, b, multicast, record,
               src_offset=None) -> None:
    """Put a load of `tile` into `stage` in flight, completing tx on barrier `b` (and, with
    `multicast`, the same load into the same stage and barrier of every CTA of the mask); the
    tensor copies (families/tensor_copies.py) issue their boxes through it too. `src_offset`
    is where in the tile the copy starts (`[tile[k] + off]`; None: its place in the stage)."""
    if nbytes > TX_LIMIT:
        raise ProgramError("operand_range", f"a bulk copy moves at most {TX_LIMIT} bytes")
    first, end = _chunks(m, stage, offset, nbytes, r)
    if src_offset is None:  # the bytes keep their place: `shifted(tile, 0)`
        content = tile
    else:
        own = first * m.chunk_bytes[stage]
        content = shifted(tile, _global_offset(m, tile, src_offset, nbytes, r, own) - own)
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
    for _, target in targets:
        if m.inits_lines[target]:
            init_known(m, a, target, record, "issued a copy that completes bytes on")
    index = None if tile == NO_TILE else tile % TILE_SPAN  # `tile_index`
    names = []
    for stage, b in targets:
        _issue(m, [LOAD, tile, stage, b, first, end, a, 0, 0, False])
        m.tma[-1].append(content)
        ordering.forget(m, ordering.chunk_range(m, stage, first, end))
        same = m.stage_tile[stage] == tile
        m.stage_tile[stage] = tile
        m.stage_bars[stage] = (m.stage_bars[stage] if same else 0) | 1 << b
        name = op_name(m, m.tma[-1])
        names.append(name)
        stage_name, bar_name = m.stage_names[stage], m.barrier_names[b]
        record["events"].append({"kind": "tma_issued", "op": name, "direction": "load",
                                 "tile": index, "stage": stage_name,
                                 "bytes": nbytes, "barrier": bar_name})
        m.tx_ledger[b][ISSUED] += nbytes
    if m.generic_reads[a] >> targets[0][0] & 1:
        _warn_async_after_read(m, a, targets[0][0], record)
    stage, b = targets[0]
    record["operands"] = {"op": names[0], "tile": index,
                          "stage": m.stage_names[stage], "bytes": nbytes,
                          "barrier": m.barrier_names[b]}
    if len(names) > 1:
        record["operands"]["multicast"] = [m.stage_names[s] for s, _ in targets]
    for _, b in targets:
        tx_check(m, b, record)


def _warn_async_after_read(m, a: int, stage: int, record: dict) -> None:
    """A warning, not a diagnostic: PTX asks for `fence.proxy.async` between generic accesses
    and async-proxy accesses of the same memory (9.7.9.25.2); whether a TMA load issued after
    the same thread's `ld.shared` of that stage needs one is not settled by the text, and
    CUTLASS-style pipelines order such reuse with the barrier handshake alone
    (docs/semantics.md, "Proxies")."""
    name = m.agents[a].name
    record.setdefault("warnings", []).append(Diagnostic.make(
        "async_write_after_read", m.step_no,
        f"{name} issued a TMA load into {m.stage_names[stage]} after reading it with ld.shared "
        "and no fence.proxy.async since: PTX asks for a proxy fence between generic and "
        "async-proxy accesses of the same memory (deepseek-ai/DeepEP#642 added one here).",
        agents=[name], stage=m.stage_names[stage]))


def _store(m, a, r, args, record) -> None:
    dst, src, offset, size, dst_offset = args
    issue_store(m, a, r, dst(r), src(r), offset, size(r), record, dst_offset)


def issue_store(m, a, r, tile, stage, offset, nbytes, record, dst_offset=None) -> None:
    """Put a bulk store of `stage` into `tile` in flight, in the agent's current bulk group (a
    tensor copy's box and a bulk reduction are stored through it too); `dst_offset` is where
    in the tile its bytes go (`[tile[k] + off]`)."""
    first, end = _chunks(m, stage, offset, nbytes, r)
    if dst_offset is not None:  # (its check; none without a global offset)
        _global_offset(m, tile, dst_offset, nbytes, r, 0)
    _issue(m, [STORE, tile, stage, -1, first, end, a, m.bulk_committed[a], 0, False])
    name = op_name(m, m.tma[-1])
    stage_name = m.stage_names[stage]
    unknown = _unknown_chunks(m, a, stage, first, end)
    if unknown:
        who = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "ordering_race", m.step_no,
            f"{who} issued a TMA store of {stage_name}, but {unknown} of the chunks it stores "
            "were written by writes it is not ordered after (no acquire wait of it observed a "
            "release of them: a .relaxed wait orders nothing, and a write landing after the "
            "wait is not ordered before it), so the store may read the old bytes.",
            agents=[who], stage=stage_name))
    index = tile_index(tile)
    record["operands"] = {"op": name, "tile": index, "stage": stage_name, "bytes": nbytes}
    record["events"].append({"kind": "tma_issued", "op": name, "direction": "store",
                             "tile": index, "stage": stage_name,
                             "bytes": nbytes, "barrier": None})


def _unknown_chunks(m, a: int, stage: int, first: int, end: int) -> int:
    """Chunks a store would read whose current write its issuer does not know (ordering.py)."""
    known, base = m.know[a], m.chunk_base[stage]
    if known & m.chunk_mask[stage] == m.chunk_mask[stage]:
        return 0
    return sum(1 for c in range(first, end)
               if m.chunks[stage][c][0] != NO_TILE and not known >> (base + c) & 1)


def store_fits(m, a, r, args) -> bool:
    """Whether `_store` with these registers issues its copy with no diagnostic: its operands
    in range, whole chunks, every chunk's write known to the issuer. The checker makes such a
    store at once (app/check)."""
    dst, src, offset, size, dst_offset = args
    try:
        tile = dst(r)
        stage = src(r)
        first, end = _chunks(m, stage, offset, size(r), r)
        _global_offset(m, tile, dst_offset, size(r), r, 0)
    except ProgramError:
        return False
    return not _unknown_chunks(m, a, stage, first, end)


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
    if m.barriers[b].tx_count - m.held[b] - m.chunk_bytes[op[OP_STAGE]] > 0:
        return False
    if op[OP_NEXT] + 1 < op[OP_END]:
        return True
    return any(other[OP_DIR] == LOAD and other[OP_BAR] == b for i, other in enumerate(m.tma)
               if i != k)


def tma_step(m, k: int, hold: bool, record: dict) -> None:
    op = m.tma[k]
    record["agent"] = "tma"
    direction, stage, c = op[OP_DIR], op[OP_STAGE], op[OP_NEXT]
    kept = m.op_names.get(id(op))  # `op_name`'s cache, looked at here: this runs per chunk
    name = kept[1] if kept is not None and kept[0] is op else op_name(m, op)
    if direction == STORE and op[OP_WRITING]:
        record["op"] = "cp.async.bulk (writes land)"
        record["operands"] = {"op": name, "tile": tile_index(op[OP_TILE])}
        record["events"].append({"kind": "store_complete", "op": name,
                                 "tile": tile_index(op[OP_TILE])})
        del m.tma[k]
        return
    stage_name = m.stage_names[stage]
    record["operands"] = {"op": name, "chunk": c, "stage": stage_name}
    if direction == LOAD:
        _land(m, op, name, hold, record, stage, c, stage_name)
    else:
        smem.store_read(m, op, name, record, stage, c, stage_name)
    op[OP_NEXT] = c + 1
    if c + 1 == op[OP_END]:
        if direction == LOAD or not m.writes_observed:
            del m.tma[k]
        else:
            op[OP_WRITING] = True


def _land(m, op: list, name: str, hold: bool, record: dict, stage: int, c: int,
          stage_name: str) -> None:
    tile, b = op[OP_TILE], op[OP_BAR]
    record["op"] = "cp.async.bulk (chunk lands)"
    old_tile = m.chunks[stage][c][0]
    if old_tile >= SHIFT_SPAN:
        old_tile = unshift(old_tile)[0]
    if m.clustered and m.agent_cta[op[OP_AGENT]] != m.stage_cta[stage]:
        remote_access(m, m.agent_cta[op[OP_AGENT]], m.stage_cta[stage],
                      f"the multicast of {tile_word(m, tile)} wrote "
                      f"{stage_name} and completed bytes on {m.barrier_names[b]}")
    if old_tile != tile and (stage, old_tile) in m.owed and not op[OP_FLAGGED] & FLAG_OVERWRITE:
        op[OP_FLAGGED] |= FLAG_OVERWRITE
        holders = [a.name for i, a in enumerate(m.agents) if m.owed[(stage, old_tile)] >> i & 1]
        record["diagnostics"].append(Diagnostic.make(
            "overwrite", m.step_no,
            f"The TMA load of {tile_word(m, tile)} wrote {stage_name} while "
            f"{tile_word(m, old_tile)} was still in use: {', '.join(holders)} had not "
            "released it.", agents=["tma", *holders], stage=stage_name))
    if m.stores_read_smem:
        for other in m.tma:  # `unread_store(m, stage, c, c + 1)`, inlined: it runs per chunk
            if (other[OP_STAGE] == stage and other[OP_DIR] == STORE and not other[OP_WRITING]
                    and other[OP_NEXT] <= c < other[OP_END]):
                unread_by_store(m, stage, c, c + 1, f"The TMA load of {tile_word(m, tile)}",
                                "tma", record)
                break
    m.chunks[stage][c] = (op[OP_CONTENT], W_ASYNC)
    if m.aliased:
        smem.alias_write(m, stage, c, ["tma"], record)
    m.carried[b] |= 1 << (m.chunk_base[stage] + c)  # ordering.land, inlined: it runs per chunk
    record["events"].append({"kind": "chunk_landed", "op": name, "stage": stage_name,
                             "chunk": c, "tile": None if tile == NO_TILE else tile % TILE_SPAN})
    bar_name = m.barrier_names[b]
    record["operands"]["barrier"] = bar_name
    nbytes = m.chunk_bytes[stage]
    if hold:
        m.held[b] += nbytes
        record["operands"]["held"] = True
        record["events"].append({"kind": "tx_held", "barrier": bar_name, "bytes": nbytes})
        return
    total = m.held[b] + nbytes
    m.held[b] = 0
    complete_tx(m, record, b, total)


def _explain(m, a, waiting) -> str:
    return "waits for its bulk stores"


def _snapshot(m) -> dict:
    return {
        "tma": [{"op": op_name(m, op), "direction": "load" if op[OP_DIR] == LOAD else "store",
                 "tile": tile_index(op[OP_TILE]), "stage": m.stage_names[op[OP_STAGE]],
                 "chunk": op[OP_NEXT], "chunks": op[OP_END],
                 "barrier": m.barrier_names[op[OP_BAR]] if op[OP_DIR] == LOAD else None,
                 **({"writing": op[OP_WRITING]} if op[OP_DIR] == STORE else {})}
                for op in m.tma],
        "bulk_groups": [{"agent": m.agents[a].name, "committed": m.bulk_committed[a],
                         "pending_reads": pending_groups(m, a, True)}
                        for a in range(m.n_agents) if "store" in m.code[a].kinds],
    }


FAMILY = Family(
    "bulk copies (app/sim/families/copies.py)", 20,
    {"load": _load, "store": _store, "commit_group": commit_group, "wait_group": wait_group},
    {"wait_group": group_ready}, {"wait_group": waiting_group},
    explain={"wait_group": _explain}, snapshot=_snapshot,
    snapshot_inputs=lambda m: ([tuple(op) for op in m.tma], list(m.bulk_committed)),
    forms=_isa_forms(), writes_smem=frozenset({"load"}), fused={"wait_group": group_fused})
"""The TMA engine's moves (`can_hold`, `tma_step`) are built-in movers of the machine: their
numbers and names (`tma:load:t3`, `...:hold`) are part of the trace format."""
