"""Authored pipelines in the browser (issue 9, items 1-3): the /author editor (colouring, the
validate error at its line and column as you type, the form its declarations generate, Run and
Ctrl+Enter, "Start from", the source lines of the current step), share links with the whole
pipeline in the URL fragment (/author, /p, /embed/p; a fragment that does not decode runs
nothing), lesson notes written beside the timeline, and the same step, snapshot and note in a
fresh browser, an iframe and an exported file opened offline. Screenshots under test-artifacts/."""

from __future__ import annotations

import hashlib
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, shot
from tests.browser.test_inspector import expect_step, lesson_site
from tests.browser.test_learning import EVIL, offline_page
from tests.browser.test_rough_edges import LOW_CONTRAST

pytestmark = pytest.mark.browser

RING = """// A ring of one stage, written by hand: a producer and a consumer thread.
param tiles = 3    in 1..50      "tiles that pass through the stage";
param bytes = 2048 in 512..8192  "bytes per tile (a multiple of 512)";

tensor  tile[tiles] bytes bytes;
smem    stage bytes bytes chunk 512;
barrier full = 1;
barrier empty = 1;

agent producer {
    int phase = 1;
    for (int i = 0; i < tiles; ++i) {
        mbarrier.try_wait.parity.shared::cta.b64 p, [empty], phase;
        mbarrier.arrive.expect_tx.shared::cta.b64 _, [full], bytes;
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [stage], [tile[i]], bytes, [full];
        phase ^= 1;
    }
}

agent consumer {
    int phase = 0;
    for (int i = 0; i < tiles; ++i) {
        mbarrier.try_wait.parity.shared::cta.b64 p, [full], phase;
        ld.shared x, [stage], tile[i];
        mbarrier.arrive.shared::cta.b64 _, [empty];
        phase ^= 1;
    }
}

bug consumer_forgets_phase "the consumer never flips its phase register: its second wait returns on the first tile's phase" {
    in consumer replace "phase ^= 1;" with "// BUG: phase ^= 1 is missing";
}
"""  # noqa: E501 - a pipeline's lines are as long as PTX makes them
NOTE_13 = "**The wait returned** on tile 0's phase: `full` has not seen tile 1 yet."
NOTE_15 = ("Look at the byte bar: 2,048 bytes are still pending while the consumer *reads* "
           "the stage.")
BUILT_INS = ("single_barrier", "double_buffer_tma", "cluster_multicast", "kloop_tma_mma",
             "proxy_fence_store")
