"""Limits on the wire: what uvicorn bounds itself, and a small subclass of its httptools protocol
for what it does not (uvicorn issue #157: no header or body read timeout).

uvicorn keeps connections open as long as a client trickles bytes: a header line every few
seconds, or a body byte, holds a connection (and its buffer) forever, and header blocks are
unbounded (httptools buffers a header line whole before any callback sees it). The subclass adds,
per request:

- a header deadline (`settings.header_timeout_s`) from the request's first byte, or from the
  connection's opening, to the end of its headers: past it, 408 and close;
- a body deadline (`settings.body_timeout_s`) from the end of the headers to the end of the body:
  past it, 408 (if no answer has started) and close, and the app sees a disconnect;
- header bytes bounded (`settings.max_header_bytes`, counted as they arrive, not once parsed):
  431; the request target bounded (`settings.max_url_bytes`): 414;
- a WebSocket upgrade that the websockets library would silently drop (a request line or header
  line past its 8 KiB, more than its 128 headers) is answered 414 / 431 here.

- the concurrency limit (`settings.limit_concurrency` connections, WebSocket upgrades
  included): 503 with Retry-After, in the API's shape (uvicorn's own is plain text, without it).

The rest is uvicorn's own (`uvicorn_options`): the keep-alive timeout, WebSocket message size
(4 KiB: commands are small) and ping, the graceful shutdown bound.
Chosen over Hypercorn or Granian because the app, its tests and its benchmarks already run under
uvicorn, whose protocol classes are a documented extension point (`--http module:Class`); the
subclass only adds timers and counters (docs/serving.md).
"""

from __future__ import annotations

import asyncio
import json

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.core.config import Settings, settings

WS_MAX_LINE = 8192
"""The websockets library's longest request or header line (`websockets.http11`)."""
WS_MAX_HEADERS = 128


LINGER_S = 2.0
"""After a refusal, how long what the client still sends is read and dropped: closing with
unread input would reset the connection, and the client would lose the answer."""


