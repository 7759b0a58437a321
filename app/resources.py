"""Where the browser UI, the templates and the shipped GPU traces are, installed or not.

The wheel carries the top-level `static/`, `templates/` and `traces/` folders inside the package
(`app/static`, ... mapped there at build time by setup.py; of `docs/`, the two references the
app serves), found with `importlib.resources`. An
editable install (`pip install -e .`, what `make run` and `make test` use) leaves them at the top of
the checkout: setuptools cannot map a folder without `__init__.py` into a package in editable mode
(pypa/setuptools#4943), so the checkout is read from the install's own metadata (PEP 610
`direct_url.json`), not guessed from `__file__`. Run from a checkout with no install at all
(`PYTHONPATH=. python -m ...` from its root, as on a GPU machine), the current folder serves when
it is the checkout this very module was imported from. Every module that needs these folders
asks here.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "mbarrier-inspector"
FOLDERS = ("static", "templates", "traces", "docs")


class MissingResources(RuntimeError):
    """The package was neither installed from a wheel nor editable from a checkout."""


def editable_checkout() -> Path | None:
    """The project folder of an editable install (`pip install -e`), or None.

    Every distribution of that name on the path is asked: a build leaves an `.egg-info` in the
    checkout, which shadows the installed metadata when the checkout is the current directory.
    """
    for dist in metadata.distributions(name=DISTRIBUTION):
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        info = json.loads(text)
        url = urlparse(info.get("url", ""))
        if url.scheme == "file" and info.get("dir_info", {}).get("editable"):
            return Path(unquote(url.path))
    return None


def checkout_here() -> Path | None:
    """The current folder, if it is the checkout this module was imported from."""
    here = Path.cwd()
    mine = here / "app" / "resources.py"
    return here if mine.is_file() and mine.samefile(__file__) else None


@cache
def folder(name: str) -> Path:
    """The folder `name` (static, templates or traces) as a real path on disk.

    Starlette's StaticFiles and Jinja2 need a directory, so a zipped install is not supported:
    wheels are installed unpacked, which is what pip, pipx and uv do.
    """
    if name not in FOLDERS:
        raise ValueError(f"{name!r} is not one of {', '.join(FOLDERS)}")
    packaged = resources.files("app") / name
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    # The checkout this module was imported from wins over the install's record of another one
    # (a second worktree run with PYTHONPATH serves its own files, not the install's).
    for checkout in (checkout_here(), editable_checkout()):
        if checkout is not None and (checkout / name).is_dir():
            return checkout / name
    raise MissingResources(
        f"no {name}/ folder: install mbarrier-inspector from its wheel (`make dist`), or "
        f"editable from a checkout (`pip install -e .`), or run from the checkout's root")


def static_dir() -> Path:
    return folder("static")


def templates_dir() -> Path:
    return folder("templates")


def traces_dir() -> Path:
    return folder("traces")
