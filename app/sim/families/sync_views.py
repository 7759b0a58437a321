"""What the mbarrier family reports rather than does: which completion a wait needs, what a
blocked wait shows, why a deadlocked wait can never return, and each barrier's snapshot.

Split from `sync.py`, which runs the lines; both follow the PTX ISA's mbarrier section and
docs/semantics.md.
"""

from __future__ import annotations

from ..core import ANNOUNCED, FLAGGED, ISSUED, LOAD, OP_BAR, OP_DIR
from ..detectors import Diagnostic

TOKEN_SHIFT = 32
"""A state token names its barrier and its phase: `(barrier + 1) << 32 | phase` (PTX calls the
token opaque; a wait on another barrier is `token_mismatch`)."""


def phases_needed(m, a: int, b: int, parity: int) -> int:
    """Completed phases barrier `b` must show for agent `a`'s next wait to return on a
    completion the agent has not seen: its first wait is taken at its word (parity 0: the
    first completion; parity 1: the state before the first phase, which a producer's start
    state treats as complete), and a later wait needs a completion after the last one its own
    waits returned on (an agent that skips phases, as consumers splitting a ring do, needs at
    least that one)."""
    seen = m.waits.get((a, b))
    if seen is None:
        return 1 - parity
    return seen[1] + 1


def waiting_parity(m, a, r, args) -> dict:
    dest, bar, parity_fn, blocking, _hint = args
    b = bar(r)
    parity = parity_fn(r)
    return _wait_view(m.barrier_names[b], parity, phases_needed(m, a, b, parity & 1))


def waiting_token(m, a, r, args) -> dict:
    dest, bar, token, blocking, _hint = args
    b = bar(r)
    phase = r[token] & ((1 << TOKEN_SHIFT) - 1)
    return _wait_view(m.barrier_names[b], phase & 1, phase + 1)


def _wait_view(barrier: str, parity: int, needed: int) -> dict:
    """What a wait asks and what it should ask: completion number `needed` of the barrier ends
    phase `needed - 1`, so the parity that names it is `(needed - 1) mod 2`."""
    return {"barrier": barrier, "parity": parity, "phases_needed": needed,
            "parity_needed": (needed - 1) % 2}


WAITING = {"wait_parity": waiting_parity, "wait_token": waiting_token}


def explain(m, a, waiting) -> str:
    """Why a wait can never return: the barrier's state, a stale parity that now names the
    current phase, or nothing left in the program that arrives on it."""
    b = m.barrier_names.index(waiting["barrier"])
    barrier = m.barriers[b]
    tx = barrier.tx_count
    bytes_text = (f"{tx} bytes pending" if tx >= 0
                  else f"{-tx} bytes landed beyond what was announced")
    why = (f"its parity is {barrier.phase & 1}, {barrier.pending_arrivals} arrivals "
           f"pending and {bytes_text}")
    needed = waiting.get("phases_needed")
    if needed is not None and barrier.phase >= needed:
        why += (f"; the completion it needs already happened ({barrier.phase} phases "
                f"completed, {needed} needed), so parity {waiting['parity']} now names "
                "the current, unfinished phase")
    elif not _can_arrive(m, b):
        why += "; nothing left in the program will arrive on it"
    return f"waits on {waiting['barrier']} parity {waiting['parity']} ({why})"


def _can_arrive(m, b: int) -> bool:
    """Whether any unfinished agent's program has a line that may arrive on barrier `b`'s
    array (a coarse, static answer for the deadlock message)."""
    array = m.program.barriers[b].array
    kinds = m.arriving_kinds
    for a in range(m.n_agents):
        if m.current_line(a) is None:
            continue
        for node in m.code[a].nodes:
            if getattr(node, "kind", None) in kinds and any(
                    getattr(arg, "array", None) == array for arg in node.args):
                return True
    return any(entry[3] == b for entry in m.tensor_core)


def deadlock(m) -> list:
    """The long side of `tx_mismatch`, known only when nothing can move: a barrier waits for
    bytes that nothing in flight will bring."""
    out = []
    for b, barrier in enumerate(m.barriers):
        ledger = m.tx_ledger[b]
        in_flight = any(op[OP_DIR] == LOAD and op[OP_BAR] == b for op in m.tma)
        if (barrier.valid and not ledger[FLAGGED] and ledger[ANNOUNCED] > ledger[ISSUED]
                and barrier.pending_arrivals == 0 and barrier.tx_count > 0 and not in_flight):
            name = m.barrier_names[b]
            out.append(Diagnostic.make(
                "tx_mismatch", m.step_no,
                f"{name}'s phase announced {ledger[ANNOUNCED]} bytes but its copies (and "
                f"complete_tx lines) brought {ledger[ISSUED]}: {barrier.tx_count} bytes can "
                "never arrive.",
                agents=["tma"], barrier=name))
    return out


def snapshot(m) -> dict:
    """Each barrier as `Mbarrier.as_dict` shows it, between its name and its held bytes (one
    dict, built at every step of a window)."""
    return {"barriers": [{"name": name, "phase": b.phase, "parity": b.phase & 1,
                          "pending_arrivals": b.pending_arrivals,
                          "expected_arrivals": b.expected_arrivals, "tx_count": b.tx_count,
                          "valid": b.valid, "tx_held": held}
                         for name, b, held in zip(m.barrier_names, m.barriers, m.held,
                                                  strict=True)]}


def snapshot_inputs(m) -> tuple:
    """What `snapshot` reads, frozen: an incremental snapshot is rebuilt only when it changes."""
    return [b.freeze() for b in m.barriers], list(m.held)
