"""Warpgroup MMAs (PTX 9.1 section 9.7.15): `wgmma.fence`, `wgmma.mma_async`, `wgmma.commit_group`
and `wgmma.wait_group N`.

`wgmma.mma_async` reads its shared-memory operands in the async proxy (9.7.15.4), at some time
between its issue and the completion of its wgmma-group, which only `wgmma.wait_group` observes
(9.7.15.7.3). The engine checks what the MMA reads at its issue (the stage must already hold the
whole tile, written by writes the issuer is ordered after, fenced with `fence.proxy.async` if
threads wrote it) and keeps the stage *being read* until a `wait_group` covers the MMA's group:
a write into the stage in that window races with the read, so an arrive on the stage's release
barrier in it does not release the issuer's hold, and the producer's next load there is an
`overwrite` (facebookexperimental/triton#1278). The groups complete on their own (nothing another
agent does delays them), so `wait_group` never blocks: the schedule decides when it returns.

The family's state is the issuing agent's own (hidden registers the compiler gives the agent on
its first wgmma line): whether a `wgmma.fence` came first, the stages its uncommitted MMAs read,
and the stage masks of its committed groups, oldest first, packed into one integer.
"""

from __future__ import annotations

from .. import ordering
from ..barrier import UndefinedBehavior
from ..core import discharge, take, tile_index, tile_word
from ..family import Family
from ..isa import Form, Gap, Slot
from ..program import ProgramError
from . import smem

REGISTERS = FENCED, OPEN, GROUPS, MASKS, RELEASED = (
    "%wgmma_fenced", "%wgmma_open", "%wgmma_groups", "%wgmma_masks", "%wgmma_released")
"""The family's hidden registers: a `wgmma.fence` since the agent's last accumulator access; the
stages its uncommitted MMAs read and the accumulators they write (`accumulators`); its
committed groups not yet waited for, and their masks (packed, oldest lowest); the stages it
released while an MMA still read them."""
GROUP_LIMIT = 64
"""Committed groups an agent may have pending (a loop that commits without waiting stops)."""


def accumulators(m) -> dict[str, int]:
    """Every accumulator name the program's MMAs write, with its bit after the stage bits."""
    found = getattr(m, "wgmma_accumulators", None)
    if found is None:
        names = sorted({n.args[1] for code in m.code for n, k in zip(code.nodes, code.kinds,
                                                                    strict=True)
                        if k == "wgmma_mma"})
        found = m.wgmma_accumulators = {n: m.n_stages + i for i, n in enumerate(names)}
    return found


def _width(m) -> int:
    return m.n_stages + len(accumulators(m))


def reading(m, r) -> int:
    """The stages the agent's MMAs may still be reading and the accumulators they may still be
    writing (a bit each): uncommitted, or in a committed group no `wait_group` has covered."""
    h = m.hidden
    width = _width(m)
    mask, packed = r[h[OPEN]], r[h[MASKS]]
    full = (1 << width) - 1
    for _ in range(r[h[GROUPS]]):
        mask |= packed & full
        packed >>= width
    return mask


def _holds(m, a: int, stages: tuple[int, ...]) -> int:
    """Of `stages` (those an arrive by agent `a` releases), the ones its MMAs may still read:
    the arrive does not release them; the `wait_group` that covers the read does."""
    r = m.regs[a]
    busy = reading(m, r)
    keep = 0
    for s in stages:
        if busy >> s & 1:
            keep |= 1 << s
    r[m.hidden[RELEASED]] |= keep
    return keep


def _accumulator_read(m, a: int, r, name: str) -> None:
    """PTX 9.7.15.7.3: reading the accumulator before a `wgmma.wait_group` covers every MMA that
    writes it is undefined; and a register access between MMAs needs a `wgmma.fence` before
    the next one (9.7.15.7.1)."""
    bit = accumulators(m).get(name)
    if bit is None:
        return
    if reading(m, r) >> bit & 1:
        raise UndefinedBehavior("wgmma_accumulator", f"{m.agents[a].name} read the accumulator "
                                f"`{name}` while a wgmma.mma_async writing it is not covered by "
                                "a wgmma.wait_group (PTX 9.7.15.7.3)")
    r[m.hidden[FENCED]] = 0


def _fence(m, a, r, args, record) -> None:
    r[m.hidden[FENCED]] = 1
    record["events"].append({"kind": "wgmma_fence", "agent": m.agents[a].name})


def _mma_async(m, a, r, args, record) -> None:
    operands, accumulator = args
    h = m.hidden
    name = m.agents[a].name
    if not r[h[FENCED]]:
        raise UndefinedBehavior("wgmma_fence", "wgmma.mma_async with no wgmma.fence before "
                                               "it: PTX 9.7.15.7.1 requires one before the "
                                               "warpgroup's first wgmma.mma_async")
    stages, tiles = [], []
    reader = f"{name}'s wgmma.mma_async"
    for stage_fn, tile_fn in operands:
        stage, tile = stage_fn(r), tile_fn(r)
        if smem.check_read(m, [name], stage, tile, record, reader):
            ordering.check(m, [name], stage, tile, m.know[a], record, reader,
                           tile_word(m, tile))
        smem.async_read(m, [name], stage, record, f"wgmma.mma_async of {name}")
        take(m, a, stage, m.stage_tile[stage])
        r[h[OPEN]] |= 1 << stage
        stages.append(m.stage_names[stage])
        tiles.append(tile_index(tile))
    r[h[OPEN]] |= 1 << accumulators(m)[accumulator]
    record["operands"] = {"stages": stages, "tiles": tiles}
    record["events"].append({"kind": "wgmma_issued", "agent": name, "stages": stages,
                             "tiles": tiles})


