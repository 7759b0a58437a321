"""Building runs for the API: one place that turns query parameters into a `Run`, with a small
per-process cache so that paging through a long trace does not simulate it again.

Runs are pure functions of (scenario, configuration, schedule), so any worker process can rebuild
any run; the cache only saves time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fastapi import HTTPException

from app.core.config import settings
from app.scenarios import ParamError, Scenario
from app.scenarios import get as get_scenario
from app.sim.machine import MoveError
from app.sim.schedule import SCHEDULES, Schedule
from app.sim.trace import STEP_LIMIT, Run

MAX_MANUAL_MOVES = 10_000
MAX_SEED = 2**63 - 1


def scenario_or_404(scenario_id: str) -> Scenario:
    try:
        return get_scenario(scenario_id)
    except KeyError:
        raise HTTPException(404, f"no scenario {scenario_id[:80]!r}") from None


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


class RunCache:
    """Least-recently-used runs by their full key; thread-safe (handlers run in a thread pool).

    At most `builders` runs are simulated at once (a million-step run takes seconds of CPU), and
    concurrent requests for the same run wait for one build instead of each starting their own.
    """

    def __init__(self, size: int, builders: int = 2, step_limit: int = STEP_LIMIT):
        self.size = size
        self.step_limit = step_limit
        self.runs: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.building: dict = {}
        self.builders = threading.BoundedSemaphore(builders)

    def get(self, scenario: Scenario, params: dict, bugs, schedule: Schedule) -> Run:
        cfg = scenario.resolve(params, bugs)
        key = (scenario.id, cfg, schedule)
        while True:
            with self.lock:
                run = self.runs.get(key)
                if run is not None:
                    self.runs.move_to_end(key)
                    return run
                pending = self.building.get(key)
                if pending is None:
                    pending = self.building[key] = threading.Event()
                    break
            pending.wait()
        try:
            with self.builders:
                run = Run.complete(cfg, schedule, scenario.describe(cfg), self.step_limit)
            with self.lock:
                self.runs[key] = run
                while len(self.runs) > self.size:
                    self.runs.popitem(last=False)
            return run
        except MoveError as err:
            raise ParamError("moves", str(err)) from None
        finally:
            with self.lock:
                del self.building[key]
            pending.set()


runs = RunCache(settings.run_cache_size)
