"""Diagnostics: a failure named at the step where it happened (trace format: DIAGNOSTIC), and the
reports made when no move is left (`deadlock`, and the long side of `tx_mismatch`)."""

from __future__ import annotations

UB_KINDS = {"over_arrival", "tx_overflow", "tx_underflow", "stale_token", "remote_after_exit"}
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

    Each family says it for its own lines (`Family.explain`) and adds what only a deadlock
    shows (`Family.deadlock`: the long side of `tx_mismatch`). A pure function of the state (it
    changes nothing), so the checker can recompute it from a frozen deadlocked state."""
    out = []
    for report in m.deadlock_reports:
        out.extend(report(m))
    blocked, names = [], []
    first_barrier = None
    for a, agent in enumerate(m.agents):
        waiting = m.waiting_on(a)
        if waiting is None:
            continue
        names.append(agent.name)
        if "barrier" in waiting:
            first_barrier = first_barrier or waiting["barrier"]
        kind = m.current_line(a).kind
        blocked.append(f"{agent.name} {m.explain[kind](m, a, waiting)}")
    out.append(Diagnostic.make("deadlock", m.step_no,
                               "Work remains and no agent can move: " + "; ".join(blocked) + ".",
                               agents=names, barrier=first_barrier))
    return out
