"""Issue 20, item 2: limits on the wire, against the real server (`mbarrier-inspector serve`, its
uvicorn options and `app.core.wire`'s protocol) on loopback, with short timeouts so that each
case ends in seconds: slow headers and bodies, header and URL sizes, idle and keep-alive
connections, the concurrency limit, WebSocket message size, ping and oversized upgrades."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

from tests.api.served import served
from tests.asyncutil import run_async

API = "/api/v1"
TIMEOUT_S = 2.0
SLACK_S = 6.0
"""Generous: a loaded machine answers late, never never."""
LIMITS = {"MBI_HEADER_TIMEOUT_S": str(TIMEOUT_S), "MBI_BODY_TIMEOUT_S": str(TIMEOUT_S),
          "MBI_KEEP_ALIVE_S": "2", "MBI_MAX_HEADER_BYTES": "8192", "MBI_MAX_URL_BYTES": "20000",
          "MBI_WS_PING_S": "1", "MBI_LIMIT_CONCURRENCY": "150"}


@pytest.fixture(scope="module")
def server():
    with served(LIMITS) as running:
        yield running


async def _answer(reader: asyncio.StreamReader, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (monotonic)."""
    data = await asyncio.wait_for(reader.read(1 << 20), within)
    while data and not reader.at_eof():
        more = await asyncio.wait_for(reader.read(1 << 20), within)
        if not more:
            break
        data += more
    return data, time.monotonic()


async def _open(port: int):
    return await asyncio.open_connection("127.0.0.1", port)


async def _trickle(port: int, head: bytes, drip: bytes, every: float, until: float):
    """Send `head`, then `drip` every `every` s until the server closes (or `until`)."""
    reader, writer = await _open(port)
    writer.write(head)
    started = time.monotonic()
    closed_at = None
    status = b""
    try:
        while time.monotonic() < until:
            try:
                chunk = await asyncio.wait_for(reader.read(4096), every)
            except TimeoutError:
                writer.write(drip)
                try:
                    await writer.drain()
                except ConnectionError:
                    closed_at = time.monotonic()
                    break
                continue
            status += chunk
            if not chunk:
                closed_at = time.monotonic()
                break
    finally:
        writer.close()
    return status, (closed_at or float("inf")) - started


def _slow_clients(port: int, head: bytes, drip: bytes, count: int = 50):
    async def scenario():
        until = time.monotonic() + TIMEOUT_S + SLACK_S + 5
        clients = [asyncio.ensure_future(_trickle(port, head, drip, 0.5, until))
                   for _ in range(count)]
        await asyncio.sleep(0.5)
        probe_started = time.monotonic()
        async with httpx.AsyncClient() as client:
            probe = await client.get(f"http://127.0.0.1:{port}{API}/scenarios", timeout=10)
        probe_s = time.monotonic() - probe_started
        return await asyncio.gather(*clients), probe.status_code, probe_s

    return run_async(scenario, TIMEOUT_S + SLACK_S + 30)


def test_50_connections_trickling_headers_are_closed_with_408(server):
    _, port, _ = server
    results, probe, probe_s = _slow_clients(
        port, b"GET /api/v1/scenarios HTTP/1.1\r\nHost: x\r\n", b"X-Slow: 1\r\n")
    assert probe == 200 and probe_s < 5  # the others are still served meanwhile
    for answer, after in results:
        assert after < TIMEOUT_S + SLACK_S
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]


def test_50_connections_trickling_a_body_are_closed_with_408(server):
    _, port, _ = server
    head = (b"POST /api/v1/pipelines/validate HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
    results, probe, _ = _slow_clients(port, head, b" ")
    assert probe == 200
    for answer, after in results:
        assert after < TIMEOUT_S + SLACK_S
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]


def test_a_connection_that_sends_nothing_is_closed(server):
    _, port, _ = server

    async def scenario():
        reader, writer = await _open(port)
        started = time.monotonic()
        data, closed = await _answer(reader, TIMEOUT_S + SLACK_S)
        writer.close()
        return data, closed - started

    data, after = run_async(scenario, 30)
    assert after < TIMEOUT_S + SLACK_S and data.startswith(b"HTTP/1.1 408")


