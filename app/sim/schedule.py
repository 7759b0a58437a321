"""Schedules: who moves next when several agents (and the TMA engine) could.

A real GPU interleaves warps and copy-engine traffic as it likes; a schedule is one such
interleaving, chosen deterministically so that the same inputs give the same trace. `manual` takes
the caller's list of movers (the student as the scheduler), `round_robin` cycles over the movers,
`random` draws from a seeded `random.Random`. Pacing in wall-clock time lives elsewhere (the UI).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .machine import Machine, MoveError

SCHEDULES = ("manual", "round_robin", "random")


@dataclass(frozen=True, slots=True)
class Schedule:
    kind: str = "round_robin"
    seed: int = 0
    moves: tuple[str, ...] = ()
    """For `manual`: mover names in order (`producer`, `consumer0`, `tma`, `tensor_core`, ...)."""

    def as_dict(self) -> dict:
        if self.kind == "random":
            return {"kind": "random", "seed": self.seed}
        if self.kind == "manual":
            return {"kind": "manual", "moves": list(self.moves)}
        return {"kind": self.kind}

    def chooser(self):
        """A fresh chooser: a callable from a machine to the next move number (None: stop)."""
        if self.kind == "round_robin":
            return RoundRobin()
        if self.kind == "random":
            return SeededRandom(self.seed)
        if self.kind == "manual":
            return Manual(self.moves)
        raise ValueError(f"unknown schedule {self.kind!r}")


class RoundRobin:
    """The next enabled mover after the one that moved last, in move order. It never holds a
    landing's complete-tx: each chunk reaches the barrier on its own. Its state is `last`: with
    the machine's state it fixes every later move, so a run that comes back to both repeats
    forever (app.sim.trace looks for that). Every mover that stays enabled gets its turn within
    one round, so such a repeat is a fair cycle (weak fairness), a livelock."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = -1

    def __call__(self, machine: Machine) -> int | None:
        move = machine.round_robin_move(self.last)
        if move is not None:
            self.last = move
        return move


class SeededRandom:
    """A uniformly random enabled mover, from a seeded generator."""

    __slots__ = ("rng",)

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, machine: Machine) -> int | None:
        ready = machine.ready
        if not ready:
            return None
        return ready[self.rng.randrange(len(ready))]


class Manual:
    """The caller's movers, by name, in order; a blocked or unknown mover is a `MoveError`."""

    __slots__ = ("names", "position")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.position = 0

    @property
    def exhausted(self) -> bool:
        """Every listed move was made."""
        return self.position >= len(self.names)

    def __call__(self, machine: Machine) -> int | None:
        if self.position >= len(self.names) or not machine.ready:
            return None
        name = self.names[self.position]
        move = machine.resolve(name)
        if move not in machine.ready:
            raise MoveError(f"move {self.position + 1} ({name}) cannot be made: "
                            f"{machine.why_not(move)}")
        self.position += 1
        return move
