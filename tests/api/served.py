"""`mbarrier-inspector serve` itself (the CLI, with its wire limits) on a free loopback port, in a
subprocess: ready when its health check answers, stopped and waited for afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.browser.server import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def served(env: dict | None = None, workers: int = 1, timeout_s: float = 40.0,
           log_path: Path | None = None):
    """Yield `(base_url, port, process)` of a running server."""
    port = free_port()
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers",
         str(workers)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/api/v1/health", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in time")
            time.sleep(0.2)
        yield base, port, process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        if log_path:
            log.close()
