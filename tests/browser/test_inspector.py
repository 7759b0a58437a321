"""The inspector in a real browser: the seed lesson, stepping against the API, the scrubber, the
keyboard, manual mode, permalinks, embedding, play/pause over the WebSocket, compare, replays,
the check button; screenshots of each state under test-artifacts/."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot
from tests.browser.server import HTTP

pytestmark = pytest.mark.browser

CARD_FIELDS = {"name": "barrier", "phase": "phase", "parity": "parity",
               "pending_arrivals": "pendingArrivals", "expected_arrivals": "expectedArrivals",
               "tx_count": "txCount"}
READ_CARDS = """run => [...document.querySelectorAll(`[data-run="${run}"] [data-barrier]`)]
  .map(c => ({
  name: c.dataset.barrier, phase: +c.dataset.phase, parity: +c.dataset.parity,
  pending_arrivals: +c.dataset.pendingArrivals, expected_arrivals: +c.dataset.expectedArrivals,
  tx_count: +c.dataset.txCount}))"""


def open_inspector(page, path: str, step: int = 0):
    page.goto(path)
    expect(page.locator("#inspector")).not_to_have_attribute("data-session", "")
    expect_step(page, step)


def expect_step(page, step: int, scope=None):
    expect((scope or page).locator(".counter")).to_have_attribute("data-step", str(step))


def cards(page, run: str = "main") -> list[dict]:
    return page.evaluate(READ_CARDS, run)


def barriers_of(snapshot: dict) -> list[dict]:
    return [{k: b[k] for k in CARD_FIELDS} for b in snapshot["barriers"]]


def card(page, name: str):
    return page.locator(f'[data-run="main"] [data-barrier="{name}"]')


def now_line(page):
    return page.locator('[data-run="main"] .now-line')


def test_seed_lesson_single_barrier(page):
    """init, arrive.expect_tx, bytes land in chunks, the wait returns; three iterations with the
    phase toggling 0, 1, 0."""
    open_inspector(page, "/scenarios/single_barrier")
    bar = card(page, "bar")
    expect(bar).to_have_attribute("data-valid", "false")
    shot(page, "seed-00-initial")
    page.keyboard.press("ArrowRight")
    expect_step(page, 1)
    expect(now_line(page)).to_contain_text("mbarrier.init")
    expect(bar).to_have_attribute("data-pending-arrivals", "1")
    expect(bar).to_have_attribute("data-expected-arrivals", "1")
    expect(bar).to_have_attribute("data-phase", "0")
    page.keyboard.press("ArrowRight")
    expect_step(page, 2)
    expect(now_line(page)).to_contain_text("mbarrier.arrive.expect_tx")
    expect(bar).to_have_attribute("data-tx-count", "4096")
    expect(bar).to_have_attribute("data-pending-arrivals", "0")
    expect(bar.locator(".bytes")).to_have_attribute("data-state", "pending")
    shot(page, "seed-02-arrive-expect-tx")
    page.keyboard.press("ArrowRight")
    expect_step(page, 3)
    for k, tx in zip(range(4, 8), (3072, 2048, 1024, 0), strict=True):
        page.keyboard.press("ArrowRight")
        expect_step(page, k)
        expect(now_line(page)).to_contain_text("landed")
        expect(bar).to_have_attribute("data-tx-count", str(tx))
        if k == 5:
            shot(page, "seed-05-chunks-landing")
    expect(bar).to_have_attribute("data-phase", "1")
    expect(bar).to_have_attribute("data-parity", "1")
    expect(bar.locator(".bytes")).to_have_attribute("data-state", "clear")
    waits = {8: 0, 17: 1, 26: 0}
    parity_after = {7: 1, 16: 0, 25: 1}
    for k in range(8, 29):
        page.keyboard.press("ArrowRight")
        expect_step(page, k)
        if k in waits:
            expect(now_line(page)).to_contain_text(
                f"the wait on bar for parity {waits[k]} returned")
            lane = page.locator('[data-run="main"] .lane[data-agent="thread"]')
            expect(lane.locator(".regs")).to_contain_text(f"phase={waits[k]}".replace("=", ""))
            shot(page, f"seed-{k:02d}-wait-returns-parity-{waits[k]}")
        if k in parity_after:
            expect(bar).to_have_attribute("data-parity", str(parity_after[k]))
    expect(page.locator(".status-pill")).to_have_attribute("data-status", "done")
    expect(page.locator("[data-diagnostic]")).to_have_count(0)


def test_seed_lesson_with_forget_phase_toggle(page):
    """Iteration 1's wait returns early, the byte bar still red, the diagnostic shown."""
    open_inspector(page, "/scenarios/single_barrier?bugs=forget_phase_toggle&step=12", 12)
    bar = card(page, "bar")
    expect(page.locator("[data-diagnostic]")).to_have_count(0)
    page.keyboard.press("ArrowRight")
    expect_step(page, 13)
    expect(now_line(page)).to_contain_text("the wait on bar for parity 0 returned")
    expect(now_line(page)).to_contain_text("stale_wait")
    assert int(bar.get_attribute("data-tx-count")) > 0
    expect(bar.locator(".bytes")).to_have_attribute("data-state", "pending")
    expect(bar.locator(".bytes-text")).to_contain_text("still to land")
    diagnostic = page.locator('[data-diagnostic="stale_wait"]')
    expect(diagnostic).to_be_visible()
    expect(diagnostic).to_contain_text("returned at once")
    formula = page.locator('[data-formula] li[data-agent="thread"]')
    expect(formula).to_have_class(re.compile("bad"))
    shot(page, "seed-bug-13-stale-wait")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect_step(page, 15)
    expect(page.locator('[data-diagnostic="partial_read"]')).to_be_visible()
    expect(page.locator('[data-stage="smem"]')).to_have_attribute("data-read", "read-bad")
    shot(page, "seed-bug-15-partial-read")