READ_STATE = """els => els.map(c => ({name: c.dataset.barrier, phase: c.dataset.phase,
  parity: c.dataset.parity, pending: c.dataset.pendingArrivals,
  expected: c.dataset.expectedArrivals, tx: c.dataset.txCount}))"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def open_author(page, path: str = "/author"):
    page.goto(path)
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))


def start_empty(page):
    """"Start from: an empty pipeline" (no lesson notes carried over from a built-in)."""
    page.locator("[data-start-from]").select_option("")
    page.locator("[data-load-start]").click()
    expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
    expect(page.locator("[data-editor]")).to_have_value(re.compile(r"^// A pipeline"))
    expect(page.locator("[data-callout-item]")).to_have_count(0)


def run_source(page, source: str):
    page.locator("[data-editor]").fill(source)
    expect(page.locator("[data-editor-state]")).to_contain_text("Compiles")
    page.locator("[data-run]").click()
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(source))


def seek(scope, step: int):
    scope.locator('[data-control="scrubber"]').fill(str(step))
    expect_step(scope, step)


def state_of(scope) -> dict:
    """What a student sees at the cursor: the step, every barrier card, the diagnostics shown and
    the note (its step and text)."""
    callout = scope.locator("[data-callout]")
    expect(callout.locator(".callout-body")).not_to_be_empty()
    return {
        "step": scope.locator(".counter").get_attribute("data-step"),
        "cards": scope.locator('.run [data-barrier]').evaluate_all(READ_STATE),
        "diagnostics": scope.locator("[data-diagnostic]").evaluate_all(
            "els => els.map(e => e.dataset.diagnostic)"),
        "callout_step": callout.get_attribute("data-callout-step"),
        "callout": callout.locator(".callout-body").inner_text(),
    }


def copied(page, what: str) -> str:
    """Click a "Copy ..." button and read what it wrote in the share box."""
    page.locator(f'[data-copy="{what}"]').click()
    pattern = {"inspector": r"^http://127\.0\.0\.1:\d+/p#v1\.[A-Za-z0-9_-]+$",
               "link": r"^http://127\.0\.0\.1:\d+/(author|p)#v1\.[A-Za-z0-9_-]+$",
               "embed": r"^<iframe src=\"http://127\.0\.0\.1:\d+/embed/p"}[what]
    box = page.locator("[data-share-url]")
    expect(box).to_have_value(re.compile(pattern))
    return box.input_value()


def wait_fragment(page) -> str:
    expect(page.locator("#inspector")).to_have_attribute("data-fragment", "ready")
    return page.url


def author_lesson(page) -> dict:
    """Type RING into /author, two tiles, the toggle on, a title, two notes; stand at step 15."""
    open_author(page)
    start_empty(page)
    page.locator("[data-editor]").fill(RING)
    expect(page.locator("[data-editor-state]")).to_contain_text(
        "Compiles: 2 agents (producer, consumer)")
    tiles = page.locator('#pipe-config input[name="tiles"]')
    expect(tiles).to_have_value("3")
    expect(tiles).to_have_attribute("max", "50")
    tiles.fill("2")
    toggle = page.locator('#pipe-config input[value="consumer_forgets_phase"]')
    toggle.check()
    expect(page.locator("#tdoc-consumer_forgets_phase")).to_contain_text("never flips its phase")
    page.locator("[data-title-input]").fill("A ring of one stage")
    page.locator("[data-editor]").press("Control+Enter")
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(page.locator(".counter .total")).to_have_text("22")
    seek(page, 13)
    page.locator("[data-add-callout]").click()
    page.locator('[data-callout-item="13"] textarea').fill(NOTE_13)
    seek(page, 15)
    page.locator("[data-add-callout]").click()
    page.locator('[data-callout-item="15"] textarea').fill(NOTE_15)
    callout = page.locator("[data-callout]")
    expect(callout).to_have_attribute("data-callout-step", "15")
    expect(callout.locator("em")).to_have_text("reads")
    expect(page.locator('.run [data-callout-mark]')).to_have_count(2)
    expect(page.locator('[data-barrier="full"]')).to_have_attribute("data-tx-count", "2048")
    expect(page.locator('[data-diagnostic="stale_read"]')).to_be_visible()
    return state_of(page)


# ------------------------------------------------------------------ done when: four places

def test_authored_lesson_shows_the_same_step_snapshot_and_note_everywhere(page, browser, base_url):
    """Typed into /author, shared by link, reloaded in a fresh browser context, embedded in an
    iframe, exported to a file opened from file:// with the network off: the same step, the same
    barrier cards and diagnostics, the same note."""
    seen = author_lesson(page)
    assert seen["step"] == "15" and seen["callout_step"] == "15"
    assert {"stale_wait", "stale_read"} <= set(seen["diagnostics"])
    shot(page, "author-ring-step-15")
    author_url = wait_fragment(page)
    assert "#v1." in author_url and "consumer" not in author_url  # deflated, not plain text
    assert copied(page, "link") == author_url
    inspector_url = copied(page, "inspector")
    copied(page, "embed")
    page.locator('[data-embed-panels] input[value="agents"]').uncheck()
    snippet = page.locator("[data-share-url]")
    expect(snippet).to_have_value(re.compile(r"/embed/p\?panels=barriers,stages,timeline,diagnostics,controls#v1\."))
    snippet = snippet.input_value()
    with page.expect_download() as download:
        page.locator('[data-download="lesson"]').click()
    exported = ARTIFACTS / "authored-ring-lesson.html"
    download.value.save_as(exported)
    assert download.value.suggested_filename == (
        f"pipeline-{sha(RING)[:12]}-consumer_forgets_phase.html")

    # A fresh browser context (no storage, no cache): the /author link and the inspector link.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    fresh = context.new_page()
    errors = []
    fresh.on("pageerror", lambda e: errors.append(str(e)))
    fresh.goto(author_url)
    expect(fresh.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(fresh.locator("[data-editor]")).to_have_value(RING)
    expect(fresh.locator('#pipe-config input[name="tiles"]')).to_have_value("2")
    expect(fresh.locator('#pipe-config input[value="consumer_forgets_phase"]')).to_be_checked()
    expect(fresh.locator("[data-title-input]")).to_have_value("A ring of one stage")
    expect(fresh.locator("[data-callout-item]")).to_have_count(2)
    assert state_of(fresh) == seen
    fresh.goto(inspector_url)
    expect(fresh.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(fresh.locator("h1")).to_have_text("A ring of one stage")
    assert state_of(fresh) == seen
    shot(fresh, "authored-inspector-p-step-15")
    fresh.locator("[data-action='step']").click()
    expect_step(fresh, 16)
    wait_fragment(fresh)
    fresh.reload()  # the URL follows the cursor
    expect(fresh.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect_step(fresh, 16)

    # Embedded in another origin's page.
    with lesson_site(f"<!doctype html><h1>Week 3</h1>{snippet}") as host:
        fresh.goto(host)
        frame = fresh.frame_locator("iframe")
        expect(frame.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
        assert state_of(frame) == seen
        expect(frame.locator('[data-panel="agents"]')).to_have_count(0)
        frame.locator('[data-action="back"]').click()
        expect_step(frame, 14)
        expect(fresh.locator("iframe")).to_have_attribute("style", re.compile(r"height: \d+px"))
        shot(fresh, "authored-embed-in-iframe")
    assert errors == []
    context.close()

    # The exported file, from file://, with the network off.
    offline, opened, requests, errors = offline_page(browser)
    opened.goto(exported.as_uri())
    expect(opened.locator("#inspector")).to_have_attribute("data-ready", "true")
    expect(opened.locator("h1")).to_have_text("A ring of one stage")
    assert state_of(opened) == seen
    shot(opened, "authored-export-offline-step-15")
    # Prediction mode reads the snapshot at the cursor in the file too.
    opened.locator("[data-predict-toggle]").check()
    seek(opened, 12)
    opened.locator('[data-action="step"]').click()
    expect(opened.locator("[data-predict]")).to_have_attribute("data-predict", "wait")
    opened.locator('[data-choice="stale"]').click()
    result = opened.locator("[data-predict-result]")
    expect(result).to_have_attribute("data-predict-result", "right")
    expect_step(opened, 13)
    assert all(url.startswith(("file:", "blob:", "data:")) for url in requests), requests
    assert errors == []
    offline.close()


# ------------------------------------------------------------------------- the editor (1)

def test_editor_colours_the_source_and_marks_the_error_as_you_type(page):
    open_author(page)
    editor = page.locator("[data-editor]")
    editor.fill(RING)
    expect(page.locator("[data-editor-state]")).to_contain_text("Compiles")
    code = page.locator(".editor-code")
    expect(code.locator(".t-op").first).to_have_text("mbarrier.try_wait.parity.shared::cta.b64")
    expect(code.locator(".t-kw").first).to_have_text("param")
    expect(code.locator(".t-com").first).to_contain_text("A ring of one stage")
    expect(code.locator(".t-str").first).to_have_text('"tiles that pass through the stage"')
    expect(page.locator(".editor-gutter .gl")).to_have_count(RING.count("\n") + 1)
    # A missing `;` on line 11: the marker appears at the line, the message gives the column.
    broken = RING.replace("int phase = 1;", "int phase = 1")
    editor.fill(broken)
    marker = page.locator("[data-error-line]")
    expect(marker).to_have_text("11")
    expect(page.locator("[data-error]")).to_contain_text("Line 11, column 18")
    expect(page.locator("[data-error]")).to_contain_text("`;` is missing")
    expect(editor).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".editor-code .ln.err .caret-mark")).to_have_count(1)
    shot(page, "author-error-line-11", full_page=False)
    # Typing on: an unknown opcode on line 13 moves the marker there.
    editor.fill(RING.replace("mbarrier.try_wait.parity.shared::cta.b64 p, [empty]",
                             "mbarrier.try_wiat.parity.shared::cta.b64 p, [empty]"))
    expect(marker).to_have_text("13")
    page.locator("[data-error] button").click()  # "Go to the error"
    assert page.evaluate("document.activeElement.matches('[data-editor]')")
    # Fixed: the marker goes; Run is refused while the error stands.
    editor.fill(broken)
    expect(marker).to_have_text("11")
    page.locator("[data-run]").click()
    expect(page.locator("#inspector")).not_to_have_attribute("data-ran", sha(broken))
    editor.fill(RING)
    expect(page.locator("[data-error-line]")).to_have_count(0)
    expect(editor).to_have_attribute("aria-invalid", "false")


def test_form_comes_from_the_declarations_and_run_takes_it(page):
    open_author(page)
    run_source(page, RING)
    source = RING.replace('param bytes', 'param waves = 2 in 1..4 "a new knob";\nparam bytes')
    source = source.replace("bug consumer_forgets_phase",
                            'bug gone "a patch whose text is not there" {\n'
                            '    replace "no such text;" with "x";\n}\n'
                            'bug consumer_forgets_phase')
    page.locator('#pipe-config input[name="tiles"]').fill("4")
    page.locator("[data-editor]").fill(source)
    waves = page.locator('#pipe-config input[name="waves"]')
    expect(waves).to_have_value("2")
    expect(waves).to_have_attribute("min", "1")
    expect(page.locator("#pdoc-waves")).to_contain_text("a new knob (1..4, default 2)")
    expect(page.locator('#pipe-config input[name="tiles"]')).to_have_value("4")  # kept
    gone = page.locator('#pipe-config input[value="gone"]')
    expect(gone).to_be_disabled()
    expect(page.locator("#tdoc-gone")).to_contain_text("cannot apply")
    expect(page.locator("[data-unapplied]")).to_be_visible()
    page.keyboard.press("Control+Enter")  # from anywhere on the page
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(source))
    expect(page.locator("[data-unapplied]")).to_be_hidden()
    expect(page.locator(".counter .total")).to_have_text(str(12 * 4))
    # A value the engine refuses names its field.
    page.locator('#pipe-config input[name="bytes"]').fill("1000")
    page.locator("[data-run]").click()
    expect(page.locator("#pipe-config .form-error")).to_contain_text("bytes")
    expect(page.locator('#pipe-config input[name="bytes"]')).to_have_attribute(
        "aria-invalid", "true")
    # No manual schedule without sessions: the page says so.
    assert page.locator('#pipe-config select[name="schedule"] option').all_inner_texts() == [
        "round robin", "random (seeded)"]
    expect(page.locator("[data-needs-session]")).to_contain_text("manual mode (choosing who moves)")


def test_start_from_loads_every_built_in(page, base_url):
    open_author(page)
    select = page.locator("[data-start-from]")
    listed = httpx.get(f"{base_url}/api/v1/scenarios", timeout=30).json()["scenarios"]
    catalogue = [s["id"] for s in listed]
    assert set(BUILT_INS) <= set(catalogue)
    assert select.locator("option").evaluate_all("os => os.map(o => o.value)") == [*catalogue, ""]
    for scenario in BUILT_INS:
        source = httpx.get(f"{base_url}/api/v1/scenarios/{scenario}").json()["source"]
        select.select_option(scenario)
        page.locator("[data-load-start]").click()
        expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
        expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(source),
                                                             timeout=20_000)
        assert page.locator("[data-editor]").input_value() == source
        total = httpx.get(f"{base_url}/api/v1/traces/{scenario}",
                          params={"snapshots": "false"}).json()
        expect(page.locator(".counter .total")).to_have_text(str(total["total_steps"]))
    # A first visit starts with no notes; an explicit Load brings the built-in lesson's notes
    # (and "Remove every note" takes them away); the text typed before can come back.
    page.goto("/author")
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile("."))
    expect(page.locator("[data-callout-item]")).to_have_count(0)
    expect(page.locator("[data-clear-callouts]")).to_be_hidden()
    select.select_option("single_barrier")
    page.locator("[data-load-start]").click()
    expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
    source = httpx.get(f"{base_url}/api/v1/scenarios/single_barrier").json()["source"]
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(source))
    expect(page.locator("[data-callout-item]").first).to_be_visible()
    expect(page.locator(".run [data-callout-mark]").first).to_be_visible()
    page.locator("[data-clear-callouts]").click()
    expect(page.locator("[data-callout-item]")).to_have_count(0)
    expect(page.locator(".run [data-callout-mark]")).to_have_count(0)
    expect(page.locator("[data-callout]")).to_be_hidden()
    page.locator("[data-editor]").fill(RING)
    select.select_option("")
    page.locator("[data-load-start]").click()
    expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
    expect(page.locator("[data-editor]")).to_have_value(re.compile(r"^// A pipeline"))
    page.locator("[data-restore]").click()
    expect(page.locator("[data-editor]")).to_have_value(RING)


def test_the_source_lines_of_the_current_step_are_marked(page, base_url):
    open_author(page)
    run_source(page, RING)
    doc = httpx.post(f"{base_url}/api/v1/traces", json={"source": RING}).json()
    lines = {a["name"]: a["source_lines"] for a in doc["layout"]["agents"]}
    for step in (0, 4, 9, 13):
        seek(page, step)
        snapshot = doc["initial"] if step == 0 else doc["steps"][step - 1]["snapshot"]
        want = {}
        for agent in snapshot["agents"]:
            if agent["status"] != "done":
                want.setdefault(lines[agent["name"]][agent["line"]], []).append(agent["name"])
        # The editor draws on the next animation frame: wait for the marks, then compare.
        expect(page.locator("[data-current-line]")).to_have_count(len(want))
        for line, names in want.items():
            expect(page.locator(f".editor-gutter .gl:nth-child({line})")).to_have_attribute(
                "data-current-line", ",".join(names))
        expect(page.locator(".editor-code .ln.cur")).to_have_count(len(want))
        # The lanes number their lines as the source does.
        lane = page.locator('.lane[data-agent="consumer"] .program li.current')
        agent = next(a for a in snapshot["agents"] if a["name"] == "consumer")
        expect(lane).to_have_attribute("data-source-line", str(lines["consumer"][agent["line"]]))
    shot(page, "author-source-lines-step-13", full_page=False)
    # Edited text no longer matches the run: the marks go until the next Run.
    page.locator("[data-editor]").fill(RING + "\n// more\n")
    expect(page.locator("[data-current-line]")).to_have_count(0)
    expect(page.locator("[data-unapplied]")).to_be_visible()


def test_random_schedule_and_its_seed_survive_the_link(page, base_url):
    open_author(page)
    start_empty(page)
    run_source(page, RING)
    page.locator('#pipe-config select[name="schedule"]').select_option("random")
    page.locator('#pipe-config input[name="seed"]').fill("7")
    page.locator("[data-run]").click()
    expect(page.locator("[data-unapplied]")).to_be_hidden()
    doc = httpx.post(f"{base_url}/api/v1/traces", json={
        "source": RING, "schedule": "random", "seed": 7, "snapshots": False}).json()
    movers = [s["agent"] for s in doc["steps"]]
    seek(page, 6)
    expect(page.locator(".now-line")).to_contain_text(
        "TMA engine" if movers[5] == "tma" else movers[5])
    before = page.locator(".run [data-barrier]").evaluate_all(READ_STATE)
    url = wait_fragment(page)
    page.goto("about:blank")
    page.goto(url)
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(page.locator('#pipe-config select[name="schedule"]')).to_have_value("random")
    expect(page.locator('#pipe-config input[name="seed"]')).to_have_value("7")
    expect_step(page, 6)
    assert page.locator(".run [data-barrier]").evaluate_all(READ_STATE) == before


def test_in_page_links_keep_the_state_in_the_url(page):
    """The skip link (#main) changes the fragment; the page puts the pipeline back."""
    open_author(page)
    url = wait_fragment(page)
    page.keyboard.press("Tab")
    expect(page.locator(".skip")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(url)
    page.reload()
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))
    expect(page.locator("[data-fragment-error]")).to_be_hidden()


