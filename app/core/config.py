"""One settings object for the server, read from environment variables (`MBI_*`) at start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


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
    other page is `'none'`). Its origins may also open the embed page's WebSocket."""
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
    check_queue: int = field(default_factory=lambda: _int("MBI_CHECK_QUEUE", 2))
    """Checks that may wait for a worker; past that, 503 with Retry-After."""
    build_workers: int = field(default_factory=lambda: _int("MBI_BUILD_WORKERS", 1))
    """Worker processes that build runs (sessions and traces), per server process."""
    build_queue: int = field(default_factory=lambda: _int("MBI_BUILD_QUEUE", 256))
    """Builds that may wait: a class opening sessions on another worker rebuilds them all."""
    check_max_memory_mb: int = field(
        default_factory=lambda: _int("MBI_CHECK_MAX_MEMORY_MB", 1024))
    """Megabytes one check may keep in stored states."""
    pool_start_method: str = field(
        default_factory=lambda: os.environ.get("MBI_POOL_START", "spawn"))
    """How worker processes start: `spawn` (safe beside threads) or `fork` / `forkserver`."""
    max_body_bytes: int = field(default_factory=lambda: _int("MBI_MAX_BODY_BYTES", 1 << 20))
    """Largest request body read (413 past it): 1 MiB."""
    ws_messages_per_s: int = field(default_factory=lambda: _int("MBI_WS_MESSAGES_PER_S", 50))
    """Commands a WebSocket may send per second (a burst of as many is allowed)."""
    ws_send_buffer: int = field(default_factory=lambda: _int("MBI_WS_SEND_BUFFER", 256 << 10))
    """Bytes queued for a WebSocket client that does not read before it is dropped."""


settings = Settings()
