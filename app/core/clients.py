"""Who a request comes from, and each one's share of the server.

A client is its session where it has one (the lineage stamp `c` that a session id keeps from
`POST /sessions` through every step: one student), else its address. A class behind one NAT is
one address, so per-address shares are sized for 200 students and per-session shares are what
keep one student from taking the others' turn:

- requests: a token bucket per client (`/api/` only; pages and static assets are not counted):
  a request whose path names a valid session id pays its session's bucket, any other its
  address's (loopback has no per-address share at all, `LOCAL`), 429 with Retry-After past
  them (`charge_request`, called by app.core.security's middleware);
- builds: worker time, a bucket of seconds per session and per address: a client whose builds
  took more than its share waits (429) before its next one starts;
- trace windows: the window worker's time likewise, a bucket per session (else per address);
- checks: running or queued checks per address;
- streams: open WebSockets and SSE streams per session and per address.

All of it is per process and in memory (no shared store): each bound is a process's share.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from app.core.config import settings

KEPT = 20_000
"""Clients remembered per bucket table (the least recently seen are forgotten first)."""


class TooMany(Exception):
    """A client past its share: 429 with `retry_after` seconds."""

    def __init__(self, what: str, retry_after: float):
        super().__init__(what)
        self.what = what
        self.retry_after = max(1, math.ceil(retry_after))


LOCAL = frozenset({"a:127.0.0.1", "a:::1", "a:testclient"})
"""Loopback addresses: a local user (or a test client), not a class: no per-address share
applies to them (their sessions' shares do). Behind a proxy on this host, uvicorn's proxy
headers put the client's own address in its place."""


def address(scope) -> str:
    client = scope.get("client") or ("unknown", 0)
    return f"a:{client[0]}"


def session_client(token) -> str | None:
    return f"s:{token.client}" if getattr(token, "client", "") else None


SessionOf = Callable[[str], "str | None"]
_session_of: SessionOf | None = None
"""Reads the session client (`s:...`) of a request path, or None (app.api.session provides it:
this layer knows no session ids)."""


def identify_sessions(session_of: SessionOf | None) -> None:
    """Install how a request path names its session (`session_of(path)`: `s:<client>` for a
    valid session id, else None)."""
    global _session_of
    _session_of = session_of


def request_client(scope) -> str:
    """Whom a request is charged to: its session where its path names a valid one (a forged,
    damaged or expired id is not one), else its address."""
    if _session_of is not None:
        session = _session_of(scope.get("path", ""))
        if session is not None:
            return session
    return address(scope)


def charge_request(scope) -> None:
    """One request of `request_client(scope)`: `TooMany` past that client's share."""
    key = request_client(scope)
    (requests_by_session if key.startswith("s:") else requests_by_address).take(key)


class Buckets:
    """A token bucket per client: `rate` a second, at most `burst` saved up; `take` spends
    `cost` or raises `TooMany`; `spend` takes what a finished job cost, even into debt."""

    def __init__(self, what: str, rate: float, burst: float):
        self.what = what
        self.rate = rate
        self.burst = burst
        self.table: OrderedDict[str, list[float]] = OrderedDict()

    def _level(self, key: str, now: float) -> list[float]:
        entry = self.table.get(key)
        if entry is None:
            entry = self.table[key] = [self.burst, now]
            if len(self.table) > KEPT:
                self.table.popitem(last=False)
        else:
            self.table.move_to_end(key)
            entry[0] = min(self.burst, entry[0] + (now - entry[1]) * self.rate)
            entry[1] = now
        return entry

    def take(self, key: str, cost: float = 1.0) -> None:
        if self.rate <= 0 or key in LOCAL:
            return
        entry = self._level(key, time.monotonic())
        if entry[0] < cost:
            raise TooMany(self.what, (cost - entry[0]) / self.rate)
        entry[0] -= cost

    def spend(self, key: str, cost: float) -> None:
        if self.rate > 0 and key not in LOCAL:
            self._level(key, time.monotonic())[0] -= cost


class Shares:
    """How many of a pool's jobs (or streams) each client holds now, each within its cap."""

    def __init__(self, what: str):
        self.what = what
        self.held: dict[str, int] = {}

    def take(self, key: str, cap: int, retry_after: float = 5) -> None:
        if key in LOCAL:
            cap = 1 << 30
        if self.held.get(key, 0) >= cap:
            raise TooMany(f"{self.what}: at most {cap} at once for one client", retry_after)
        self.held[key] = self.held.get(key, 0) + 1

    def give(self, key: str) -> None:
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)

    @contextlib.contextmanager
    def hold(self, key: str, cap: int, retry_after: float = 5):
        self.take(key, cap, retry_after)
        try:
            yield
        finally:
            self.give(key)


requests_by_address = Buckets("requests from one address", settings.rate_per_address,
                              settings.rate_burst_address)
requests_by_session = Buckets("requests of one session", settings.rate_per_session,
                              settings.rate_burst_session)
build_time = {
    "session": Buckets("build time of one session", settings.build_share_session,
                       settings.build_burst_session_s),
    "address": Buckets("build time of one address", settings.build_share_address,
                       settings.build_burst_address_s),
}
window_time = {
    "session": Buckets("window time of one session", settings.window_share_session,
                       settings.window_burst_session_s),
    "address": Buckets("window time of one address", settings.window_share_address,
                       settings.window_burst_address_s),
}
checks_held = Shares("checks")
streams_held = Shares("open streams")


def build_admit(clients: tuple[str, ...]) -> None:
    """Refuse a build to a client whose builds already took more than its share."""
    for key in clients:
        build_time["session" if key.startswith("s:") else "address"].take(key, 0.0)


def build_charge(clients: tuple[str, ...], seconds: float) -> None:
    for key in clients:
        build_time["session" if key.startswith("s:") else "address"].spend(key, seconds)


def window_admit(clients: tuple[str, ...]) -> None:
    """Refuse a trace window to a client whose windows already took more than its share of the
    window worker (a student playing at 30 steps/s takes about a four-hundredth of it)."""
    for key in clients:
        window_time["session" if key.startswith("s:") else "address"].take(key, 0.0)


def window_charge(clients: tuple[str, ...], seconds: float) -> None:
    for key in clients:
        window_time["session" if key.startswith("s:") else "address"].spend(key, seconds)


@contextlib.contextmanager
def stream_slot(session: str | None, where: str):
    """An open stream counted against its session's and its address's caps."""
    taken = []
    try:
        if session is not None:
            streams_held.take(session, settings.streams_per_session)
            taken.append(session)
        streams_held.take(where, settings.streams_per_address)
        taken.append(where)
    except TooMany:
        for key in taken:
            streams_held.give(key)
        raise
    try:
        yield
    finally:
        for key in taken:
            streams_held.give(key)
