"""The UI, templates and traces are found through `app.resources` only, never from `__file__`."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
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


def git_common_dir(checkout: Path) -> Path | None:
    """The repository a checkout (or a worktree of it) belongs to; None without git."""
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--git-common-dir"],
                             capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return (checkout / out.stdout.strip()).resolve()


def test_the_install_holds_what_the_server_serves():
    """`make install-test` installs editable: its metadata names a checkout that holds every
    folder the app serves, and it is the checkout we run in, or (a git worktree run with
    `PYTHONPATH`, which shadows the install) a worktree of the same repository, whose own
    folders then serve. A wheel install carries the folders in the package."""
    dists = list(metadata.distributions(name=resources.DISTRIBUTION))
    if not dists:
        pytest.skip("not installed")
    checkout = resources.editable_checkout()
    if checkout is None:  # a wheel: the folders are files of the package
        files = {str(f) for d in dists for f in (d.files or ())}
        for name in resources.FOLDERS:
            assert any(f.startswith(f"app/{name}/") for f in files), name
        return
    for name in resources.FOLDERS:
        assert (checkout / name).is_dir(), f"the editable checkout {checkout} has no {name}/"
    assert (checkout / "app" / "resources.py").is_file()
    if (checkout / "app" / "resources.py").samefile(APP / "resources.py"):
        return  # we run the installed checkout
    ours, theirs = git_common_dir(APP.parent), git_common_dir(checkout)
    if ours is None:
        pytest.skip(f"{APP.parent} shadows the install of {checkout}, and is no git checkout "
                    "(or there is no git) to tell whether both are worktrees of one repository")
    assert ours == theirs, f"the install names {checkout}, not a worktree of {APP.parent}'s " \
                           "repository"
    assert served(APP.parent) == str(APP.parent / "static")


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


def served(cwd: Path) -> str:
    """What the static folder is for a process in `cwd` with the checkout on `PYTHONPATH` and
    the install's site-packages (no `-S`)."""
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, capture_output=True,
                            text=True, env={"PYTHONPATH": str(APP.parent)}, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()
