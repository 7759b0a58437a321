"""Trace windows (docs/trace-format.md, "Windows"): steps `from..to` of a run as a trace document,
built, encoded and compressed in the window pool's worker process (`app.api.work.windows`),
never on the event loop nor under its GIL, and kept by this process by content.

A window is a pure function of its run's key, its bounds and its form, so each one is built once
per process and every client of that run shares it (a class on one lesson: one build); its ETag
is a digest of its bytes, and a client that holds it gets 304. Two forms:

- `snapshots=true` (the contract every API client has): each step carries its `snapshot`;
- `patches=true` (what the browser's player asks for): a window is a cursor over one full
  snapshot, `base` (the state after step `from - 1`), and each step carries `patch`, what
  changed since the step before (`app.sim.snapshot.patch`), a third of the bytes;
- `snapshots=false`: the step records alone.

A window is encoded once in the worker, and compressed there in the coding its first client
prefers (zstd, else gzip); another coding only when a client that needs it asks (most of a
class's browsers accept the same one). The event loop only picks the bytes a client accepts.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import pickle
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from fastapi import Request, Response

from app.api.encode import WORKER
from app.api.runstore import Entry, store
from app.api.work import windows as windows_pool
from app.core.clients import window_admit, window_charge
from app.core.config import settings
from app.core.flight import shared
from app.scenarios import ParamError
from app.sim.trace import Run

try:  # Python 3.14's standard library, else the package starlette-compress brings
    from compression import zstd as _zstd  # type: ignore[import-not-found]

    def _zstd_compress(data: bytes) -> bytes:
        return _zstd.compress(data, 3)
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        import zstandard

        _compressor = zstandard.ZstdCompressor(level=3)

        def _zstd_compress(data: bytes) -> bytes:
            return _compressor.compress(data)
    except ImportError:
        _zstd_compress = None

Form = Literal["snapshots", "patches", "records"]
GZIP_LEVEL = 5
"""A window compresses about 20:1 at any level: the fast levels cost a millisecond."""


# ------------------------------------------------------------------- what a window holds

def mover_name(record: dict) -> str:
    """The name that moves the same mover again: an agent, `tensor_core` or `tma:<op>`."""
    if record["agent"] == "tma":
        return f"tma:{record['operands']['op']}"
    return record["agent"]


def named_picks(run: Run, picks: tuple[tuple[int, int], ...]) -> list[dict]:
    """A run's picks as `{"step", "agent"}` with mover names, as a permalink spells them."""
    if not picks:
        return []
    records = {r["step"]: r for r in run.steps(picks[0][0], picks[-1][0], snapshots=False)}
    return [{"step": step, "agent": mover_name(records[step])} for step, _ in picks]


def window_diagnostics(diagnostics: list[dict], first: int, last: int) -> list[dict]:
    """Those of steps `first..last` (the list is in step order), and the run's first one."""
    lo = bisect_left(diagnostics, first, key=lambda d: d["step"])
    hi = bisect_right(diagnostics, last, key=lambda d: d["step"])
    inside = diagnostics[lo:hi]
    if diagnostics and lo > 0:
        inside = [diagnostics[0], *inside]
    return inside


def window_doc(run: Run, first: int, last: int, form: Form, picks: tuple = ()) -> dict:
    """The trace document of steps `first..last` of `run` in `form`; a session's picks named
    in `scenario.schedule.picks`; a window that is not the whole run holds its own diagnostics
    and the run's first one, and `diagnostics_total`."""
    first = max(1, first)
    if form == "patches":
        doc = run.document(first, first - 1, snapshots=False)  # the header, no steps
        doc["base"], doc["steps"] = run.patched_steps(first, last)  # past the end: empty
        doc["window"] = {"from": first, "to": max(first - 1, min(last, run.total_steps))}
    else:
        doc = run.document(first, last, snapshots=form == "snapshots")
    if picks:
        doc["scenario"]["schedule"]["picks"] = named_picks(run, picks)
    if not (first == 1 and last >= run.total_steps):
        doc["diagnostics"] = window_diagnostics(run.diagnostics, first, last)
        doc["diagnostics_total"] = len(run.diagnostics)
    return doc


# ------------------------------------------------------------------------ in the worker

