"""Barrier lines of a pipeline program: `mbarrier.init`, `arrive` (and `.expect_tx`,
`arrive_drop`), `expect_tx`, `complete_tx`, `try_wait`/`test_wait` (`.parity` or a state token),
and `inval`, with the detectors that watch them (what a blocked or deadlocked wait reports,
and the snapshot, are in `sync_views.py`).

Follows the PTX ISA's mbarrier section and docs/semantics.md. Beside the barrier itself the machine
keeps, per barrier, whether some wait has observed the current phase (`reuse_before_wait`), the
bytes announced and the bytes of copies issued in the current phase (`tx_mismatch`), and per
(agent, barrier) the parity of the agent's first wait and how many of its waits returned: the
ground truth of which completion a wait needs (`stale_wait`), which the parity only approximates.
"""

from __future__ import annotations

from .. import ordering
from ..barrier import COUNT_LIMIT, TX_LIMIT, UndefinedBehavior
from ..core import (
    ANNOUNCED,
    ISSUED,
    OWN_INITS,
    PC,
    arrival,
    barrier_op,
    init_known,
    operand_range,
    release,
    remote_access,
    take,
    tx_check,
)
from ..detectors import Diagnostic
from ..family import Family
from ..program import SINK, TC_FENCED, WAIT_BLOCKS, ProgramError
from . import sync_views as views
from .sync_forms import isa_forms as _isa_forms
from .sync_views import TOKEN_SHIFT

# ------------------------------------------------------------------------------------ lines

def _init(m, a, r, args, record) -> None:
    bar, count = args
    b = bar(r)
    n = operand_range(count(r), 1, COUNT_LIMIT, "the arrival count")
    record["operands"] = {"barrier": m.barrier_names[b], "count": n}
    barrier_op(m, record, b, "init", n)
    bit = ordering.init_bit(m, b)
    ordering.forget(m, bit)
    m.know[a] |= bit
    own = m.hidden.get(OWN_INITS)
    if own is not None:
        r[own] |= bit


def _token(m, r, dest: int, b: int) -> None:
    if dest != SINK:
        r[dest] = (b + 1) << TOKEN_SHIFT | m.barriers[b].phase


def token_phase(m, r, token: int, b: int) -> int:
    """The phase a state token was returned in, checked to name barrier `b`."""
    value = r[token]
    named = (value >> TOKEN_SHIFT) - 1
    if named != b:
        what = (f"a token of {m.barrier_names[named]}" if 0 <= named < len(m.barriers)
                else "a register that holds no state token")
        raise UndefinedBehavior("token_mismatch", f"a wait on {m.barrier_names[b]} with {what}: "
                                                  "PTX takes only a state returned by an arrive "
                                                  "on the same mbarrier")
    return value & ((1 << TOKEN_SHIFT) - 1)


def _arrive(m, a, r, args, record, kind: str = "arrive") -> None:
    dest, bar, count = args
    b = bar(r)
    n = 1 if count is None else operand_range(count(r), 1, COUNT_LIMIT, "the count")
    name = m.barrier_names[b]
    record["operands"] = {"barrier": name, "count": n}
    barrier = m.barriers[b]
    if not barrier.valid:
        raise barrier._invalid(f"mbarrier.{kind}")
    _arrival(m, a, r, dest, b, barrier, record)
    line = m.code[a].nodes[r[PC]]
    ordering.release(m, a, b, line.sem, line.scope)
    if ("noComplete" in line.flags and n == barrier.pending_arrivals
            and barrier.tx_count == 0):
        raise UndefinedBehavior("no_complete", f"mbarrier.{kind}.noComplete of {n} on {name} "
                                               f"would complete its phase ({n} arrivals pending,"
                                               " tx-count 0)")
    barrier_op(m, record, b, kind, n)


def _arrival(m, a, r, dest, b, barrier, record, init: bool = True) -> None:
    """What an arrive of agent `a` on barrier `b` does before the barrier counts it, in this
    order: `init_known` (unless done already: `init` False), `arrival`'s checks, the state
    token, the release of the stages it frees, `ordering.touch`; each call skipped where it
    would do nothing (an arrive is one of the commonest lines)."""
    if init and m.inits_lines[b]:
        init_known(m, a, b, record, "arrived on")
    if m.clustered or not m.observed[b]:
        arrival(m, m.agents[a].name, b, record, m.agents[a].cta)
    if dest != SINK:
        _token(m, r, dest, b)
    if m.hold_hooks or b in m.release_stages:
        release(m, a, b)
    if barrier.phase == 0:
        ordering.touch(m, a, b)


def _arrive_drop(m, a, r, args, record) -> None:
    _arrive(m, a, r, args, record, "arrive_drop")


