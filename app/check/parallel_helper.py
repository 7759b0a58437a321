"""What a helper process of the parallel search runs (app/check/parallel.py): its loop over
the search's messages, and the expansion of one state into the successors it answers with, their
parts named by the numbers of its copy of the search's part table."""

from __future__ import annotations

import pickle

from app.sim.machine import DEADLOCK, RUNNING

from .budget import Budget, CloseGuard, Limits, Stop
from .model import PACK


def helper(explorer, conn, limits: Limits, inherited: list) -> None:
    """A helper's loop. In: the parts the search's table gained since the last message (as
    pickled segments, `parallel._Feed`), then the keys of the states to expand; the helper keeps
    a copy of the table, so a state travels as its 44-byte key. Out: per state its successors,
    each (cost, kinds raised, whether a local move raised one, ended, its canonical parts: the
    search's number where the copy of the table has the part, else the part itself). The
    search's ends of the pipes it inherited are closed first, so that it sees the end of its own
    pipe when the search is gone."""
    for other in inherited:
        other.close()
    explorer.guard = CloseGuard(Budget(limits), limits.max_local_moves, explorer.cyclic)
    form = explorer.canonical.form
    parts: list = []
    ids: dict = {}
    while True:
        try:
            message = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        if message is None:
            return
        segments, chunk = message
        for blob in segments:
            for part in pickle.loads(blob):
                ids[part] = len(parts)
                parts.append(part)
        try:
            answer = [_expand_key(explorer, form, parts, ids, key) for key in chunk]
            conn.send_bytes(pickle.dumps(("ok", answer), pickle.HIGHEST_PROTOCOL))
        except Stop as stop:
            conn.send_bytes(pickle.dumps(("stop", stop.reason, stop.message)))
        except Exception as err:  # a consistency check failed: the search reports it
            conn.send_bytes(pickle.dumps(("error", f"{type(err).__name__}: {err}")))


def _expand_key(explorer, form, parts: list, ids: dict, key: bytes) -> list:
    numbers = PACK.unpack(key)
    frozen = tuple(parts[i] for i in numbers[:-1])
    old_pend = parts[numbers[-1]]
    out = []
    for _, cost, record, closing, machine, after, now in explorer.successors(
            frozen, list(old_pend)):
        at_stop = machine.stop_report if machine.status == DEADLOCK else ()
        kinds = [d["kind"] for d in record["diagnostics"]
                 if not any(d is s for s in at_stop)]
        raised = bool(closing) and any(not any(c is d for d in at_stop) for c in closing)
        canonical, canonical_pend = form(now, after)
        named = []
        for part, old, number in zip(canonical, frozen, numbers, strict=False):
            if part is old:
                named.append(number)
            else:
                i = ids.get(part)
                named.append(part if i is None else i)
        canonical_pend = tuple(canonical_pend)
        i = numbers[-1] if canonical_pend == old_pend else ids.get(canonical_pend)
        named.append(canonical_pend if i is None else i)
        out.append((cost, kinds, raised, machine.status != RUNNING, named))
    return out


def expand(explorer, form, frozen: tuple, pend: list) -> list:
    out = []
    for _, cost, record, closing, machine, after, now in explorer.successors(frozen, pend):
        at_stop = machine.stop_report if machine.status == DEADLOCK else ()
        kinds = [d["kind"] for d in record["diagnostics"]
                 if not any(d is s for s in at_stop)]
        raised = bool(closing) and any(not any(c is d for d in at_stop) for c in closing)
        canonical, canonical_pend = form(now, after)
        out.append((cost, kinds, raised, machine.status != RUNNING, canonical,
                    tuple(canonical_pend)))
    return out
