"""The bulk copies family's rows of the instruction table (app/sim/isa.py), kept beside
families/copies.py, which registers them (`Family.forms`); no `FAMILY` of its own."""

from __future__ import annotations

from ..isa import Form, Gap, Slot


def isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.9.25.4 (bulk copies) and 9.7.9.27.2 (their completion)."""
    on_barrier = Slot("completion_mechanism", ("mbarrier::complete_tx::bytes",), required=True)
    in_group = Slot("completion_mechanism", ("bulk_group",), required=True)
    hint = Slot("level::cache_hint", ("L2::cache_hint",),
                note="with its `cache-policy` operand: a performance hint only (PTX "
                     "9.7.9.25.4.1), which changes nothing the engine observes")
    multicast = Slot("multicast", ("multicast::cluster",),
                     note="with its `ctaMask` operand: one load lands in every CTA of the mask")
    cp_mask = Slot("cp_mask", ("cp_mask",), modelled=(),
                   note="`byteMask` copies only some bytes of each 16; the engine tracks whole "
                        "chunks")
    release = (("sem", "release"), ("scope", "cluster"))
    lands = ("a bulk load: lands chunk by chunk (each a TMA step) and completes tx on the "
             "barrier (a release at cluster scope)")
    return (
        Form("cp.async.bulk.shared::cluster.global", "load",
             "[smem[i] (+ off)], [tensor[k] (+ off)], bytes, [barrier] {, ctaMask} "
             "{, cache-policy}",
             "9.7.9.25.4.1", lands + "; with `.multicast::cluster`, one load landing in every "
             "CTA of `ctaMask`, completing tx on each CTA's own barrier",
             (on_barrier, multicast, hint), implied=release),
        Form("cp.async.bulk.shared::cta.global", "load",
             "[smem[i] (+ off)], [tensor[k] (+ off)], bytes, [barrier] {, cache-policy}",
             "9.7.9.25.4.1", lands + ", in the executing CTA", (on_barrier, hint),
             remote="with `.shared::cta` the destination is the executing CTA's own shared "
                    "memory (PTX 9.7.9.25.4.1): write `.shared::cluster` for another CTA's",
             implied=release),
        Form("cp.async.bulk.global.shared::cta", "store",
             "[tensor[k] (+ off)], [smem[i] (+ off)], bytes {, cache-policy}", "9.7.9.25.4.1",
             "a bulk store: reads the stage chunk by chunk, then its writes land",
             (in_group, hint, cp_mask),
             remote="a bulk store reads the executing CTA's own shared memory (`.shared::cta`)"),
        Form("cp.async.bulk.commit_group", "commit_group", "", "9.7.9.27.2.1",
             "closes the agent's current bulk group"),
        Form("cp.async.bulk.wait_group", "wait_group", "N", "9.7.9.27.2.2",
             "blocks until every group but the N most recent has finished reading shared "
             "memory (`.read`) or completed its writes (plain)",
             (Slot("read", ("read",)),)),
        Gap("cp.async.bulk.shared::cluster.shared::cta", "9.7.9.25.4.1",
            "bulk copies from shared memory into another CTA's are not modelled yet",
            "the engine models bulk loads from global memory"),
        Gap("cp.async.bulk.prefetch", "9.7.9.25.4.3", "bulk prefetches are not modelled yet"),
        Gap("cp.async.bulk.prefetch.tensor", "9.7.9.27.1.4",
            "tensor prefetches are not modelled yet"),
        Gap("cp.reduce.async.bulk.tensor", "9.7.9.27.1.3",
            "tensor reductions are not modelled yet"),
    )
