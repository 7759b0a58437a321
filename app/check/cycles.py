"""Cycles of a stored state graph: its strongly connected components (Tarjan's algorithm,
iterative, bounded by a budget), and within a fair component a closed walk that meets every
mover. Graph work only: what a state or a move is, and what fairness means for the program's
movers, is livelock.py's."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from .budget import Budget, Stop

if TYPE_CHECKING:
    from .graph import Exploration

CHECK_EVERY = 2048
"""States between looks at the budget."""


def has_cycle(out: Exploration, budget: Budget) -> bool:
    """Whether the expanded states hold a cycle (a self-loop included); where the budget runs
    out first, taken as yes."""
    try:
        return next(sccs(out, budget), None) is not None
    except Stop:
        return True


def sccs(out: Exploration, budget: Budget):
    """The strongly connected components of the expanded states that have an internal edge
    (Tarjan's algorithm, iterative); edges into states not expanded are left out."""
    start, stop, edges = out.edge_start, out.edge_stop, out.edges
    n = len(start)

    def successors(v: int):
        return [w for w in edges[start[v]:stop[v]] if start[w] >= 0]

    yield from tarjan(n, lambda v: start[v] >= 0, successors, budget)


def tarjan(n: int, present, successors, budget: Budget):
    index = [-1] * n
    low = [0] * n
    on_stack = bytearray(n)
    stack: list[int] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0 or not present(root):
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [(root, successors(root), 0)]
        while work:
            v, succ, i = work[-1]
            if i < len(succ):
                work[-1] = (v, succ, i + 1)
                w = succ[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    if counter % CHECK_EVERY == 0:
                        budget.check()
                    stack.append(w)
                    on_stack[w] = 1
                    work.append((w, successors(w), 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work and low[v] < low[work[-1][0]]:
                low[work[-1][0]] = low[v]
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or v in succ:
                    yield component


def fair_part(states: list, enabled: list, edges: list, budget: Budget) -> set | None:
    """A fair component of a lift (the one holding its first state where it is fair), or None."""
    present = [True] * len(states)
    parts = tarjan(len(states), present.__getitem__, lambda v: [w for w, _, _ in edges[v]],
                    budget)
    for part in sorted(parts, key=min):
        members = set(part)
        always = set.intersection(*(set(enabled[v]) for v in part))
        moved = set()
        for v in part:
            for w, by, _ in edges[v]:
                if w in members:
                    moved |= by
        if not always - moved:
            return members
    return None


def fair_cycle(start: int, members: set, edges: list, enabled: list) -> list | None:
    """A closed walk from `start` inside a fair component that passes, for every mover enabled
    somewhere in it, an edge that moves it or a state that disables it (greedy: the nearest
    witness for a mover still unmet, again and again, then back to `start`)."""
    inside = [[e for e in edges[v] if e[0] in members] for v in range(len(edges))]
    need = set().union(*(enabled[v] for v in members))
    unmet = {m for m in need if m in enabled[start]}
    walk: list = []
    at = start
    while unmet:
        def witness(w, edge, unmet=unmet):
            return bool(edge[1] & unmet) or bool(unmet - enabled[w])
        step = path(inside, at, witness)
        if step is None:
            return None
        for w, by, _ in step:
            unmet -= by
            unmet -= unmet - enabled[w]
        walk.extend(step)
        at = walk[-1][0]
    if at != start or not walk:
        back = path(inside, at, lambda w, edge: w == start)
        if back is None:
            return None
        walk.extend(back)
    return walk


def path(edges: list, start: int, goal) -> list | None:
    """Breadth-first, over edges that have names, from `start` to the first edge whose end
    `goal(state, edge)` accepts (`start` itself included, after one edge at least): the edges
    (child, movers, names) of the path."""
    seen: dict[int, tuple | None] = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for edge in edges[v]:
            w, _, made = edge
            if made is None:
                continue
            if goal(w, edge):
                path = [edge]
                while seen[v] is not None:
                    v, back = seen[v]
                    path.append(back)
                return path[::-1]
            if w not in seen:
                seen[w] = (v, edge)
                queue.append(w)
    return None
