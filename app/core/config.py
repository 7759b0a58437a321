"""One settings object for the server, read from environment variables (`MBI_*`) at start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


@dataclass(frozen=True)
class Settings:
    frame_ancestors: str = field(
        default_factory=lambda: os.environ.get("MBI_FRAME_ANCESTORS", "*"))
    """CSP `frame-ancestors` for pages: who may embed the inspector in an iframe."""
    run_cache_size: int = field(default_factory=lambda: _int("MBI_RUN_CACHE", 8))
    """Runs kept per process: a million-step run holds 10-35 MB (choices and checkpoints)."""
    max_window: int = field(default_factory=lambda: _int("MBI_MAX_WINDOW", 2000))
    """Most steps one trace response holds with snapshots (ten times that without)."""
    max_sessions: int = field(default_factory=lambda: _int("MBI_MAX_SESSIONS", 2000))
    session_idle_s: int = field(default_factory=lambda: _int("MBI_SESSION_IDLE_S", 1800))


settings = Settings()