RUNS_KEPT = 64
RUN_BYTES_KEPT = 128 << 20
"""The worker keeps the runs it was sent (by serial, as pickled bytes count them), so that a
run's next window costs no unpickling."""
_runs: OrderedDict[int, tuple[Run, int]] = OrderedDict()


def _run_of(serial: int, blob: bytes) -> Run:
    kept = _runs.get(serial)
    if kept is not None:
        _runs.move_to_end(serial)
        return kept[0]
    run = pickle.loads(blob)
    _runs[serial] = (run, len(blob))
    while len(_runs) > RUNS_KEPT or (len(_runs) > 1 and sum(
            size for _, size in _runs.values()) > RUN_BYTES_KEPT):
        _runs.popitem(last=False)
    return run


def build_window(serial: int, blob: bytes, first: int, last: int, form: Form,
                 picks: tuple = (), coding: str | None = None
                 ) -> tuple[bytes, str, dict[str, bytes], float]:
    """In a window worker: (the window's JSON, its ETag, {`coding`: the JSON so compressed},
    the CPU seconds it took)."""
    started = time.process_time()
    # A window shares parts between its steps, but no part holds itself: no cycle to look for.
    body = json.dumps(window_doc(_run_of(serial, blob), first, last, form, picks),
                      separators=(",", ":"), check_circular=False).encode()
    etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    coded = {coding: compress(body, coding)} if coding is not None else {}
    return body, etag, coded, time.process_time() - started


def compress(body: bytes, coding: str) -> bytes:
    return _zstd_compress(body) if coding == "zstd" else gzip.compress(body, GZIP_LEVEL, mtime=0)


def timed_compress(body: bytes, coding: str) -> tuple[bytes, float]:
    """In a window worker: `body` compressed in `coding`, and the CPU seconds it took."""
    started = time.process_time()
    return compress(body, coding), time.process_time() - started


# ------------------------------------------------------------------------ in the server

CODINGS = ("zstd", "gzip") if _zstd_compress is not None else ("gzip",)
"""The Content-Encodings a window is sent in, the preferred first."""


def preferred_coding(accept_encoding: str) -> str | None:
    """The coding a client that sends `accept_encoding` gets (None: the JSON as it is)."""
    accepted = accepted_encodings(accept_encoding)
    return next((coding for coding in CODINGS if coding in accepted), None)


@dataclass(slots=True)
class Window:
    body: bytes
    etag: str
    coded: dict[str, bytes]
    """The body compressed, by Content-Encoding: those that clients asked for so far."""

    @property
    def size(self) -> int:
        return len(self.body) + sum(map(len, self.coded.values()))

    def encoded(self, accept_encoding: str) -> tuple[bytes, str | None]:
        """The bytes for a client that sends `accept_encoding`, and their Content-Encoding."""
        coding = preferred_coding(accept_encoding)
        if coding in self.coded:
            return self.coded[coding], coding
        return self.body, None


def accepted_encodings(header: str) -> set[str]:
    """The codings an Accept-Encoding header accepts (`q=0` refuses one)."""
    out = set()
    for part in header.lower().split(",")[:32]:
        name, _, params = part.strip().partition(";")
        q = params.strip()
        if q.startswith("q="):
            try:
                if float(q[2:]) <= 0:
                    continue
            except ValueError:
                continue
        if name:
            out.add(name.strip())
    return out


class WindowCache:
    """Windows this process built, by (run key, bounds, form): least recently used first,
    bounded in bytes (`settings.window_cache_mb`, shared by the server's processes)."""

    def __init__(self) -> None:
        self.windows: OrderedDict[tuple, Window] = OrderedDict()
        self.bytes = 0

    def get(self, key: tuple) -> Window | None:
        window = self.windows.get(key)
        if window is not None:
            self.windows.move_to_end(key)
        return window

    def put(self, key: tuple, window: Window, budget: int) -> None:
        if key in self.windows:
            return
        self.windows[key] = window
        self.bytes += window.size
        while len(self.windows) > 1 and self.bytes > budget:
            _, old = self.windows.popitem(last=False)
            self.bytes -= old.size

    def add_coding(self, key: tuple, window: Window, coding: str, data: bytes) -> None:
        """`window` (kept under `key`, or no longer) compressed in one more coding."""
        if coding not in window.coded:
            window.coded[coding] = data
            if self.windows.get(key) is window:
                self.bytes += len(data)