def test_double_buffer_cards_equal_the_api_at_every_step(page, base_url):
    query = "schedule=random&seed=3&bugs=forget_phase_toggle"
    trace = HTTP.get(f"{base_url}/api/v1/traces/double_buffer_tma?{query}").json()
    snapshots = {0: trace["initial"], **{s["step"]: s["snapshot"] for s in trace["steps"]}}
    open_inspector(page, f"/scenarios/double_buffer_tma?{query}")
    assert cards(page) == barriers_of(snapshots[0])
    step_button = page.locator('#transport [data-action="step"]')
    for k in range(1, 31):
        step_button.click()
        expect_step(page, k)
        assert cards(page) == barriers_of(snapshots[k]), f"step {k}"
    shot(page, "double-buffer-30")
    back_button = page.locator('#transport [data-action="back"]')
    for k in range(29, 19, -1):
        back_button.click()
        expect_step(page, k)
        assert cards(page) == barriers_of(snapshots[k]), f"back to step {k}"
    shot(page, "double-buffer-back-to-20")


def test_scrubber_and_timeline_jump(page, base_url):
    trace = HTTP.get(f"{base_url}/api/v1/traces/double_buffer_tma").json()
    open_inspector(page, "/scenarios/double_buffer_tma")
    scrubber = page.locator('[data-control="scrubber"]')
    expect(scrubber).to_have_attribute("max", str(trace["total_steps"]))
    scrubber.fill("40")
    expect_step(page, 40)
    assert cards(page) == barriers_of(trace["steps"][39]["snapshot"])
    scrubber.fill("7")
    expect_step(page, 7)
    svg = page.locator('[data-run="main"] .timeline-svg')
    box = svg.bounding_box()
    svg.click(position={"x": box["width"] - 20, "y": box["height"] / 2})
    expect(page.locator(".counter")).not_to_have_attribute("data-step", "7")
    step = int(page.locator(".counter").get_attribute("data-step"))
    assert step > trace["total_steps"] * 0.8
    assert cards(page) == barriers_of(trace["steps"][step - 1]["snapshot"])
    shot(page, "timeline-jump")


def test_keyboard(page, base_url):
    total = HTTP.get(f"{base_url}/api/v1/traces/single_barrier").json()["total_steps"]
    open_inspector(page, "/scenarios/single_barrier")
    page.keyboard.press("End")
    expect_step(page, total)
    page.keyboard.press("Home")
    expect_step(page, 0)
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect_step(page, 3)
    page.keyboard.press("ArrowLeft")
    expect_step(page, 2)
    play = page.locator('#transport [data-action="play"]')
    page.keyboard.press(" ")
    expect(play).to_have_attribute("aria-pressed", "true")
    page.keyboard.press(" ")
    expect(play).to_have_attribute("aria-pressed", "false")
    stopped = page.locator(".counter").get_attribute("data-step")
    page.wait_for_timeout(600)
    expect_step(page, int(stopped))
    # Tab reaches the controls, and they say what they do.
    for name in ("Step forward", "Step back", "Play", "Go to step 0", "Go to the last step"):
        expect(page.get_by_role("button", name=name, exact=True)).to_be_visible()
    expect(page.get_by_label("Step: drag to move through the run")).to_be_visible()


