"""The tensor core and the accumulator: `tcgen05.mma` reads a stage asynchronously, after the
issuing thread has moved on; `tcgen05.commit` makes the tensor core arrive on a barrier once every
MMA issued before it has finished (nothing arrives without one). The epilogue reads the
accumulator as PTX 9.7.16.6.4.4 orders it: wait, `tcgen05.fence::after_thread_sync`,
`tcgen05.ld`, `tcgen05.wait::ld`, then use the registers; skipping either ordering step is a
`tcgen05_ld_race`.
"""

from __future__ import annotations

from .. import ordering
from ..core import (
    NO_TILE,
    arrival,
    barrier_op,
    init_known,
    release,
    take,
    tile_index,
    tile_word,
)
from ..detectors import Diagnostic
from ..family import Family
from ..isa import Form, Gap, Slot
from ..program import TC_FENCED, TC_PENDING
from . import smem

MMA, COMMIT = "mma", "commit"


def _mma(m, a, r, args, record) -> None:
    acc, stage_fn, tile_fn = args
    stage, tile = stage_fn(r), tile_fn(r)
    m.tensor_core.append((MMA, stage, tile, -1, a, m.know[a] & ordering.chunk_bits(m, stage)))
    take(m, a, stage, m.stage_tile[stage])
    m.acc_dirty = (1 << m.n_agents) - 1
    m.acc_cover = [0, 0]
    name = f"mma:k{tile_index(tile)}"
    stage_name = m.stage_names[stage]
    record["operands"] = {"op": name, "stage": stage_name, "tile": tile_index(tile)}
    record["events"].append({"kind": "mma_issued", "op": name, "stage": stage_name,
                             "tile": tile_index(tile)})


def _commit(m, a, r, args, record) -> None:
    (bar,) = args
    b = bar(r)
    init_known(m, a, b, record, "committed MMAs to")
    m.tensor_core.append((COMMIT, NO_TILE, NO_TILE, b, a, 0))
    record["operands"] = {"barrier": m.barrier_names[b]}


def retire(m, record: dict) -> None:
    """The tensor core finishes its oldest queued MMA or commit."""
    kind, stage, tile, b, a, known = m.tensor_core.pop(0)
    record["agent"] = "tensor_core"
    if kind == MMA:
        name = f"mma:k{tile_index(tile)}"
        stage_name = m.stage_names[stage]
        record["op"] = "tcgen05.mma (executes)"
        record["operands"] = {"op": name, "stage": stage_name, "tile": tile_index(tile)}
        readers = ["tensor_core", m.agents[a].name]
        if smem.check_read(m, readers, stage, tile, record, "the tensor core"):
            ordering.check(m, readers, stage, tile, known, record, "the tensor core",
                           tile_word(m, tile))
        smem.async_read(m, readers, stage, record, f"tcgen05.mma of {m.agents[a].name}")
        record["events"].append({"kind": "mma_done", "op": name, "stage": stage_name,
                                 "tile": tile_index(tile)})
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


def _snapshot(m) -> dict:
    return {"tensor_core": [
        {"op": f"mma:k{tile_index(tile)}" if kind == MMA else "commit", "kind": kind,
         "stage": m.stage_names[stage] if kind == MMA else None,
         "tile": tile_index(tile),
         "barrier": m.barrier_names[b] if kind != MMA else None}
        for kind, stage, tile, b, *_ in m.tensor_core]}


# ------------------------------------------------------------------- the instruction table

