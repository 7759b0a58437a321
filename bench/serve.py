"""Serving benchmark, against a real uvicorn on loopback (stops by itself):

1. Throughput of `POST /api/v1/sessions/{id}/step` beside a bare FastAPI endpoint served by the
   same process in the same run (target: the step endpoint at least 50% of the bare one), served
   as `mbarrier-inspector serve` serves (app.core.wire's protocol and limits), and the bare
   endpoint under stock uvicorn too: what the wire limits cost (target: at least 90%).
2. Step latency while 200 WebSocket sessions play at 30 steps/s: the round trip of a `step`
   command from probe sessions, and the lateness of the played steps (target: p99 under 20 ms).

    .venv/bin/python bench/serve.py [--seconds 4] [--sessions 200] [--speed 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]


def bench_app():
    """The real app plus a bare endpoint: the cheapest thing FastAPI can answer with JSON."""
    sys.path.insert(0, str(ROOT))
    from app.main import create_app

    app = create_app()

    @app.post("/bench/bare")
    async def bare() -> dict:
        return {"step": 1}

    return app


def served_flags() -> list[str]:
    """`mbarrier-inspector serve`'s uvicorn options (app.core.wire) as uvicorn's flags."""
    sys.path.insert(0, str(ROOT))
    from app.core.wire import uvicorn_options

    o = uvicorn_options()
    return ["--http", o["http"], "--timeout-keep-alive", str(o["timeout_keep_alive"]),
            "--timeout-graceful-shutdown", str(o["timeout_graceful_shutdown"]),
            "--ws-max-size", str(o["ws_max_size"]), "--ws-ping-interval",
            str(o["ws_ping_interval"]), "--ws-ping-timeout", str(o["ws_ping_timeout"])]


@contextlib.contextmanager
def server(workers: int = 1, deflate: bool = True, stock: bool = False):
    """uvicorn serving `bench_app`: as `serve` runs it (the bounded protocol and its limits),
    or `stock` (uvicorn's own httptools protocol, its defaults). One session's steps are not
    rate limited here (the limiter still runs): the loop posts thousands a second."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "serve:bench_app", "--factory", "--app-dir",
         str(ROOT / "bench"), "--host", "127.0.0.1", "--port", str(port), "--workers",
         str(workers), "--log-level", "warning", "--no-access-log",
         *([] if deflate else ["--ws-per-message-deflate", "false"]),
         *([] if stock else served_flags())],
        cwd=ROOT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MBI_RATE_PER_SESSION": "1e9",
             "MBI_RATE_BURST_SESSION": "1e9"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/api/v1/scenarios", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("uvicorn did not start")
        yield base, port, process.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


# ------------------------------------------------------------------ a lean HTTP/1.1 client

async def post_loop(port: int, path_of, seconds: float, latencies: list[float]) -> int:
    """One keep-alive connection posting as fast as answers come; `path_of(body)` gives the next
    path from the last answer (None at first). Returns the number of answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done, body = 0, None
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            path = path_of(body)
            started = time.perf_counter()
            writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
                         .encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            body = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{path}: {head[:40]!r} {body[:200]!r}")
            done += 1
    finally:
        writer.close()
    return done


async def throughput(port: int, make_path, connections: int, seconds: float) -> tuple[float, list]:
    latencies: list[float] = []
    counts = await asyncio.gather(*(post_loop(port, make_path(), seconds, latencies)
                                    for _ in range(connections)))
    return sum(counts) / seconds, latencies


def step_paths(first_id: str):
    """A per-connection chain of session ids: each answer's id is the next request's."""

    def make():
        def path_of(body):
            if body is None:
                return f"/api/v1/sessions/{first_id}/step"
            view = json.loads(body)
            if view["step"] >= view["total_steps"]:
                return f"/api/v1/sessions/{first_id}/step"
            return f"/api/v1/sessions/{view['id']}/step"
        return path_of
    return make


def bare_paths():
    return lambda body: "/bench/bare"


# ------------------------------------------------------------------ 200 playing sockets

async def player(url: str, speed: float, seconds: float, gaps: list[float], counts: list[int],
                 go: asyncio.Event, connected: list, offset: float) -> None:
    async with websockets.connect(url, max_size=2**22) as ws:
        await ws.recv()
        connected.append(1)
        await go.wait()
        await asyncio.sleep(offset)  # students press play at different moments
        await ws.send(json.dumps({"type": "play", "steps_per_s": speed, "patches": True}))
        last = None
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(ws.recv(), timeout=max(0.05, deadline - time.monotonic()))
            except TimeoutError:
                break
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
            n += 1
        counts.append(n)
        await ws.send(json.dumps({"type": "pause"}))


def players_process(urls: list[str], sessions: int, speed: float, seconds: float, connected_flag,
                    go_flag, results) -> None:
    """The playing sessions, in a process of their own (as real clients would be), so that
    their receiving does not delay the probes' event loop."""

    async def run():
        gaps: list[float] = []
        counts: list[int] = []
        connected: list = []
        go = asyncio.Event()
        tasks = [asyncio.create_task(player(urls[i], speed, seconds, gaps, counts, go,
                                            connected, i / sessions / speed))
                 for i in range(sessions)]
        while len(connected) < sessions:
            await asyncio.sleep(0.05)
        connected_flag.set()
        await asyncio.get_running_loop().run_in_executor(None, go_flag.wait, 60)
        go.set()
        await asyncio.wait_for(asyncio.gather(*tasks), seconds + 30)
        return gaps, counts

    results.put(asyncio.run(run()))


