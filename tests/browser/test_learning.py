"""Learning in the browser (issue 9): lesson callouts rendered from Markdown, the offline lesson
export, prediction mode, one barrier by hand, challenge mode, downloads; instructor text that
tries to run script (checked with a dialog handler). Screenshots under test-artifacts/."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, shot
from tests.browser.server import HTTP
from tests.browser.test_inspector import card, expect_step, open_inspector

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
EVIL = [
    {"step": 1, "text": "<script>alert('script')</script> plain <b>bold html</b>"},
    {"step": 2, "text": "<img src=x onerror=\"alert('img')\"> and "
                        "![pic](javascript:alert('md-img'))"},
    {"step": 3, "text": "[click me](javascript:alert('link')) [v](vbscript:msgbox(1)) "
                        "[d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) "
                        "[tab](java\tscript:alert('tab'))"},
    {"step": 4, "text": "<a href=\"javascript:alert('raw')\">raw link</a> "
                        "<svg onload=alert('svg')></svg> "
                        "<iframe src=\"javascript:alert('frame')\"></iframe> **ok** "
                        "![dot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==)"},
]


def export_file(base_url: str, query: str, name: str) -> tuple[Path, httpx.Response]:
    response = HTTP.get(f"{base_url}/export/{query}", timeout=30)
    assert response.status_code == 200, response.text
    path = ARTIFACTS / name
    path.write_bytes(response.content)
    return path, response


def offline_page(browser, dialogs: list | None = None):
    context = browser.new_context(viewport={"width": 1100, "height": 800}, offline=True)
    requests = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    if dialogs is not None:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return context, page, requests, errors


# ---------------------------------------------------------------------- callouts (item 3)

def test_markdown_vendor_is_pinned():
    readme = (ROOT / "static/vendor/README.md").read_text()
    assert "markdown-it | 15.0.3" in readme
    source = (ROOT / "static/vendor/markdown-it/markdown-it.min.mjs").read_bytes()
    assert source.startswith(b"/*! markdown-it 15.0.3 ")
    assert hashlib.sha256(source).hexdigest() == (
        "40ee4f75f35a4c8d24f1d7a902f4c56a26da8bd9eec5bb02ad4a672d6ba05525")
    assert (ROOT / "static/vendor/markdown-it/LICENSE").read_text().startswith("Copyright")


def test_callouts_of_the_guided_tour_follow_the_step(page):
    open_inspector(page, "/scenarios/single_barrier?bugs=forget_phase_toggle&step=12", 12)
    callout = page.locator("[data-callout]")
    expect(callout).to_be_visible()
    expect(callout).to_have_attribute("data-callout-step", "10")
    page.keyboard.press("ArrowRight")
    expect_step(page, 13)
    expect(callout).to_have_attribute("data-callout-step", "13")
    expect(callout).to_contain_text("look at the byte bar")
    expect(callout.locator("strong").first).to_contain_text("The wait returned")  # Markdown
    assert int(card(page, "bar").get_attribute("data-tx-count")) > 0
    marks = page.locator('[data-run="main"] [data-callout-mark]')
    expect(marks).to_have_count(4)  # the forget_phase_toggle tour flags its 4 notes
    assert marks.evaluate_all("els => els.map(e => +e.dataset.calloutMark)") == [10, 13, 15, 17]
    shot(page, "callout-step-13")
    callout.get_by_role("button", name=re.compile("next note")).click()
    expect_step(page, 15)
    expect(callout).to_contain_text("partial read")
    # The tours are offered as links; the correct run's tour has its own callouts.
    page.get_by_role("link", name="Guided tour: the correct run").click()
    expect_step(page, 1)
    expect(callout).to_contain_text("one arrival")
    # A run the callouts were not written for (other parameters) shows none.
    open_inspector(page, "/scenarios/single_barrier?tiles=5&step=2", 2)
    expect(page.locator("[data-callout]")).to_be_hidden()


def test_each_built_in_lesson_pins_callouts_to_real_steps(base_url):
    """Every callout's step exists in the run it was written for, and the steps named in the
    text happen there (the wait, the diagnostic)."""
    for scenario in ("single_barrier", "double_buffer_tma", "cluster_multicast", "kloop_tma_mma",
                     "proxy_fence_store"):
        lesson = HTTP.get(f"{base_url}/lessons/{scenario}").json()
        assert len(lesson["callouts"]) >= 5, scenario
        for bugs in {tuple(c.get("bugs", [])) for c in lesson["callouts"]}:
            doc = HTTP.get(f"{base_url}/api/v1/traces/{scenario}",
                            params={"bugs": ",".join(bugs), "snapshots": "false"}).json()
            kinds = {d["step"]: d["kind"] for d in doc["diagnostics"]}
            for c in lesson["callouts"]:
                if tuple(c.get("bugs", [])) != bugs:
                    continue
                assert 1 <= c["step"] <= doc["total_steps"], (scenario, bugs, c)
                for kind, words in (("stale_wait", "stale wait"), ("partial_read", "partial read"),
                                    ("deadlock", "Deadlock"), ("proxy_fence_missing", "old bytes")):
                    if words in c["text"]:
                        assert kinds.get(c["step"]) == kind, (scenario, c)
    assert HTTP.get(f"{base_url}/lessons/nope").status_code == 404


def test_instructor_markdown_runs_no_script_in_the_inspector(page):
    """The real renderer (vendored markdown-it, html off, links checked) on hostile text."""
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_inspector(page, "/scenarios/single_barrier")
    found = page.evaluate("""async (evil) => {
      const {CalloutCaption} = await import('/static/js/callouts.js');
      const box = document.querySelector('[data-callout]');
      const caption = new CalloutCaption(box, {});
      const out = {html: [], active: [], handlers: [], hrefs: []};
      caption.set(evil);
      for (const c of evil) {
        const before = box.querySelector('.callout-body').innerHTML;
        caption.update(c.step);
        // rendering is asynchronous (the first note imports markdown-it): wait for this note
        for (let n = 0; n < 600 && box.querySelector('.callout-body').innerHTML === before; n++)
          await new Promise(r => setTimeout(r, 100));
        const body = box.querySelector('.callout-body');
        out.html.push(body.innerHTML);
        out.active.push(body.querySelectorAll('script, iframe, svg, object, embed, style').length);
        out.handlers.push([...body.querySelectorAll('*')].filter(e =>
          [...e.attributes].some(a => a.name.startsWith('on'))).length);
        out.hrefs.push(...[...body.querySelectorAll('[href], [src]')].map(e =>
          e.getAttribute('href') || e.getAttribute('src')));
      }
      return out;
    }""", EVIL)
    joined = "\n".join(found["html"])
    assert found["active"] == [0, 0, 0, 0] and found["handlers"] == [0, 0, 0, 0]
    assert "&lt;script&gt;" in joined  # raw HTML is shown as text
    assert all(re.match(r"(https?:|mailto:|#|data:image/png;)", h) for h in found["hrefs"]), found
    assert "<strong>ok</strong>" in joined
    assert any(h.startswith("data:image/png;base64") for h in found["hrefs"])  # images allowed
    for link in page.locator("[data-callout] .callout-body a").all():
        link.click()
    page.wait_for_timeout(300)
    assert dialogs == []


# ---------------------------------------------------------------------- export (item 4)

def test_exported_lesson_opens_from_file_with_the_network_off(browser, base_url):
    path, response = export_file(
        base_url, "single_barrier?bugs=forget_phase_toggle&step=12", "lesson-single-barrier.html")
    assert response.headers["content-disposition"] == (
        'attachment; filename="single_barrier-forget_phase_toggle.html"')
    context, page, requests, errors = offline_page(browser)
    page.goto(path.as_uri())
    expect(page.locator("#inspector")).to_have_attribute("data-ready", "true")
    expect_step(page, 12)
    page.keyboard.press("ArrowRight")
    expect_step(page, 13)
    expect(page.locator('[data-barrier="bar"]')).to_have_attribute("data-tx-count", "3072")
    expect(page.locator("[data-callout]")).to_contain_text("look at the byte bar")
    expect(page.locator('[data-diagnostic="stale_wait"]')).to_be_visible()
    shot(page, "export-file-step-13")
    page.keyboard.press("ArrowLeft")
    expect_step(page, 12)
    page.locator('[data-control="scrubber"]').fill("5")
    expect_step(page, 5)
    page.locator('[data-control="speed"]').select_option("30")
    page.locator('[data-action="play"]').click()
    expect(page.locator(".counter")).to_have_attribute("data-step", "17")
    expect(page.locator(".status-pill")).to_have_attribute("data-status", "undefined_behavior")
    # Without the controls panel the keys still step (and no [data-step] counter is drawn).
    bare, _ = export_file(base_url, "single_barrier?panels=barriers,timeline&step=2",
                          "lesson-bare.html")
    page.goto(bare.as_uri())
    expect(page.locator("#inspector")).to_have_attribute("data-ready", "true")
    expect(page.locator(".now-line")).to_contain_text("Step 2 ")
    page.keyboard.press("ArrowRight")
    expect(page.locator(".now-line")).to_contain_text("Step 3 ")
    expect(page.locator('[data-panel="agents"]')).to_have_count(0)
    assert all(url.startswith(("file:", "blob:", "data:")) for url in requests), requests
    assert errors == []
    context.close()


def test_exported_500_step_lesson_is_under_1_mb(base_url):
    path, response = export_file(base_url, "double_buffer_tma?tiles=27", "lesson-500-steps.html")
    html = response.text
    packed = re.search(r'id="trace-data">([^<]+)<', html).group(1)
    doc = json.loads(gzip.decompress(base64.b64decode(packed)))
    assert doc["total_steps"] >= 500 and len(doc["steps"]) == doc["total_steps"]
    assert all("snapshot" in s for s in doc["steps"])
    assert len(response.content) < 1_000_000, len(response.content)
    assert "connect-src 'none'" in html
    bad = HTTP.get(f"{base_url}/export/double_buffer_tma?stages=abc")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "stages"
    assert HTTP.get(f"{base_url}/export/double_buffer_tma?nope=1").status_code == 422


def test_exported_callouts_with_hostile_markdown_run_nothing(browser, base_url):
    """The export's own CSP allows inline script (its loader is inline), so the renderer alone
    must keep instructor text from running: POST /export with hostile callouts."""
    response = HTTP.post(f"{base_url}/export", timeout=30, json={
        "scenario": "single_barrier", "params": {"tiles": 2}, "callouts": EVIL})
    assert response.status_code == 200, response.text
    path = ARTIFACTS / "lesson-hostile.html"
    path.write_bytes(response.content)
    assert HTTP.post(f"{base_url}/export", json={"scenario": "single_barrier",
                                                  "callouts": [{"step": -1, "text": ""}]}
                      ).status_code == 422
    dialogs = []
    context, page, _, errors = offline_page(browser, dialogs)
    page.goto(path.as_uri())
    expect(page.locator("#inspector")).to_have_attribute("data-ready", "true")
    for step in range(1, 5):
        page.keyboard.press("ArrowRight")
        expect_step(page, step)
        expect(page.locator("[data-callout]")).to_have_attribute("data-callout-step", str(step))
        page.wait_for_timeout(200)
        for link in page.locator("[data-callout] a").all():
            link.click()
    expect(page.locator("[data-callout] strong")).to_have_text("ok")
    shot(page, "export-hostile-callouts")
    body = page.locator("[data-callout]").inner_html()
    assert "<svg" not in body and "<iframe" not in body
    assert dialogs == [] and errors == []
    context.close()


# ---------------------------------------------------------------------- prediction (item 5)

def test_prediction_mode_asks_then_reveals_and_keeps_score(page):
    open_inspector(page, "/scenarios/single_barrier?predict=1&step=1", 1)
    expect(page.locator("[data-predict-toggle]")).to_be_checked()
    page.keyboard.press("ArrowRight")
    question = page.locator("[data-predict]")
    expect(question).to_have_attribute("data-predict", "parity")
    expect_step(page, 1)  # not shown before the answer
    shot(page, "predict-question")
    page.locator('[data-choice="1"]').click()  # wrong: one arrive leaves 4,096 B pending
    expect_step(page, 2)
    result = page.locator("[data-predict-result]")
    expect(result).to_have_attribute("data-predict-result", "wrong")
    expect(result).to_contain_text("stays 0")
    page.keyboard.press("ArrowRight")  # only the thread can move: nothing to predict
    expect_step(page, 3)
    page.keyboard.press("ArrowRight")
    expect(question).to_have_attribute("data-predict", "bytes")
    expect_step(page, 3)
    page.locator('[data-choice="3072"]').click()
    expect_step(page, 4)
    expect(result).to_have_attribute("data-predict-result", "right")
    expect(page.locator("[data-predict-score]")).to_have_text("Score this session: 1 / 2")
    shot(page, "predict-answered")
    expect(page).to_have_url(re.compile(r"predict=1"))
    page.locator("[data-predict-toggle]").uncheck()
    page.locator('[data-action="step"]').click()
    expect_step(page, 5)
    expect(page.locator("[data-predict]")).to_have_count(0)


def test_prediction_asks_about_a_stale_wait_in_an_embed(page):
    page.goto("/embed/single_barrier?bugs=forget_phase_toggle&step=12&predict=1&panels=barriers,controls")
    expect_step(page, 12)
    page.locator('[data-action="step"]').click()
    expect(page.locator("[data-predict]")).to_have_attribute("data-predict", "wait")
    page.locator('[data-choice="stale"]').click()
    expect_step(page, 13)
    expect(page.locator("[data-predict-result]")).to_have_attribute("data-predict-result", "right")


# ---------------------------------------------------------------------- /barrier (item 6)

def test_drive_one_barrier_by_hand(page):
    page.goto("/barrier")
    bar = page.locator('[data-barrier="bar"]')
    expect(bar).to_have_attribute("data-valid", "false")
    page.locator('input[name="init_count"]').fill("2")
    page.locator('[data-op="init"]').click()
    expect(bar).to_have_attribute("data-pending-arrivals", "2")
    page.locator('[data-op="arrive_expect_tx"]').click()
    expect(bar).to_have_attribute("data-tx-count", "4096")
    expect(bar.locator(".bytes")).to_have_attribute("data-state", "pending")
    for tx in (3072, 2048, 1024, 0):
        page.locator('[data-op="complete_tx"]').click()
        expect(bar).to_have_attribute("data-tx-count", str(tx))
    expect(bar).to_have_attribute("data-phase", "0")  # one arrival still pending
    page.locator('[data-op="test_wait_parity"]').click()
    expect(page.locator("[data-last]")).to_contain_text("wait_complete = false")
    page.locator('[data-op="arrive"]').click()
    expect(bar).to_have_attribute("data-phase", "1")
    expect(bar).to_have_attribute("data-parity", "1")
    page.locator('[data-op="test_wait_parity"]').click()
    expect(page.locator("[data-last]")).to_contain_text("wait_complete = true")
    expect(page.locator("[data-history] li")).to_have_count(9)
    shot(page, "barrier-by-hand")
    page.locator('[data-action="undo"]').click()
    expect(page.locator("[data-history] li")).to_have_count(8)
    page.reload()  # the history is in the URL fragment and replays through the API
    expect(page.locator("[data-history] li")).to_have_count(8)
    expect(bar).to_have_attribute("data-phase", "1")
    page.locator('input[name="arrive_count"]').fill("3")
    page.locator('[data-op="arrive"]').click()
    stop = page.locator("p[data-ub]")
    expect(stop).to_be_visible()
    expect(stop).to_have_attribute("data-ub", "over_arrival")
    expect(stop).to_contain_text("Undefined behaviour: over_arrival")
    expect(page.locator('[data-op="arrive"]')).to_be_disabled()
    shot(page, "barrier-undefined-behaviour")
    page.locator('[data-action="undo"]').click()
    expect(stop).to_be_hidden()


def test_barrier_tokens_work_or_say_why_not(page, base_url):
    """Token ops are in SEMANTICS.md's contract; until the API takes them, the page says so."""
    probe = HTTP.post(f"{base_url}/api/v1/mbarrier/run",
                       json={"ops": [{"op": "init", "count": 1}, {"op": "arrive", "token": "t"}]})
    page.goto("/barrier")
    page.locator('[data-op="init"]').click()
    page.locator('input[name="arrive_token"]').fill("t0")
    page.locator('input[name="arrive_count"]').fill("1")
    page.locator('input[name="init_count"]').fill("2")
    page.locator('[data-op="arrive"]').click()
    if probe.status_code == 422:
        expect(page.locator("[data-lab-error]")).to_contain_text("does not take state tokens yet")
        expect(page.locator('[data-op="test_wait"]')).to_be_disabled()
        expect(page.locator("[data-token-note]")).to_be_visible()
        expect(page.locator("[data-history] li")).to_have_count(1)
    else:
        expect(page.locator('[data-token="t0"]')).to_contain_text("phase 0")
        page.locator('[data-op="test_wait"]').click()
        expect(page.locator("[data-last]")).to_contain_text("wait_complete")


