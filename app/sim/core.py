"""What every instruction family may use: one barrier operation with the bookkeeping around it
(phase completion, the tx ledger, `reuse_before_wait`, `remote_after_exit`), who owes a stage's
tile, how tiles are named, and the layout of an in-flight bulk copy.

These are the machine's shared services, not a family of their own: the families in
app/sim/families call them, and this module imports none of them, so the layers point one way
(barrier, program, detectors, ordering < core < families < machine). Follows the PTX ISA's
mbarrier section (9.7.13.15) and docs/semantics.md.
"""

from __future__ import annotations

from . import ordering
from .barrier import TX_LIMIT, UndefinedBehavior
from .detectors import Diagnostic
from .program import ProgramError

PC = 0
REGISTER_LIMIT = 2**62

# ------------------------------------------------------------------------------ registers

def checked(value: int) -> int:
    if -REGISTER_LIMIT <= value <= REGISTER_LIMIT:
        return value
    raise ProgramError("overflow", f"a register value left ±2^62 ({str(value)[:30]}...)")


def operand_range(value: int, low: int, high: int, what: str) -> int:
    if low <= value <= high:
        return value
    raise ProgramError("operand_range", f"{what} must be in {low}..{high}; got {value}")


# ---------------------------------------------------------------------------------- tiles

NO_TILE = -1
TILE_SPAN = 1 << 21
"""A tile is a global tensor element; its id is `tensor * TILE_SPAN + index`, shown as `tile 3`
for the first tensor and `name[3]` for others."""
W_NONE, W_ASYNC, W_GENERIC, W_GENERIC_FENCED = 0, 1, 2, 3
"""Which proxy wrote a chunk of shared memory (families/smem.py)."""
WRITER_NAMES = {W_NONE: None, W_ASYNC: "async", W_GENERIC: "generic", W_GENERIC_FENCED: "generic"}


def tile_index(tile: int) -> int | None:
    return None if tile == NO_TILE else tile % TILE_SPAN


def tile_tag(m, tile: int) -> str:
    t, k = divmod(tile, TILE_SPAN)
    return f"t{k}" if t == 0 else f"{m.tensor_names[t]}{k}"


SHIFT_SPAN = 1 << 40
SHIFT_ZERO = 1 << 20
"""A chunk holds a tile's bytes at the chunk's own position in the stage (what `ld.shared`
expects), or bytes of the tile from another position: a copy whose global offset differs
from its shared-memory offset, or a write through another view of the same bytes
(`smem ... at`). Such content is `shifted(tile, delta)`: the tile id plus (delta / 16 +
SHIFT_ZERO) * SHIFT_SPAN, where delta = tile byte - stage byte; it equals no tile id."""


