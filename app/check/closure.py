"""The closure the search makes after every move: every enabled purely-local move and, where they
are invisible, every bulk-store chunk read, at once (the persistent-set reduction of
app/check/engine.py), with the two guards a closure needs in a program that can loop: a local loop
is found and handed back to the search as ordinary moves, and a runaway is stopped."""

from __future__ import annotations

from app.sim.core import OP_AGENT, OP_DIR, OP_GROUP, OP_WRITING, STORE
from app.sim.families.copies import store_fits
from app.sim.machine import PC, RUNNING, Machine

EXIT_SENSITIVE = 2
"""A local line whose move may end its agent, in a cluster: an agent's end is seen by other
CTAs (a CTA exits when all its agents are done: `remote_after_exit`), so `close` makes it only
where it does not end the agent."""


def close(machine: Machine, local: tuple, pend: list, moves: list | None = None,
          reads: bool = False, guard=None) -> list:
    """Make every enabled purely-local move (lowest agent first) and, with `reads`, every
    enabled bulk-store chunk read, until none is left.

    `pend[a]` counts the local moves agent `a` has made since its last other move (the search
    charges them to the agent's next move, see engine.py). A store read made here is owed by
    its agent's bulk group (`pend[n + a]`); a `wait_group` of that agent that needs the group
    moves the group's reads into `pend[a]` (the wait cannot return without them). Reads no
    `wait_group` needed are never charged. Returns the diagnostics these moves emitted (only
    ever `deadlock`: the move was the last thing that could move). `moves`, when given,
    collects what was done: ("local", agent, name), ("read", agent, group, name) and
    ("charge", agent, groups below which reads were charged). An exit-sensitive line
    (`EXIT_SENSITIVE`, cluster programs) is made only where its move does not end its agent.

    **A loop of local moves** (`while (1) { x = x; }`) would make this run forever. Past
    `LOOP_AFTER` moves the machine's state is watched with Brent's algorithm (exact, constant
    memory: the moves made here are a function of the state); when it repeats, the agents
    whose local moves make the cycle are left standing where they are for the rest of this
    closure: the stored state has their local line enabled, the search makes it as an ordinary
    move, and the cycle appears in the state graph (the cycle proviso of partial-order
    reduction, docs/checker.md). Their pending counts are dropped: such an agent never leaves
    its loop, so no schedule to a diagnostic needs its local moves (a rebuilt counterexample
    drops them as trailing ones), and counts that grew with every closure would make the
    stored states endless. Only where the program can cycle (`guard.cyclic`). `guard`
    (budget.CloseGuard) is told every `TICK_EVERY` moves past that point: it stops a runaway
    (a loop whose state never repeats) and honours the search's clock, memory and cancel flag.
    """
    diagnostics: list = []
    skip: set[int] = set()
    made = 0
    watch = None
    while machine.status == RUNNING:
        who, record = _close_move(machine, local, pend, moves, reads, skip)
        if record is None:
            return diagnostics
        if record["diagnostics"]:
            diagnostics.extend(record["diagnostics"])
        made += 1
        if made < LOOP_AFTER:
            continue
        if guard is not None and made % TICK_EVERY == 0:
            guard.tick(made, machine.agents[who].name if who is not None else "the TMA engine")
        if guard is None or not guard.cyclic:
            continue  # no state can repeat
        if watch is None:
            watch = _Repeat(machine)
        elif watch.step(machine):
            looping = _cycle_agents(machine, local, pend, moves, reads, skip, watch.period)
            skip |= looping
            n_agents = machine.n_agents
            for a in looping:  # their local moves are never needed: not counted (else the
                pend[a] = 0  # counts, part of the key, grow with every closure forever)
                pend[n_agents + a] = ()
            watch = None
    return diagnostics


LOOP_AFTER = 16
"""Local moves one `close` makes before it watches for a repeating state (a program's own
sequences of local lines are shorter: a loop's bookkeeping, a few register updates)."""
TICK_EVERY = 32


