"""The instruction table's core: what one row says about one PTX instruction. Each instruction
family (a module of app/sim/families) registers its rows beside its line handlers, in its
`FAMILY.forms`, and the language reads every opcode against their
union (app/lang/opcodes.py), so what is accepted cannot drift from what the engine does.

Follows the syntax blocks of the PTX ISA 9.1 (chapter 9.7): a `Form` is an opcode stem, the
qualifier slots PTX lists for it (their values, PTX's default, which values the engine models),
the engine line kind it becomes and the operand form the language reads; a `Gap` is an instruction
PTX has and the engine does not model yet, refused by name. This module knows no instruction; it
is plain frozen data and the PTX 9.1 section titles the rows cite.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Slot:
    """One qualifier slot of a form, as PTX's syntax block writes it (`.sem = { .release,
    .relaxed }`), values spelled without their dot."""

    name: str
    values: tuple[str, ...]
    modelled: tuple[str, ...] | None = None
    """The values the engine models; None: every value. Others are refused as not modelled."""
    default: str | None = None
    """PTX's default when the slot is left out (`.release` for an arrive's `.sem`); for a slot
    PTX requires and the language lets be left out (`may_omit`), the value the line reads as."""
    required: bool = False
    """PTX requires the slot (no braces around it in the syntax block)."""
    may_omit: bool = False
    """The language accepts a required slot left out (`mbarrier.init [bar], 1` for `.b64`)."""
    note: str = ""
    """Why the values that are not modelled are refused, or what the slot changes (docs)."""

    def models(self, value: str) -> bool:
        return self.modelled is None or value in self.modelled


@dataclass(frozen=True, slots=True)
class Form:
    """An instruction the engine models: `stem` (the leading words, in PTX's order), then the
    qualifiers of `slots` in any order, each at most once."""

    stem: str
    kind: str
    """The engine line kind (a key of `app.sim.agent_code.HANDLERS`)."""
    operands: str
    """The operand form the language reads, as its messages and docs show it."""
    section: str
    """The PTX 9.1 section whose syntax block the slots follow (a key of `SECTIONS`)."""
    does: str
    """What the engine does with the line, in one sentence (docs/language.md)."""
    slots: tuple[Slot, ...] = ()
    where: tuple[tuple[str, tuple[str | None, ...]], ...] = ()
    """Forms that share a stem (and its slots) are told apart by slot values: (slot, values the
    form takes, None for the slot left out)."""
    together: tuple[tuple[str, str], ...] = ()
    """Slots PTX requires together (`.sem` and `.scope`)."""
    refuse: tuple[tuple[str, str, str], ...] = ()
    """Qualifiers PTX has elsewhere (or in a later ISA) that this form refuses: (qualifier,
    message, hint)."""
    remote: str = ""
    """Empty: a `[mapa(object, cta)]` operand is accepted (with a `.shared::cluster` state space
    or none); else why it is refused."""
    remote_sink: bool = False
    """On a barrier in another CTA the destination must be the sink `_` (no state returns)."""
    flags: tuple[str, ...] = ()
    """Modifiers the line carries in `Line.flags` (`noComplete`)."""
    positional: tuple[str, ...] = ()
    """Slots whose values overlap, filled in PTX's order (`.dtype.atype.btype`, `.dst.src`): a
    word several of them take fills the first of them still empty."""
    implied: tuple[tuple[str, str], ...] = ()
    """`Line.sem` / `Line.scope` that PTX gives the form without a qualifier (a bulk copy's
    complete-tx is a release at cluster scope)."""

    def slot(self, name: str) -> Slot | None:
        return next((s for s in self.slots if s.name == name), None)


@dataclass(frozen=True, slots=True)
class Gap:
    """An instruction PTX 9.1 has and the engine does not model yet: every opcode that starts
    with `stem` (and is not a longer modelled stem) is refused with `message`."""

    stem: str
    section: str
    message: str
    hint: str = ""


SECTIONS = {
    "9.7.9.8": "ld",
    "9.7.9.9": "ld.global.nc",
    "9.7.9.11": "st",
    "9.7.9.12": "st.async",
    "9.7.9.13": "st.bulk",
    "9.7.9.14": "multimem.ld_reduce, multimem.st, multimem.red",
    "9.7.9.23": "mapa",
    "9.7.9.25.3.1": "cp.async",
    "9.7.9.25.3.2": "cp.async.commit_group",
    "9.7.9.25.3.3": "cp.async.wait_group / cp.async.wait_all",
    "9.7.9.25.4.1": "cp.async.bulk",
    "9.7.9.25.4.2": "cp.reduce.async.bulk",
    "9.7.9.25.4.3": "cp.async.bulk.prefetch",
    "9.7.9.26": "multimem.cp.async.bulk",
    "9.7.9.27.1.2": "cp.async.bulk.tensor",
    "9.7.9.27.1.3": "cp.reduce.async.bulk.tensor",
    "9.7.9.27.1.4": "cp.async.bulk.prefetch.tensor",
    "9.7.9.27.2.1": "cp.async.bulk.commit_group",
    "9.7.9.27.2.2": "cp.async.bulk.wait_group",
    "9.7.9.28": "tensormap.replace",
    "9.7.13.1": "bar, barrier",
    "9.7.13.2": "bar.warp.sync",
    "9.7.13.3": "barrier.cluster",
    "9.7.13.4": "membar / fence",
    "9.7.13.5": "atom",
    "9.7.13.6": "red",
    "9.7.13.7": "red.async",
    "9.7.13.13": "griddepcontrol",
    "9.7.13.14": "elect.sync",
    "9.7.13.15.8": "mbarrier support with shared memory",
    "9.7.13.15.9": "mbarrier.init",
    "9.7.13.15.10": "mbarrier.inval",
    "9.7.13.15.11": "mbarrier.expect_tx",
    "9.7.13.15.12": "mbarrier.complete_tx",
    "9.7.13.15.13": "mbarrier.arrive",
    "9.7.13.15.14": "mbarrier.arrive_drop",
    "9.7.13.15.15": "cp.async.mbarrier.arrive",
    "9.7.13.15.16": "mbarrier.test_wait / mbarrier.try_wait",
    "9.7.13.15.17": "mbarrier.pending_count",
    "9.7.13.16": "tensormap.cp_fenceproxy",
    "9.7.13.17": "clusterlaunchcontrol.try_cancel",
    "9.7.15.5.2": "wgmma.mma_async",
    "9.7.15.6.3": "wgmma.mma_async.sp",
    "9.7.15.7.1": "wgmma.fence",
    "9.7.15.7.2": "wgmma.commit_group",
    "9.7.15.7.3": "wgmma.wait_group",
    "9.7.16.7.1": "tcgen05.alloc, tcgen05.dealloc, tcgen05.relinquish_alloc_permit",
    "9.7.16.8.3": "tcgen05.ld",
    "9.7.16.8.4": "tcgen05.st",
    "9.7.16.8.5": "tcgen05.wait",
    "9.7.16.9.2": "tcgen05.cp",
    "9.7.16.9.3": "tcgen05.shift",
    "9.7.16.10.9.1": "tcgen05.mma",
    "9.7.16.10.9.2": "tcgen05.mma.sp",
    "9.7.16.10.9.3": "tcgen05.mma.ws",
    "9.7.16.11.1": "tcgen05.fence",
    "9.7.16.12.1": "tcgen05.commit",
    "9.7.19.2": "nanosleep",
    "9.7.19.5": "setmaxnreg",
}
"""The PTX ISA 9.1 sections the table cites, with their titles."""