def _reply(transport: asyncio.Transport, status: int, reason: str, field: str,
           message: str) -> None:
    """A JSON error in the API's shape, written straight to the socket; then the sending side
    is closed, input is drained for `LINGER_S` (the protocol drops it), and the socket closed."""
    where = ["server", "busy"] if status == 503 else ["header", field]
    body = json.dumps({"detail": [{"loc": where, "msg": message,
                                   "type": "value_error"}]}).encode()
    retry = "retry-after: 5\r\n" if status == 503 else ""
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n{retry}"
            "x-content-type-options: nosniff\r\n\r\n").encode()
    if transport.is_closing():
        return
    transport.write(head + body)
    if not transport.can_write_eof():
        transport.close()
        return
    transport.write_eof()
    transport.resume_reading()
    asyncio.get_running_loop().call_later(LINGER_S, transport.close)


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with header/body deadlines and header/URL byte bounds."""

    limits: Settings = settings

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_headers = True
        self.header_bytes = 0
        self.url_bytes = 0
        self.header_count = 0
        self.header_size = 0
        self.refusal: tuple[int, str, str, str] | None = None
        self.lingering = False
        self.header_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None

    # --------------------------------------------------------------------------- timers

    def _arm_header_timer(self) -> None:
        if self.header_timer is None:
            self.header_timer = self.loop.call_later(self.limits.header_timeout_s,
                                                     self._header_timeout)

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _header_timeout(self) -> None:
        self.header_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm_header_timer()  # a pipelined request behind an answer still streaming
            return
        if self.in_headers and not self.transport.is_closing():
            self.lingering = True
            _reply(self.transport, 408, "Request Timeout", "headers",
                   f"the request's headers did not arrive within "
                   f"{self.limits.header_timeout_s:g} s")

    def _body_timeout(self) -> None:
        self.body_timer = None
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        if cycle.response_complete:  # answered (a 413, say) while the body still trickles in
            self.transport.close()
            return
        cycle.disconnected = True  # the app's next receive() is a disconnect
        cycle.message_event.set()
        if cycle.response_started:
            self.transport.close()
        else:
            self.lingering = True
            _reply(self.transport, 408, "Request Timeout", "content-length",
                   f"the request's body did not arrive within {self.limits.body_timeout_s:g} s")

    # -------------------------------------------------------------------------- protocol

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_header_timer()  # a connection that never sends a byte is closed too

    def connection_lost(self, exc) -> None:
        self._cancel("header_timer")
        self._cancel("body_timer")
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return
        self._unset_keepalive_if_required()
        if self.in_headers:
            self.header_bytes += len(data)
            self._arm_header_timer()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self.refusal is not None:
                return self._refuse()
            self._cancel("header_timer")
            self._cancel("body_timer")
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return None
        except httptools.HttpParserError:
            if self.refusal is not None:
                return self._refuse()
            self.logger.warning("Invalid HTTP request received.")
            self._cancel("header_timer")
            self._cancel("body_timer")
            self.send_400_response("Invalid HTTP request received.")
            return None
        if self.refusal is not None:
            return self._refuse()
        raw_limit = self.limits.max_url_bytes + self.limits.max_header_bytes
        if self.in_headers and self.header_size > self.limits.max_header_bytes:
            self.refusal = (431, "Request Header Fields Too Large", "headers",
                            f"request headers are at most {self.limits.max_header_bytes} bytes")
            return self._refuse()
        if self.in_headers and self.header_bytes > raw_limit:
            self.refusal = (431, "Request Header Fields Too Large", "headers",
                            f"the request line and headers are at most {raw_limit} bytes")
            return self._refuse()
        return None

    def _refuse(self) -> None:
        self._cancel("header_timer")
        self._cancel("body_timer")
        self.lingering = True
        status, reason, field, message = self.refusal
        _reply(self.transport, status, reason, field, message)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_headers = True
        self.url_bytes = 0
        self.header_count = 0
        self.header_size = 0

    def on_url(self, url: bytes) -> None:
        self.url_bytes += len(url)
        if self.url_bytes <= self.limits.max_url_bytes:
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_count += 1
        self.header_size += len(name) + len(value) + 4
        if self.header_count <= 2 * WS_MAX_HEADERS and \
                self.header_size <= self.limits.max_header_bytes:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_headers = False
        self.header_bytes = 0
        self._cancel("header_timer")
        limits = self.limits
        upgrade = self.parser.should_upgrade()
        url_limit = min(limits.max_url_bytes, WS_MAX_LINE - 32) if upgrade else \
            limits.max_url_bytes
        if self.url_bytes > url_limit:
            what = "a WebSocket's path" if upgrade else "a request target"
            self.refusal = (414, "URI Too Long", "url",
                            f"{what} is at most {url_limit} bytes; send long input in a "
                            "body (POST) instead")
            return
        if self.header_size > limits.max_header_bytes:
            self.refusal = (431, "Request Header Fields Too Large", "headers",
                            f"request headers are at most {limits.max_header_bytes} bytes")
            return
        too_many = WS_MAX_HEADERS if upgrade else 2 * WS_MAX_HEADERS
        if self.header_count > too_many or (upgrade and any(
                len(n) + len(v) + 2 > WS_MAX_LINE for n, v in self.headers)):
            self.refusal = (431, "Request Header Fields Too Large", "headers",
                            f"at most {too_many} header lines"
                            + (f" of at most {WS_MAX_LINE} bytes" if upgrade else ""))
            return
        if len(self.connections) > limits.limit_concurrency or \
                len(self.tasks) >= limits.limit_concurrency:
            self.refusal = (503, "Service Unavailable", "server",
                            f"this server holds {limits.limit_concurrency} connections at "
                            "most; retry soon")
            return
        super().on_headers_complete()
        if not upgrade and not self.transport.is_closing():
            self.body_timer = self.loop.call_later(limits.body_timeout_s, self._body_timeout)

    def on_body(self, body: bytes) -> None:
        if self.refusal is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel("body_timer")
        if self.refusal is None:
            super().on_message_complete()
        self.in_headers = True
        self.header_bytes = 0

    def handle_websocket_upgrade(self) -> None:
        self._cancel("header_timer")
        self._cancel("body_timer")
        super().handle_websocket_upgrade()


def uvicorn_options(config: Settings = settings) -> dict:
    """What `mbarrier-inspector serve` (and the benchmarks) give `uvicorn.run`."""
    return {
        "http": "app.core.wire:BoundedHttpTools",
        "timeout_keep_alive": config.keep_alive_s,
        "timeout_graceful_shutdown": config.graceful_shutdown_s,
        "ws_max_size": config.ws_max_bytes,
        "ws_ping_interval": config.ws_ping_s,
        "ws_ping_timeout": config.ws_ping_s,
    }