def test_an_embed_without_controls_takes_the_keys(page):
    open_author(page)
    link = copied(page, "inspector")
    page.goto(link.replace("/p#", "/embed/p?panels=barriers,timeline#"))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile("."))
    expect(page.locator("#transport")).to_have_count(0)
    expect(page.locator('[data-panel="agents"]')).to_have_count(0)
    now = page.locator(".now-line")
    expect(now).to_contain_text("Step 0")
    page.locator("#inspector").focus()
    page.keyboard.press("ArrowRight")
    expect(now).to_contain_text("Step 1 ")
    page.keyboard.press("End")
    expect(now).to_contain_text("Step 28 ")
    expect(page.locator("#open-full")).to_have_attribute("href", re.compile(r"^/p#v1\."))


def test_a_long_run_is_held_in_part_and_says_so(page):
    open_author(page)  # single_barrier's text
    page.locator('#pipe-config input[name="tiles"]').fill("300")
    page.locator("[data-run]").click()
    note = page.locator("[data-window-note]")
    expect(note).to_be_visible()
    expect(note).to_have_attribute("data-step-limit", "2000")
    expect(note).to_contain_text("the page holds the first 2,000")
    expect(page.locator(".counter .total")).to_have_text("2000")
    page.keyboard.press("End")
    expect_step(page, 2000)
    expect(page.locator(".status-pill")).to_have_attribute("data-status", "step_limit")
    page.locator('#pipe-config input[name="tiles"]').fill("3")
    page.locator("[data-run]").click()
    expect(note).to_be_hidden()


