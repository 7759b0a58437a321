"""The one run store, shared by traces and sessions: one build per run however many ask."""

import asyncio

from app.api import runstore
from app.api.runstore import RunStore, build_run, canonical_key
from app.sim.schedule import Schedule
from tests.asyncutil import run_async


class CountingPool:
    """Stands in for the build pool: counts builds, and holds them until released."""

    def __init__(self):
        self.calls = 0

    async def run(self, fn, *args, **kwargs):
        self.calls += 1
        await asyncio.sleep(0.05)
        return fn(*args)


def test_concurrent_requests_for_one_run_build_it_once(monkeypatch):
    pool = CountingPool()
    monkeypatch.setattr(runstore, "builds", pool)
    store = RunStore()
    key = canonical_key("double_buffer_tma", {"tiles": 8}, "", Schedule("round_robin"))

    async def fetch_four():
        return await asyncio.gather(*(store.get(key) for _ in range(4)))

    entries = run_async(fetch_four)
    assert pool.calls == 1
    assert all(e is entries[0] for e in entries)


def test_two_spellings_of_one_configuration_share_a_run():
    plain = canonical_key("single_barrier", {}, "", Schedule("round_robin"))
    spelled = canonical_key("single_barrier", {"tiles": plain.params[2][1]}, [],
                            Schedule("round_robin"))
    assert plain == spelled
    store = RunStore()
    run, key = build_run(plain)
    assert store.put(key, run) is store.put(spelled, build_run(spelled)[0])
