"""Round robin's run loop: `Run._extend`'s choose-step-record cycle for `Schedule("round_robin")`
with the machine's `round_robin_move`, `step` and `_settle` fused into one frame.

The moves, records, statuses and checkpoints are those of calling them one by one (the test is
tests/sim/test_engine_caches.py); what it saves is the calls and a second look at the state:
after an agent's step with no copy in flight, `_settle` would list every enabled move to tell a
running machine from a finished one, where the next round-robin move, looked for in its order
from the agent that moved, is the answer already (none found: `_settle` decides). Families
that add movers take the ordinary path (`Run._extend`).
"""

from __future__ import annotations

from .barrier import UndefinedBehavior
from .families import copies
from .family import STAY
from .program import ProgramError
from .reports import RUNNING


def usable(machine) -> bool:
    """Whether `extend` can run this machine: no family adds movers of its own."""
    return not machine.extra_movers


def extend(run, m, last: int, limit: int, until_checkpoint: int, every: int) -> tuple[int, int]:
    """Make up to `limit` round-robin moves after move `last` (`RoundRobin.last`), appending
    to `run`'s choices, diagnostics and (every `every` steps, `until_checkpoint` steps from
    now first) checkpoints. Returns (moves made, the last move)."""
    n = m.n_agents
    codes, regs, names, tma = m.code, m.regs, m.agent_names, m.tma
    rows = gates(m)
    choices, diagnostics, checkpoints = run.choices, run.diagnostics, run.checkpoints
    append = choices.append
    tma_step = copies.tma_step
    after = [tuple(range(a + 1, n)) + tuple(range(a + 1)) for a in range(n)]
    after.append(tuple(range(n)))
    """Per last move (any past the agents: `n`), the agents in round-robin order after it."""
    tails = [tuple(range(a, n)) for a in range(n + 1)]
    heads = [tuple(range(a)) for a in range(n + 1)]
    """The agents from agent `a` on, and before it (`_pick`'s two scans)."""
    made = 0
    found = -1
    """An agent known to be round robin's next move in this state (-1: not looked for)."""
    if m.status != RUNNING:
        return made, last
    m._picked = -1  # no step below reads it, and each would forget it
    ended = False
    while not ended and made < limit:
        chunk = done = min(limit - made, until_checkpoint)  # the steps to the next checkpoint
        for i in range(chunk):
            if found >= 0:
                move, found = found, -1
            elif m._ready is None and last < n + len(tma):  # `_pick`'s commonest cases
                if last >= n:
                    move = last + 1  # the copy after the one (or the tensor core) that moved
                else:
                    tail = tails[last + 1]
                    a = _first_ready(m, tail, rows, regs) if tail else -1
                    if a >= 0:
                        move = a
                    elif m.tensor_core:
                        move = n
                    elif tma:
                        move = n + 1
                    else:
                        move = _pick(m, last, n, rows, regs, tails, heads)
                        if move is None:
                            done, ended = i, True
                            break
            else:
                move = _pick(m, last, n, rows, regs, tails, heads)
                if move is None:
                    done, ended = i, True
                    break
            if move > 255:
                choices = run._record(choices, move)
                append = choices.append
            else:
                append(move)
            last = move
            step_no = m.step_no = m.step_no + 1
            try:
                if move < n:
                    r = regs[move]
                    code = codes[move]
                    pc = r[0]
                    record = {"step": step_no, "agent": names[move], "op": code.ops[pc],
                              "line": code.line_of[pc], "operands": {}, "events": [],
                              "diagnostics": []}
                    if code.handlers[pc](m, move, r, code.prepared[pc], record) is not STAY:
                        r[0] = pc + 1
                        if not code.is_line[pc + 1]:
                            m._follow(move)
                else:
                    record = {"step": step_no, "agent": None, "op": None, "line": None,
                              "operands": {}, "events": [], "diagnostics": []}
                    k = move - n - 1
                    if 0 <= k < len(tma):
                        tma_step(m, k, False, record)
                    else:
                        m._other_step(move, record)
            except (UndefinedBehavior, ProgramError) as ub:
                m.undefined(ub, record)
                ended = True
            else:
                m._ready = None
                if not tma and not m.tensor_core:
                    found = _first_ready(m, after[move if move < n else n], rows, regs)
                    if found < 0:
                        m._settle(record)  # nothing can move: the run is done or deadlocked
                        ended = True
            if record["diagnostics"]:
                diagnostics.extend(record["diagnostics"])
            if ended:
                done = i + 1
                break
        made += done
        until_checkpoint -= done
        if not until_checkpoint:
            checkpoints.append(m.freeze())
            until_checkpoint = every
    return made, last


def gates(m) -> tuple:
    """Per agent, per PC (the end included), what `_first_ready` tests there: None (a line
    that never blocks), DONE (the agent has ended), or (the line's blocker, its operands)."""
    return tuple(tuple(None if test is None else (test, args)
                       for test, args in zip(blockers, prepared, strict=True)) + (DONE,)
                 for end, blockers, prepared in m._rows)


DONE = ()
"""`gates`' mark of an ended agent."""


def _first_ready(m, agents, rows, regs) -> int:
    """The first of `agents` (a range) that can move now, or -1: `Reports._agent_ready` of
    each in turn, inline (a call per agent per step was most of this loop's cost), reading
    `gates` (`rows`)."""
    for a in agents:
        r = regs[a]
        try:
            gate = rows[a][r[0]]
        except IndexError:  # past the end, as `enabled()` reads `pc >= end`
            continue
        if gate is None:
            return a
        if gate is DONE:
            continue
        try:
            if gate[0](m, a, r, gate[1]):
                return a
        except ProgramError:  # the step stops the run at this line (`_can_move`)
            return a
    return -1


def _pick(m, last: int, n: int, rows, regs, tails, heads) -> int | None:
    """`Reports.round_robin_move` (no family movers)."""
    ready = m._ready
    if ready is not None:
        if not ready:
            return None
        holds = n + 1 + len(m.tma)
        for move in ready:
            if move >= holds:
                break
            if move > last:
                return move
        return ready[0]
    if last < n:
        a = _first_ready(m, tails[last + 1], rows, regs)
        if a >= 0:
            return a
        if m.tensor_core:
            return n
    copies_in_flight = len(m.tma)
    if copies_in_flight and last < n + copies_in_flight:
        return last + 1 if last >= n else n + 1
    a = _first_ready(m, heads[min(last + 1, n)], rows, regs)
    if a >= 0:
        return a
    if m.tensor_core:
        return n
    return n + 1 if copies_in_flight else None
