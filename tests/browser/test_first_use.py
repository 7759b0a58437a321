"""What a student and an instructor hit on a first use (issue 21), each as the browser shows it:
a re-run with another shape, the register a step names, a line a toggle deletes, the compare
view's first divergence, prediction questions, panels that stay put, /author's messages, the
language reference, embeds, line numbers, the replay's pills. Screenshots under test-artifacts/."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot
from tests.browser.test_author import copied, open_author, run_source, sha
from tests.browser.test_inspector import expect_step, now_line, open_inspector

pytestmark = pytest.mark.browser

RING3 = """// Three stages of 2,048-byte tiles landing in 1,024-byte chunks.
param tiles = 4 in 1..50 "tiles";

tensor  tile[tiles] bytes 2048;
smem    stage[3] bytes 2048 chunk 1024;
barrier full[3] = 1;
barrier empty[3] = 1;

agent producer {
    int phase = 1;
    int s = 0;
    for (int i = 0; i < tiles; ++i) {
        mbarrier.try_wait.parity.shared::cta.b64 p, [empty[s]], phase;
        mbarrier.arrive.expect_tx.shared::cta.b64 _, [full[s]], 2048;
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [stage[s]], [tile[i]], 2048, [full[s]];
        ++s;
        if (s == 3) { s = 0; phase ^= 1; }
    }
}

agent consumer {
    int phase = 0;
    int s = 0;
    for (int i = 0; i < tiles; ++i) {
        mbarrier.try_wait.parity.shared::cta.b64 p, [full[s]], phase;
        ld.shared x, [stage[s]], tile[i];
        mbarrier.arrive.shared::cta.b64 _, [empty[s]];
        ++s;
        if (s == 3) { s = 0; phase ^= 1; }
    }
}
"""  # noqa: E501 - a pipeline's lines are as long as PTX makes them


def step_to(page, step: int):
    page.locator('[data-control="scrubber"]').fill(str(step))
    expect_step(page, step)


# ------------------------------------------------------------------ item 1: a re-run reshapes


def test_a_rerun_with_fewer_chunks_per_stage_draws_the_new_run(page):
    """The first run (single_barrier: 1 stage of 4 chunks) stands at a step; the next has 3
    stages of 2 chunks. Every panel, the counter and the keys follow the new run."""
    open_author(page)
    step_to(page, 7)
    run_source(page, RING3)
    expect(page.locator(".stage[data-stage]")).to_have_count(3)
    for stage in page.locator(".stage[data-stage]").all():
        expect(stage.locator(".chunk")).to_have_count(2)
    total = page.locator(".counter .total").inner_text()
    assert int(total) > 20, total
    expect_step(page, 0)
    page.keyboard.press("ArrowRight")
    expect_step(page, 1)
    step_to(page, int(total))
    expect(page.locator('[data-barrier="full[0]"]')).to_have_attribute("data-valid", "true")
    shot(page, "first-use-01-rerun-three-stages")


def test_p_apply_with_other_parameters_shows_only_the_new_run(page):
    """/p: Apply with another tile count re-runs; the counter, the cards and the stages are the
    new run's at step 0 (no frame of the old run drawn on the new layout)."""
    open_author(page)
    run_source(page, RING3)
    page.goto(copied(page, "inspector"))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING3))
    step_to(page, 9)
    old_total = int(page.locator(".counter .total").inner_text())
    page.locator('#pipe-config input[name="tiles"]').fill("2")
    page.locator("#pipe-config").evaluate("f => f.requestSubmit()")
    expect(page.locator(".counter .total")).not_to_have_text(str(old_total))
    expect_step(page, 0)
    expect(page.locator('[data-barrier="full[0]"]')).to_have_attribute("data-valid", "true")
    expect(page.locator('[data-barrier="full[0]"]')).to_have_attribute("data-tx-count", "0")
    expect(page.locator(".stage .chunk.empty")).to_have_count(6)
    page.locator('[data-action="end"]').click()
    expect_step(page, int(page.locator(".counter .total").inner_text()))
    page.locator('[data-action="reset"]').click()
    page.keyboard.press("ArrowRight")
    expect_step(page, 1)


# ---------------------------------------------------------- item 2: the register a step names


