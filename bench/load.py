"""A class at once, against a real uvicorn with 2 workers on loopback (stops by itself):

- 200 WebSocket sessions, each on its own run, playing at 30 steps/s (in a process of their own);
- 4 clients posting schedule checks in a loop (a documented 503 with Retry-After counts as an
  answer); 1 client flooding `seek` as fast as it can; 20 clients that never read;
- probes: `GET /api/v1/scenarios` and a `step` command's round trip, a few times a second.

Prints `GET /api/v1/scenarios` p99 (target < 100 ms), the step round trip p99 (< 100 ms), lost or
reordered played steps (0), and the servers' RSS growth over the second half (< 10%).

    .venv/bin/python bench/load.py [--seconds 120] [--sessions 200] [--speed 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path

import httpx
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import pct, server  # noqa: E402  (bench/serve.py: the same uvicorn launcher)

CHECK = {"scenario": "double_buffer_tma", "params": {"stages": 2, "tiles": 6, "consumers": 2},
         "bugs": ["forget_phase_toggle"], "timeout_s": 2}


def rss_of_group(pgid: int) -> int:
    """Resident bytes of every process in the server's process group (workers, pools)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


async def create(client: httpx.AsyncClient, base: str, seed: int) -> str:
    for _ in range(50):
        response = await client.post(f"{base}/api/v1/sessions", json={
            "scenario": "double_buffer_tma", "params": {"tiles": 300}, "schedule": "random",
            "seed": seed}, timeout=60)
        if response.status_code == 201:
            return response.json()["id"]
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


# ------------------------------------------------------------------ the playing sessions

async def player(url: str, speed: float, seconds: float, go: asyncio.Event, out: dict) -> None:
    ws, first = await connect(url)
    async with ws:
        out["connected"] += 1
        await go.wait()
        await ws.send(json.dumps({"type": "play", "steps_per_s": speed, "patches": True}))
        expected = first["step"] + 1
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = json.loads(await asyncio.wait_for(
                    ws.recv(), timeout=max(0.05, deadline - time.monotonic())))
            except TimeoutError:
                break
            if message.get("type") != "state" or not message.get("playing"):
                continue
            if message["step"] != expected:
                out["lost_or_reordered"] += 1
            expected = message["step"] + 1
            out["steps"] += 1


def players_process(urls: list[str], speed: float, seconds: float, ready, go_flag,
                    results) -> None:
    async def run():
        out = {"connected": 0, "steps": 0, "lost_or_reordered": 0}
        go = asyncio.Event()
        tasks = [asyncio.create_task(player(u, speed, seconds, go, out)) for u in urls]
        while out["connected"] < len(urls):
            await asyncio.sleep(0.05)
        ready.set()
        await asyncio.get_running_loop().run_in_executor(None, go_flag.wait, 120)
        go.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), seconds + 60)
        return out

    results.put(asyncio.run(run()))


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


async def non_reader(url: str, until: float, out: dict) -> None:
    """Asks for the fastest play and never reads a byte (with a small receive buffer, so that
    the server sees it within the run rather than after the kernel has queued megabytes)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", int(url.split(":")[2].split("/")[0])))
    sock.setblocking(False)
    try:
        async with websockets.connect(url, sock=sock, max_size=2**22, max_queue=1,
                                      open_timeout=30) as ws:
            await ws.send(json.dumps({"type": "play", "steps_per_s": 240}))
            ws.transport.pause_reading()
            while time.monotonic() < until:
                await asyncio.sleep(1)
                if ws.transport.is_closing():
                    break
            ws.transport.resume_reading()
            try:
                await asyncio.wait_for(ws.wait_closed(), 5)
                out["dropped"] += 1
            except TimeoutError:
                pass
    except (websockets.ConnectionClosed, OSError):
        out["dropped"] += 1


def adversaries_process(base: str, flood: str, quiet: list[str], seconds: float, go_flag,
                        results) -> None:
    """The check posters, the seek flooder and the non-readers, in a process of their own (as
    other machines would be), so that their loops do not delay the probes' clock."""

    async def run():
        checks: dict = {}
        flooded = {"sent": 0, "answers": 0, "closed": "open to the end"}
        quiet_out = {"dropped": 0}
        await asyncio.get_running_loop().run_in_executor(None, go_flag.wait, 120)
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(check_poster(base, until, checks) for _ in range(4)),
            seek_flooder(flood, until, flooded),
            *(non_reader(u, until, quiet_out) for u in quiet))
        return {"others": (checks, flooded, quiet_out)}

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