async def prober(url: str, seconds: float, rtts: list[float]) -> None:
    """Step by command and time the answer, a few times a second, while the others play."""
    async with websockets.connect(url, max_size=2**22) as ws:
        await ws.recv()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
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
            await asyncio.sleep(0.1)


def playing(base: str, pid: int, sessions: int, probes: int, speed: float, seconds: float,
            distinct: bool = False):
    """`distinct`: every session its own run (its own seed), so no two share a frame."""
    import multiprocessing

    def url_for(seed: int) -> str:
        created = httpx.post(f"{base}/api/v1/sessions", json={
            "scenario": "double_buffer_tma", "params": {"tiles": 300}, "schedule": "random",
            "seed": seed}, timeout=60)
        return base.replace("http", "ws") + f"/api/v1/sessions/{created.json()['id']}/ws"

    # each student its own session (ids of one session may hold only a few streams); without
    # `distinct`, all of one run, whose frames they then share
    urls = [url_for(seed if distinct else 1) for seed in range(2, sessions + 2)]
    context = multiprocessing.get_context("spawn")
    connected, go, results = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=players_process,
                              args=(urls, sessions, speed, seconds, connected, go, results))
    process.start()
    try:
        if not connected.wait(60):
            raise RuntimeError("the playing sessions did not connect")
        cpu_before = cpu_seconds(pid)
        go.set()
        time.sleep(0.5)  # let playing reach its pace
        rtts: list[float] = []

        async def probe_all():
            await asyncio.gather(*(prober(url_for(1), seconds - 1, rtts)
                                   for _ in range(probes)))

        asyncio.run(asyncio.wait_for(probe_all(), seconds + 30))
        gaps, counts = results.get(timeout=seconds + 60)
        server_cpu = cpu_seconds(pid) - cpu_before
    finally:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
    return gaps, rtts, counts, server_cpu


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--speed", type=float, default=30.0)
    parser.add_argument("--no-deflate", action="store_true",
                        help="serve WebSockets without permessage-deflate")
    parser.add_argument("--distinct", action="store_true",
                        help="every playing session its own run (no shared frames)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; uvicorn: 1 worker on loopback; clients in this process "
          "(HTTP, probes) and one more (the playing sockets)")
    with server(deflate=not args.no_deflate, stock=True) as (base, port, pid):
        stock = []
        for _ in range(2):
            stock.append(asyncio.run(throughput(port, bare_paths, args.connections,
                                                args.seconds / 2))[0])
    with server(deflate=not args.no_deflate) as (base, port, pid):
        first = httpx.post(f"{base}/api/v1/sessions", json={
            "scenario": "double_buffer_tma", "params": {"tiles": 5000}}, timeout=120).json()["id"]
        asyncio.run(throughput(port, step_paths(first), 2, 1.0))  # warm the run cache
        rates = {"bare": [], "step": []}
        lat = {"bare": [], "step": []}
        for _ in range(2):
            for name, make in (("bare", bare_paths), ("step", step_paths(first))):
                rate, latencies = asyncio.run(
                    throughput(port, make, args.connections, args.seconds / 2))
                rates[name].append(rate)
                lat[name] += latencies
        bare, step = max(rates["bare"]), max(rates["step"])
        print(f"bare FastAPI endpoint, stock uvicorn: {max(stock):8.0f} req/s")
        print(f"bare FastAPI endpoint, as served: {bare:8.0f} req/s  p50 "
              f"{pct(lat['bare'], .5):.2f} ms  p99 {pct(lat['bare'], .99):.2f} ms   = "
              f"{bare / max(stock):.0%} of stock (the wire limits' cost; target >= 90%)")
        print(f"POST /sessions/{{id}}/step: {step:5.0f} req/s  p50 {pct(lat['step'], .5):.2f} ms  "
              f"p99 {pct(lat['step'], .99):.2f} ms   = {step / bare:.0%} of bare "
              f"(target >= 50%)")
        gaps, rtts, counts, server_cpu = playing(base, pid, args.sessions, args.probes,
                                                 args.speed, args.seconds * 2, args.distinct)
        expected = 1 / args.speed
        lateness = [max(0.0, g - expected) for g in gaps]
        total = sum(counts)
        shared = "each its own run" if args.distinct else "one lesson's run, shared"
        print(f"{args.sessions} WebSocket sessions ({shared}) playing at {args.speed:g} "
              f"steps/s for {args.seconds * 2:g} s: {total} steps streamed "
              f"({total / (args.seconds * 2):.0f}/s of {args.sessions * args.speed:.0f}/s asked)")
        print(f"  step latency (a step command's round trip, {len(rtts)} probes): "
              f"p50 {pct(rtts, .5):.2f} ms  p99 {pct(rtts, .99):.2f} ms (target p99 < 20 ms)")
        print(f"  server CPU: {server_cpu:.1f} s for {total} streamed steps = "
              f"{server_cpu / max(total, 1) * 1e6:.0f} us a step "
              f"(load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
        print(f"  played-step lateness beyond 1/{args.speed:g} s: p50 {pct(lateness, .5):.2f} ms"
              f"  p99 {pct(lateness, .99):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
