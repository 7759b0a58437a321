"""The tensor core and the accumulator: `tcgen05.mma` reads a stage asynchronously, after the
issuing thread has moved on; `tcgen05.commit` makes the tensor core arrive on a barrier once every
MMA issued before it has finished (nothing arrives without one). The epilogue reads the
accumulator as PTX 9.7.16.6.4.4 orders it: wait, `tcgen05.fence::after_thread_sync`,
`tcgen05.ld`, `tcgen05.wait::ld`, then use the registers; skipping either ordering step is a
`tcgen05_ld_race`.
"""

from __future__ import annotations

from . import ordering, smem
from .detectors import Diagnostic
from .program import TC_FENCED, TC_PENDING
from .sync import arrival, barrier_op, release, take

MMA, COMMIT = "mma", "commit"


def _mma(m, a, r, args, record) -> None:
    acc, stage_fn, tile_fn = args
    stage, tile = stage_fn(r), tile_fn(r)
    m.tensor_core.append((MMA, stage, tile, -1, a, m.know[a] & ordering.chunk_bits(m, stage)))
    take(m, a, stage, m.stage_tile[stage])
    m.acc_dirty = (1 << m.n_agents) - 1
    m.acc_cover = [0, 0]
    name = f"mma:k{smem.tile_index(tile)}"
    stage_name = m.stage_names[stage]
    record["operands"] = {"op": name, "stage": stage_name, "tile": smem.tile_index(tile)}
    record["events"].append({"kind": "mma_issued", "op": name, "stage": stage_name,
                             "tile": smem.tile_index(tile)})


def _commit(m, a, r, args, record) -> None:
    (bar,) = args
    b = bar(r)
    m.tensor_core.append((COMMIT, smem.NO_TILE, smem.NO_TILE, b, a, 0))
    record["operands"] = {"barrier": m.barrier_names[b]}


def retire(m, record: dict) -> None:
    """The tensor core finishes its oldest queued MMA or commit."""
    kind, stage, tile, b, a, known = m.tensor_core.pop(0)
    record["agent"] = "tensor_core"
    if kind == MMA:
        name = f"mma:k{smem.tile_index(tile)}"
        stage_name = m.stage_names[stage]
        record["op"] = "tcgen05.mma (executes)"
        record["operands"] = {"op": name, "stage": stage_name, "tile": smem.tile_index(tile)}
        readers = ["tensor_core", m.agents[a].name]
        if smem.check_read(m, readers, stage, tile, record, "the tensor core"):
            ordering.check(m, readers, stage, tile, known, record, "the tensor core",
                           smem.tile_word(m, tile))
        smem.async_read(m, readers, stage, record, f"tcgen05.mma of {m.agents[a].name}")
        record["events"].append({"kind": "mma_done", "op": name, "stage": stage_name,
                                 "tile": smem.tile_index(tile)})
        return
    name = m.barrier_names[b]
    record["op"] = "tcgen05.commit (arrives)"
    record["operands"] = {"barrier": name}
    record["events"].append({"kind": "mma_commit", "barrier": name})
    m.barriers[b]._require_valid("tcgen05.commit")
    arrival(m, "tensor_core", b, record)
    release(m, a, b)
    if not any(entry[0] == MMA for entry in m.tensor_core):
        m.acc_cover[0] |= 1 << b
    barrier_op(m, record, b, "arrive", 1)


def _fence(m, a, r, args, record) -> None:
    r[TC_FENCED] = 1


def _ld(m, a, r, args, record) -> None:
    name = m.agents[a].name
    queued = sum(1 for entry in m.tensor_core if entry[0] == MMA)
    record["operands"] = {"mma_queued": queued}
    record["events"].append({"kind": "tmem_read", "mma_queued": queued})
    if not r[TC_FENCED]:
        record["diagnostics"].append(Diagnostic.make(
            "tcgen05_ld_race", m.step_no,
            f"{name} issued tcgen05.ld with no tcgen05.fence::after_thread_sync after its wait: "
            "the load may read the accumulator before the MMAs the wait saw finish.",
            agents=[name]))
    if m.acc_dirty >> a & 1:
        still = (f"{queued} MMA(s) still queued" if queued else
                 "MMAs whose completion no wait of it observed (a tcgen05.commit that covers "
                 "them, then a wait on its barrier)")
        record["diagnostics"].append(Diagnostic.make(
            "partial_read", m.step_no, f"{name} read the accumulator with {still}.",
            agents=[name]))
    r[TC_PENDING] = 1


def _wait_ld(m, a, r, args, record) -> None:
    r[TC_PENDING] = 0


def _st_global(m, a, r, args, record) -> None:
    (tensor,) = args
    tile = tensor(r)
    record["operands"] = {"tile": smem.tile_index(tile)}
    if r[TC_PENDING]:
        name = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "tcgen05_ld_race", m.step_no,
            f"{name} used the registers of tcgen05.ld before tcgen05.wait::ld: they may not "
            "hold the accumulator yet.", agents=[name]))


HANDLERS = {"mma": _mma, "tc_commit": _commit, "tc_fence": _fence, "tc_ld": _ld,
            "tc_wait_ld": _wait_ld, "st_global": _st_global}