def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 section 9.7.16 (tcgen05). The language reads its own operand forms (the stage and
    the tile an MMA reads, not descriptors); shapes, kinds and packing change no value the
    engine tracks."""
    pairs = "CTA pairs (`.cta_group::2`) are not modelled yet"
    group = Slot("cta_group", ("cta_group::1", "cta_group::2"), modelled=("cta_group::1",),
                 default="cta_group::1", required=True, may_omit=True, note=pairs)
    sync = Slot("sync", ("sync",), default="sync", required=True, may_omit=True)
    aligned = Slot("aligned", ("aligned",), default="aligned", required=True, may_omit=True)
    scaled = "block-scaled MMAs are not modelled yet"
    conv = "convolution MMAs (collector buffers, `.ashift`) are not modelled yet"
    mma = (
        group,
        Slot("kind", ("kind::f16", "kind::tf32", "kind::f8f6f4", "kind::i8", "kind::mxf8f6f4",
                      "kind::mxf4", "kind::mxf4nvf4"),
             modelled=("kind::f16", "kind::tf32", "kind::f8f6f4", "kind::i8"),
             default="kind::f16", required=True, may_omit=True, note=scaled),
        Slot("block_scale", ("block_scale",), modelled=(), note=scaled),
        Slot("scale_vectorsize", ("scale_vec::1X", "scale_vec::2X", "scale_vec::4X", "block16",
                                  "block32"), modelled=(), note=scaled),
        Slot("collector_usage", ("collector::a::fill", "collector::a::use",
                                 "collector::a::lastuse", "collector::a::discard"),
             modelled=(), note=conv),
        Slot("ashift", ("ashift",), modelled=(), note=conv),
    )
    commit = (
        group,
        Slot("completion_mechanism", ("mbarrier::arrive::one",),
             default="mbarrier::arrive::one", required=True, may_omit=True),
        Slot("space", ("shared::cluster",)),
        Slot("multicast", ("multicast::cluster",), modelled=(),
             note="a commit that signals several CTAs' barriers is not modelled yet"),
        Slot("type", ("b64",), default="b64", required=True, may_omit=True),
    )
    ld = (
        sync, aligned,
        Slot("shape", ("16x64b", "16x128b", "16x256b", "32x32b", "16x32bx2"),
             modelled=("16x64b", "16x128b", "16x256b", "32x32b"), required=True,
             may_omit=True, note="`.16x32bx2` takes an `immHalfSplitoff` operand, which is not "
                                 "modelled"),
        Slot("num", ("x1", "x2", "x4", "x8", "x16", "x32", "x64", "x128"), required=True,
             may_omit=True),
        Slot("pack", ("pack::16b",)),
        Slot("type", ("b32",), default="b32", required=True, may_omit=True),
    )
    return (
        Form("tcgen05.mma", "mma", "[tmem], [smem[i]], tile[k]", "9.7.16.10.9.1",
             "queues an MMA on the tensor core, which reads the stage when it executes", mma,
             remote="an MMA reads the executing CTA's shared memory (its matrix descriptors)"),
        Form("tcgen05.commit", "tc_commit", "[barrier]", "9.7.16.12.1",
             "the tensor core arrives on the barrier (count 1, cluster scope) once every "
             "earlier MMA is done, and releases the stage", commit,
             implied=(("scope", "cluster"),)),
        Form("tcgen05.fence::after_thread_sync", "tc_fence", "", "9.7.16.11.1",
             "orders the agent's last wait before its next tcgen05 operation"),
        Form("tcgen05.ld", "tc_ld", "dest, [tmem]", "9.7.16.8.3",
             "reads the accumulator: `tcgen05_ld_race` without the fence after the wait; "
             "`partial_read` with MMAs outstanding", ld),
        Form("tcgen05.wait::ld", "tc_wait_ld", "", "9.7.16.8.5",
             "the registers of `tcgen05.ld` may be used", (sync, aligned)),
        Gap("tcgen05.mma.sp", "9.7.16.10.9.2", "sparse MMAs are not modelled yet"),
        Gap("tcgen05.mma.ws", "9.7.16.10.9.3", "weight-stationary MMAs are not modelled yet"),
        Gap("tcgen05.ld.red", "9.7.16.8.3", "`tcgen05.ld.red` is not modelled yet"),
        Gap("tcgen05.st", "9.7.16.8.4", "`tcgen05.st` is not modelled yet"),
        Gap("tcgen05.wait::st", "9.7.16.8.5", "`tcgen05.wait::st` is not modelled yet"),
        Gap("tcgen05.cp", "9.7.16.9.2", "`tcgen05.cp` is not modelled yet"),
        Gap("tcgen05.shift", "9.7.16.9.3", "`tcgen05.shift` is not modelled yet"),
        Gap("tcgen05.fence::before_thread_sync", "9.7.16.11.1",
            "`tcgen05.fence::before_thread_sync` is not modelled yet"),
        Gap("tcgen05.alloc", "9.7.16.7.1", "tensor-memory allocation is not modelled yet",
            "declare the accumulator (`tmem acc;`)"),
        Gap("tcgen05.dealloc", "9.7.16.7.1", "tensor-memory allocation is not modelled yet"),
        Gap("tcgen05.relinquish_alloc_permit", "9.7.16.7.1",
            "tensor-memory allocation is not modelled yet"),
    )


FAMILY = Family(
    "tensor core (app/sim/families/tensor_core.py)", 40,
    {"mma": _mma, "tc_commit": _commit, "tc_fence": _fence, "tc_ld": _ld,
     "tc_wait_ld": _wait_ld},
    arrives=("tc_commit",), snapshot=_snapshot, forms=_isa_forms(), writes_smem=frozenset())
"""The tensor core's move (`retire`) is a built-in mover of the machine (`tensor_core`)."""
