"""A class at once against a real uvicorn on loopback, with one worker and then two (stops by
itself; `make load`):

- 200 students, each on a run of its own, playing at 30 steps/s as the browser plays (issue 20,
  item 6; static/js/player.js): windows of the session's trace on a grid of 256 steps, each one
  full snapshot and a patch per step (`GET /sessions/{id}/trace?patches=true`), the next asked
  for while 5 s (at least 64 steps) of the one held remain, each frame drawn at its due time or
  when its window arrives (in a process of their own; students press Play over 10 s);
- 4 clients posting schedule checks in a loop (a documented 503 with Retry-After counts as an
  answer) and 1 client flooding `seek` over a session socket as fast as it can (another process);
- probes: `GET /api/v1/scenarios` and a WebSocket `step` command's round trip (a manual move).

Prints, per worker count, frames on time (drawn within 100 ms of their due time; target >= 99%
with one worker), `GET /api/v1/scenarios` p99 (target < 100 ms) and the step round trip p99
(target < 100 ms), beside the targets; and the CPU seconds each kind of process took while
the class played (the server's processes, its window workers, its check workers; the students',
the check posters' and the probes' processes), with the machine's load
average: on a shared machine, compare runs by those.

    .venv/bin/python bench/load.py [--duration 60] [--sessions 200] [--speed 30] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import resource
import ssl
import sys
import time
from pathlib import Path

import httpx
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import pct, server  # noqa: E402  (bench/serve.py: the same uvicorn launcher)

CHECK = {"scenario": "double_buffer_tma", "params": {"stages": 2, "tiles": 6, "consumers": 2},
         "bugs": ["forget_phase_toggle"], "timeout_s": 2}


def processes() -> dict[int, tuple[int, int, float, int, bytes]]:
    """Every process: pid -> (parent, nice, CPU seconds so far, resident bytes, command line)."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            out[int(entry.name)] = (int(fields[1]), int(fields[16]),
                                    (int(fields[11]) + int(fields[12])) / tick,
                                    int(fields[21]) * page, (entry / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue
    return out


def descendants(table: dict, root: int) -> list[int]:
    """`root` and every process below it (a pool worker in a session of its own included)."""
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            found.append(pid)
            todo.extend(children.get(pid, ()))
    return found


def cpu_of_tree(server: int, ours: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) so far, by kind: the server processes (with several
    workers, uvicorn spawns them at the server's own priority); their pool workers
    (multiprocessing spawned them, niced below the server) by priority: the window workers
    (niced less than 10 below the server) and the check and build workers; and this bench's own
    processes (`ours`: kind -> pid; "probes" is this process)."""
    table = processes()
    out = {"server": 0.0, "windows": 0.0, "checks": 0.0}
    top = table.get(server, (0, 0))[1]
    for pid in descendants(table, server):
        _, nice, cpu, _, cmdline = table[pid]
        kind = "server" if b"spawn_main" not in cmdline or nice == top else \
            "windows" if nice < min(19, top + 10) else "checks"
        out[kind] += cpu
    for kind, pid in ours.items():
        out[kind] = table.get(pid, (0, 0, 0.0))[2]
    return out


def rss_of_tree(server: int) -> int:
    """Resident bytes of the server and every process below it (workers, pools)."""
    table = processes()
    return sum(table[pid][3] for pid in descendants(table, server))


async def create(client: httpx.AsyncClient, base: str, seed: int) -> tuple[str, int]:
    """A session on a run of its own (a random schedule of its own seed): (id, total steps)."""
    for _ in range(50):
        response = await client.post(f"{base}/api/v1/sessions", json={
            "scenario": "double_buffer_tma", "params": {"tiles": 300}, "schedule": "random",
            "seed": seed}, timeout=60)
        if response.status_code == 201:
            body = response.json()
            return body["id"], body["total_steps"]
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))
    raise RuntimeError(f"could not create session {seed}: {response.text[:200]}")


async def connect(url: str, **kwargs):
    """A session socket and its first state, retrying a 503 (a worker rebuilding the run is
    busy) as the browser UI does."""
    for attempt in range(60):
        ws = await websockets.connect(url, max_size=2**22, **kwargs)
        first = json.loads(await ws.recv())
        if first.get("type") == "state":
            return ws, first
        await ws.close()
        await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt))
    raise RuntimeError(f"{url}: {first}")


# ------------------------------------------------------------------ the students

ON_TIME_S = 0.1


GRID = 256
"""Windows start on this grid (static/js/player.js WINDOW_GRID)."""


def window_size(speed: float) -> int:
    """Steps per window, as static/js/player.js asks: about 8 s of play in whole grid cells."""
    return GRID * max(1, min(4, math.ceil(speed * 8 / GRID)))


TRACE = b'{"format":"mbarrier-inspector/trace"'


def held_steps(body: bytes) -> int:
    """The steps a patched window holds, counted by their `patch` fields (each step has one;
    a snapshot has no such field) rather than parsed: a browser parses a window on its own
    CPU, and parsing 200 students' windows in this one process would take much of a core
    from the server it measures."""
    if not body.startswith(TRACE):
        raise RuntimeError(f"not a trace document: {body[:80]!r}")
    return body.count(b'"patch":{')


async def fetch_window(client: httpx.AsyncClient, base: str, sid: str, first: int, last: int,
                       out: dict) -> int:
    """Fetch steps first..last, one snapshot and a patch per step (retrying 429/503 after
    Retry-After, as the page does); the number of steps it holds."""
    for _ in range(20):
        try:
            response = await client.get(f"{base}/api/v1/sessions/{sid}/trace", params={
                "from": first, "to": last, "snapshots": "true", "patches": "true"})
        except httpx.TransportError as err:  # a browser retries a GET on a dropped keep-alive
            out["refused"][type(err).__name__] = out["refused"].get(type(err).__name__, 0) + 1
            await asyncio.sleep(0.5)
            continue
        if response.status_code == 200:
            out["windows"] += 1
            out["bytes"] += int(response.headers.get("content-length", 0))
            return held_steps(response.content)
        out["refused"][response.status_code] = out["refused"].get(response.status_code, 0) + 1
        await asyncio.sleep(min(2.0, float(response.headers.get("retry-after", "0.5"))))
    raise RuntimeError(f"window {first}..{last} of {sid}: no answer in 20 tries")


async def student(client: httpx.AsyncClient, base: str, sid: str, total: int, speed: float,
                  delay: float, until: float, out: dict) -> None:
    """Play one run as player.js does; count each frame on time or late."""
    await asyncio.sleep(delay)
    ahead = max(64, speed * 5)
    size = window_size(speed)
    available: list[tuple[int, float]] = []  # (last step of a window, when it arrived)

    async def fetch(first: int) -> int:
        first -= (first - 1) % size  # the window on the grid that holds it
        last = min(total, first + size - 1)
        held = await fetch_window(client, base, sid, first, last, out)
        if held != last - first + 1:
            raise RuntimeError(f"{sid}: window {first}..{last} held {held} steps")
        available.append((last, time.monotonic()))
        return last

    cached_to = await fetch(1)
    anchor_at, anchor_step = available[0][1] - 1 / speed, 0  # the first frame is due on arrival
    # Every frame due at the chosen speed from the first one to the end counts: one that a stall
    # pushed past the end (the page re-anchors its clock) was not drawn on time either.
    out["due"] += min(total, max(0, math.floor((until - available[0][1]) * speed) + 1))
    step = 0
    while step < total:
        k = step + 1
        due = anchor_at + (k - anchor_step) / speed
        if due > until:
            break
        arrived = next(at for last, at in available if last >= k)
        drawn = max(due, arrived)
        out["frames"] += 1
        if drawn - due <= ON_TIME_S:
            out["on_time"] += 1
        else:
            out["worst_late"] = max(out["worst_late"], drawn - due)
            anchor_at, anchor_step = drawn, k  # the page re-anchors rather than rushing
        step = k
        if cached_to < total and cached_to - step < ahead:
            await asyncio.sleep(max(0.0, drawn - time.monotonic()))  # when the page asks
            cached_to = await fetch(cached_to + 1)


def students_process(base: str, runs: list[tuple[str, int]], speed: float, seconds: float,
                     go_flag, results) -> None:
    async def run():
        out = {"frames": 0, "due": 0, "on_time": 0, "worst_late": 0.0, "windows": 0, "bytes": 0,
               "refused": {}, "failed": 0, "why": {}}
        # A client (a connection pool) per student, as each browser has its own: httpcore
        # scans every connection of a pool on each request, so one pool of 200 connections
        # cost this process a third of its CPU. One TLS context for all (none is used).
        tls = ssl.create_default_context()
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(httpx.AsyncClient(timeout=60, verify=tls))
                       for _ in runs]
            await asyncio.get_running_loop().run_in_executor(None, go_flag.wait, 300)
            until = time.monotonic() + seconds
            spread = min(10.0, seconds / 4)
            tasks = [student(client, base, sid, total, speed, spread * i / len(runs), until, out)
                     for i, (client, (sid, total)) in enumerate(zip(clients, runs, strict=True))]
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception):
                    out["failed"] += 1
                    why = type(outcome).__name__
                    out["why"][why] = out["why"].get(why, 0) + 1
        return out

    played = asyncio.run(run())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    played["cpu_s"] = usage.ru_utime + usage.ru_stime
    results.put({"students": played})


# ------------------------------------------------------------------------- the others

async def check_poster(base: str, until: float, out: dict) -> None:
    async with httpx.AsyncClient(timeout=120) as client:
        while time.monotonic() < until:
            response = await client.post(f"{base}/api/v1/check", json=CHECK)
            out[response.status_code] = out.get(response.status_code, 0) + 1
            if response.status_code == 503:
                await asyncio.sleep(min(1.0, float(response.headers.get("retry-after", "1"))))


async def seek_flooder(url: str, until: float, out: dict) -> None:
    ws, _ = await connect(url)
    async with ws:

        async def read():
            while True:
                await ws.recv()
                out["answers"] += 1

        reader = asyncio.create_task(read())
        step = 0
        try:
            while time.monotonic() < until:
                await ws.send(f'{{"type":"seek","step":{step}}}')
                out["sent"] += 1
                step = (step + 1) % 100
                if out["sent"] % 200 == 0:
                    await asyncio.sleep(0)
        except websockets.ConnectionClosed as closed:
            out["closed"] = f"closed by the server ({closed.rcvd.code if closed.rcvd else '-'})"
        reader.cancel()


def adversaries_process(base: str, flood: str, seconds: float, go_flag, results) -> None:
    """The check posters and the seek flooder, in a process of their own (as other machines
    would be), so that their loops do not delay the probes' clock."""

    async def run():
        checks: dict = {}
        flooded = {"sent": 0, "answers": 0, "closed": "open to the end"}
        await asyncio.get_running_loop().run_in_executor(None, go_flag.wait, 300)
        until = time.monotonic() + seconds
        await asyncio.gather(*(check_poster(base, until, checks) for _ in range(4)),
                             seek_flooder(flood, until, flooded))
        return {"others": (checks, flooded)}

    results.put(asyncio.run(run()))


async def get_probe(base: str, until: float, latencies: list[float]) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        while time.monotonic() < until:
            started = time.perf_counter()
            response = await client.get(f"{base}/api/v1/scenarios")
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200
            await asyncio.sleep(0.1)


async def step_probe(url: str, until: float, rtts: list[float]) -> None:
    ws, _ = await connect(url)
    async with ws:
        while time.monotonic() < until:
            started = time.perf_counter()
            await ws.send('{"type":"step"}')
            while True:
                message = json.loads(await ws.recv())
                if message["type"] in ("state", "error"):
                    break
            rtts.append(time.perf_counter() - started)
            if message["type"] == "error" or message["step"] >= message["total_steps"]:
                await ws.send('{"type":"seek","step":0}')
                await ws.recv()
            await asyncio.sleep(0.2)


async def rss_sampler(server: int, seconds: float, samples: list[tuple[float, int]]) -> None:
    """Each second, the server's resident bytes, read from /proc in a thread: not on the loop
    whose clock times the probes."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        samples.append((time.monotonic() - start, await asyncio.to_thread(rss_of_tree, server)))
        await asyncio.sleep(1)


def one_class(workers: int, args) -> dict:
    """The class against `workers` uvicorn workers; the figures."""
    seconds = args.seconds
    with server(workers=workers, deflate=False) as (base, _port, pid):
        async def make_runs():
            async with httpx.AsyncClient() as client:
                return [await create(client, base, seed)
                        for seed in range(1, args.sessions + args.probes + 2)]

        made = asyncio.run(make_runs())
        ws = base.replace("http", "ws")
        runs = made[:args.sessions]
        probes = [f"{ws}/api/v1/sessions/{i}/ws" for i, _ in made[args.sessions:-1]]
        flood = f"{ws}/api/v1/sessions/{made[-1][0]}/ws"
        context = multiprocessing.get_context("spawn")
        go, results = context.Event(), context.Queue()
        players = context.Process(target=students_process,
                                  args=(base, runs, args.speed, seconds, go, results))
        others = context.Process(target=adversaries_process,
                                 args=(base, flood, seconds, go, results))
        players.start()
        others.start()
        gets: list[float] = []
        rtts: list[float] = []
        rss: list[tuple[float, int]] = []

        async def everything():
            until = time.monotonic() + seconds
            await asyncio.gather(get_probe(base, until, gets),
                                 *(step_probe(u, until, rtts) for u in probes),
                                 rss_sampler(pid, seconds, rss))

        ours = {"students": players.pid, "others": others.pid, "probes": os.getpid()}
        cpu_before, load_before = cpu_of_tree(pid, ours), os.getloadavg()[0]
        go.set()
        asyncio.run(everything())
        cpu_after, load_after = cpu_of_tree(pid, ours), os.getloadavg()[0]
        cpu = {kind: cpu_after[kind] - cpu_before[kind] for kind in cpu_after}
        outcomes = [results.get(timeout=seconds + 300) for _ in range(2)]
        played = next(o for o in outcomes if "students" in o)["students"]
        checks, flooded = next(o for o in outcomes if "others" in o)["others"]
        players.join(30)
        others.join(30)
    return {"workers": workers, "played": played, "checks": checks, "flooded": flooded,
            "gets": gets, "rtts": rtts, "rss": rss, "cpu": cpu,
            "load": (load_before, load_after)}


def report(figures: dict, args) -> None:
    played, gets, rtts = figures["played"], figures["gets"], figures["rtts"]
    due = max(1, played["due"])
    print(f"-- {figures['workers']} worker{'s' if figures['workers'] > 1 else ''}")
    print(f"frames on time: {played['on_time'] / due:.2%} of {played['due']} due "
          f"({played['frames']} drawn, {played['frames'] / args.seconds:.0f}/s of "
          f"{args.sessions * args.speed:.0f}/s asked; "
          f"worst late {played['worst_late'] * 1000:.0f} ms; {played['windows']} windows, "
          f"{played['bytes'] / 2**20:.0f} MiB; refused {played['refused'] or 'none'}; "
          f"students failed {played['failed']} {played['why'] or ''})  "
          "(target >= 99% with one worker)")
    print(f"GET /api/v1/scenarios: {len(gets)} probes  p50 {pct(gets, .5):.1f} ms  "
          f"p99 {pct(gets, .99):.1f} ms  (target p99 < 100 ms)")
    print(f"step round trip: {len(rtts)} probes  p50 {pct(rtts, .5):.1f} ms  "
          f"p99 {pct(rtts, .99):.1f} ms  (target p99 < 100 ms)")
    flooded = figures["flooded"]
    print(f"checks answered: {figures['checks']}; seek flood: {flooded['sent']} sent, "
          f"{flooded['answers']} answers, {flooded['closed']}")
    cpu, seconds = figures["cpu"], args.seconds
    print(f"CPU while the class played ({seconds:g} s): server processes {cpu['server']:.1f} s "
          f"({cpu['server'] / seconds:.0%} of a core), their window workers "
          f"{cpu['windows']:.1f} s, check workers {cpu['checks']:.1f} s; the students' process "
          f"{cpu['students']:.1f} s, the check posters and the flooder {cpu['others']:.1f} s, "
          f"the probes {cpu['probes']:.1f} s; load average {figures['load'][0]:.1f} -> "
          f"{figures['load'][1]:.1f} on {os.cpu_count()} cores; peak RSS of the server's "
          f"processes {max((r for _, r in figures['rss']), default=0) / 2**20:.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", "--seconds", dest="seconds", type=float, default=60.0,
                        help="seconds the class plays, per worker count")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--speed", type=float, default=30.0)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="worker counts to run, in order")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; uvicorn on loopback, WebSocket deflate off; "
          f"{args.sessions} students on distinct runs at {args.speed:g} steps/s (windows of "
          f"{window_size(args.speed)} steps, a snapshot and patches), 4 check posters, 1 seek "
          f"flooder, {args.seconds:g} s per worker count")
    for workers in (int(w) for w in args.workers.split(",")):
        report(one_class(workers, args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