def test_each_register_update_is_narrated_by_its_own_name(page):
    """Step 10 of the seed lesson is `phase ^= 1`: the line names `phase`, the phase register;
    `++s` in one's own pipeline names `s`; CUTLASS's `++pipe_state` names pipe_state."""
    open_inspector(page, "/scenarios/single_barrier?step=10", step=10)
    expect(now_line(page)).to_contain_text("phase is now 1 (the phase register")
    expect(now_line(page)).not_to_contain_text("pipe_state")
    open_inspector(page, "/scenarios/double_buffer_tma")
    for step in range(1, 40):
        step_to(page, step)
        if "++pipe_state" in now_line(page).inner_text():
            break
    expect(now_line(page)).to_contain_text("pipe_state is now")
    expect(now_line(page)).to_contain_text("(its phase register)")
    open_author(page)
    run_source(page, RING3)
    text = ""
    for step in range(1, 12):
        step_to(page, step)
        text = page.locator(".now-line").inner_text()
        if "++s" in text:
            break
    assert "s is now 1" in text and "pipe_state" not in text, text


# ------------------------------------------------------- item 3: a line a toggle deletes shows


LINE_NUMBER = "li => getComputedStyle(li, '::before').content.replaceAll('\"', '')"


@pytest.mark.parametrize(("scenario", "bug", "agent", "text"), [
    ("single_barrier", "forget_phase_toggle", "thread", "phase ^= 1;"),
    ("double_buffer_tma", "consumer_skips_release", "consumer0", "consumer_release(pipe_state);"),
    ("kloop_tma_mma", "missing_mma_commit", "mma", "tcgen05.commit"),
    ("proxy_fence_store", "missing_proxy_fence", "writer", "fence.proxy.async"),
])
def test_a_deleted_line_is_struck_through_with_its_bug_note(page, scenario, bug, agent, text):
    open_inspector(page, f"/scenarios/{scenario}?bugs={bug}")
    lane = page.locator(f'.lane[data-agent="{agent}"]')
    gone = lane.locator(".program li.deleted").first
    expect(gone).to_be_visible()
    expect(gone.locator("del")).to_contain_text(text)
    expect(gone.locator(".bug-note")).to_contain_text("// BUG")
    line = gone.get_attribute("data-deleted-line")
    assert gone.evaluate(LINE_NUMBER) == line  # numbered as the source numbers it
    decoration = gone.locator("del").evaluate("d => getComputedStyle(d).textDecorationLine")
    assert "line-through" in decoration
    if scenario == "single_barrier":
        shot(page, "first-use-03-deleted-line")
        for step in (9, 10, 13):
            step_to(page, step)
            expect(lane.locator("li.current")).to_have_count(1)
            expect(lane.locator("li.deleted.current, li.deleted.ran")).to_have_count(0)
    page.goto(f"/scenarios/{scenario}")
    expect(page.locator("#inspector")).not_to_have_attribute("data-session", "")
    expect(page.locator(f'.lane[data-agent="{agent}"] .program li').first).to_be_visible()
    expect(page.locator(".program li.deleted")).to_have_count(0)


def test_lane_line_numbers_are_the_source_lines_one_based(page):
    """The seed lesson's lane numbers its lines as single_barrier.pipe does (12, 14, ...), as
    /author and the downloaded lesson do: never 0..n."""
    open_inspector(page, "/scenarios/single_barrier")
    numbers = page.locator('.lane[data-agent="thread"] .program li').evaluate_all(
        f"lis => lis.map({LINE_NUMBER})")
    assert numbers == ["12", "14", "15", "16", "17", "18"], numbers
    regs = page.locator('.lane[data-agent="thread"] .regs dt').all_inner_texts()
    assert regs == ["phase", "i"], regs  # the loop variable by its own name, once
    open_inspector(page, "/scenarios/double_buffer_tma")
    regs = page.locator('.lane[data-agent="producer"] .regs dt').all_inner_texts()
    assert "k" in regs and not any(r.startswith("iteration") for r in regs), regs


# ------------------------------------------------- item 4: prediction that gives nothing away

QUESTION_KINDS = """async (query) => {
  const {question} = await import("/static/js/predict.js");
  const doc = await (await fetch(`/api/v1/traces/${query}`)).json();
  const kinds = [];
  let before = {step: 0, snapshot: doc.initial, ready: []};
  for (const record of doc.steps) {
    const q = question(before, {record, snapshot: record.snapshot});
    kinds.push(q ? q.kind : null);
    before = {step: record.step, snapshot: record.snapshot, ready: []};
  }
  return kinds;
}"""


