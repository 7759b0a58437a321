"""The bulk groups of the bulk copies family (app/sim/families/copies.py registers them):
`cp.async.bulk.commit_group` closes a group of an agent's bulk stores, and
`cp.async.bulk.wait_group[.read] N` waits until all but the N most recent groups have finished
(reading shared memory, with `.read`)."""

from __future__ import annotations

from ..core import OP_AGENT, OP_DIR, OP_GROUP, OP_WRITING, STORE


def commit_group(m, a, r, args, record) -> None:
    group = m.bulk_committed[a]
    m.bulk_committed[a] = group + 1
    record["operands"] = {"group": group}
    record["events"].append({"kind": "bulk_commit", "agent": m.agents[a].name, "group": group})


def pending_groups(m, a: int, reading: bool) -> int:
    """Committed groups of agent `a` with a store still reading SMEM (or, with `reading`
    False, whose writes have not all landed)."""
    committed = m.bulk_committed[a]
    return len({op[OP_GROUP] for op in m.tma
                if op[OP_DIR] == STORE and op[OP_AGENT] == a and op[OP_GROUP] < committed
                and not (reading and op[OP_WRITING])})


def wait_group(m, a, r, args, record) -> None:
    n, read = args
    allowed = n(r)
    record["operands"] = {"pending": allowed}
    record["events"].append({"kind": "bulk_wait_returned", "agent": m.agents[a].name,
                             "pending": pending_groups(m, a, read)})


def group_ready(m, a, r, args) -> bool:
    """PTX: every group but the N most recent has finished (reading, with `.read`)."""
    n, read = args
    return groups_done(m, a, m.bulk_committed[a] - n(r), read)


def groups_done(m, a: int, oldest_allowed: int, read: bool) -> bool:
    for op in m.tma:
        if op[OP_DIR] == STORE and op[OP_AGENT] == a and op[OP_GROUP] < oldest_allowed:
            if not (read and op[OP_WRITING]):
                return False
    return True


def group_fused(line, code) -> tuple | None:
    """`group_ready` of one line, its operand written in (`Family.fused`)."""
    n, read = line.args
    n = code(n)
    if n is None or not isinstance(read, bool):
        return None
    return f"groups_done(m, a, m.bulk_committed[a] - {n}, {read})", {"groups_done": groups_done}


def waiting_group(m, a, r, args) -> dict:
    n, read = args
    return {"bulk_groups": pending_groups(m, a, read), "allowed": n(r)}
