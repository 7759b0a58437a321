"""Livelock: movers that go on moving forever while the program never finishes (DESIGN.md,
SEMANTICS.md "Hangs"). This module holds what a run and the schedule checker both need: which
programs can come back to a state at all, who counts as a mover for fairness, the weak-fairness
test a cycle of moves must pass, and the diagnostic that says who spins on what.

*Weak fairness (justice).* A mover is an agent, the tensor core, or one in-flight TMA copy (its
landing and its hold move are one mover), named as `Machine.moves()` names it. An infinite run is
fair when every mover that stays enabled from some step on moves again and again. A cycle of
states repeated forever is fair exactly when every mover enabled in all of its states moves
somewhere in it. A fair cycle the run can reach is a livelock: a spin whose wait can never
succeed, as opposed to a spin that a schedule merely lets run while another mover waits its turn.
"""

from __future__ import annotations

from .detectors import Diagnostic
from .program import Branch, Jump

LIVELOCK = "livelock"


def can_cycle(program) -> bool:
    """Whether some agent may come back to a state it was in: its code has a backward jump
    that is not a counted `for` loop's (`Jump.counted`). Without one every move makes progress
    (a program counter, a counted loop's variable, a copy's chunks, the tensor core's queue),
    so no state repeats and there is no cycle to look for."""
    for agent in program.agents:
        for i, node in enumerate(agent.nodes):
            if isinstance(node, Jump | Branch) and node.target <= i and not getattr(
                    node, "counted", False):
                return True
    return False


def mover_id(machine, move: int, names: list[str] | None = None) -> str:
    """The mover a move number belongs to, for fairness: agents and the tensor core by name,
    a copy by its name, its hold move included."""
    name = (names or machine.moves())[move]
    return name[:-5] if _is_hold(machine, move) else name


def _is_hold(machine, move: int) -> bool:
    return machine.hold_base <= move < machine.hold_base + len(machine.tma)


def enabled_ids(machine) -> frozenset[str]:
    """The movers enabled now."""
    ready = machine.ready
    if not ready:
        return frozenset()
    names = machine.moves()
    return frozenset(names[m][:-5] if _is_hold(machine, m) else names[m] for m in ready)


def unfair_movers(enabled: list[frozenset], moved: set[str]) -> set[str]:
    """Movers a cycle ignores: enabled in every one of its states (`enabled`), never among the
    movers that moved in it. The cycle is fair when there are none."""
    if not enabled:
        return set()
    always = set(enabled[0])
    for ids in enabled[1:]:
        always &= ids
    return always - moved


def diagnostic(machine, step: int, cycle_from: int, movers: set[str]) -> Diagnostic:
    """The `livelock` report at the last step of a cycle: who keeps moving and on what, who
    waits, and that from `cycle_from` on the run repeats."""
    spinning, waiting, barrier = [], [], None
    for a, agent in enumerate(machine.agents):
        if machine.current_line(a) is None:
            continue
        wait = machine.wait_at(a)
        if agent.name in movers:
            if wait is not None and "barrier" in wait:
                barrier = barrier or wait["barrier"]
                spinning.append(f"{agent.name} polls {wait['barrier']} parity {wait['parity']}"
                                f" ({_barrier_text(machine, wait['barrier'])})")
            else:
                line = machine.current_line(a)
                spinning.append(f"{agent.name} loops at `{line.text}`")
            continue
        blocked = machine.waiting_on(a)
        if blocked is not None and "barrier" in blocked:
            barrier = barrier or blocked["barrier"]
            waiting.append(f"{agent.name} waits on {blocked['barrier']} parity "
                           f"{blocked['parity']}")
        elif blocked is not None:
            waiting.append(f"{agent.name} waits for its bulk stores")
    others = sorted(m for m in movers if m not in {a.name for a in machine.agents})
    text = "; ".join(spinning) if spinning else "the movers loop"
    if others:
        text += f"; {', '.join(others)} keep{'s' if len(others) == 1 else ''} moving"
    if waiting:
        text += "; " + "; ".join(waiting)
    message = (f"From step {cycle_from} the run repeats forever and the program never "
               f"finishes: {text}. Every mover that stays enabled moves in the cycle, so no fair "
               "schedule leaves it.")
    agents = [a.name for a in machine.agents if a.name in movers]
    return Diagnostic.make(LIVELOCK, step, message, agents=agents, barrier=barrier)


def _barrier_text(machine, name: str) -> str:
    b = machine.barrier_names.index(name)
    barrier = machine.barriers[b]
    if not barrier.valid:
        return "the barrier is not initialized"
    return (f"{barrier.phase} phase{'s' if barrier.phase != 1 else ''} completed, "
            f"{barrier.pending_arrivals} arrival{'s' if barrier.pending_arrivals != 1 else ''} "
            f"and {barrier.tx_count} bytes pending")