def test_manual_mode_clicking_agents_moves_them(page):
    open_inspector(page, "/scenarios/single_barrier?schedule=manual")
    expect(page.locator("#manual-mode")).to_be_checked()
    thread = page.locator('[data-run="main"] button[data-mover="thread"]')
    for k in (1, 2, 3):
        thread.click()
        expect_step(page, k)
    expect(thread).to_be_disabled()  # the thread now waits on bar
    lane = page.locator('.lane[data-agent="thread"]')
    expect(lane.locator(".status")).to_contain_text("waiting on bar parity 0")
    shot(page, "manual-thread-blocked")
    page.locator('[data-run="main"] button[data-mover="tma:load:t0"]').click()
    expect_step(page, 4)
    expect(card(page, "bar")).to_have_attribute("data-tx-count", "3072")
    expect(page).to_have_url(re.compile(r"moves=thread,thread,thread,tma:load:t0"))
    expect(page).to_have_url(re.compile(r"step=4"))
    page.reload()
    expect_step(page, 4)
    expect(card(page, "bar")).to_have_attribute("data-tx-count", "3072")
    shot(page, "manual-after-reload")


def test_manual_pick_on_a_schedule_forks_the_run(page, base_url):
    open_inspector(page, "/scenarios/double_buffer_tma?step=4", 4)
    page.locator("#manual-mode").check()
    ready = page.locator('[data-run="main"] button[data-mover^="tma:"]:not([disabled])')
    expect(ready.first).to_be_visible()
    view = HTTP.post(f"{base_url}/api/v1/sessions",
                      json={"scenario": "double_buffer_tma", "step": 5}).json()
    natural = view["record"]["agent"]
    mover = ready.first.get_attribute("data-mover")
    ready.first.click()
    expect_step(page, 5)
    if natural != "tma":
        expect(page).to_have_url(re.compile(rf"picks=5:{re.escape(mover)}"))
    expect(now_line(page)).to_contain_text("TMA engine")
    shot(page, "manual-pick-tma")


def test_permalink_round_trip(page, browser, base_url):
    query = ("stages=3&tiles=5&consumers=2&bugs=consumer_skips_release"
             "&schedule=random&seed=7")
    open_inspector(page, f"/scenarios/double_buffer_tma?{query}")
    for _ in range(12):
        page.keyboard.press("ArrowRight")
    expect_step(page, 12)
    expect(page).to_have_url(re.compile(r"step=12"))
    url = page.url
    before = cards(page)
    lanes = page.locator('[data-run="main"] .lanes').inner_text()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    other = context.new_page()
    other.goto(url)
    expect_step(other, 12)
    assert cards(other) == before
    assert other.locator('[data-run="main"] .lanes').inner_text() == lanes
    assert other.locator('input[name="stages"]').input_value() == "3"
    assert other.locator('input[name="seed"]').input_value() == "7"
    assert other.locator('input[value="consumer_skips_release"]').is_checked()
    shot(other, "permalink-restored")
    context.close()


def test_embed_page_in_an_iframe(page, base_url):
    headers = HTTP.get(f"{base_url}/embed/single_barrier").headers
    assert "frame-ancestors *" in headers["content-security-policy"]
    open_inspector(page, "/scenarios/single_barrier?step=8", 8)
    page.locator("#copy-embed").click()
    code = page.locator("#embed-code")
    expect(code).to_have_value(re.compile(r'^<iframe src="http://127\.0\.0\.1:\d+/embed/single_barrier\?'))
    page.locator('#embed-dialog input[value="agents"]').uncheck()
    page.locator('#embed-dialog input[value="stages"]').uncheck()
    expect(code).to_have_value(re.compile(r"panels=barriers,timeline,diagnostics,controls"))
    expect(code).to_have_value(re.compile(r"step=8"))
    shot(page, "embed-dialog", full_page=False)
    snippet = code.input_value()
    page.keyboard.press("Escape")
    lesson = f"<!doctype html><h1>A lesson</h1><p>Watch the phase flip:</p>{snippet}"
    with lesson_site(lesson) as host:  # another origin (another port) embeds us
        page.goto(host)
        embedded(page)


