"""Diagnostics: a failure named at the step where it happened (trace format: DIAGNOSTIC), and the
reports made when no move is left (`deadlock`, and the long side of `tx_mismatch`)."""

from __future__ import annotations

UB_KINDS = {"over_arrival", "tx_overflow", "tx_underflow", "stale_token"}
"""Undefined-behaviour rules that are diagnostics of their own; others: `undefined_behavior`."""


class Diagnostic(dict):
    """One failure: kind, step, agents, barrier, stage, rule and a one-sentence message."""

    @classmethod
    def make(cls, kind: str, step: int, message: str, agents=(), barrier=None, stage=None,
             rule=None) -> Diagnostic:
        return cls(kind=kind, step=step, agents=list(agents), barrier=barrier, stage=stage,
                   rule=rule, message=message)


def deadlock_diagnostics(m) -> list[Diagnostic]:
    """Work remains and nothing can move: say who waits on what, and why it will never come.

    A pure function of the state (it changes nothing), so the checker can recompute it from a
    frozen deadlocked state."""
    from .copies import LOAD, OP_BAR, OP_DIR
    from .sync import ANNOUNCED, FLAGGED, ISSUED

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
    blocked, names = [], []
    first_barrier = None
    for a, agent in enumerate(m.agents):
        waiting = m.waiting_on(a)
        if waiting is None:
            continue
        names.append(agent.name)
        if "barrier" in waiting:
            b = m.barrier_names.index(waiting["barrier"])
            barrier = m.barriers[b]
            first_barrier = first_barrier or waiting["barrier"]
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
            blocked.append(f"{agent.name} waits on {waiting['barrier']} parity "
                           f"{waiting['parity']} ({why})")
        else:
            blocked.append(f"{agent.name} waits for its bulk stores")
    out.append(Diagnostic.make("deadlock", m.step_no,
                               "Work remains and no agent can move: " + "; ".join(blocked) + ".",
                               agents=names, barrier=first_barrier))
    return out


def _can_arrive(m, b: int) -> bool:
    """Whether any unfinished agent's program has a line that may arrive on barrier `b`'s
    array (a coarse, static answer for the deadlock message)."""
    array = m.program.barriers[b].array
    kinds = ("arrive", "arrive_drop", "arrive_expect_tx", "tc_commit")
    for a in range(m.n_agents):
        if m.current_line(a) is None:
            continue
        for node in m.code[a].nodes:
            if getattr(node, "kind", None) in kinds and any(
                    getattr(arg, "array", None) == array for arg in node.args):
                return True
    return any(entry[3] == b for entry in m.tensor_core)