def shifted(tile: int, delta: int) -> int:
    if delta == 0 or tile == NO_TILE:
        return tile
    return tile + (delta // 16 + SHIFT_ZERO) * SHIFT_SPAN


def unshift(content: int) -> tuple[int, int]:
    """(tile id, delta in bytes) of a chunk's content."""
    if content < SHIFT_SPAN:
        return content, 0
    units, tile = divmod(content, SHIFT_SPAN)
    return tile, (units - SHIFT_ZERO) * 16


def tile_word(m, tile: int) -> str:
    tile, delta = unshift(tile)
    t, k = divmod(tile, TILE_SPAN)
    word = f"tile {k}" if t == 0 else f"{m.tensor_names[t]}[{k}]"
    return f"{word} {delta:+} bytes off its place" if delta else word


# ----------------------------------------------------------------------- in-flight copies

LOAD, STORE = 0, 1
FLAG_OVERWRITE, FLAG_PROXY = 1, 2
# An in-flight copy (`Machine.tma`): [direction, tile, stage, barrier, next_chunk, end_chunk,
#     agent, group, flagged (FLAG_* bits: each diagnostic once per copy), writing, serial,
#     content (loads: what its chunks hold once landed, its tile or the tile `shifted`)]
(OP_DIR, OP_TILE, OP_STAGE, OP_BAR, OP_NEXT, OP_END, OP_AGENT, OP_GROUP, OP_FLAGGED, OP_WRITING,
 OP_SERIAL, OP_CONTENT) = range(12)


def op_name(m, op: list) -> str:
    """A copy's name, unique among the copies in flight and fixed for its life: `load:t3`,
    `load:t3@cta1` in a cluster, `store:consumer0:t3`; a copy issued while another of the same
    name is in flight gets the lowest free suffix (`load:t3#2@cta1`). Kept in `m.op_names` by
    the copy's identity (a name is asked for at every chunk the copy moves)."""
    entry = m.op_names.get(id(op))
    if entry is not None and entry[0] is op:
        return entry[1]
    name = _op_name(m, op)
    names = m.op_names
    if len(names) >= OP_NAMES_KEPT:
        names.clear()
    names[id(op)] = (op, name)
    return name


OP_NAMES_KEPT = 1024
"""An entry holds its copy, so no other copy takes its id while it is kept."""


def _op_name(m, op: list) -> str:
    serial = op[OP_SERIAL]
    tile = op[OP_TILE]
    tag = f"t{tile}" if 0 <= tile < TILE_SPAN else tile_tag(m, tile)  # `tile_tag`, inlined
    if serial != 1:
        tag = f"{tag}#{serial}"
    if op[OP_DIR] == LOAD:
        return f"load:{tag}@cta{m.stage_cta[op[OP_STAGE]]}" if m.clustered else f"load:{tag}"
    return f"store:{m.agent_names[op[OP_AGENT]]}:{tag}"


# ------------------------------------------------------------------------ barrier operations

ANNOUNCED, ISSUED, FLAGGED = 0, 1, 2
"""`Machine.tx_ledger[b]`: bytes announced and bytes of copies issued in the current phase, and
whether its `tx_mismatch` was reported."""


_VALUE_KEY = {"init": "count", "arrive": "count", "arrive_drop": "count"}
"""The key of a barrier operation's event that holds its operand (others: `bytes`)."""


def barrier_op(m, record: dict, b: int, kind: str, value: int) -> bool:
    """Run one barrier operation, recording it and the phase completion it may cause."""
    barrier = m.barriers[b]
    name = m.barrier_names[b]
    done = getattr(barrier, kind)(value)
    events = record["events"]
    events.append({"kind": kind, "barrier": name, _VALUE_KEY.get(kind, "bytes"): value})
    if kind == "init":
        m.observed[b] = 1
        m.tx_ledger[b] = [0, 0, 0]
        ordering.reset(m, b)
    if done:
        _completed(m, events, b, barrier.phase, name)
    return done


def complete_tx(m, record: dict, b: int, value: int) -> bool:
    """`barrier_op(m, record, b, "complete_tx", value)`: what every landing chunk does, with
    `Mbarrier.complete_tx` inline where it is defined (else the method raises)."""
    barrier = m.barriers[b]
    if barrier.valid and 0 <= value <= TX_LIMIT and barrier.tx_count - value >= -TX_LIMIT:
        count = barrier.tx_count = barrier.tx_count - value
        done = count == 0 and barrier.pending_arrivals == 0
        if done:
            barrier.phase += 1
            barrier.pending_arrivals = barrier.expected_arrivals
    else:
        done = barrier.complete_tx(value)
    name = m.barrier_names[b]
    events = record["events"]
    events.append({"kind": "complete_tx", "barrier": name, "bytes": value})
    if done:
        _completed(m, events, b, barrier.phase, name)
    return done


def _completed(m, events: list, b: int, phase: int, name: str) -> None:
    """Barrier `b` just completed a phase (now `phase`): its record, its ledger, what a
    `tcgen05.commit` in it covers, what its waits learn."""
    events.append({"kind": "phase_completed", "barrier": name, "phase": phase,
                   "parity": phase & 1})
    m.observed[b] = 0
    m.tx_ledger[b] = [0, 0, 0]
    bit = 1 << b
    pending, completed = m.acc_cover
    if (pending | completed) & bit:
        m.acc_cover = [pending & ~bit, (completed & ~bit) | (pending & bit)]
    ordering.complete(m, b)


def arrival(m, a_name: str, b: int, record: dict, cta: int | None = None) -> None:
    """Checks every arrive makes (threads, or the tensor core for a commit) before it lands.

    `reuse_before_wait` as PTX 9.7.13.15.4 writes it, for every arrive-on, local or remote:
    some wait must return true for phase k before any arrive-on in phase k+1. A remote arrive
    into a CTA that has exited is `remote_after_exit`."""
    barrier = m.barriers[b]
    if cta is not None and m.clustered:
        remote_access(m, cta, m.barrier_cta[b], f"arrived on {m.barrier_names[b]}")
    if not m.observed[b] and barrier.valid and barrier.phase > 0:
        m.observed[b] = 1
        name = m.barrier_names[b]
        record["diagnostics"].append(Diagnostic.make(
            "reuse_before_wait", m.step_no,
            f"{a_name} arrived on {name} in its phase {barrier.phase} before any wait observed "
            f"that phase {barrier.phase - 1} had completed: the next use of a barrier must "
            "start after a wait saw the last one finish (PTX 9.7.13.15.4).", agents=[a_name],
            barrier=name))


def remote_access(m, from_cta: int, to_cta: int, what: str) -> None:
    """`remote_after_exit` stops the run: a CTA reached into a peer whose agents have all
    finished, whose shared memory is gone (CUDA: distributed-shared-memory accesses must
    complete before the target block exits). What follows is not defined, and the H200 shows
    it: the access is lost, or the next fence of the CTA that made it never returns (probe
    rows `remote_after_exit`, traces/probes.json)."""
    if from_cta == to_cta or not m.cta_exited(to_cta):
        return
    raise UndefinedBehavior("remote_after_exit", f"{what} in CTA {to_cta}, which has "
                            "exited (all its agents are done): its shared memory is gone; a "
                            "CTA must not exit while peers still access it (CUTLASS's "
                            "producer_tail waits for them)")


def tx_check(m, b: int, record: dict) -> None:
    """`tx_mismatch`: all arrivals of the phase are in and its copies bring more bytes than it
    announced (the short side; the long side is known at the deadlock, see families/sync.py)."""
    ledger = m.tx_ledger[b]
    if ledger[FLAGGED] or m.barriers[b].pending_arrivals or ledger[ISSUED] <= ledger[ANNOUNCED]:
        return
    ledger[FLAGGED] = 1
    name = m.barrier_names[b]
    record["diagnostics"].append(Diagnostic.make(
        "tx_mismatch", m.step_no,
        f"{name}'s phase announced {ledger[ANNOUNCED]} bytes but its copies bring "
        f"{ledger[ISSUED]}: the phase can complete before the tile has landed, or the count "
        "can step over zero and never complete.", agents=[record["agent"] or "tma"],
        barrier=name))


OWN_INITS = "%own_inits"
"""The hidden register (of the cluster barrier family) with the init bits of the barriers the
agent itself initialized: what `fence.mbarrier_init` releases (PTX 9.7.13.4)."""


def init_known(m, a: int, b: int, record: dict, what: str) -> None:
    """An access to barrier `b` by agent `a` must be ordered after the `mbarrier.init` that a
    program line made (a barrier declared with a count is initialized before any agent moves):
    in its own CTA by a `bar.sync` or another barrier after the init; in another CTA through a
    cluster-scope release, such as `fence.mbarrier_init.release.cluster` then
    `barrier.cluster.arrive.relaxed` and `barrier.cluster.wait` (PTX 9.7.13.4, 9.7.13.3).
    Unordered, the access races with the init: an `ordering_race`, reported once per agent
    and init."""
    if not m.inits_lines[b]:
        return
    bit = ordering.init_bit(m, b)
    if m.know[a] & bit:
        return
    m.know[a] |= bit
    name, who = m.barrier_names[b], m.agents[a].name
    record["diagnostics"].append(Diagnostic.make(
        "ordering_race", m.step_no,
        f"{who} {what} {name}, but nothing orders the mbarrier.init of {name} before it: "
        "another thread's init is visible only through a barrier or fence after it "
        "(bar.sync in the CTA; fence.mbarrier_init.release.cluster and a cluster barrier "
        "across CTAs)", agents=[who], barrier=name))


# ----------------------------------------------------------------------------- ownership

def release(m, a: int, b: int) -> None:
    """An arrive on a stage's release barrier: agent `a` is done with the tiles of every stage
    that barrier releases."""
    stages = m.release_stages.get(b, ())
    if m.hold_hooks:
        held = 0
        for hook in m.hold_hooks:
            held |= hook(m, a, stages)
        stages = tuple(s for s in stages if not held >> s & 1)
    for stage in stages:
        discharge(m, stage, 1 << a)


def take(m, a: int, stage: int, tile: int) -> None:
    """Agent `a` holds `tile` of `stage` until it arrives on the stage's release barrier: a tile
    is owed by the agents that waited for it or read it, not by every agent whose code names
    the array (consumers that split a ring, a consumer that left with `arrive_drop`)."""
    if m.releasable[stage] and tile >= 0:
        key = (stage, tile)
        m.owed[key] = m.owed.get(key, 0) | 1 << a


def discharge(m, stage: int, bits: int) -> None:
    owed = m.owed
    if not owed:
        return
    for key in [k for k in owed if k[0] == stage]:
        left = owed[key] & ~bits
        if left:
            owed[key] = left
        else:
            del owed[key]


def unread_by_store(m, stage: int, first: int, end: int, who: str, agent: str,
                    record: dict) -> None:
    """A write to chunks [first, end) of `stage` while a bulk store from them has not read them
    is `overwrite`: the store may carry the new bytes to global memory. PTX 9.7.9.27.2.2 lets
    the source be reused only once `cp.async.bulk.wait_group.read` says the store has read it;
    until then a schedule can always leave the read for later (docs/semantics.md)."""
    op = unread_store(m, stage, first, end)
    if op is not None:
        issuer = m.agents[op[OP_AGENT]].name
        stage_name = m.stage_names[stage]
        record["diagnostics"].append(Diagnostic.make(
            "overwrite", m.step_no,
            f"{who} wrote {stage_name} while the bulk store of {tile_word(m, op[OP_TILE])} "
            f"that {issuer} issued from it had not read it yet (no "
            "`cp.async.bulk.wait_group.read` of its group had returned): the store may write "
            "the new bytes to global memory.", agents=[agent, issuer], stage=stage_name))


def unread_store(m, stage: int, first: int, end: int) -> list | None:
    """The first bulk store in flight that has still to read one of chunks [first, end) of
    `stage` (`unread_by_store`), or None."""
    for op in m.tma:
        if (op[OP_DIR] == STORE and op[OP_STAGE] == stage and not op[OP_WRITING]
                and op[OP_NEXT] < end and op[OP_END] > first):
            return op
    return None
