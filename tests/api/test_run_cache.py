import threading

from app.api import runs as runs_module
from app.api.runs import RunCache
from app.scenarios import get
from app.sim.schedule import Schedule


def test_concurrent_requests_for_one_run_build_it_once(monkeypatch):
    calls = []
    real_complete = runs_module.Run.complete
    gate = threading.Event()

    def slow_complete(*args, **kwargs):
        calls.append(args)
        gate.wait(5)
        return real_complete(*args, **kwargs)

    monkeypatch.setattr(runs_module.Run, "complete", slow_complete)
    cache = RunCache(size=2)
    scenario = get("double_buffer_tma")
    results = []

    def fetch():
        results.append(cache.get(scenario, {"tiles": 8}, "", Schedule("round_robin")))

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1
    assert len(results) == 4 and all(r is results[0] for r in results)


def test_least_recently_used_run_is_evicted():
    cache = RunCache(size=2)
    scenario = get("single_barrier")
    first = cache.get(scenario, {"tiles": 1}, "", Schedule("round_robin"))
    cache.get(scenario, {"tiles": 2}, "", Schedule("round_robin"))
    assert cache.get(scenario, {"tiles": 1}, "", Schedule("round_robin")) is first
    cache.get(scenario, {"tiles": 3}, "", Schedule("round_robin"))
    assert len(cache.runs) == 2
    assert cache.get(scenario, {"tiles": 1}, "", Schedule("round_robin")) is first