class _Repeat:
    """Brent's cycle finder over the states `close` goes through: `step` after each move says
    whether the state is the tortoise's again (then `period` is the cycle's length)."""

    __slots__ = ("power", "period", "regs", "frozen")

    def __init__(self, machine: Machine):
        self.power = self.period = 1
        self.regs = [list(r) for r in machine.regs]
        self.frozen = machine.freeze()

    def step(self, machine: Machine) -> bool:
        if machine.regs == self.regs and machine.freeze() == self.frozen:
            return True
        if self.power == self.period:
            self.regs = [list(r) for r in machine.regs]
            self.frozen = machine.freeze()
            self.power <<= 1
            self.period = 0
        self.period += 1
        return False


def _cycle_agents(machine: Machine, local: tuple, pend: list, moves: list | None, reads: bool,
                  skip: set[int], period: int) -> set[int]:
    """The agents whose local moves make a cycle of `period` moves: one more turn of it (the
    same moves again, back to the same state), noting who moved."""
    agents = set()
    for _ in range(period):
        who, record = _close_move(machine, local, pend, moves, reads, skip)
        if record is None or machine.status != RUNNING:
            break
        if who is not None:
            agents.add(who)
    return agents


def _close_move(machine: Machine, local: tuple, pend: list, moves: list | None, reads: bool,
                skip: set[int]) -> tuple[int | None, dict | None]:
    """One move `close` makes (the lowest agent's enabled local move, else the first store
    read): the agent (None for a read) and the step record; (None, None) when there is none."""
    n_agents = machine.n_agents
    regs = machine.regs
    code = machine.code
    for a in _candidates(machine, local, reads):
        if a < n_agents:
            pc = regs[a][PC]
            if not local[a][pc] or a in skip:
                continue
            if local[a][pc] == EXIT_SENSITIVE and _would_end(machine, a):
                skip.add(a)  # its end is seen by other CTAs: left for the search
                regs = machine.regs  # the trial thawed the machine
                continue
            if code[a].kinds[pc] == "store" and not store_fits(machine, a, regs[a],
                                                               code[a].prepared[pc]):
                continue
            if reads and pend[n_agents + a] and code[a].kinds[pc] == "wait_group":
                limit = machine.bulk_committed[a] - code[a].prepared[pc][0](regs[a])
                groups = pend[n_agents + a]
                pend[a] += sum(c for g, c in groups if g < limit)
                pend[n_agents + a] = tuple((g, c) for g, c in groups if g >= limit)
                if moves is not None:
                    moves.append(("charge", a, limit))
            if moves is not None:
                moves.append(("local", a, machine.agents[a].name))
            record = machine.step(a)
            pend[a] += 1
            return a, record
        if a == n_agents or not reads:
            continue
        k = a - n_agents - 1
        tma = machine.tma
        if k >= len(tma):
            return None, None  # hold moves: loads only
        op = tma[k]
        if op[OP_DIR] != STORE or op[OP_WRITING]:
            continue
        owner, group = op[OP_AGENT], op[OP_GROUP]
        if moves is not None:
            moves.append(("read", owner, group, machine.moves()[a]))
        record = machine.step(a)
        groups = dict(pend[n_agents + owner])
        groups[group] = groups.get(group, 0) + 1
        pend[n_agents + owner] = tuple(sorted(groups.items()))
        return None, record
    return None, None


def _candidates(machine: Machine, local: tuple, reads: bool):
    """`machine.ready` as far as `_close_move` reads it: where `ready` is not known (copies in
    flight), only the agents standing on a local line are tested, then (with `reads`) the
    copies, every one of which can move, then the first hold; no hold is tested."""
    ready = machine._ready
    if ready is not None:
        return ready
    if machine.status != RUNNING:
        return ()
    regs, rows, agent_ready = machine.regs, machine._rows, machine._agent_ready
    out = []
    for a in range(machine.n_agents):
        pc = regs[a][PC]
        if pc < rows[a][0] and local[a][pc] and agent_ready(a):
            out.append(a)
    if reads:
        base = machine.n_agents + 1
        out.extend(range(base, base + len(machine.tma) + 1))
    return out


def _would_end(machine: Machine, a: int) -> bool:
    """Whether agent `a`'s next move ends its program (tried on a copy of the state)."""
    frozen, step_no = machine.freeze(), machine.step_no
    machine.step(a)
    ends = machine.regs[a][PC] >= machine.code[a].end
    machine.thaw(frozen, step_no)
    return ends