def visibility(locator) -> str:
    return locator.evaluate("e => getComputedStyle(e).visibility")


def test_prediction_never_asks_who_moves_next(page):
    """The questions are about the barrier (waits, parity, bytes, reads), never the scheduler."""
    page.goto("/barrier")
    for query in ("double_buffer_tma?snapshots=true&consumers=2",
                  "single_barrier?snapshots=true&bugs=forget_phase_toggle",
                  "kloop_tma_mma?snapshots=true&schedule=random&seed=3"):
        kinds = page.evaluate(QUESTION_KINDS, query)
        asked = {k for k in kinds if k}
        assert "mover" not in asked, query
        assert {"wait", "parity", "bytes"} <= asked, (query, asked)
    kinds = page.evaluate(QUESTION_KINDS, "single_barrier?snapshots=true&bugs=forget_phase_toggle")
    assert kinds[9 - 1] == kinds[15 - 1] == "read"  # the whole tile 0; half of tile 1


def test_an_open_question_hides_its_answer_and_play_closes_it(page):
    open_inspector(page, "/scenarios/single_barrier?bugs=forget_phase_toggle&step=12&predict=1",
                   step=12)
    formula = page.locator('[data-run="main"] [data-formula] li[data-agent="thread"]')
    veil = page.locator('[data-run="main"] .future-veil')
    expect(veil).to_have_attribute("visibility", "visible")  # no parity or diagnostics ahead
    expect(page.locator(".ahead")).to_be_hidden()
    before = page.evaluate("() => { window.scrollTo(0, 500); return window.scrollY; }")
    assert before > 0
    page.keyboard.press("ArrowRight")
    expect(page.locator("[data-predict]")).to_have_attribute("data-predict", "wait")
    expect_step(page, 12)
    assert abs(page.evaluate("() => window.scrollY") - before) <= 2  # the focus did not scroll
    # The formula shows the wait but not its verdict (which would answer "stale?").
    expect(formula).to_contain_text("waits on bar with parity 0")
    assert visibility(formula.locator(".verdict")) == "hidden"
    assert visibility(formula.locator(".math").first) == "hidden"
    shot(page, "first-use-04-question-open", full_page=False)
    page.locator('[data-choice="stale"]').click()
    expect_step(page, 13)
    expect(page.locator("[data-predict-result]")).to_have_attribute("data-predict-result", "right")
    assert visibility(formula.locator(".verdict")) == "visible"
    step_to(page, 5)  # the answer leaves with the cursor
    expect(page.locator("[data-predict-result]")).to_have_count(0)
    # Play closes an open question: answering it later can neither score nor step.
    step_to(page, 12)
    page.locator('[data-action="step"]').click()
    expect(page.locator("[data-choice]")).to_have_count(2)
    score = page.locator("[data-predict-score]").inner_text()
    page.locator('[data-action="play"]').click()
    expect(page.locator("[data-choice]")).to_have_count(0)
    page.locator('[data-action="play"]').click()  # pause
    expect(page.locator('[data-action="play"]')).to_have_attribute("aria-pressed", "false")
    expect(page.locator("[data-predict-score]")).to_have_text(score)


# ----------------------------------------------------------- item 5: the panels stay put

TOPS = """() => {
  const top = (s) => document.querySelector(`[data-run="main"] ${s}`).getBoundingClientRect().top;
  return {card: top("[data-barrier]") + scrollY,
          timeline: top('[data-panel="timeline"]') + scrollY};
}"""


@pytest.mark.parametrize("path", ["/scenarios/single_barrier?bugs=forget_phase_toggle",
                                  "/scenarios/double_buffer_tma?tiles=3"])
