"""Giving a finished search's memory back to the operating system (a worker process, after each
check); engine.py re-exports `release_memory`."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc


def release_memory() -> None:
    """Give a finished search's memory back to the operating system.

    Call it once the Exploration and the answer built from it are dropped (a worker process,
    after each check). Stored states are many small objects; CPython frees them into its own
    arenas and glibc keeps freed heap pages, so without `malloc_trim` the process's RSS stays at
    its peak after the check ends. What `Explorer.explore` froze out of the collector's sight
    comes back into it first."""
    gc.unfreeze()
    gc.collect()
    _malloc_trim()


def _malloc_trim() -> None:
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        pass
