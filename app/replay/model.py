"""Replays barrier operations logged on a GPU through the simulator's `Mbarrier`, in log order.

What a GPU log shows is not the whole story: the bytes of a bulk copy land (each landing a
`complete_tx`) at moments no thread can observe. So the replay treats the chunks of every issued
`cp.async.bulk` load as in flight, and lands them only when an observation needs them: before each
logged operation that returned something (an arrive's token: the parity and pending arrivals of the
phase it arrived on; a `try_wait.parity` result; a tile read whose words were all correct), it lands
the fewest in-flight chunks that make the model agree with what the hardware returned. Landing
more later is always possible and landing less is not, so the fewest explains the most. One bound
holds the other way: a copy issued more than about 100 us before an observation has landed by then.
An observation no number of landings explains is a *divergence*: the hardware did something the
barrier model (shared SEMANTICS.md) says it cannot.

Two threads' operations on one barrier within a few hundred cycles of each other may be logged in
either order (an arrive's clock is read before it, a wait's after it returned). When an arrive's
token disagrees and the next arrive on that barrier by another agent agrees, or when a wait by
another agent logged just after an arrive agrees only if it came first, the two are swapped (and
marked `reordered`) instead of reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from app.sim.barrier import Mbarrier, UndefinedBehavior

ARRIVES = ("arrive", "arrive_expect_tx")
REORDER_WINDOW = 2000
"""Cycles within which two agents' arrives on one barrier count as concurrent."""
LOOKAHEAD = 4
LANDING_BOUND = 200_000
"""Cycles (about 100 us) after which an issued copy has certainly landed: a bulk copy of a tile
takes about a microsecond, so no observation may be explained by bytes that stayed in flight this
long."""


@dataclass
class Op:
    """One logged operation, in the terms the replay needs.

    kind: init | arrive | arrive_expect_tx | expect_tx | complete_tx | wait | inval | tma_load |
    read | other. `value` is the count (init, arrive), bytes (expect_tx, complete_tx,
    arrive_expect_tx) or parity (wait). Observations are None when the log has none.
    """

    agent: str
    kind: str
    barrier: int | None = None
    value: int = 0
    clock: int = 0
    tile: int | None = None
    token_parity: int | None = None
    token_pending: int | None = None
    wait_complete: bool | None = None
    load: str | None = None
    chunks: int = 0
    chunk_bytes: int = 0
    good_chunks: tuple[int, ...] = ()
    needed_phase: int | None = None
    """Waits: completed phases the agent meant to wait for (a stale wait sees fewer)."""
    ref: object = None
    """Whatever the caller wants handed back with this op's action."""


@dataclass
class Action:
    """One thing that happened in the replay: a chunk landed, or a logged op was applied."""

    kind: str  # "land" or "op"
    op: Op | None = None
    load: str | None = None
    chunk: int | None = None
    barrier: int | None = None
    bytes: int = 0
    phase_completed: bool = False
    divergence: str | None = None
    undefined: UndefinedBehavior | None = None
    phase_range: tuple[int, int] | None = None
    reordered: bool = False
    model_before: dict = field(default_factory=dict)


@dataclass
class _Load:
    barrier: int
    chunk_bytes: int
    pending: list[int]
    issued: int = 0


