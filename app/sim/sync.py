"""Barrier lines of a pipeline program: `mbarrier.init`, `arrive` (and `.expect_tx`,
`arrive_drop`), `expect_tx`, `complete_tx`, `try_wait`/`test_wait` (`.parity` or a state token),
`inval`, and register updates; with the detectors that watch them.

Follows the PTX ISA's mbarrier section and SEMANTICS.md. Beside the barrier itself the machine
keeps, per barrier, whether some wait has observed the current phase (`reuse_before_wait`), the
bytes announced and the bytes of copies issued in the current phase (`tx_mismatch`), and per
(agent, barrier) the parity of the agent's first wait and how many of its waits returned: the
ground truth of which completion a wait needs (`stale_wait`), which the parity only approximates.
"""

from __future__ import annotations

from .barrier import COUNT_LIMIT, TX_LIMIT, UndefinedBehavior
from .detectors import Diagnostic
from .program import SINK, TC_FENCED, ProgramError

PC = 0

REGISTER_LIMIT = 2**62
ANNOUNCED, ISSUED, FLAGGED = 0, 1, 2
TOKEN_SHIFT = 32
"""A state token names its barrier and its phase: `(barrier + 1) << 32 | phase` (PTX calls the
token opaque; a wait on another barrier is `token_mismatch`)."""


def checked(value: int) -> int:
    if -REGISTER_LIMIT <= value <= REGISTER_LIMIT:
        return value
    raise ProgramError("overflow", f"a register value left ±2^62 ({str(value)[:30]}...)")


def _range(value: int, low: int, high: int, what: str) -> int:
    if low <= value <= high:
        return value
    raise ProgramError("operand_range", f"{what} must be in {low}..{high}; got {value}")


def barrier_op(m, record: dict, b: int, kind: str, value: int) -> bool:
    """Run one barrier operation, recording it and the phase completion it may cause."""
    barrier = m.barriers[b]
    name = m.barrier_names[b]
    done = getattr(barrier, kind)(value)
    events = record["events"]
    events.append({"kind": kind, "barrier": name,
                   ("count" if kind in ("init", "arrive", "arrive_drop") else "bytes"): value})
    if kind == "init":
        m.observed[b] = 1
        m.tx_ledger[b] = [0, 0, 0]
    if done:
        events.append({"kind": "phase_completed", "barrier": name, "phase": barrier.phase,
                       "parity": barrier.phase & 1})
        m.observed[b] = 0
        m.tx_ledger[b] = [0, 0, 0]
    return done


def arrival(m, a_name: str, b: int, record: dict, cta: int | None = None) -> None:
    """Checks every arrive makes (threads, or the tensor core for a commit) before it lands.

    `reuse_before_wait` watches arrivals from the barrier's own CTA. A remote arrive from
    another CTA of the cluster (`mapa` + `.shared::cluster`) is a one-way signal that may reach
    the next phase before the barrier's own waiter has looked, as in CUTLASS's multicast
    pipelines; a phase it helps complete unobserved still shows as `stale_wait` or `deadlock`."""
    barrier = m.barriers[b]
    if cta is not None and cta != m.program.barriers[b].cta:
        return
    if not m.observed[b] and barrier.valid and barrier.phase > 0:
        m.observed[b] = 1
        name = m.barrier_names[b]
        record["diagnostics"].append(Diagnostic.make(
            "reuse_before_wait", m.step_no,
            f"{a_name} arrived on {name} in its phase {barrier.phase} before any wait observed "
            f"that phase {barrier.phase - 1} had completed: the next use of a barrier must "
            "start after a wait saw the last one finish.", agents=[a_name], barrier=name))


def release(m, a: int, b: int) -> None:
    """An arrive on a stage's release barrier: agent `a` is done with that stage's tile."""
    stage = m.release_stage.get(b)
    if stage is not None:
        discharge(m, stage, 1 << a)


def discharge(m, stage: int, bits: int) -> None:
    owed = m.owed
    for key in [k for k in owed if k[0] == stage]:
        left = owed[key] & ~bits
        if left:
            owed[key] = left
        else:
            del owed[key]


def tx_check(m, b: int, record: dict) -> None:
    """`tx_mismatch`: all arrivals of the phase are in and its copies bring more bytes than it
    announced (the short side; the long side is known at the deadlock, see detectors.py)."""
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


# ------------------------------------------------------------------------------------ lines

