"""A `Schedule` from what a user typed (a query, a form, the command line). Shared by the API and
the CLI, so it imports neither FastAPI nor pydantic: `mbarrier-inspector check` starts without
the web stack."""

from __future__ import annotations

from app.scenarios import ParamError
from app.sim.schedule import SCHEDULES, Schedule

MAX_MANUAL_MOVES = 10_000
MAX_SEED = 2**63 - 1


def parse_schedule(kind: str | None, seed: int | str | None = None,
                   moves: str | list[str] | None = None) -> Schedule:
    """A `Schedule` from user input; `ParamError` names `schedule`, `seed` or `moves`."""
    kind = kind or "round_robin"
    if kind not in SCHEDULES:
        raise ParamError("schedule", f"schedule must be one of {', '.join(SCHEDULES)}; "
                                     f"got {kind[:40]!r}")
    if kind == "random":
        if seed in (None, ""):
            seed = 0
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise ParamError("seed", "seed must be an integer") from None
        if not 0 <= seed <= MAX_SEED:
            raise ParamError("seed", f"seed must be in 0..{MAX_SEED}")
        return Schedule("random", seed=seed)
    if kind == "manual":
        if isinstance(moves, str):
            moves = [m.strip() for m in moves.split(",") if m.strip()]
        moves = list(moves or [])
        if len(moves) > MAX_MANUAL_MOVES:
            raise ParamError("moves", f"at most {MAX_MANUAL_MOVES} manual moves")
        return Schedule("manual", moves=tuple(moves))
    return Schedule(kind)
