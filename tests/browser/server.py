"""A real uvicorn on a free loopback port, for tests and benchmarks: started in a subprocess,
ready when it answers, stopped (and waited for) when the block ends, whatever happens."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
HTTP = httpx.Client(timeout=120)
"""The tests' own requests: generous timeouts, for a machine busy with other work."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def uvicorn_server(app: str = "app.main:app", *, workers: int = 1, factory: bool = False,
                   app_dir: str | None = None, env: dict | None = None, timeout_s: float = 120.0,
                   log_path: Path | None = None):
    """Yield the base URL of `uvicorn app` serving on 127.0.0.1; stop it afterwards."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
               "--workers", str(workers), "--log-level", "warning", "--no-access-log"]
    if factory:
        command.append("--factory")
    if app_dir:
        command += ["--app-dir", app_dir]
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})},
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {process.returncode}")
            try:
                if httpx.get(f"{base}/api/v1/scenarios", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start in time")
            time.sleep(0.1)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        if log_path:
            log.close()