def _init(m, a, r, args, record) -> None:
    bar, count = args
    b = bar(r)
    n = _range(count(r), 1, COUNT_LIMIT, "the arrival count")
    record["operands"] = {"barrier": m.barrier_names[b], "count": n}
    barrier_op(m, record, b, "init", n)


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
    n = 1 if count is None else _range(count(r), 1, COUNT_LIMIT, "the count")
    name = m.barrier_names[b]
    record["operands"] = {"barrier": name, "count": n}
    barrier = m.barriers[b]
    barrier._require_valid(f"mbarrier.{kind}")
    arrival(m, m.agents[a].name, b, record, m.agents[a].cta)
    _token(m, r, dest, b)
    release(m, a, b)
    if ("noComplete" in m.code[a].nodes[r[PC]].flags and n == barrier.pending_arrivals
            and barrier.tx_count == 0):
        raise UndefinedBehavior("no_complete", f"mbarrier.{kind}.noComplete of {n} on {name} "
                                               f"would complete its phase ({n} arrivals pending,"
                                               " tx-count 0)")
    barrier_op(m, record, b, kind, n)


def _arrive_drop(m, a, r, args, record) -> None:
    _arrive(m, a, r, args, record, "arrive_drop")


def _arrive_expect_tx(m, a, r, args, record) -> None:
    dest, bar, nbytes = args
    b = bar(r)
    n = _range(nbytes(r), 0, TX_LIMIT, "the byte count")
    name = m.barrier_names[b]
    record["operands"] = {"barrier": name, "bytes": n}
    barrier = m.barriers[b]
    barrier._require_valid("mbarrier.arrive.expect_tx")
    if barrier.pending_arrivals < 1:
        raise UndefinedBehavior("over_arrival", f"mbarrier.arrive.expect_tx on {name} with no "
                                                "arrivals pending (a second arrive in one phase)")
    arrival(m, m.agents[a].name, b, record, m.agents[a].cta)
    _token(m, r, dest, b)
    release(m, a, b)
    m.tx_ledger[b][ANNOUNCED] += n
    barrier_op(m, record, b, "expect_tx", n)
    if barrier_op(m, record, b, "arrive", 1):
        return
    tx_check(m, b, record)


def _expect_tx(m, a, r, args, record) -> None:
    bar, nbytes = args
    b = bar(r)
    n = _range(nbytes(r), 0, TX_LIMIT, "the byte count")
    record["operands"] = {"barrier": m.barrier_names[b], "bytes": n}
    m.barriers[b]._require_valid("mbarrier.expect_tx")
    m.tx_ledger[b][ANNOUNCED] += n
    if not barrier_op(m, record, b, "expect_tx", n):
        tx_check(m, b, record)


def _complete_tx(m, a, r, args, record) -> None:
    bar, nbytes = args
    b = bar(r)
    n = _range(nbytes(r), 0, TX_LIMIT, "the byte count")
    record["operands"] = {"barrier": m.barrier_names[b], "bytes": n}
    m.barriers[b]._require_valid("mbarrier.complete_tx")
    m.tx_ledger[b][ISSUED] += n
    if not barrier_op(m, record, b, "complete_tx", n):
        tx_check(m, b, record)


def phases_needed(m, a: int, b: int, parity: int) -> int:
    """Completed phases barrier `b` must show for agent `a`'s next wait to be the right one:
    its first wait is taken at its word (parity 0: the first completion; parity 1: the phase
    before the first, which a producer's start state treats as complete), and every later wait
    on the same barrier is for the next completion."""
    seen = m.waits.get((a, b))
    if seen is None:
        return 1 - parity
    return seen[1] + 1 - seen[0]


def _parity(value: int) -> int:
    if value in (0, 1):
        return value
    raise ProgramError("operand_range", f"a phase parity is 0 or 1; got {value}")


def _wait_parity(m, a, r, args, record) -> None:
    dest, bar, parity_fn, blocking = args
    b = bar(r)
    parity = _parity(parity_fn(r))
    name = m.barrier_names[b]
    barrier = m.barriers[b]
    needed = phases_needed(m, a, b, parity)
    record["operands"] = {"barrier": name, "parity": parity, "phases_needed": needed}
    ok = barrier.try_wait_parity(parity)
    if dest != SINK:
        r[dest] = int(ok)
    if not ok:
        record["events"].append({"kind": "wait_pending", "barrier": name, "parity": parity})
        return
    _returned(m, a, r, b, record, {"kind": "wait_returned", "barrier": name, "parity": parity},
              parity, needed)