async def rss_sampler(pgid: int, seconds: float, samples: list[tuple[float, int]]) -> None:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        samples.append((time.monotonic() - start, rss_of_group(pgid)))
        await asyncio.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--speed", type=float, default=30.0)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--deflate", action="store_true",
                        help="WebSocket permessage-deflate on (`serve` leaves it off)")
    args = parser.parse_args()
    seconds = args.seconds
    print(f"cores: {os.cpu_count()}; uvicorn: 2 workers on loopback, WebSocket deflate "
          f"{'on' if args.deflate else 'off'}; {args.sessions} sessions "
          f"at {args.speed:g} steps/s, 4 check posters, 1 seek flooder, 20 non-readers, "
          f"{seconds:g} s")
    with server(workers=2, deflate=args.deflate) as (base, _port, pid):
        async def make_ids():
            async with httpx.AsyncClient() as client:
                return [await create(client, base, seed)
                        for seed in range(1, args.sessions + args.probes + 23)]

        ids = asyncio.run(make_ids())
        ws = base.replace("http", "ws")
        urls = [f"{ws}/api/v1/sessions/{i}/ws" for i in ids]
        players, probes = urls[:args.sessions], urls[args.sessions:args.sessions + args.probes]
        flood, quiet = urls[args.sessions + args.probes], urls[args.sessions + args.probes + 1:]
        context = multiprocessing.get_context("spawn")
        ready, go, results = context.Event(), context.Event(), context.Queue()
        process = context.Process(target=players_process,
                                  args=(players, args.speed, seconds, ready, go, results))
        process.start()
        if not ready.wait(120):
            raise RuntimeError("the playing sessions did not connect")
        gets: list[float] = []
        rtts: list[float] = []
        rss: list[tuple[float, int]] = []

        others = context.Process(target=adversaries_process,
                                 args=(base, flood, quiet, seconds, go, results))
        others.start()

        async def everything():
            until = time.monotonic() + seconds
            await asyncio.gather(
                get_probe(base, until, gets),
                *(step_probe(u, until, rtts) for u in probes),
                rss_sampler(pid, seconds, rss))

        go.set()
        asyncio.run(everything())
        outcomes = [results.get(timeout=120) for _ in range(2)]
        played = next(o for o in outcomes if "steps" in o)
        checks, flooded, quiet_out = next(o for o in outcomes if "steps" not in o)["others"]
        process.join(30)
        others.join(30)
    half = seconds / 2
    at_half = next(r for t, r in rss if t >= half)
    at_end = rss[-1][1]
    growth = (at_end - at_half) / at_half
    print(f"GET /api/v1/scenarios: {len(gets)} probes  p50 {pct(gets, .5):.1f} ms  "
          f"p99 {pct(gets, .99):.1f} ms  (target p99 < 100 ms)")
    print(f"step round trip: {len(rtts)} probes  p50 {pct(rtts, .5):.1f} ms  "
          f"p99 {pct(rtts, .99):.1f} ms  (target p99 < 100 ms)")
    print(f"played steps: {played['steps']} ({played['steps'] / seconds:.0f}/s of "
          f"{args.sessions * args.speed:.0f}/s asked), lost or reordered: "
          f"{played['lost_or_reordered']} (target 0)")
    print(f"checks answered: {checks}; seek flood: {flooded['sent']} sent, "
          f"{flooded['answers']} answers, {flooded['closed']}; non-readers dropped: "
          f"{quiet_out['dropped']}/{len(quiet)}")
    print(f"server RSS: {at_half / 2**20:.0f} MiB at {half:g} s, {at_end / 2**20:.0f} MiB at "
          f"the end: {growth:+.1%} in the second half (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