def embedded(page):
    frame = page.frame_locator("iframe")
    expect(frame.locator(".counter")).to_have_attribute("data-step", "8")
    expect(frame.locator('[data-barrier="bar"]')).to_have_attribute("data-phase", "1")
    expect(frame.locator('[data-panel="agents"]')).to_have_count(0)
    expect(frame.locator('[data-panel="stages"]')).to_have_count(0)
    expect(frame.locator(".site")).to_have_count(0)
    frame.locator('[data-action="step"]').click()
    expect(frame.locator(".counter")).to_have_attribute("data-step", "9")
    shot(page, "embed-in-iframe")


@contextlib.contextmanager
def lesson_site(html: str):
    """A lesson page on its own loopback port: a real, different origin."""

    class Lesson(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Lesson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_play_and_pause_over_the_websocket(page):
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    open_inspector(page, "/scenarios/double_buffer_tma")
    page.locator('[data-control="speed"]').select_option("30")
    play = page.locator('#transport [data-action="play"]')
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    expect(page.locator(".counter")).not_to_have_attribute("data-step", re.compile(r"^[0-5]$"))
    shot(page, "playing", full_page=False)
    play.click()
    expect(play).to_have_attribute("aria-pressed", "false")
    stopped = page.locator(".counter").get_attribute("data-step")
    page.wait_for_timeout(500)
    expect_step(page, int(stopped))
    assert any(url.endswith("/ws") and "/api/v1/sessions/" in url for url in sockets)


def test_compare_view_marks_the_first_divergence(page):
    page.goto("/compare/single_barrier?bugs=forget_phase_toggle")
    note = page.locator("#divergence")
    # The runs part where the buggy thread has no `phase ^= 1` (step 10), not at the loop
    # counter that the deleted line lets step one step early (issue 21, item 6).
    expect(note).to_have_attribute("data-divergence", "10")
    expect(note).to_contain_text("runs `phase ^= 1;` (line 18) in the correct run")
    expect(note).to_contain_text("the bug deleted `phase ^= 1;` (// BUG: phase ^= 1 is missing)")
    expect(note).not_to_contain_text("i register")
    expect(page.locator(".divergence-mark[visibility=visible]")).to_have_count(2)
    note.get_by_role("button").click()
    expect_step(page, 10)
    left = page.evaluate(READ_CARDS, "left")
    right = page.evaluate(READ_CARDS, "right")
    assert left and right
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect_step(page, 13)
    expect(page.locator('[data-run="right"] [data-diagnostic="stale_wait"]')).to_be_visible()
    # The buggy thread's wait asked parity 0 for completion #2 (parity 1): marked wrong.
    expect(page.locator('[data-run="right"] [data-formula] li[data-agent="thread"]')).to_have_class(
        re.compile("bad"))
    expect(page.locator('[data-run="left"] [data-formula] li.bad')).to_have_count(0)
    expect(page.locator('[data-run="left"] [data-diagnostic]')).to_have_count(0)
    shot(page, "compare-single-barrier")
    page.goto("/compare/double_buffer_tma?bugs=forget_phase_toggle&schedule=random&seed=3&step=46")
    expect(page.locator("#divergence")).to_have_attribute("data-divergence", re.compile(r"\d+"))
    expect_step(page, 46)
    shot(page, "compare-double-buffer")


def test_catalogue_and_gpu_replay_beside_the_simulation(page):
    page.goto("/")
    expect(page.locator(".scenario-card")).to_have_count(5)
    shot(page, "catalogue")
    link = page.locator("#replay-list a").first
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#replay-source")).to_contain_text("captured on")
    expect(page.locator('[data-run="left"] .lane-label', has_text="GPU time")).to_have_count(1)
    expect(page.locator('[data-run="right"] .lane-label', has_text="step")).to_have_count(1)
    page.keyboard.press("End")
    expect(page.locator('[data-run="left"] .now-line')).to_contain_text(" ns")
    shot(page, "replay")


PROBES_FIXTURE = Path(__file__).resolve().parents[1] / "replay" / "probes_v2.json"


def test_replay_shows_its_verdict_figures_launch_and_kernel(page, base_url):
    page.goto("/replays/double_buffer_tma_2stage_1consumer")
    note = page.locator("#divergence")
    expect(note).to_have_attribute("data-conformance", "passes")
    expect(note).to_contain_text("explains all 48 observations")
    expect(page.locator('[data-figure="observations"]')).to_have_text("48")
    expect(page.locator('[data-figure="landings"]')).to_contain_text("32")
    expect(page.locator(".launch-line")).to_have_attribute("data-launched", "132")
    expect(page.locator(".launch-line")).to_contain_text("132 finished")
    expect(page.locator("#replay-title")).to_contain_text("TMA ring")
    expect(page.locator("#replay-lesson")).to_contain_text("Replayed in the GPU's order")
    kernel = page.locator('[data-download="kernel"]')
    expect(kernel).to_be_visible()
    expect(kernel).to_have_text("the kernel that ran")
    text = HTTP.get(base_url + kernel.get_attribute("href")).text
    assert "pipeline_kernel" in text
    panel = page.locator("#probes-panel")
    expect(panel).to_be_visible()
    expect(panel).not_to_have_attribute("open", "")
    shot(page, "replay-verdict")


def test_a_launch_table_says_why_ctas_never_reported(page):
    """A CTA with no report was ended by a trap, or by the host when the launch hung (a wait
    with no deadline, such as a named barrier's): the table names which."""
    page.goto("/replays/bar_red_short_count")
    line = page.locator(".launch-line")
    expect(line).to_contain_text("1 never reported (the launch hung)")
    expect(line).not_to_contain_text("trap")
    page.goto("/replays/double_buffer_tma_producer_skips_empty_wait_132ctas")
    expect(page.locator(".launch-line")).to_contain_text("132 never reported (trap)")


def test_replay_jumps_to_its_first_divergence(page, base_url):
    doc = HTTP.get(f"{base_url}/api/v1/replays/single_barrier").json()
    doc["source"]["conformance"].update(
        matches=False, first_divergence={"step": 20, "why": "a fabricated disagreement"})
    page.route("**/api/v1/replays/single_barrier",
               lambda route: route.fulfill(status=200, content_type="application/json",
                                           body=json.dumps(doc)))
    page.goto("/replays/single_barrier")
    note = page.locator("#divergence")
    expect(note).to_have_attribute("data-conformance", "diverges")
    expect(note).to_contain_text("at step 20: a fabricated disagreement")
    expect(page.locator('[data-run="left"] .divergence-mark[visibility=visible]')).to_have_count(1)
    note.get_by_role("button", name="Jump to step 20").click()
    expect_step(page, 20)


def test_probes_panel_renders_beside_the_model(page):
    fixture = PROBES_FIXTURE.read_text()
    page.route("**/api/v1/replays/probes",
               lambda route: route.fulfill(status=200, content_type="application/json",
                                           body=fixture))
    page.goto("/replays/double_buffer_tma_expect_tx_short")
    panel = page.locator("#probes-panel")
    expect(panel).to_have_attribute("open", "")
    expect(panel).to_have_attribute("data-probes", "shown")
    row = panel.locator('[data-table="scale"] tr[data-probe="short_one_copy"]')
    expect(row.locator('[data-outcome="early"]')).to_have_text("24.7%")
    expect(row.locator('[data-outcome="hung"]')).to_have_text("75.3%")
    expect(row).to_contain_text("partial_read, deadlock")
    expect(row.locator('[data-agrees="true"]')).to_contain_text("reachable")
    single = panel.locator('[data-table="single"] tr[data-probe="exact"]')
    expect(single).to_contain_text("completed")
    expect(panel.locator('[data-part="granularity"]')).to_contain_text("128 bytes")
    shot(page, "replay-probes")


def test_missing_probes_degrade_gracefully(page):
    page.route("**/api/v1/replays/probes",
               lambda route: route.fulfill(status=404, content_type="application/json",
                                           body='{"detail": [{"loc": ["file", "probes"], '
                                                '"msg": "no tx-count probes shipped"}]}'))
    page.goto("/replays/single_barrier_expect_tx_long")
    panel = page.locator("#probes-panel")
    expect(panel).to_have_attribute("data-probes", "missing")
    expect(panel).to_contain_text("No tx-count probes")


def test_a_pipeline_that_is_not_a_builtin_replays_beside_its_simulation(page):
    page.goto("/replays/release_behind")
    expect(page.locator("#replay-source")).to_contain_text("a pipeline of its own")
    verdict = page.locator("#divergence")
    expect(verdict).to_have_attribute("data-conformance", "passes")
    expect(verdict).not_to_contain_text("could not run")
    simulated = page.locator('[data-run="right"]')
    page.keyboard.press("End")
    expect(simulated.locator('.lane[data-agent="consumer"]')).to_be_visible()
    expect(simulated.locator(".now-line")).not_to_contain_text("Step 0 ")
    expect(simulated.locator(".timeline svg")).to_be_visible()


def test_missing_replay_degrades_gracefully(page):
    page.goto("/replays/no-such-trace")
    expect(page.locator("#replay-source")).to_contain_text("no GPU trace")


def test_kloop_says_it_is_simulation_only(page):
    open_inspector(page, "/scenarios/kloop_tma_mma")
    expect(page.locator('[data-note="simulation-only"]')).to_contain_text("Hopper")
    page.keyboard.press("End")
    expect(page.locator(".status-pill")).to_have_attribute("data-status", "done")
    shot(page, "kloop-end")


def test_check_button_loads_a_counterexample(page):
    open_inspector(page, "/scenarios/double_buffer_tma?bugs=forget_phase_toggle")
    page.locator("#check-button").click()
    verdict = page.locator("#check-result [data-verdict]")
    expect(verdict).to_have_attribute("data-verdict", "unsafe")
    first = page.locator("#check-result [data-violation]").first
    kind = first.get_attribute("data-violation")
    first.get_by_role("button").click()
    expect(page.locator(f'[data-run="main"] [data-diagnostic="{kind}"].now')).to_be_visible()
    expect(page.locator("#manual-mode")).to_be_checked()
    expect(page).to_have_url(re.compile(r"schedule=manual&moves="))
    shot(page, "check-counterexample")


def test_bad_parameters_name_the_field(page):
    open_inspector(page, "/scenarios/double_buffer_tma")
    page.locator('input[name="chunk_bytes"]').fill("1000")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator(".form-error")).to_contain_text("chunk_bytes")
    expect(page.locator('input[name="chunk_bytes"]')).to_have_attribute("aria-invalid", "true")
    page.locator('input[name="chunk_bytes"]').fill("512")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator(".form-error")).to_have_text("")
    expect(page).to_have_url(re.compile(r"chunk_bytes=512"))
    expect(page.locator('[data-stage="smem[0]"] .chunk')).to_have_count(8)