def _returned(m, a, r, b, record, event, parity, needed) -> None:
    barrier = m.barriers[b]
    name = m.barrier_names[b]
    record["events"].append(event)
    m.observed[b] = 1
    r[TC_FENCED] = 0
    seen = m.waits.get((a, b))
    if seen is None:
        seen = m.waits[(a, b)] = [parity, 0]
    seen[1] += 1
    if barrier.phase < needed:
        agent = m.agents[a].name
        record["diagnostics"].append(Diagnostic.make(
            "stale_wait", m.step_no,
            f"{agent}'s wait on {name} with parity {parity} returned at once: the barrier's "
            f"current parity is {barrier.phase & 1} from an earlier use ({barrier.phase} "
            f"phase{'s' if barrier.phase != 1 else ''} completed, {needed} needed).",
            agents=[agent], barrier=name))


def _wait_token(m, a, r, args, record) -> None:
    dest, bar, token, blocking = args
    b = bar(r)
    name = m.barrier_names[b]
    barrier = m.barriers[b]
    barrier._require_valid("mbarrier.test_wait")
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
                                   "parity": arrived_in & 1}, arrived_in & 1, arrived_in + 1)


def _inval(m, a, r, args, record) -> None:
    (bar,) = args
    b = bar(r)
    record["operands"] = {"barrier": m.barrier_names[b]}
    m.barriers[b].inval()
    record["events"].append({"kind": "inval", "barrier": m.barrier_names[b]})


def _assign(m, a, r, args, record) -> None:
    (updates,) = args
    names = m.agents[a].registers
    touched = []
    for reg, fn in updates:
        r[reg] = checked(fn(r))
        if reg not in touched:
            touched.append(reg)
    touched.sort()
    base = names[touched[0] - 1].split(".")[0]
    value = {}
    for reg in touched:
        name = names[reg - 1]
        value[name[len(base) + 1:] if name.startswith(base + ".") else name] = r[reg]
    record["operands"] = {names[reg - 1]: r[reg] for reg in touched}
    record["events"].append({"kind": "register", "agent": m.agents[a].name, "name": base,
                             "value": value})


HANDLERS = {
    "init": _init, "arrive": _arrive, "arrive_drop": _arrive_drop,
    "arrive_expect_tx": _arrive_expect_tx, "expect_tx": _expect_tx,
    "complete_tx": _complete_tx, "wait_parity": _wait_parity, "wait_token": _wait_token,
    "inval": _inval, "assign": _assign,
}


def _parity_ready(m, a, r, args) -> bool:
    dest, bar, parity_fn, blocking = args
    if not blocking:
        return True
    barrier = m.barriers[bar(r)]
    return not barrier.valid or (barrier.phase & 1) != parity_fn(r)


def _token_ready(m, a, r, args) -> bool:
    """Blocked until the token's phase completes; a wait that is undefined behaviour (an
    invalid barrier, a stale token, another barrier's token) can move, and stops the run."""
    dest, bar, token, blocking = args
    if not blocking:
        return True
    b = bar(r)
    barrier = m.barriers[b]
    value = r[token]
    if (value >> TOKEN_SHIFT) - 1 != b:
        return True
    phase = value & ((1 << TOKEN_SHIFT) - 1)
    return not barrier.valid or barrier.phase > phase or barrier.phase - phase >= 2


BLOCKERS = {"wait_parity": _parity_ready, "wait_token": _token_ready}


def _waiting_parity(m, a, r, args) -> dict:
    dest, bar, parity_fn, blocking = args
    b = bar(r)
    parity = parity_fn(r)
    return _wait_view(m.barrier_names[b], parity, phases_needed(m, a, b, parity & 1))


def _waiting_token(m, a, r, args) -> dict:
    dest, bar, token, blocking = args
    b = bar(r)
    phase = r[token] & ((1 << TOKEN_SHIFT) - 1)
    return _wait_view(m.barrier_names[b], phase & 1, phase + 1)


def _wait_view(barrier: str, parity: int, needed: int) -> dict:
    """What a wait asks and what it should ask: completion number `needed` of the barrier ends
    phase `needed - 1`, so the parity that names it is `(needed - 1) mod 2`."""
    return {"barrier": barrier, "parity": parity, "phases_needed": needed,
            "parity_needed": (needed - 1) % 2}


WAITING = {"wait_parity": _waiting_parity, "wait_token": _waiting_token}