def _arrive_expect_tx(m, a, r, args, record) -> None:
    dest, bar, nbytes = args
    b = bar(r)
    n = operand_range(nbytes(r), 0, TX_LIMIT, "the byte count")
    name = m.barrier_names[b]
    record["operands"] = {"barrier": name, "bytes": n}
    barrier = m.barriers[b]
    barrier._require_valid("mbarrier.arrive.expect_tx")
    if m.inits_lines[b]:
        init_known(m, a, b, record, "arrived on")
    if barrier.pending_arrivals < 1:
        raise UndefinedBehavior("over_arrival", f"mbarrier.arrive.expect_tx on {name} with no "
                                                "arrivals pending (a second arrive in one phase)")
    _arrival(m, a, r, dest, b, barrier, record, False)
    line = m.code[a].nodes[r[PC]]
    ordering.release(m, a, b, line.sem, line.scope)
    m.tx_ledger[b][ANNOUNCED] += n
    barrier_op(m, record, b, "expect_tx", n)
    if barrier_op(m, record, b, "arrive", 1):
        return
    tx_check(m, b, record)


def _expect_tx(m, a, r, args, record) -> None:
    bar, nbytes = args
    b = bar(r)
    n = operand_range(nbytes(r), 0, TX_LIMIT, "the byte count")
    record["operands"] = {"barrier": m.barrier_names[b], "bytes": n}
    m.barriers[b]._require_valid("mbarrier.expect_tx")
    init_known(m, a, b, record, "announced bytes on")
    if m.clustered:
        remote_access(m, m.agent_cta[a], m.barrier_cta[b],
                      f"announced bytes on {m.barrier_names[b]}")
    ordering.touch(m, a, b)
    m.tx_ledger[b][ANNOUNCED] += n
    if not barrier_op(m, record, b, "expect_tx", n):
        tx_check(m, b, record)


def _complete_tx(m, a, r, args, record) -> None:
    bar, nbytes = args
    b = bar(r)
    n = operand_range(nbytes(r), 0, TX_LIMIT, "the byte count")
    record["operands"] = {"barrier": m.barrier_names[b], "bytes": n}
    m.barriers[b]._require_valid("mbarrier.complete_tx")
    init_known(m, a, b, record, "completed bytes on")
    if m.clustered:
        remote_access(m, m.agent_cta[a], m.barrier_cta[b],
                      f"completed bytes on {m.barrier_names[b]}")
    m.tx_ledger[b][ISSUED] += n
    if not barrier_op(m, record, b, "complete_tx", n):
        tx_check(m, b, record)


def _parity(value: int) -> int:
    if value in (0, 1):
        return value
    raise ProgramError("operand_range", f"a phase parity is 0 or 1; got {value}")


def _wait_parity(m, a, r, args, record) -> None:
    dest, bar, parity_fn, blocking, _hint = args
    b = bar(r)
    parity = parity_fn(r)
    if parity not in (0, 1):
        _parity(parity)
    name = m.barrier_names[b]
    barrier = m.barriers[b]
    seen = m.waits.get((a, b))  # `phases_needed`, inlined
    needed = 1 - parity if seen is None else seen[1] + 1
    record["operands"] = {"barrier": name, "parity": parity, "phases_needed": needed}
    if not barrier.valid:
        barrier.try_wait_parity(parity)  # raises `uninitialized`
    ok = (barrier.phase & 1) != parity  # `try_wait_parity`
    if m.inits_lines[b]:
        init_known(m, a, b, record, "waited on")
    if dest != SINK:
        r[dest] = int(ok)
    if not ok:
        record["events"].append({"kind": "wait_pending", "barrier": name, "parity": parity})
        return
    _returned(m, a, r, b, record, {"kind": "wait_returned", "barrier": name, "parity": parity},
              parity, needed)


