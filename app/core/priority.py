"""Worker processes below the server: a check takes the CPU that the event loop, the run builds
and the trace windows leave."""

from __future__ import annotations

import contextlib
import os


def lower_priority(nice: int, background: bool = False) -> None:
    """This process `nice` below the server. Where Linux shares the CPU out by session first
    (autogroup: a server started from a terminal), nice weighs a process only against those of
    its own session, so a search at nice 10 spends the server session's share as the event
    loop would: a `background` worker leaves for a session of its own, niced as much (a killpg
    of the server then misses it; its watchdog ends it with the server)."""
    if nice:
        with contextlib.suppress(OSError, AttributeError):
            os.nice(nice)
    if not background:
        return
    with contextlib.suppress(OSError, AttributeError):
        os.setsid()
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