class Replay:
    """The barrier model driven by a log. `barriers` always holds the state after the last action.

    `infer_landings=False` lands nothing on its own: the log must carry its landings as
    `complete_tx` ops (a trace whose TMA steps are to be checked as recorded).
    """

    def __init__(self, barriers: list[Mbarrier], names: list[str], infer_landings: bool = True):
        self.barriers = barriers
        self.names = names
        self.infer = infer_landings
        self.loads: dict[str, _Load] = {}
        self.order: dict[int, list[str]] = {}

    # ------------------------------------------------------------------------ in-flight bytes

    def in_flight(self, barrier: int) -> list[tuple[str, int]]:
        """(load, chunk) pairs issued against `barrier` and not landed yet, oldest first."""
        return [(name, c) for name in self.order.get(barrier, [])
                for c in self.loads[name].pending]

    def _land(self, load: str, chunk: int) -> Action:
        entry = self.loads[load]
        entry.pending.remove(chunk)
        barrier = self.barriers[entry.barrier]
        completed = barrier.complete_tx(entry.chunk_bytes)
        if not entry.pending:
            self.order[entry.barrier].remove(load)
        return Action("land", load=load, chunk=chunk, barrier=entry.barrier,
                      bytes=entry.chunk_bytes, phase_completed=completed)

    # --------------------------------------------------------------------------- observations

    @staticmethod
    def _agrees(op: Op, barrier: Mbarrier) -> bool:
        if op.kind in ARRIVES and op.token_parity is not None:
            return (barrier.valid and barrier.parity == op.token_parity
                    and barrier.pending_arrivals == op.token_pending)
        if op.kind == "wait" and op.wait_complete is not None:
            return barrier.valid and (barrier.parity != op.value) == op.wait_complete
        return True

    def _consistent_landings(self, op: Op, base: Mbarrier | None = None) -> list[tuple[int, int]]:
        """Every k (chunks to land first) that makes `op`'s observation agree, with the phase.

        `base` replaces the barrier's current state (to ask "what if another op came first").
        """
        if op.barrier is None:
            return [(0, 0)]
        chunks = self.in_flight(op.barrier) if self.infer else []
        trial = Mbarrier.thaw((base or self.barriers[op.barrier]).freeze())
        found = []
        for k in range(len(chunks) + 1):
            if k:
                try:
                    trial.complete_tx(self.loads[chunks[k - 1][0]].chunk_bytes)
                except UndefinedBehavior:
                    break
            if self._agrees(op, trial):
                found.append((k, trial.phase))
        return found

    def _describe(self, op: Op) -> str:
        barrier = self.barriers[op.barrier]
        name = self.names[op.barrier]
        pending = barrier.pending_arrivals
        state = (f"the model has {name} at parity {barrier.parity} with {pending} "
                 f"arrival{'' if pending == 1 else 's'} and {barrier.tx_count} bytes pending")
        flight = len(self.in_flight(op.barrier)) if self.infer else 0
        extra = f" and {flight} chunks in flight" if flight else ""
        if op.kind == "wait":
            got = "returned" if op.wait_complete else "timed out"
            return (f"{op.agent}'s try_wait.parity {op.value} on {name} {got}, but {state}"
                    f"{extra}: no landing of the copies in flight explains it.")
        return (f"{op.agent}'s {op.kind} on {name} returned a token of parity "
                f"{op.token_parity} with {op.token_pending} arrivals pending, but {state}{extra}.")

    # ------------------------------------------------------------------------------ the loop

    def run(self, ops: list[Op]) -> Iterator[Action]:
        """Apply `ops` in order (with concurrent-arrive swaps), yielding each landing and op."""
        ops = list(ops)
        swapped: set[int] = set()
        i = 0
        while i < len(ops):
            op = ops[i]
            if self.infer and (op.kind in ("read", "wait") or op.kind in ARRIVES):
                yield from self._land_overdue(op.clock)
            if op.kind == "read" and op.load in self.loads and self.infer:
                for c in op.good_chunks:
                    if c in self.loads[op.load].pending:
                        yield self._land(op.load, c)
            options = self._consistent_landings(op)
            if op.kind in ARRIVES and id(op) not in swapped:
                j = (self._concurrent_partner(ops, i) if not options
                     else self._concurrent_waiter(ops, i))
                if j is not None:
                    swapped.update((id(op), id(ops[j])))
                    ops.insert(i, ops.pop(j))
                    continue
            action = Action("op", op=op, reordered=id(op) in swapped)
            if options:
                k = options[0][0]
                for load, c in self.in_flight(op.barrier)[:k] if k else []:
                    yield self._land(load, c)
                if op.kind == "wait":
                    action.phase_range = (options[0][1], options[-1][1])
            elif op.barrier is not None:
                action.divergence = self._describe(op)
            if op.barrier is not None:
                action.model_before = self.barriers[op.barrier].as_dict()
            self._apply(op, action)
            yield action
            i += 1

    def _land_overdue(self, clock: int) -> Iterator[Action]:
        """Land every chunk issued more than LANDING_BOUND cycles before `clock`."""
        for b in sorted(self.order):
            for load, c in self.in_flight(b):
                if clock - self.loads[load].issued > LANDING_BOUND:
                    yield self._land(load, c)

    def _concurrent_partner(self, ops: list[Op], i: int) -> int | None:
        op = ops[i]
        for j in range(i + 1, min(len(ops), i + 1 + LOOKAHEAD)):
            other = ops[j]
            if (other.kind in ARRIVES and other.barrier == op.barrier and other.agent != op.agent
                    and abs(other.clock - op.clock) <= REORDER_WINDOW
                    and self._consistent_landings(other)):
                return j
        return None

    def _concurrent_waiter(self, ops: list[Op], i: int) -> int | None:
        """A wait by another agent, logged just after this arrive, that only agrees without it.

        A wait's clock is read after it returned, an arrive's before it took effect: when the two
        are this close, the wait may well have returned first.
        """
        op = ops[i]
        after = Mbarrier.thaw(self.barriers[op.barrier].freeze())
        try:
            if op.kind == "arrive":
                after.arrive(op.value or 1)
            else:
                after.arrive_expect_tx(op.value)
        except UndefinedBehavior:
            return None
        for j in range(i + 1, min(len(ops), i + 1 + LOOKAHEAD)):
            other = ops[j]
            if (other.kind == "wait" and other.barrier == op.barrier and other.agent != op.agent
                    and other.wait_complete is not None
                    and abs(other.clock - op.clock) <= REORDER_WINDOW
                    and self._consistent_landings(other)
                    and not self._consistent_landings(other, after)):
                return j
        return None

    def _apply(self, op: Op, action: Action) -> None:
        if op.kind == "tma_load":
            self.loads[op.load] = _Load(op.barrier, op.chunk_bytes, list(range(op.chunks)),
                                        op.clock)
            self.order.setdefault(op.barrier, []).append(op.load)
            return
        if op.barrier is None:
            return
        barrier = self.barriers[op.barrier]
        try:
            if op.kind == "init":
                action.phase_completed = barrier.init(op.value)
            elif op.kind == "arrive":
                action.phase_completed = barrier.arrive(op.value or 1)
            elif op.kind == "arrive_expect_tx":
                action.phase_completed = barrier.arrive_expect_tx(op.value)
            elif op.kind == "expect_tx":
                action.phase_completed = barrier.expect_tx(op.value)
            elif op.kind == "complete_tx":
                action.phase_completed = barrier.complete_tx(op.value)
            elif op.kind == "inval":
                barrier.inval()
        except UndefinedBehavior as ub:
            action.undefined = ub

    def flush(self) -> Iterator[Action]:
        """Land everything still in flight (a run that finished: every copy completed)."""
        for b in sorted(self.order):
            for load, c in self.in_flight(b):
                yield self._land(load, c)