# ---------------------------------------------------------------------- challenge (item 7)

def challenge_moves(base_url, bugs):
    doc = HTTP.get(f"{base_url}/api/v1/traces/single_barrier",
                    params={"bugs": bugs, "snapshots": "false"}).json()
    return [f"tma:{s['operands']['op']}" if s["agent"] == "tma" else s["agent"]
            for s in doc["steps"]]


def test_challenge_break_it_then_beat_the_checker(page, base_url):
    open_inspector(page, "/scenarios/single_barrier")
    page.locator('input[value="forget_phase_toggle"]').check()
    page.locator("[data-challenge-start]").click()
    box = page.locator("[data-challenge]")
    expect(box).to_contain_text("Goal:")
    expect(page.locator("#manual-mode")).to_be_checked()
    expect(box.locator("[data-shortest]")).to_have_count(0)  # not revealed yet
    for i, mover in enumerate(challenge_moves(base_url, "forget_phase_toggle")[:13], start=1):
        page.locator(f'[data-run="main"] button[data-mover="{mover}"]').click()
        expect_step(page, i)
        if i < 13:
            expect(box.locator(".moves")).to_have_attribute("data-moves", str(i))
    expect(box.locator("[data-challenge-result]")).to_have_attribute("data-challenge-result", "won")
    expect(box).to_contain_text("stale_wait at step 13")
    shortest = box.locator("[data-shortest]")
    expect(shortest).to_have_attribute("data-shortest", re.compile(r"^\d+$"))
    assert int(shortest.get_attribute("data-shortest")) <= 13
    shot(page, "challenge-won")


