"""docs/notebook.ipynb runs (nbclient, a real kernel, no network) and its outputs hold the
inspector for the single_barrier lesson; `show` works as the notebook uses it."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from app.notebook import show

ROOT = Path(__file__).resolve().parents[1]


def test_show_returns_the_offline_page_in_an_iframe_and_the_trace():
    view = show("single_barrier", bugs=["forget_phase_toggle"], step=13, callouts="lesson")
    assert view.trace["format"] == "mbarrier-inspector/trace"
    assert [d["kind"] for d in view.diagnostics][:2] == ["stale_wait", "partial_read"]
    assert {c["step"] for c in view.callouts} == {10, 13, 15, 17}
    frame = view._repr_html_()
    assert frame.startswith("<iframe ") and "srcdoc=" in frame
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert page.lstrip().startswith("<!doctype html>") and "connect-src 'none'" in page
    assert '"page":"export"' in page and '"step":13' in page
    assert "mbarrier-inspector:height" in frame  # the cell's frame follows the page's height


def test_show_takes_a_pipeline_text_and_refuses_unknown_ids():
    from app.scenarios import get

    view = show(get("proxy_fence_store").source, params={"tiles": 2})
    assert view.trace["scenario"]["id"] is None and view.status == "done"
    with pytest.raises(ValueError, match="no built-in scenario"):
        show("nope")


def test_the_notebook_executes_and_shows_the_lesson():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    frames = [o["data"]["text/html"] for o in outputs
              if o.output_type == "execute_result" and "text/html" in o.get("data", {})]
    # The lesson, the buggy run, and the student's own pipeline: shown, not only printed.
    assert len(frames) == 3 and all("<iframe" in f and "srcdoc=" in f for f in frames)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "parities waited for: [0, 1, 0]" in text
    assert "stale_wait    thread's wait on bar with parity 0 returned at once" in text
    assert "deadlock after 8 steps; diagnostics: tx_mismatch@3, deadlock@8" in text