def test_cards_and_timeline_do_not_move_from_step_to_step(page, path):
    """Once a run has been walked, stepping never moves the cards or the timeline (the formula
    box, captions and notes keep the room they took), so a second click on the timeline lands on
    the step the first did."""
    open_inspector(page, path)
    total = int(page.locator(".counter .total").inner_text())
    first = []
    for step in range(1, total + 1):
        page.locator('[data-action="step"]').click()
        expect_step(page, step)
        first.append(page.evaluate(TOPS))
    page.locator('[data-action="reset"]').click()
    expect_step(page, 0)
    second = [page.evaluate(TOPS)]
    for step in range(1, total + 1):
        page.locator('[data-action="step"]').click()
        expect_step(page, step)
        second.append(page.evaluate(TOPS))
    for key in ("card", "timeline"):
        seen = {round(t[key]) for t in second}
        assert max(seen) - min(seen) <= 1, (key, sorted(seen))
        moves = sum(1 for a, b in zip(first, first[1:], strict=False) if abs(a[key] - b[key]) > 1)
        assert moves <= 3, (key, " ".join(str(round(t[key])) for t in first))  # first growths
    svg = page.locator('[data-run="main"] .timeline svg')
    box = svg.bounding_box()
    x, y = box["x"] + box["width"] * 0.55, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    landed = page.locator(".counter").get_attribute("data-step")
    page.mouse.click(x, y)
    expect(page.locator(".counter")).to_have_attribute("data-step", landed)


# ------------------------------------------------------------ item 7: /author's messages

def test_author_messages_are_whole_sentences_at_their_line(page):
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    open_author(page)
    editor = page.locator("[data-editor]")
    source = editor.input_value()
    message = page.locator("[data-error]")
    editor.fill(source.replace("[bar], 1;", "[nobar], 1;"))
    expect(message).to_contain_text("`nobar` is not declared here")
    expect(message).to_contain_text("Hint: did you mean `bar`?")
    expect(message).not_to_contain_text("null")
    expect(page.locator("[data-error-line]")).to_have_text("12")
    # A block left open: the hint names the `{` and the keywords keep their spelling.
    editor.fill(source.replace("        phase ^= 1;\n    }\n}", "        phase ^= 1;\n    }\n"))
    expect(message).to_contain_text("the `{` on line 10 is not closed")
    expect(message).to_contain_text("`PipelineState`")
    expect(message).not_to_contain_text("pipelinestate")
    expect(message).not_to_contain_text("null")
    # A parameter's bad value names the parameter and marks the line that declares it.
    editor.fill(source)
    expect(page.locator("[data-editor-state]")).to_contain_text("Compiles")
    typed = list(errors)  # typing (validated as you type) logs no failed request
    assert not [e for e in typed if "422" in e or "Failed to load" in e], typed
    page.locator('#pipe-config input[name="chunk_bytes"]').fill("1000")
    page.locator("[data-run]").click()
    expect(message).to_contain_text("parameter chunk_bytes = 1000: sizes must be positive")
    expect(message).not_to_contain_text("null")
    expect(page.locator("[data-error-line]")).to_have_text("4")


# -------------------------------------------------------- item 8: the reference in the app

def test_the_language_reference_is_served_and_linked_from_author(page, base_url):
    open_author(page)
    page.locator("[data-reference-link]").click()
    expect(page).to_have_url(re.compile(r"/reference/language$"))
    article = page.locator('article[data-reference="language"]')
    expect(article.locator("h2#bug-toggles")).to_be_visible()
    expect(article.locator("pre code").first).to_be_visible()
    assert article.locator("script, iframe").count() == 0
    article.locator('a[href="#bug-toggles"]').first.click()
    expect(page).to_have_url(re.compile(r"#bug-toggles$"))
    page.locator('nav.reference-nav a[href="/reference/semantics"]').click()
    expect(page.locator('article[data-reference="semantics"] h1')).to_be_visible()
    expect(page.locator('nav.reference-nav [aria-current="page"]')).to_have_attribute(
        "href", "/reference/semantics")
    assert httpx.get(f"{base_url}/reference/nothing", timeout=30).status_code == 404
    docs = httpx.get(f"{base_url}/docs", timeout=30)
    assert docs.status_code == 200 and "swagger-ui" in docs.text  # /docs stays the OpenAPI UI
    shot(page, "first-use-08-reference")


# ------------------------------------- issue 20, item 6: the browser plays windows itself

RECORD_WINDOWS = """(() => {
  window.__windows = [];
  const fetch0 = window.fetch;
  window.fetch = (url, ...rest) => {
    const u = String(url);
    if (u.includes("/trace?") && u.includes("snapshots=true")) {
      const counter = document.querySelector(".counter");
      window.__windows.push({from: +new URL(u, location.href).searchParams.get("from"),
                             to: +new URL(u, location.href).searchParams.get("to"),
                             at: counter ? +counter.dataset.step : -1});
    }
    return fetch0(url, ...rest);
  };
})();"""