def test_offline_page_weight_and_accessible_names(page, base_url):
    sizes = {}
    urls = []

    def on_response(response):
        urls.append(response.url)
        if "/api/" not in response.url:
            try:
                sizes[response.url] = len(response.body())
            except Exception:  # noqa: BLE001 - redirects have no body
                pass

    page.on("response", on_response)
    open_inspector(page, "/scenarios/double_buffer_tma")
    page.wait_for_load_state("networkidle")
    assert all(url.startswith(base_url) for url in urls), urls
    assert sum(sizes.values()) < 300_000, sizes
    unnamed = page.evaluate("""() => [...document.querySelectorAll('button, input, select, a')]
      .filter(e => e.offsetParent !== null)
      .filter(e => !(e.getAttribute('aria-label') || e.textContent.trim() || e.labels?.length
                     || e.title)).map(e => e.outerHTML.slice(0, 80))""")
    assert unnamed == []


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_screens_and_themes(browser, base_url, theme, width, height):
    context = browser.new_context(viewport={"width": width, "height": height},
                                  base_url=base_url, color_scheme=theme)
    page = context.new_page()
    open_inspector(page, "/scenarios/double_buffer_tma?bugs=forget_phase_toggle"
                         "&schedule=random&seed=3&step=21", 21)
    assert page.evaluate("document.documentElement.dataset.theme") == theme
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"the page is {overflow}px wide at {width}px"
    shot(page, f"inspector-{width}x{height}-{theme}", full_page=False)
    shot(page, f"inspector-{width}x{height}-{theme}-full")
    page.goto("/compare/single_barrier?bugs=forget_phase_toggle&step=14")
    expect_step(page, 14)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shot(page, f"compare-{width}x{height}-{theme}", full_page=False)
    context.close()


def test_theme_toggle_is_remembered(page):
    open_inspector(page, "/scenarios/single_barrier")
    page.locator("#theme-toggle").click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def test_why_pipelining_plot_draws_the_measured_bandwidth(page):
    page.goto("/")
    chart = page.locator("#bandwidth-chart svg.bw-chart")
    expect(chart).to_be_visible()
    lines = page.locator("#bandwidth-chart .bw-line")
    expect(lines).to_have_count(3)
    assert page.locator("#bandwidth-chart .bw-memcpy").count() == 1
    assert lines.first.get_attribute("data-tile-bytes") == "4096"
    expect(page.locator("#bandwidth-chart")).to_contain_text("of cudaMemcpy")
    page.locator("#why-pipelining").scroll_into_view_if_needed()
    shot(page, "why-pipelining")
