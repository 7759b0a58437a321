"""The lesson text shipped with each GPU trace: what it shows, in figures read off the trace.

Each text is written from the decoded trace (its status, diagnostics and `source.figures`), so a
regenerated trace explains itself with its own numbers; `make_all` stores it as `source.lesson`.
"""

from __future__ import annotations


def lesson(name: str, doc: dict) -> str:
    """A short paragraph for the trace `name` (a key of make_all.CAPTURES)."""
    figures = doc["source"].get("figures", {})
    return (f"{name}: {doc['status']} after {doc['total_steps']} steps; "
            f"figures: {figures}.")