cache = WindowCache()


def run_blob(entry: Entry) -> bytes:
    """The entry's run as the window worker receives it (pickled once per entry)."""
    if entry.blob is None:
        entry.blob = pickle.dumps(entry.run, protocol=pickle.HIGHEST_PROTOCOL)
        entry.bytes += len(entry.blob)  # the run cache counts it (its bound is in bytes)
        if store.entries.get(entry.key) is entry:
            store.bytes += len(entry.blob)
    return entry.blob


_building: dict[tuple, asyncio.Future] = {}


def _window_limit(form: Form) -> int:
    return settings.max_window * (10 if form == "records" else 1)


def window_form(snapshots: bool, patches: bool) -> Form:
    if patches and not snapshots:
        raise ParamError("patches", "patches stand in for snapshots: ask for snapshots (the "
                                    "default) with patches=true, or neither")
    return "patches" if patches else "snapshots" if snapshots else "records"


async def window_response(request: Request, entry: Entry, first: int, last: int | None,
                          form: Form, cache_control: str, clients: tuple[str, ...]) -> Response:
    """Answer steps `first..last` of `entry`'s run in `form` (`window_of`); 304 for a client
    that holds it (its ETag)."""
    window = await window_of(entry, first, last, form, clients,
                             request.headers.get("accept-encoding", ""))
    return window_answer(request, window, cache_control)


async def window_of(entry: Entry, first: int, last: int | None, form: Form,
                    clients: tuple[str, ...], accept_encoding: str = "") -> Window:
    """Steps `first..last` of `entry`'s run (to as many as a window holds when `last` is
    None) in `form`, compressed as a client that sends `accept_encoding` prefers: from this
    process's windows, else built in the window pool (its CPU time charged to `clients`,
    app.core.clients)."""
    window_steps = _window_limit(form)
    first = max(first, 1)
    if last is None:
        last = min(entry.run.total_steps, first + window_steps - 1)
    if last < first - 1:
        raise ParamError("to", f"to ({last}) is before from ({first})")
    if last - first + 1 > window_steps:
        raise ParamError("to", f"a window holds at most {window_steps} steps "
                               f"({'without' if form == 'records' else 'with'} snapshots); "
                               f"asked for {last - first + 1}")
    last = min(last, max(first - 1, entry.run.total_steps))  # one window, however it is asked
    key = (entry.key, first, last, form)
    coding = preferred_coding(accept_encoding)
    window = cache.get(key)
    if window is None:
        window = await _build(key, entry, clients, coding)
    if coding is not None and coding not in window.coded:
        await _compress(key, window, coding, clients)
    return window


def window_answer(request: Request, window: Window, cache_control: str | None) -> Response:
    """The window in the coding the client accepts (zstd, gzip or none), with `cache_control`
    and its ETag; 304 when the client sends that ETag in If-None-Match."""
    headers = {"etag": window.etag, "vary": "Accept-Encoding", "x-worker": WORKER}
    if cache_control:
        headers["cache-control"] = cache_control
    if window.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    body, coding = window.encoded(request.headers.get("accept-encoding", ""))
    if coding is not None:
        headers["content-encoding"] = coding
    return Response(body, media_type="application/json", headers=headers)


async def _build(key: tuple, entry: Entry, clients: tuple[str, ...],
                 coding: str | None) -> Window:
    """The window of `key`, built once however many clients ask for it at once, compressed
    in `coding` (its first client's)."""
    async def build() -> Window:
        window_admit(clients)
        _, first, last, form = key
        *parts, cpu = await windows_pool.run(build_window, entry.serial, run_blob(entry),
                                             first, last, form, entry.key.picks, coding)
        window = Window(*parts)
        window_charge(clients, cpu)
        cache.put(key, window, (settings.window_cache_mb << 20) // max(1, settings.workers))
        return window

    return await shared(_building, key, build)


async def _compress(key: tuple, window: Window, coding: str, clients: tuple[str, ...]) -> None:
    """`window` compressed in `coding` too, in the window pool, once however many ask."""
    async def squeeze() -> None:
        window_admit(clients)
        data, cpu = await windows_pool.run(timed_compress, window.body, coding)
        window_charge(clients, cpu)
        cache.add_coding(key, window, coding, data)

    await shared(_building, (key, coding), squeeze)
