"""The wheel runs anywhere (issue 13): built as `make dist` builds it (the sdist, then the wheel
from the sdist) from a copy of the sources, installed into a fresh virtual environment in a
temporary folder, and served by `mbarrier-inspector serve` started from another folder; the
pages, the static assets, a trace and a replay answer over HTTP.

Marked `wheel`: it takes 10-60 s (two isolated builds, then the dependencies from pip's cache or
the package index) and runs in `make test`; `-m "not wheel"` leaves it out of a quick run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "app", "static", "templates", "traces",
           "docs")
"""What a build reads: a copy keeps the checkout free of build/ and .egg-info/ folders."""
ENGINE_DATA = (".json", ".pipe", ".lark", ".md", ".txt")


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("build")
    for name in SOURCES:
        source, target = ROOT / name, tmp / "src" / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    run([sys.executable, "-m", "build", "--outdir", tmp / "dist", tmp / "src"], timeout=300)
    wheels = list((tmp / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_carries_the_ui_templates_scenarios_and_traces(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"app/{p.relative_to(ROOT).as_posix()}"
              for folder in ("static", "templates") for p in (ROOT / folder).rglob("*")
              if p.is_file()}
    wanted |= {f"app/traces/{p.name}" for p in (ROOT / "traces").glob("*.json")}
    wanted |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "app").rglob("*")
               if p.is_file() and p.suffix in ENGINE_DATA}
    assert wanted - names == set()
    assert "app/sim/trace_schema.json" in names and "app/templates/inspector.html" in names
    assert not [n for n in names if n.split("/")[0] in ("static", "templates", "traces", "tests")]
    assert not [n for n in names if "/raw/" in n and not n.endswith(".cu")]
    assert "app/traces/raw/gen_single_barrier.cu" in names  # the kernel a replay page links


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel and its dependencies, nothing else."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
         "--quiet", "--disable-pip-version-check", wheel], timeout=600)
    return venv


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> tuple[Path, dict]:
    """A folder with no sources in it, and an environment that points nowhere near them."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    return tmp_path_factory.mktemp("elsewhere"), env


def test_the_installed_package_reads_its_own_files(venv, elsewhere):
    folder, env = elsewhere
    probe = ("import app, app.resources as r; "
             "print(app.__file__); print(r.static_dir()); print(r.editable_checkout())")
    out = run([venv / "bin" / "python", "-c", probe], cwd=folder, env=env).stdout.split("\n")
    site = str(venv.resolve())
    assert out[0].startswith(site) and out[1].startswith(site), out
    assert out[2] == "None"


@pytest.fixture(scope="module")
def server(venv, elsewhere, tmp_path_factory):
    folder, env = elsewhere
    port = free_port()
    log_path = tmp_path_factory.mktemp("log") / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [venv / "bin" / "mbarrier-inspector", "serve", "--host", "127.0.0.1",
             "--port", str(port)], cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"serve exited: {log_path.read_text()[-3000:]}"
            try:
                httpx.get(base + "/api/v1/scenarios", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.2)
        with httpx.Client(base_url=base, timeout=30) as client:
            yield client
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


@pytest.mark.parametrize("path", ["/", "/scenarios/single_barrier", "/embed/single_barrier",
                                  "/reference/language", "/reference/semantics",
                                  "/compare/double_buffer_tma", "/replays/single_barrier"])
def test_pages(server, path):
    response = server.get(path)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"].startswith("text/html")


def test_every_asset_the_inspector_page_links_is_served_as_shipped(server):
    page = server.get("/scenarios/single_barrier").text
    assets = sorted(set(re.findall(r'(?:src|href)="(/static/[^"?#]+)', page)))
    assert assets, "the page links no /static/ asset"
    for asset in assets:
        response = server.get(asset)
        assert response.status_code == 200, asset
        assert response.content == (ROOT / asset.lstrip("/")).read_bytes(), asset


def test_a_trace(server):
    doc = server.get("/api/v1/traces/single_barrier",
                     params={"bugs": "forget_phase_toggle", "snapshots": "false"}).json()
    assert doc["format"] == "mbarrier-inspector/trace"
    assert doc["scenario"]["bugs"] == ["forget_phase_toggle"]
    assert server.get("/api/v1/schema/trace.json").json()["type"] == "object"


def test_a_replay(server):
    ids = {r["id"] for r in server.get("/api/v1/replays").json()["replays"]}
    assert "single_barrier" in ids
    doc = server.get("/api/v1/replays/single_barrier").json()
    assert doc["source"]["kind"] == "gpu" and doc["steps"]
    kernel = server.get("/api/v1/replays/single_barrier/kernel")
    assert kernel.status_code == 200 and "pipeline_kernel(" in kernel.text
    chrome = server.get("/api/v1/replays/single_barrier/perfetto").json()
    assert len([e for e in chrome["traceEvents"] if e.get("cat") == "step"]) == len(doc["steps"])
