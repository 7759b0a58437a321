"""Bulk reductions (PTX 9.1 section 9.7.9.25.4.2): `cp.reduce.async.bulk.global.shared::cta
.bulk_group.redOp.type` reduces a stage into a global tensor element.

What the engine observes of it is a bulk store's (families/copies.py): it reads the stage in the
async proxy chunk by chunk (so a stage threads wrote needs `fence.proxy.async` first), belongs to
the agent's current bulk group, lets `cp.async.bulk.wait_group.read` return once it has read the
stage and plain `wait_group` once its writes are performed; reading the destination before that
is `store_not_visible`. The reduction's values (each element `.relaxed.gpu`) are not modelled.
"""

from __future__ import annotations

from ..family import Family
from ..isa import Form, Slot
from . import copies


def _reduce(m, a, r, args, record) -> None:
    dst, src, offset, size = args
    copies.issue_store(m, a, r, dst(r), src(r), offset, size(r), record)


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 section 9.7.9.25.4.2 (the `.bulk_group` forms into global memory)."""
    cluster = ("the reduction into another CTA's shared memory (`.shared::cluster` with "
               "`.mbarrier::complete_tx::bytes`) is not modelled yet")
    return (
        Form("cp.reduce.async.bulk", "reduce_store",
             "[tensor[k]], [smem[i] (+ off)], bytes {, cache-policy}", "9.7.9.25.4.2",
             "a bulk store that reduces into the tensor element: reads the stage chunk by "
             "chunk (async proxy), then its writes land",
             (Slot("dst", ("global", "shared::cluster"), modelled=("global",), required=True,
                   note=cluster),
              Slot("src", ("shared::cta",), required=True),
              Slot("completion_mechanism", ("bulk_group", "mbarrier::complete_tx::bytes"),
                   modelled=("bulk_group",), required=True, note=cluster),
              Slot("level::cache_hint", ("L2::cache_hint",),
                   note="with its `cache-policy` operand: a performance hint only"),
              Slot("redOp", ("add", "and", "or", "xor", "inc", "dec", "min", "max"),
                   required=True),
              Slot("noftz", ("noftz",)),
              Slot("type", ("f16", "bf16", "b32", "u32", "s32", "b64", "u64", "s64", "f32",
                            "f64"), required=True)),
             remote="a bulk reduction reads the executing CTA's own shared memory"),
    )


FAMILY = Family("bulk reductions (app/sim/families/bulk_reduce.py)", 21,
                {"reduce_store": _reduce}, forms=_isa_forms())