def test_play_walks_prefetched_windows_and_the_socket_only_steps(page):
    """Play is drawn in the browser from windows of the session's trace, each asked for before
    the cursor needs it; the socket carries no play command, only what the server computes
    (a step, the seek that puts its cursor where play stopped)."""
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
    page.add_init_script(RECORD_WINDOWS)
    open_inspector(page, "/scenarios/double_buffer_tma?tiles=60&speed=30")
    total = int(page.locator(".counter .total").inner_text())
    assert total > 300, total
    page.locator('[data-action="play"]').click()
    page.wait_for_function("() => +document.querySelector('.counter').dataset.step >= 200",
                           timeout=60_000)
    page.locator('[data-action="play"]').click()
    expect(page.locator('[data-action="play"]')).to_have_attribute("aria-pressed", "false")
    windows = page.evaluate("window.__windows")
    assert len(windows) >= 2, windows
    assert windows[0]["from"] == 1
    for earlier, later in zip(windows, windows[1:], strict=False):
        assert later["from"] == earlier["to"] + 1, windows  # contiguous windows
        assert later["at"] < later["from"] - 1, windows     # asked for ahead of need
    commands = [json.loads(m)["type"] for m in sent if m.startswith("{")]
    assert "play" not in commands, commands
    stopped = int(page.locator(".counter").get_attribute("data-step"))
    assert commands[-1] == "seek" and json.loads(sent[-1])["step"] == stopped
    frames = int(page.locator("#inspector").get_attribute("data-play-frames"))
    assert frames >= 199  # every step drawn, one by one
    # A manual step after play goes over the socket, from where play stopped.
    page.locator('[data-action="step"]').click()
    expect_step(page, stopped + 1)
    assert json.loads(sent[-1])["type"] == "step"


# --------------------------------------------- item 10: a replay's two endings, two pills

def test_a_replay_page_has_a_pill_for_the_gpu_and_one_for_the_model(page):
    page.goto("/replays/single_barrier_forget_phase_toggle")
    gpu = page.locator('#transport .status-pill[data-pill="gpu"]')
    model = page.locator('#transport .status-pill[data-pill="model"]')
    expect(gpu).to_have_text("GPU: done")
    expect(gpu).to_have_attribute("data-status", "done")
    expect(model).to_have_text("model: undefined behavior")
    expect(page.locator("#transport .status-pill")).to_have_count(2)


# ------------------------------------ the probes file v3 and /barrier's .noComplete arrive

def test_the_probes_panel_draws_the_v3_sections(page):
    page.goto("/replays/single_barrier_expect_tx_short")
    panel = page.locator("#probes-panel")
    expect(panel).to_have_attribute("data-probes", "shown")
    panel.evaluate("d => { d.open = true; }")
    for section, probe in (("no_complete", "pending_count"), ("remote_after_exit", "arrive_0us")):
        table = panel.locator(f'table[data-table="{section}"]')
        expect(table).to_be_visible()
        row = table.locator(f'tr[data-probe="{probe}"]')
        expect(row.locator("[data-agrees]")).to_have_attribute("data-agrees", "true")
    expect(panel.locator('table[data-table="remote_after_exit"] tr[data-probe="arrive_0us"]')
           ).to_contain_text("remote_after_exit")


def test_barrier_page_offers_no_complete_for_pending_count(page):
    page.goto("/barrier")
    page.locator('input[name="init_count"]').fill("3")
    page.locator('[data-op="init"]').click()
    page.locator('input[name="arrive_token"]').fill("t")
    page.locator('[data-no-complete="arrive"]').check()
    page.locator('[data-op="arrive"]').click()
    expect(page.locator("[data-history] li").last).to_contain_text("arrive.noComplete")
    page.locator("[data-token-select]").select_option("t")
    page.locator('[data-op="pending_count"]').click()
    expect(page.locator("[data-last]")).to_contain_text("pending_count = 3")  # as silicon reads it
    expect(page.locator("p[data-ub]")).to_have_attribute("data-ub", "")
    # A .noComplete arrive that completes the phase is undefined behaviour, named as such.
    page.locator('input[name="arrive_count"]').fill("2")
    page.locator('[data-op="arrive"]').click()
    expect(page.locator("p[data-ub]")).to_have_attribute("data-ub", "no_complete")
