"""Memory ordering as mbarriers carry it (PTX 9.1, 8. Memory Consistency Model; 9.7.13.15.16):
what each agent's reads are ordered after.

The engine does not model values, so it models *knowledge*: a set of bits per agent, one per
SMEM chunk (the current write of that chunk) and one per barrier (its phase 0 has begun). An
agent knows its own writes and arrivals. A release arrive (`.release`, the default) adds what
the arriver knows to the barrier's current phase: on the "near" side when the arriver is in the
barrier's CTA, on the "far" side when it is in another CTA and its scope is `.cluster`; a
`.cta`-scoped release from another CTA and any `.relaxed` arrive add nothing (PTX 8.7: the two
operations are morally strong only if each one's scope includes the other's thread). A copy's
complete-tx is a release of the copy's own writes only (PTX 8.9.1.1: it "does not transitively
establish ordering with respect to prior instructions from the issuing thread"); the barrier and
the stage it writes are in the waiter's CTA, so it is near. When the phase completes, what was
released is what an acquire wait that returns on it learns: a `.cta` acquire the near side, a
`.cluster` acquire both; a `.relaxed` wait learns nothing.

A read of a chunk whose current write the reader does not know is an `ordering_race`. When a
chunk is written again, every old knowledge of it is forgotten.
"""

from __future__ import annotations

from .detectors import Diagnostic

RELEASED_NEAR, RELEASED_FAR, COMPLETED_NEAR, COMPLETED_FAR = range(4)
"""`Machine.carried` holds four runs of one int per barrier, in this order."""


def chunk_bits(m, stage: int) -> int:
    """The knowledge bits of every chunk of `stage`."""
    return m.chunk_mask[stage]


def act_bit(m, b: int) -> int:
    """The bit that says barrier `b`'s phase 0 has begun (an arrive or expect-tx in it)."""
    return 1 << (m.n_chunk_bits + b)


def init_bit(m, b: int) -> int:
    """The bit that says barrier `b`'s last `mbarrier.init` (a program's own line) is ordered
    before what the agent does next."""
    return 1 << (m.n_chunk_bits + m.n_bars + b)


def forget(m, bits: int) -> None:
    """A new write to these chunks (or a new init): old knowledge of them means nothing now."""
    keep = ~bits
    m.know = [k & keep for k in m.know]
    m.carried = [x & keep for x in m.carried]
    if m.forget_hooks:
        for hook in m.forget_hooks:
            hook(m, bits)


def write(m, a: int, bits: int) -> None:
    """Agent `a` wrote these chunks (`st.shared`): it alone knows the new data."""
    forget(m, bits)
    m.know[a] |= bits


def chunk_range(m, stage: int, first: int, end: int) -> int:
    """The knowledge bits of chunks `first..end-1` of `stage`."""
    return ((1 << (end - first)) - 1) << (m.chunk_base[stage] + first)


def land(m, bit: int, b: int) -> None:
    """A copy wrote one chunk and releases it with its complete-tx on barrier `b`. (The
    knowledge of what the chunk held before was forgotten when the copy was issued: a read of
    the old data after that is a use after release, which ownership already reports.)"""
    m.carried[b] |= bit


def touch(m, a: int, b: int) -> None:
    """Agent `a` arrived or announced bytes on `b`: it knows whether phase 0 has begun."""
    if m.barriers[b].phase == 0:
        m.know[a] |= act_bit(m, b)


def release(m, a: int, b: int, sem: str | None, scope: str | None) -> None:
    """An arrive by agent `a` on barrier `b` with PTX's `.sem` and `.scope`. A relaxed one
    carries only what a `fence.mbarrier_init.release.cluster` before it released (a release
    fence and a later strong write form a release pattern, PTX 8.9)."""
    bits = m.know[a]
    if sem == "relaxed":
        fenced = m.hidden.get("%init_fenced")
        if fenced is None:
            return
        bits = m.regs[a][fenced]
    if m.agent_cta[a] == m.barrier_cta[b]:
        m.carried[b] |= bits
    elif scope == "cluster":
        m.carried[m.n_bars + b] |= bits


def complete(m, b: int) -> None:
    """Barrier `b` completed a phase: what its arrivals released is what its waits learn."""
    carried, n = m.carried, m.n_bars
    carried[2 * n + b], carried[3 * n + b] = carried[b], carried[n + b]
    carried[b] = carried[n + b] = 0


def reset(m, b: int) -> None:
    """`mbarrier.init`: the barrier carries nothing, and its phase 0 has not begun."""
    forget(m, act_bit(m, b))
    n = m.n_bars
    for side in range(4):
        m.carried[side * n + b] = 0


def acquire(m, a: int, b: int, sem: str | None, scope: str | None) -> None:
    """A wait of agent `a` returned true on barrier `b`'s last completion."""
    if sem == "relaxed":
        return
    carried, n = m.carried, m.n_bars
    learned = carried[2 * n + b]
    if scope == "cluster":
        learned |= carried[3 * n + b]
    m.know[a] |= learned


def unordered(m, stage: int, tile: int, known: int) -> int:
    """How many chunks of `stage` hold `tile` from a write that `known` does not include."""
    if known & m.chunk_mask[stage] == m.chunk_mask[stage]:
        return 0
    base = m.chunk_base[stage]
    return sum(1 for c, (t, _) in enumerate(m.chunks[stage])
               if t == tile and not known >> (base + c) & 1)


def check(m, agents: list[str], stage: int, tile: int, known: int, record: dict,
          reader: str, what: str) -> None:
    """`ordering_race`: a read found the right data, but nothing orders it after the writes
    (or a load in flight is already writing over them)."""
    missing = unordered(m, stage, tile, known)
    if not missing:
        return
    stage_name = m.stage_names[stage]
    n = len(m.chunks[stage])
    if any(op[0] == 0 and op[2] == stage for op in m.tma):  # copies.LOAD into this stage
        why = ("a TMA load issued since is writing over them, so the read races with its "
               "landing")
    else:
        why = ("no acquire wait of it observed a release of them: a .relaxed arrive or wait "
               "orders nothing, a .cta scope does not reach another CTA, and a write landing "
               "after the wait is not ordered before it; it may read the old bytes")
    record["diagnostics"].append(Diagnostic.make(
        "ordering_race", m.step_no,
        f"{reader} read {what} from {stage_name}, but {missing} of its {n} chunks were "
        f"written by writes its read is not ordered after ({why}).", agents=agents,
        stage=stage_name))
