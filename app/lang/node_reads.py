"""What compiled nodes read: the registers in their operands' code, and which `try_wait`
answers a program reads (so the engine explores a false one)."""

from __future__ import annotations

import re
from dataclasses import replace

from app.sim.program import SINK, WAIT_BLOCKS, WAIT_MAY_FAIL, Assign, Branch, Expr, Jump, Line, Ref


def waits_that_may_fail(nodes: list) -> None:
    """A `try_wait` whose answer the program reads (an `if` on it: CUTLASS's
    `consumer_try_wait`, then `consumer_wait(token)`) may return false before the phase
    completes (PTX 9.7.13.15.16: the time limit), so the engine explores both answers
    (`WAIT_MAY_FAIL`). One that only a loop reads, `while (!p) { try_wait p ...; }`, is the
    blocking wait it stands for: a false answer would only come back to the same line."""
    reads: dict[int, int] = {}
    for node in nodes:
        for code in codes(node):
            for reg in re.findall(r"r\[(\d+)\]", code):
                reads[int(reg)] = reads.get(int(reg), 0) + 1
    for j, node in enumerate(nodes):
        if not (isinstance(node, Line) and node.kind in ("wait_parity", "wait_token")):
            continue
        dest, ref, third, how, hint = node.args
        if how != WAIT_BLOCKS or dest == SINK or not reads.get(dest):
            continue
        before = nodes[j - 1] if j else None
        after = nodes[j + 1] if j + 1 < len(nodes) else None
        looped = (isinstance(before, Branch) and before.target == j + 2
                  and isinstance(after, Jump) and after.target == j - 1
                  and f"r[{dest}]" in before.cond.code)
        if not looped:
            nodes[j] = replace(node, args=(dest, ref, third, WAIT_MAY_FAIL, hint))


def codes(node):
    """The code of every expression a node reads."""
    if isinstance(node, Branch):
        yield node.cond.code
    elif isinstance(node, Assign):
        yield from (e.code for _, e in node.updates)
    elif isinstance(node, Line):
        stack = list(node.args)
        while stack:
            arg = stack.pop()
            if isinstance(arg, Expr):
                yield arg.code
            elif isinstance(arg, Ref):
                stack.extend((arg.index, arg.cta))
            elif isinstance(arg, tuple):
                stack.extend(arg)
            elif isinstance(arg, Line):
                stack.extend(arg.args)


def mentions(node, reg: int) -> bool:
    """Whether a node's operands hold the register number `reg` anywhere (destinations and
    update targets are plain ints; expressions and array references are not looked into)."""
    if isinstance(node, Assign):
        return any(target == reg for target, _ in node.updates)
    if not isinstance(node, Line):
        return False
    stack = list(node.args)
    while stack:
        arg = stack.pop()
        if type(arg) is int and arg == reg:
            return True
        if isinstance(arg, tuple):
            stack.extend(arg)
    return False
