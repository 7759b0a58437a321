"""One settings object for the server, read from environment variables (`MBI_*`) at start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def _float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def _list(name: str) -> tuple[str, ...]:
    return tuple(v for v in os.environ.get(name, "").replace(",", " ").split() if v)


def default_data_dir() -> Path:
    """The user's data directory (XDG on Linux, ~/Library on macOS, %APPDATA% on Windows)."""
    if os.name == "nt":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "mbarrier-inspector"


@dataclass(frozen=True)
class Settings:
    frame_ancestors: str = field(
        default_factory=lambda: os.environ.get("MBI_FRAME_ANCESTORS", "*"))
    """CSP `frame-ancestors` of `/embed` pages: who may embed the inspector in an iframe (every
    other page is `'none'`). The embedded page has this server's origin, so its WebSocket is
    checked against `allowed_origins` like any page's."""
    allowed_origins: tuple[str, ...] = field(
        default_factory=lambda: _list("MBI_ALLOWED_ORIGINS"))
    """Origins whose pages may open WebSockets; empty: the loopback origins of the served port."""
    max_window: int = field(default_factory=lambda: _int("MBI_MAX_WINDOW", 2000))
    """Most steps one trace response holds with snapshots (ten times that without)."""
    max_sessions: int = field(default_factory=lambda: _int("MBI_MAX_SESSIONS", 2000))
    """Runs kept by the session store, and open streams (WebSocket + SSE) per process."""
    session_idle_s: int = field(default_factory=lambda: _int("MBI_SESSION_IDLE_S", 1800))
    session_key: str = field(default_factory=lambda: os.environ.get("MBI_SESSION_KEY", ""))
    """Signs session ids; empty: a random key kept in `data_dir/session.key`."""
    data_dir: Path = field(default_factory=lambda: Path(
        os.environ.get("MBI_DATA_DIR") or default_data_dir()))
    check_concurrency: int = field(default_factory=lambda: _int("MBI_CHECK_CONCURRENCY", 2))
    """Worker processes for schedule checks, per server process."""
    check_helpers: int = field(default_factory=lambda: _int("MBI_CHECK_HELPERS", 0))
    """Helper processes one check may add (app/check/parallel.py), each borrowing a slot of
    `check_concurrency` that no check holds; 0 (the default): every check runs alone."""
    check_queue: int = field(default_factory=lambda: _int("MBI_CHECK_QUEUE", 2))
    """Checks that may wait for a worker; past that, 503 with Retry-After."""
    build_workers: int = field(default_factory=lambda: _int("MBI_BUILD_WORKERS", 1))
    """Worker processes that build runs (sessions and traces), per server process."""
    build_queue: int = field(default_factory=lambda: _int("MBI_BUILD_QUEUE", 256))
    """Builds that may wait: a class opening sessions on another worker rebuilds them all."""
    window_workers: int = field(default_factory=lambda: _int("MBI_WINDOW_WORKERS", 1))
    """Worker processes that build trace windows (app.api.windows), per server process."""
    window_queue: int = field(default_factory=lambda: _int("MBI_WINDOW_QUEUE", 512))
    """Windows that may wait for a window worker (a class of 200 asks for one each at once)."""
    window_cache_mb: int = field(default_factory=lambda: _int("MBI_WINDOW_CACHE_MB", 128))
    """Megabytes of built windows (their JSON, gzip and zstd bytes) the host keeps, shared by
    its server processes like the run cache."""
    check_max_memory_mb: int = field(
        default_factory=lambda: _int("MBI_CHECK_MAX_MEMORY_MB", 1024))
    """Megabytes one check may keep in stored states."""
    run_cache_mb: int = field(default_factory=lambda: _int("MBI_RUN_CACHE_MB", 1024))
    """Megabytes of built runs the host keeps, shared by its server processes (`workers`)."""
    workers: int = field(default_factory=lambda: _int("MBI_WORKERS", 1))
    """Server processes on this host (`serve --workers` sets it for its processes)."""
    build_timeout_s: float = field(default_factory=lambda: _float("MBI_BUILD_TIMEOUT_S", 30))
    """Seconds one build (a run, a parsed pipeline, an exported page) may take, from the moment
    it is asked for; past that its worker stops it and the answer is 503."""
    worker_max_memory_mb: int = field(
        default_factory=lambda: _int("MBI_WORKER_MAX_MEMORY_MB", 2048))
    """Resident megabytes a build worker may reach in one job before it is stopped (503)."""
    pool_start_method: str = field(
        default_factory=lambda: os.environ.get("MBI_POOL_START", "spawn"))
    """How worker processes start: `spawn` (safe beside threads) or `fork` / `forkserver`."""
    max_body_bytes: int = field(default_factory=lambda: _int("MBI_MAX_BODY_BYTES", 1 << 20))
    """Largest request body read (413 past it): 1 MiB."""
    ws_messages_per_s: int = field(default_factory=lambda: _int("MBI_WS_MESSAGES_PER_S", 50))
    """Commands a WebSocket may send per second (a burst of as many is allowed)."""
    ws_send_buffer: int = field(default_factory=lambda: _int("MBI_WS_SEND_BUFFER", 256 << 10))
    """Bytes queued for a WebSocket client that does not read before it is dropped."""
    # ------------------------------------------------ each client's share (app.core.clients)
    rate_per_address: float = field(default_factory=lambda: _float("MBI_RATE_PER_ADDRESS", 300))
    """API requests a second from one address (a class behind one NAT is one address)."""
    rate_burst_address: float = field(
        default_factory=lambda: _float("MBI_RATE_BURST_ADDRESS", 600))
    rate_per_session: float = field(default_factory=lambda: _float("MBI_RATE_PER_SESSION", 100))
    """Requests a second for one session (one student: every id its steps give)."""
    rate_burst_session: float = field(
        default_factory=lambda: _float("MBI_RATE_BURST_SESSION", 500))
    build_share_session: float = field(
        default_factory=lambda: _float("MBI_BUILD_SHARE_SESSION", 0.2))
    """Seconds of build worker time a session earns a second (a fifth of a worker)."""
    build_burst_session_s: float = field(
        default_factory=lambda: _float("MBI_BUILD_BURST_SESSION_S", 10))
    build_share_address: float = field(
        default_factory=lambda: _float("MBI_BUILD_SHARE_ADDRESS", 0.5))
    """Seconds of build worker time an address earns a second."""
    build_burst_address_s: float = field(
        default_factory=lambda: _float("MBI_BUILD_BURST_ADDRESS_S", 120))
    window_share_session: float = field(
        default_factory=lambda: _float("MBI_WINDOW_SHARE_SESSION", 0.1))
    """Seconds of window worker time a session earns a second (playing at 30 steps/s takes
    about 0.003)."""
    window_burst_session_s: float = field(
        default_factory=lambda: _float("MBI_WINDOW_BURST_SESSION_S", 5))
    window_share_address: float = field(
        default_factory=lambda: _float("MBI_WINDOW_SHARE_ADDRESS", 0.5))
    """Seconds of window worker time an address (a client without a session) earns a second."""
    window_burst_address_s: float = field(
        default_factory=lambda: _float("MBI_WINDOW_BURST_ADDRESS_S", 30))
    checks_per_address: int = field(default_factory=lambda: _int("MBI_CHECKS_PER_ADDRESS", 3))
    """Checks one address may have running or queued (of `check_concurrency + check_queue`,
    4 by default): one client always leaves a slot to the others, a class behind one NAT
    loses one."""
    streams_per_session: int = field(
        default_factory=lambda: _int("MBI_STREAMS_PER_SESSION", 16))
    """Open WebSockets and SSE streams of one session."""
    streams_per_address: int = field(
        default_factory=lambda: _int("MBI_STREAMS_PER_ADDRESS", 500))
    """Open streams from one address (of `max_sessions`)."""
    # ------------------------------------------------------ the wire (app.core.wire)
    max_url_bytes: int = field(default_factory=lambda: _int("MBI_MAX_URL_BYTES", 64 << 10))
    """Longest request target (414 past it): a session id is at most 16,000 characters."""
    max_header_bytes: int = field(default_factory=lambda: _int("MBI_MAX_HEADER_BYTES", 32 << 10))
    """Most bytes of header fields one request may send (431 past it)."""
    header_timeout_s: float = field(default_factory=lambda: _float("MBI_HEADER_TIMEOUT_S", 10))
    """Seconds a request's headers may take to arrive, from its first byte (408 past it)."""
    body_timeout_s: float = field(default_factory=lambda: _float("MBI_BODY_TIMEOUT_S", 20))
    """Seconds a request's body may take to arrive after its headers (408 past it)."""
    keep_alive_s: int = field(default_factory=lambda: _int("MBI_KEEP_ALIVE_S", 5))
    """Seconds an idle keep-alive connection stays open."""
    limit_concurrency: int = field(default_factory=lambda: _int("MBI_LIMIT_CONCURRENCY", 2000))
    """Connections (HTTP and WebSocket) per process before new requests get 503."""
    ws_max_bytes: int = field(default_factory=lambda: _int("MBI_WS_MAX_BYTES", 4096))
    """Largest WebSocket message a client may send (commands are at most 4 KiB; close 1009)."""
    ws_ping_s: float = field(default_factory=lambda: _float("MBI_WS_PING_S", 20))
    """Seconds between pings, and to wait for the pong, before a silent socket is closed."""
    graceful_shutdown_s: int = field(default_factory=lambda: _int("MBI_GRACEFUL_SHUTDOWN_S", 10))
    """Seconds open connections get at shutdown before they are closed."""


settings = Settings()