def test_challenge_give_up_shows_the_checker_schedule(page):
    open_inspector(page, "/scenarios/single_barrier?bugs=expect_tx_long")
    page.locator("[data-challenge-start]").click()
    page.locator("[data-challenge-give-up]").click()
    box = page.locator("[data-challenge]")
    result = box.locator("[data-challenge-result]")
    expect(result).to_have_attribute("data-challenge-result", "gave-up")
    expect(box.locator("[data-shortest]")).to_be_visible()
    box.get_by_role("button", name="Load the checker's schedule").click()
    expect(page.locator('[data-run="main"] [data-diagnostic="deadlock"].now')).to_be_visible()


# ---------------------------------------------------------------------- downloads

def test_downloads_json_svg_lesson_and_perfetto_when_served(page, base_url):
    open_inspector(page, "/scenarios/double_buffer_tma?step=12", 12)
    json_link = page.locator('[data-download="json"]')
    expect(json_link).to_have_attribute("href", re.compile(r"^/api/v1/sessions/.+/trace"))
    doc = HTTP.get(base_url + json_link.get_attribute("href")).json()
    assert doc["format"] == "mbarrier-inspector/trace" and doc["steps"][0]["snapshot"]
    # The timeline arrives after the session (its own fetch): under load it may not be drawn yet.
    expect(page.locator('[data-run="main"] .timeline svg')).to_be_visible()
    with page.expect_download() as info:
        page.locator('[data-download="svg"]').click()
    svg_text = Path(info.value.path()).read_text()
    assert svg_text.startswith("<?xml") and "<svg" in svg_text and "full_barrier[0]" in svg_text
    assert "var(--" not in svg_text  # computed colours, not the page's CSS variables
    (ARTIFACTS / "timeline.svg").write_text(svg_text)
    with page.expect_download() as info:
        page.locator('[data-download="lesson"]').click()
    assert info.value.suggested_filename == "double_buffer_tma.html"
    assert b"trace-data" in Path(info.value.path()).read_bytes()
    paths = HTTP.get(f"{base_url}/openapi.json").json()["paths"]
    perfetto = page.locator('[data-download="perfetto"]')
    if "/api/v1/traces/{scenario_id}/perfetto" in paths:
        expect(perfetto).to_be_visible()
    else:
        expect(perfetto).to_be_hidden()