def test_catalogue_links_to_the_editor(page):
    page.goto("/")
    page.locator("[data-author-link]").click()
    expect(page).to_have_url(re.compile(r"/author#v1\."))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))


def test_tab_indents_and_escape_then_tab_leaves_the_editor(page):
    open_author(page)
    editor = page.locator("[data-editor]")
    editor.fill("")
    editor.press("Tab")
    assert editor.input_value() == "    "
    editor.press("Escape")
    editor.press("Tab")
    assert not page.evaluate("document.activeElement.matches('[data-editor]')")


# -------------------------------------------------------------------- share links (2)

def test_links_that_do_not_decode_say_so_and_run_nothing(page, base_url):
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto(f"{base_url}/barrier")
    damaged = page.evaluate("""async () => {
      const {encodeState} = await import('/static/js/share.js');
      const good = await encodeState({source: 'x'});
      const raw = async (text) => {
        const s = new Blob([new TextEncoder().encode(text)]).stream()
          .pipeThrough(new CompressionStream('deflate-raw'));
        const b = new Uint8Array(await new Response(s).arrayBuffer());
        return 'v1.' + btoa(String.fromCharCode(...b)).replaceAll('+', '-')
          .replaceAll('/', '_').replace(/=+$/, '');
      };
      return {cut: good.slice(0, good.length - 6), notjson: await raw('hello'),
              noSource: await raw('{"params": {}}'),
              badStep: await raw('{"source": "x", "step": -3}')};
    }""")
    cases = {"#nonsense": "does not start with", "#v1.%%%": "base64url",
             f"#{damaged['cut']}": "does not decode", f"#{damaged['notjson']}": "not JSON",
             f"#{damaged['noSource']}": "no pipeline source", f"#{damaged['badStep']}": "step"}
    for path in ("/p", "/embed/p", "/author"):
        for case, (fragment, words) in enumerate(cases.items()):
            posts.clear()
            page.goto(f"{base_url}{path}?case={case}{fragment}")  # a new document each time
            error = page.locator("[data-fragment-error]")
            expect(error).to_be_visible()
            expect(error).to_contain_text(words)
            expect(page.locator("#inspector")).to_have_attribute("data-fragment", "error")
            expect(page.locator("[data-barrier]")).to_have_count(0)
            assert not any("/api/v1/traces" in url for url in posts), (path, fragment, posts)
        shot(page, f"bad-link{path.replace('/', '-')}", full_page=False)
    # On /author the editor still works: loading a built-in runs it and the error goes.
    page.locator("[data-load-start]").click()
    expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))
    expect(page.locator("[data-fragment-error]")).to_be_hidden()
    expect(page.locator(".run [data-barrier]").first).to_be_visible()
    page.goto(f"{base_url}/p")
    expect(page.locator("[data-fragment-error]")).to_contain_text("carries no pipeline")
    # A link that decodes to a pipeline that does not compile: /p says where, /author marks it.
    text = RING.replace("int phase = 1;", "int phase = 1")
    broken = page.evaluate("""async (source) => {
      const {encodeState} = await import('/static/js/share.js');
      return encodeState({source});
    }""", text)
    page.goto(f"{base_url}/p?again=1#{broken}")
    expect(page.locator("[data-fragment-error]")).to_contain_text("does not run")
    expect(page.locator("[data-fragment-error]")).to_contain_text("line 11, column 18")
    expect(page.locator("[data-barrier]")).to_have_count(0)
    page.goto(f"{base_url}/author?again=1#{broken}")
    expect(page.locator("[data-error-line]")).to_have_text("11")
    expect(page.locator("[data-editor]")).to_have_value(text)