def _returned(m, a, r, b, record, event, parity, needed, token: bool = False) -> None:
    """A wait that returned true: it observed completion number `barrier.phase` (0: the state
    before the first phase).

    `stale_wait` as PTX 9.7.13.15.16 reads: a parity names the current or the immediately
    preceding phase, so a wait that returns at once returns on the latest completion. That is
    stale when this agent's own earlier wait already returned on it (a forgotten phase toggle),
    or when it returns on the state before the first phase although the agent knows phase 0
    is already under way (it saw, through its own arrivals or what its waits acquired, an
    arrive or expect-tx in it: ordering.py): a wait meant for a later phase (parity 1 from a
    consumer that has not seen phase 0, as in two consumers splitting an odd ring). A wait on
    a state token names its phase exactly, so it is never stale (an old token is
    `stale_token`)."""
    barrier = m.barriers[b]
    name = m.barrier_names[b]
    record["events"].append(event)
    m.observed[b] = 1
    r[TC_FENCED] = 0
    phase = barrier.phase
    seen = m.waits.get((a, b))
    stale = None
    if token:
        pass
    elif seen is not None and phase <= seen[1]:
        stale = (f"the barrier's current parity is {phase & 1} from an earlier use "
                 f"({phase} phase{'s' if phase != 1 else ''} completed, {needed} needed)")
    elif phase == 0 and m.know[a] & ordering.act_bit(m, b):
        stale = ("parity 1 names the state before phase 0, but it knows phase 0 is already "
                 "under way (an arrive on it happened before this wait): the wait was meant "
                 "for a later phase")
    if seen is None:
        seen = m.waits[(a, b)] = [parity, phase]
    elif phase > seen[1]:
        seen[1] = phase
    line = m.code[a].nodes[r[PC]]
    ordering.acquire(m, a, b, line.sem, line.scope)
    bit = 1 << b
    if not stale:  # a stale return gets no tile: the one it returned on was used already
        for stage, bars in enumerate(m.stage_bars):
            if bars & bit:
                take(m, a, stage, m.stage_tile[stage])
    if m.acc_cover[1] & bit:
        m.acc_dirty &= ~(1 << a)
    if stale:
        agent = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "stale_wait", m.step_no,
            f"{agent}'s wait on {name} with parity {parity} returned at once: {stale}.",
            agents=[agent], barrier=name))


def _wait_token(m, a, r, args, record) -> None:
    dest, bar, token, blocking, _hint = args
    b = bar(r)
    name = m.barrier_names[b]
    barrier = m.barriers[b]
    barrier._require_valid("mbarrier.test_wait")
    init_known(m, a, b, record, "waited on")
    arrived_in = token_phase(m, r, token, b)
    if barrier.phase - arrived_in >= 2:
        raise UndefinedBehavior("stale_token", f"the state token of phase {arrived_in} is "
                                               f"{barrier.phase - arrived_in} phases old")
    ok = barrier.phase > arrived_in
    record["operands"] = {"barrier": name, "token_phase": arrived_in}
    if dest != SINK:
        r[dest] = int(ok)
    if not ok:
        record["events"].append({"kind": "wait_pending", "barrier": name, "parity": None})
        return
    _returned(m, a, r, b, record, {"kind": "wait_returned", "barrier": name,
                                   "parity": arrived_in & 1}, arrived_in & 1, arrived_in + 1,
              token=True)


def _inval(m, a, r, args, record) -> None:
    (bar,) = args
    b = bar(r)
    record["operands"] = {"barrier": m.barrier_names[b]}
    m.barriers[b].inval()
    record["events"].append({"kind": "inval", "barrier": m.barrier_names[b]})


HANDLERS = {
    "init": _init, "arrive": _arrive, "arrive_drop": _arrive_drop,
    "arrive_expect_tx": _arrive_expect_tx, "expect_tx": _expect_tx,
    "complete_tx": _complete_tx, "wait_parity": _wait_parity, "wait_token": _wait_token,
    "inval": _inval,
}


def _parity_ready(m, a, r, args) -> bool:
    dest, bar, parity_fn, blocking, _hint = args
    if blocking != WAIT_BLOCKS:
        return True
    barrier = m.barriers[bar(r)]
    return not barrier.valid or (barrier.phase & 1) != parity_fn(r)


def _token_ready(m, a, r, args) -> bool:
    """Blocked until the token's phase completes; a wait that is undefined behaviour (an
    invalid barrier, a stale token, another barrier's token) can move, and stops the run."""
    dest, bar, token, blocking, _hint = args
    if blocking != WAIT_BLOCKS:
        return True
    b = bar(r)
    barrier = m.barriers[b]
    value = r[token]
    if (value >> TOKEN_SHIFT) - 1 != b:
        return True
    phase = value & ((1 << TOKEN_SHIFT) - 1)
    return not barrier.valid or barrier.phase > phase or barrier.phase - phase >= 2


BLOCKERS = {"wait_parity": _parity_ready, "wait_token": _token_ready}


def _parity_fused(line, code) -> tuple | None:
    """`_parity_ready` of one line, its operands written in (`Family.fused`)."""
    _dest, bar, parity, blocking, _hint = line.args
    bar, parity = code(bar), code(parity)
    if blocking != WAIT_BLOCKS or bar is None or parity is None:
        return None
    return f"not (_b := m.barriers[{bar}]).valid or (_b.phase & 1) != {parity}", {}


FAMILY = Family(
    "mbarrier (app/sim/families/sync.py)", 10, HANDLERS, BLOCKERS, views.WAITING,
    explain={"wait_parity": views.explain, "wait_token": views.explain},
    arrives=("arrive", "arrive_drop", "arrive_expect_tx"), deadlock=views.deadlock,
    snapshot=views.snapshot, snapshot_inputs=views.snapshot_inputs,
    forms=_isa_forms(), writes_smem=frozenset(), fused={"wait_parity": _parity_fused})
