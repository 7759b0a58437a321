"""The inspector in a Jupyter notebook (JupyterLab, VS Code, Colab), with no server running.

    from app.notebook import show
    show("single_barrier", bugs=["forget_phase_toggle"], step=13)

`show` runs the pipeline (a built-in id or a pipeline text) in this process and returns an
`Inspector` whose `_repr_html_()` is the standalone offline lesson page (the one "Download lesson"
writes) in an `<iframe srcdoc=...>`: it steps, plays and scrubs in the notebook's output, and it
keeps working when the notebook is saved and opened elsewhere. `show(...).trace` is the trace
document as a dict, for code that wants the data.
"""

from __future__ import annotations

import html
import uuid
from dataclasses import dataclass, field

from app.scenarios import Scenario, from_source
from app.scenarios import get as get_scenario
from app.sim.schedule import Schedule
from app.sim.trace import Run

MAX_STEPS = 20_000
"""The longest run a notebook cell holds (as an exported lesson does)."""
PANELS = ("agents", "barriers", "stages", "timeline", "diagnostics", "controls")


@dataclass
class Inspector:
    """One run of one pipeline, shown as the offline inspector page."""

    scenario: Scenario
    trace: dict
    step: int = 0
    callouts: list[dict] = field(default_factory=list)
    panels: tuple[str, ...] = PANELS
    height: int = 900
    """Pixels the iframe starts with; the page reports its own height and the frame follows."""

    @property
    def status(self) -> str:
        return self.trace["status"]

    @property
    def diagnostics(self) -> list[dict]:
        return self.trace["diagnostics"]

    def page(self) -> str:
        """The standalone page itself (what `save` writes)."""
        from app.web.learning import standalone_page

        return standalone_page(self.scenario, self.trace, step=self.step, panels=self.panels,
                               callouts={"callouts": self.callouts, "any_run": True})

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.page())

    def _repr_html_(self) -> str:
        frame = f"mbi-{uuid.uuid4().hex[:12]}"
        # The page posts {"type": "mbarrier-inspector:height", "height": n} to its parent
        # (static/js/learn.js `watchHeight`); the listener sizes this one frame.
        listener = (
            "<script>(function(){var f=document.getElementById('" + frame + "');"
            "window.addEventListener('message',function(e){var d=e.data;"
            "if(f&&e.source===f.contentWindow&&d&&d.type==='mbarrier-inspector:height'"
            "&&d.height>0){f.style.height=Math.min(d.height+4,6000)+'px';}});})();</script>")
        return (f'<iframe id="{frame}" title="mbarrier-inspector: {html.escape(self._title())}" '
                f'style="width:100%;height:{self.height}px;border:0" '
                f'srcdoc="{html.escape(self.page(), quote=True)}"></iframe>{listener}')

    def _title(self) -> str:
        return self.scenario.title if self.scenario.id else "a pipeline"

    def __repr__(self) -> str:
        kinds = ", ".join(f"{d['kind']}@{d['step']}" for d in self.diagnostics) or "none"
        name = self.scenario.id or f"pipeline {self.scenario.source_sha256[:12]}"
        return (f"<Inspector {name} bugs={self.trace['scenario']['bugs']} "
                f"{self.status} after {self.trace['total_steps']} steps; diagnostics: {kinds}>")


def show(pipeline: str, *, params: dict | None = None, bugs=(), schedule: str = "round_robin",
         seed: int = 0, step: int = 0, callouts=None, panels=PANELS) -> Inspector:
    """Run `pipeline` (a built-in scenario id, or a pipeline text) and return its inspector.

    `callouts` are lesson notes pinned to steps: `[{"step": 13, "text": "Markdown"}]`, or
    `"lesson"` for a built-in's own guided tour of this configuration."""
    scenario = _scenario(pipeline)
    cfg = scenario.resolve(params or {}, list(bugs))
    run = Run.complete(cfg, Schedule(schedule, seed=seed) if schedule == "random"
                       else Schedule(schedule), scenario.describe(cfg), step_limit=MAX_STEPS)
    doc = run.document(1, run.total_steps, True)
    if not 0 <= step <= run.total_steps:
        raise ValueError(f"step must be in 0..{run.total_steps}")
    notes = _callouts(scenario, callouts, sorted(cfg.bugs))
    return Inspector(scenario, doc, step=step, callouts=notes, panels=tuple(panels))


def _scenario(pipeline: str) -> Scenario:
    if "\n" not in pipeline and "{" not in pipeline:
        try:
            return get_scenario(pipeline)
        except KeyError:
            raise ValueError(f"no built-in scenario {pipeline!r}; pass a pipeline text or one "
                             "of the built-ins") from None
    return from_source(pipeline)


def _callouts(scenario: Scenario, callouts, bugs: list[str]) -> list[dict]:
    if callouts is None:
        return []
    if callouts == "lesson":
        from app.web.learning import lesson

        notes = lesson(scenario.id)["callouts"] if scenario.id else []
        return [{"step": c["step"], "text": c["text"]} for c in notes
                if sorted(c.get("bugs", [])) == bugs]
    return [{"step": int(c["step"]), "text": str(c["text"])} for c in callouts]