def _commit_group(m, a, r, args, record) -> None:
    h = m.hidden
    count = r[h[GROUPS]]
    if count >= GROUP_LIMIT:
        raise ProgramError("pending_limit", f"{m.agents[a].name} has {GROUP_LIMIT} "
                                            "wgmma-groups committed and none waited for")
    r[h[MASKS]] |= r[h[OPEN]] << (count * _width(m))
    r[h[OPEN]] = 0
    r[h[GROUPS]] = count + 1
    record["operands"] = {"group": count}
    record["events"].append({"kind": "wgmma_commit", "agent": m.agents[a].name,
                             "pending": count + 1})


def _wait_group(m, a, r, args, record) -> None:
    (n,) = args
    h = m.hidden
    allowed = n(r)
    count = r[h[GROUPS]]
    done = max(0, count - allowed)
    r[h[MASKS]] >>= done * _width(m)
    r[h[GROUPS]] = count - done
    busy = reading(m, r)
    freed = r[h[RELEASED]] & ~busy & ((1 << m.n_stages) - 1)
    r[h[RELEASED]] &= busy
    s = 0
    while freed:
        if freed & 1:
            discharge(m, s, 1 << a)
        freed >>= 1
        s += 1
    record["operands"] = {"pending": allowed}
    record["events"].append({"kind": "wgmma_wait_returned", "agent": m.agents[a].name,
                             "completed": done, "pending": count - done})


def _snapshot(m) -> dict:
    """Per agent that issues MMAs, its wgmma-groups (docs/trace-format.md)."""
    if FENCED not in m.hidden:
        return {}
    h = m.hidden
    return {"wgmma": [{"agent": m.agents[a].name, "pending_groups": r[h[GROUPS]],
                       "reading": [m.stage_names[s] for s in range(m.n_stages)
                                   if reading(m, r) >> s & 1]}
                      for a, r in enumerate(m.regs) if "wgmma_mma" in m.code[a].kinds]}


# ------------------------------------------------------------------- the instruction table

def _shapes() -> tuple[str, ...]:
    """Every `.shape` of the syntax blocks of 9.7.15.5.2: m64nNkK for each input type's K."""
    dense = tuple(range(8, 257, 8))
    int_n = (8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224)
    bit_n = (*int_n, 240, 256)
    out = [f"m64n{n}k{k}" for k in (16, 8) for n in dense]
    out += [f"m64n{n}k32" for n in sorted(set(dense) | set(int_n))]
    out += [f"m64n{n}k256" for n in bit_n]
    return tuple(dict.fromkeys(out))


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 section 9.7.15. The language reads its own operand forms (the stages and tiles an
    MMA reads, not matrix descriptors); shapes and types change nothing the engine tracks."""
    sync = Slot("sync", ("sync",), default="sync", required=True, may_omit=True)
    aligned = Slot("aligned", ("aligned",), default="aligned", required=True, may_omit=True)
    types = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "b1", "f32", "s32")
    mma = (sync, aligned,
           Slot("shape", _shapes(), required=True),
           Slot("dtype", types, required=True, note="the accumulator's type, then A's and "
                                                    "B's (any: values are not modelled)"),
           Slot("atype", types, required=True),
           Slot("btype", types, required=True),
           Slot("satfinite", ("satfinite",)),
           Slot("op", ("and",)),
           Slot("popc", ("popc",)))
    return (
        Form("wgmma.fence", "wgmma_fence", "", "9.7.15.7.1",
             "orders the warpgroup's register accesses before its next `wgmma.mma_async`; "
             "one must come before the agent's first (else undefined behaviour, rule "
             "`wgmma_fence`)", (sync, aligned)),
        Form("wgmma.mma_async", "wgmma_mma", "d, [smem[i]], tile[k] {, [smem[j]], tile[l]}",
             "9.7.15.5.2", "an async-proxy read of each stage (A's, then B's; A from "
             "registers: one stage): checked at issue, and the stage stays read until a "
             "`wgmma.wait_group` covers the MMA's group (a release before that does not "
             "release it)", mma,
             remote="`wgmma.mma_async` reads the executing CTA's shared memory (its matrix "
                    "descriptors)", positional=("dtype", "atype", "btype")),
        Form("wgmma.commit_group", "wgmma_commit", "", "9.7.15.7.2",
             "batches the agent's uncommitted MMAs into a new wgmma-group (possibly empty)",
             (sync, aligned)),
        Form("wgmma.wait_group", "wgmma_wait", "N", "9.7.15.7.3",
             "every group but the N most recent completes (never blocks: the groups complete "
             "on their own); stages released meanwhile are released now", (sync, aligned)),
        Gap("wgmma.mma_async.sp", "9.7.15.6.3", "sparse warpgroup MMAs are not modelled yet"),
    )


FAMILY = Family(
    "warpgroup MMAs (app/sim/families/wgmma.py)", 45,
    {"wgmma_fence": _fence, "wgmma_mma": _mma_async, "wgmma_commit": _commit_group,
     "wgmma_wait": _wait_group},
    snapshot=_snapshot, registers=REGISTERS, holds=_holds, reads=_accumulator_read,
    forms=_isa_forms())