def test_state_round_trips_through_the_fragment_with_any_text(page, base_url):
    page.goto(f"{base_url}/barrier")
    state = {"source": "// é ✓ 😀 \u2028 </script>\n" + RING, "title": "Ünïcode ✓",
             "params": {"tiles": 2}, "bugs": ["consumer_forgets_phase"], "schedule": "random",
             "seed": 2**40, "step": 7, "predict": True,
             "callouts": [{"step": 3, "text": "😀 **bold** `x`\n\n- a\n- b"}]}
    back = page.evaluate("""async (state) => {
      const {encodeState, decodeState} = await import('/static/js/share.js');
      const fragment = await encodeState(state);
      return {fragment, state: await decodeState('#' + fragment)};
    }""", state)
    assert re.fullmatch(r"v1\.[A-Za-z0-9_-]+", back["fragment"])
    assert back["state"] == {**state, "moves": []}


def test_a_64_kib_source_travels_in_the_fragment(page, base_url):
    """The largest source a pipeline may be (64 KiB), hard to compress, round-trips through the
    URL; one byte more is refused with a message at the editor."""
    filler = hashlib.sha256(b"0").hexdigest()
    lines, n = [], 0
    while len("\n".join(lines).encode()) < 64 * 1024 - len(RING.encode()) - 200:
        digest = hashlib.sha256(filler.encode() + bytes([n % 256, n // 256])).hexdigest()
        lines.append(f"// {digest}")
        n += 1
    big = RING + "\n".join(lines) + "\n"
    big += "/" * (64 * 1024 - len(big.encode()) - 1) + "\n"
    assert len(big.encode()) == 64 * 1024
    open_author(page)
    page.locator("[data-editor]").fill(big)
    expect(page.locator("[data-editor-state]")).to_contain_text("Compiles")
    page.locator("[data-run]").click()
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(big))
    seek(page, 9)
    url = wait_fragment(page)
    assert len(url) > 40_000
    page.goto("about:blank")
    page.goto(url)
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(big))
    assert page.locator("[data-editor]").input_value() == big
    expect_step(page, 9)
    page.locator("[data-editor]").fill(big + "/")
    expect(page.locator("[data-error]")).to_contain_text("over 64 KiB")


def test_p_applies_its_form_and_keeps_prediction_in_the_link(page, base_url):
    author_lesson(page)
    page.goto(copied(page, "inspector"))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(page.locator('#pipe-config input[name="tiles"]')).to_have_value("2")
    page.locator('#pipe-config input[value="consumer_forgets_phase"]').uncheck()
    expect(page.locator("[data-unapplied]")).to_be_visible()
    page.locator('#pipe-config button[type="submit"]').click()
    expect(page.locator(".counter .total")).to_have_text("24")
    expect(page.locator("[data-diagnostic]")).to_have_count(0)
    page.locator("[data-predict-toggle]").check()
    page.locator('[data-action="step"]').click()
    expect(page.locator("[data-predict]")).to_be_visible()
    page.locator("[data-choice]").first.click()
    expect(page.locator("[data-predict-result]")).to_be_visible()
    url = wait_fragment(page)
    page.goto("about:blank")
    page.goto(url)
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(page.locator("[data-predict-toggle]")).to_be_checked()
    expect(page.locator('#pipe-config input[value="consumer_forgets_phase"]')).not_to_be_checked()
    page.locator("details.source-view summary").click()
    expect(page.locator(".source-view [data-current-line]").first).to_be_visible()
    shot(page, "authored-p-source-view")
    edit = page.locator("[data-edit-link]")
    expect(edit).to_have_attribute("href", re.compile(r"^/author#v1\."))
    edit.click()
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    expect(page.locator("[data-editor]")).to_have_value(RING)


# ------------------------------------------------------------------ lesson notes (3)

def test_notes_are_edited_moved_and_deleted_beside_the_timeline(page):
    open_author(page)
    start_empty(page)
    run_source(page, RING)
    box = page.locator("[data-callout-editor]").bounding_box()
    timeline = page.locator('[data-panel="timeline"]').bounding_box()
    assert box["x"] > timeline["x"] + timeline["width"] - 1 and abs(box["y"] - timeline["y"]) < 5
    seek(page, 9)
    page.locator("[data-add-callout]").click()
    expect(page.locator('[data-callout-item="9"] textarea')).to_be_focused()
    page.keyboard.type("A `wait` that returns at once.")
    expect(page.locator("[data-callout] code")).to_have_text("wait")
    item = page.locator('[data-callout-item="9"]')
    item.locator("[data-callout-step-input]").fill("10")
    item.locator("[data-callout-step-input]").press("Enter")
    expect(page.locator('[data-callout-item="10"]')).to_have_count(1)
    expect(page.locator('.run [data-callout-mark="10"]')).to_have_count(1)
    expect(page.locator("[data-callout]")).to_have_text(re.compile("first note is at step 10"))
    page.locator('[data-callout-item="10"]').get_by_role("button", name="go there").click()
    expect_step(page, 10)
    expect(page.locator("[data-callout]")).to_have_attribute("data-callout-step", "10")
    page.locator('[data-callout-item="10"]').get_by_role(
        "button", name=re.compile("Delete")).click()
    expect(page.locator("[data-callout-item]")).to_have_count(0)
    expect(page.locator("[data-callout]")).to_be_hidden()
    expect(page.locator('.run [data-callout-mark]')).to_have_count(0)


def test_hostile_notes_run_nothing_on_author_p_embed_and_export(page, browser, base_url):
    """Instructor text with <script>, <img onerror>, javascript: links and raw HTML, typed into
    the note editor, then opened from the link, in an embed and in the exported file."""
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_author(page)
    start_empty(page)
    run_source(page, RING)
    for note in EVIL:
        seek(page, note["step"])
        page.locator("[data-add-callout]").click()
        page.locator(f'[data-callout-item="{note["step"]}"] textarea').fill(note["text"])

    def visit(scope, stepper):
        for note in EVIL:
            stepper(note["step"])
            expect(scope.locator("[data-callout]")).to_have_attribute(
                "data-callout-step", str(note["step"]))
            body = scope.locator("[data-callout] .callout-body")
            expect(body).not_to_be_empty()
            assert body.locator("script, iframe, svg, object, embed").count() == 0
            assert body.evaluate("b => [...b.querySelectorAll('*')].filter(e => [...e.attributes]"
                                 ".some(a => a.name.startsWith('on'))).length") == 0
            for link in body.locator("a").all():
                link.click()
        expect(scope.locator("[data-callout] strong")).to_have_text("ok")

    visit(page, lambda s: seek(page, s))
    expect(page.locator("[data-callout] .callout-body")).to_contain_text("<iframe")  # as text
    shot(page, "author-hostile-notes")
    snippet = copied(page, "embed")
    link = copied(page, "inspector")
    with page.expect_download() as download:
        page.locator('[data-download="lesson"]').click()
    path = ARTIFACTS / "authored-hostile-lesson.html"
    download.value.save_as(path)
    page.goto(link)
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    visit(page, lambda s: seek(page, s))
    with lesson_site(f"<!doctype html>{snippet}") as host:
        page.goto(host)
        frame = page.frame_locator("iframe")
        expect(frame.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
        visit(frame, lambda s: seek(frame, s))
    offline_dialogs = []
    context, opened, _, errors = offline_page(browser, offline_dialogs)
    opened.goto(path.as_uri())
    expect(opened.locator("#inspector")).to_have_attribute("data-ready", "true")
    visit(opened, lambda s: seek(opened, s))
    assert dialogs == [] and offline_dialogs == [] and errors == []
    context.close()


# ------------------------------------------------------------- budget and contrast

def test_author_page_and_authored_export_stay_under_the_budget(page, base_url):
    """docs/ui.md: /author with everything it loads (markdown-it included, once a note shows)
    under 350 KB; an exported 500-step authored lesson under 1 MB."""
    sizes = {}

    def on_response(response):
        if "/api/" not in response.url and "/lessons/" not in response.url:
            try:
                sizes[response.url] = len(response.body())
            except Exception:  # noqa: BLE001 - redirects have no body
                pass

    page.on("response", on_response)
    open_author(page)
    page.locator("[data-load-start]").click()  # single_barrier with its lesson's notes
    expect(page.locator("[data-editor]")).to_be_editable()  # loaded and run
    expect(page.locator("[data-callout-item]").first).to_be_visible()
    seek(page, 1)
    expect(page.locator("[data-callout] .callout-body strong").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    link = copied(page, "inspector")
    weights = {}
    for name, url in (("author", None), ("p", link),
                      ("embed", link.replace("/p#", "/embed/p#"))):
        if url:
            sizes.clear()
            page.goto(url)
            expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile("."))
            seek(page, 1)
            expect(page.locator("[data-callout] .callout-body strong").first).to_be_visible()
            page.wait_for_load_state("networkidle")
        assert any("markdown-it" in url for url in sizes), sizes
        assert all(url.startswith(base_url) for url in sizes)
        weights[name] = sum(sizes.values())
        assert weights[name] < 350_000, (name, weights[name], sizes)
    page.remove_listener("response", on_response)
    (ARTIFACTS / "author-page-weight.txt").write_text(f"{weights}\n")
    response = httpx.post(f"{base_url}/export", timeout=60, json={
        "source": RING, "params": {"tiles": 42}, "title": "Long ring",
        "callouts": [{"step": 400, "text": "**late**"}]})
    assert response.status_code == 200, response.text
    steps = httpx.post(f"{base_url}/api/v1/traces", json={
        "source": RING, "params": {"tiles": 42}, "snapshots": False, "to": 1}).json()["total_steps"]
    assert steps >= 500
    assert len(response.content) < 1_000_000, len(response.content)
    (ARTIFACTS / "authored-export-weight.txt").write_text(
        f"{steps} steps: {len(response.content)}\n")
    bad = httpx.post(f"{base_url}/export", json={"source": "agent x {"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["line"] == 1
    both = httpx.post(f"{base_url}/export", json={"source": RING, "scenario": "single_barrier"})
    assert both.status_code == 422
    huge = httpx.post(f"{base_url}/export", json={"source": RING + "/" * (64 * 1024)})
    assert huge.status_code == 413


TOKEN_CONTRAST = LOW_CONTRAST.replace(
    "const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);",
    "const walker = document.createTreeWalker(document.querySelector('.editor-code'), "
    "NodeFilter.SHOW_TEXT);",
).replace('e.closest("svg, :disabled, [aria-hidden=true], .skip")', 'e.closest("svg")')


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_author_and_p_text_reaches_4_5_to_1(browser, base_url, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                  color_scheme=scheme)
    page = context.new_page()
    open_author(page)
    page.locator("[data-editor]").fill(RING.replace("int phase = 1;", "int phase = 1"))
    expect(page.locator("[data-error-line]")).to_have_text("11")
    seek(page, 5)
    page.wait_for_timeout(300)
    assert page.evaluate(LOW_CONTRAST) == [], scheme
    page.locator("[data-editor]").fill(RING)
    page.locator("[data-run]").click()
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    seek(page, 13)
    expect(page.locator(".editor-code .ln.cur").first).to_be_visible()
    assert page.evaluate(TOKEN_CONTRAST) == [], scheme  # the coloured source, current lines too
    shot(page, f"author-{scheme}", full_page=False)
    page.goto(copied(page, "inspector"))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", sha(RING))
    page.wait_for_timeout(300)
    assert page.evaluate(LOW_CONTRAST) == [], scheme
    context.close()


@pytest.mark.parametrize("width", [390, 1400])
def test_authored_pages_never_scroll_sideways(browser, base_url, width):
    context = browser.new_context(viewport={"width": width, "height": 800}, base_url=base_url)
    page = context.new_page()
    open_author(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.goto(copied(page, "inspector"))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile("."))
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shot(page, f"authored-p-{width}")
    context.close()


def test_check_every_schedule_of_an_authored_pipeline_and_play_its_counterexample(page, base_url):
    source = httpx.get(f"{base_url}/api/v1/scenarios/single_barrier").json()["source"]
    source = source.replace("phase ^= 1;\n", "// phase ^= 1 forgotten\n")
    open_author(page)
    run_source(page, source)
    page.locator("[data-check]").click()
    result = page.locator("[data-check-result]")
    expect(result.locator("[data-verdict]")).to_have_attribute("data-verdict", "unsafe")
    stale = result.locator('[data-violation="stale_wait"]')
    expect(stale).to_contain_text("stale_wait in 12 steps")
    stale.get_by_role("button", name="Play this schedule").click()
    expect_step(page, 12)
    expect(page.locator('[data-run-view="main"] [data-diagnostic="stale_wait"]')).to_be_visible()
    shot(page, "author-check-counterexample")
    # The toggle whose text the edit removed says why it cannot apply, in words.
    expect(page.locator("#tdoc-forget_phase_toggle")).to_contain_text(
        "cannot apply: bug `forget_phase_toggle`: 'phase ^= 1;' occurs 0 times")