def test_an_idle_keep_alive_connection_is_closed(server):
    _, port, _ = server

    async def scenario():
        reader, writer = await _open(port)
        writer.write(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        answered = time.monotonic()
        await _answer(reader, 2 + SLACK_S)  # the rest of the body, then the close
        writer.close()
        return first, time.monotonic() - answered

    first, after = run_async(scenario, 30)
    assert first.startswith(b"HTTP/1.1 200") and after < 2 + SLACK_S


@pytest.mark.parametrize("size", [20_000, 1 << 20])
def test_header_blocks_past_the_limit_are_431(server, size):
    _, port, _ = server

    async def scenario():
        reader, writer = await _open(port)
        writer.write(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
        line = b"X-Big: " + b"a" * 1000 + b"\r\n"
        with_answer = b""
        try:
            for _ in range(size // len(line) + 1):
                writer.write(line)
                await writer.drain()
        except ConnectionError:
            pass
        with_answer, _ = await _answer(reader, 10)
        writer.close()
        return with_answer

    answer = run_async(scenario, 30)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["detail"][0]["loc"] == ["header",
                                                                                "headers"]


def test_one_header_line_too_long_is_431_before_it_ends(server):
    """httptools buffers a header line whole: 4 MiB of one line, never finished, is refused as
    it arrives rather than buffered."""
    _, port, _ = server

    async def scenario():
        reader, writer = await _open(port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: ")
        try:
            for _ in range(64):
                writer.write(b"b" * 65536)
                await writer.drain()
        except ConnectionError:
            pass
        answer, _ = await _answer(reader, 10)
        writer.close()
        return answer

    assert run_async(scenario, 30).startswith(b"HTTP/1.1 431")


def test_a_url_past_the_limit_is_414(server):
    base, _, _ = server
    response = httpx.get(f"{base}{API}/sessions/{'a' * 25_000}", timeout=10)
    assert response.status_code == 414
    assert response.json()["detail"][0]["loc"] == ["header", "url"]
    assert httpx.get(f"{base}{API}/sessions/{'a' * 15_000}", timeout=10).status_code == 404


def test_an_oversized_websocket_upgrade_is_answered(server):
    base, port, _ = server

    async def scenario():
        reader, writer = await _open(port)
        writer.write(f"GET {API}/sessions/{'a' * 9000}/ws HTTP/1.1\r\nHost: x\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
        answer, _ = await _answer(reader, 10)
        writer.close()
        return answer

    assert run_async(scenario, 30).startswith(b"HTTP/1.1 414")


def test_websocket_messages_are_at_most_4_kib_and_silent_sockets_are_pinged_out(server):
    base, port, _ = server
    sid = httpx.post(f"{base}{API}/sessions", json={"scenario": "single_barrier"},
                     timeout=30).json()["id"]
    url = f"ws://127.0.0.1:{port}{API}/sessions/{sid}/ws"

    async def big():
        async with websockets.connect(url) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "seek", "pad": "x" * 5000}))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            return closed.value.rcvd.code

    assert run_async(big, 30) == 1009

    async def silent():
        """A raw socket that completes the handshake and then never answers a ping."""
        reader, writer = await _open(port)
        writer.write(f"GET {API}/sessions/{sid}/ws HTTP/1.1\r\nHost: x\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
        started = time.monotonic()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        while await asyncio.wait_for(reader.read(65536), 2 + SLACK_S):
            pass  # frames, pings; never a pong
        writer.close()
        return head, time.monotonic() - started

    head, after = run_async(silent, 40)
    assert head.startswith(b"HTTP/1.1 101") and after < 2 + SLACK_S


def test_past_the_concurrency_limit_new_requests_get_503(server):
    _, port, _ = server

    async def scenario():
        held = [await _open(port) for _ in range(160)]
        try:
            async with httpx.AsyncClient() as client:
                response = await client.get(f"http://127.0.0.1:{port}{API}/health", timeout=10)
        finally:
            for _, writer in held:
                writer.close()
        return response.status_code, response.headers.get("retry-after"), response.json()

    status, retry, body = run_async(scenario, 60)
    assert status == 503 and int(retry) >= 1
    assert body["detail"][0]["loc"] == ["server", "busy"]
