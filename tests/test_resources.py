"""The UI, templates and traces are found through `app.resources` only, never from `__file__`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import resources

APP = Path(resources.__file__).parent
WALKS_UP = re.compile(r"__file__\)(\.resolve\(\))?\.(parents\[|parent\.parent)")
"""`Path(__file__).parents[2]` or `.parent.parent`; a module's own folder (`.parent`) is fine."""
LEAD_TODO: set[str] = set()


def test_each_folder_holds_what_the_server_serves():
    assert (resources.static_dir() / "js").is_dir()
    assert (resources.templates_dir() / "inspector.html").is_file()
    assert (resources.traces_dir() / "single_barrier.json").is_file()


def test_an_unknown_folder_is_refused():
    with pytest.raises(ValueError, match="static, templates, traces"):
        resources.folder("app")


def test_the_editable_install_names_this_checkout():
    """`make install-test` installs editable; its metadata points at the checkout we run in."""
    checkout = resources.editable_checkout()
    if checkout is None:
        pytest.skip("not an editable install")
    assert (checkout / "app" / "resources.py").samefile(APP / "resources.py")


def test_no_module_walks_up_from_its_file():
    offenders = sorted(
        str(path.relative_to(APP)) for path in APP.rglob("*.py")
        if WALKS_UP.search(path.read_text()))
    assert set(offenders) <= LEAD_TODO, offenders


PROBE = ("import app.resources as r\n"
         "try:\n    print(r.static_dir())\n"
         "except r.MissingResources as exc:\n    print('missing:', exc)\n")


def probe(cwd: Path) -> str:
    """`python -S` (no site-packages, so no install) with the checkout on PYTHONPATH."""
    checkout = APP.parent
    result = subprocess.run([sys.executable, "-S", "-c", PROBE], cwd=cwd, capture_output=True,
                            text=True, env={"PYTHONPATH": str(checkout)}, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_an_uninstalled_checkout_serves_from_its_root(tmp_path):
    assert probe(APP.parent) == str(APP.parent / "static")
    assert probe(tmp_path).startswith("missing: no static/ folder")
