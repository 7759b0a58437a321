"""The rough edges of issue 9 (item 8), one test each, numbered as in the issue; plus the JSON
download on every inspector and compare taking the inspector's parameters."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot
from tests.browser.test_inspector import expect_step, lesson_site, open_inspector

pytestmark = pytest.mark.browser


def contrast(page, selector: str) -> list[float]:
    """WCAG contrast of each element's text colour on its own background (rgb only)."""
    return page.evaluate("""(selector) => {
      const rgb = (s) => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
      const lum = ([r, g, b]) => [r, g, b].map(c => { c /= 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; })
        .reduce((a, c, i) => a + c * [0.2126, 0.7152, 0.0722][i], 0);
      const background = (e) => {  // the first opaque background up the tree
        for (let n = e; n; n = n.parentElement) {
          const c = getComputedStyle(n).backgroundColor;
          if (!/rgba\\(.*,\\s*0\\)$/.test(c) && c !== "transparent") return c;
        }
        return "rgb(255, 255, 255)";
      };
      return [...document.querySelectorAll(selector)].map(e => {
        const s = getComputedStyle(e);
        const a = lum(rgb(s.color)), b = lum(rgb(background(e)));
        return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      });
    }""", selector)


def test_01_single_barrier_replay_runs_its_simulation(page):
    page.goto("/replays/single_barrier")
    expect(page.locator("#replay-source")).to_contain_text("captured on")
    right = page.locator('[data-run="right"]')
    expect(right.locator(".timeline svg")).to_be_visible()
    page.keyboard.press("End")
    expect(right.locator(".now-line")).not_to_contain_text("Step 0 ")
    expect(page.locator("#divergence")).not_to_contain_text("could not run")


def test_02_check_verdicts_say_no_null_name_the_limit_and_clear_on_apply(page):
    open_inspector(page, "/scenarios/single_barrier?tiles=2")
    page.locator("#check-button").click()
    box = page.locator("#check-result")
    expect(box.locator("[data-verdict]")).to_have_attribute("data-verdict", "safe")
    assert "null" not in box.inner_text()
    page.route("**/api/v1/check", lambda route: route.fulfill(json={
        "verdict": "inconclusive", "violations": [], "states_explored": 200000, "elapsed_s": 3.2,
        "transitions": 1, "depth": 27, "stopped_by": "max_states",
        "limits": {"max_states": 200000, "timeout_s": 10}, "message": ""}))
    page.locator("#check-button").click()
    expect(box.locator("[data-stopped-by]")).to_contain_text("state limit (200,000 states)")
    expect(box.locator("[data-stopped-by]")).to_contain_text("at most 27 steps")
    assert "null" not in box.inner_text()
    page.locator('input[name="tiles"]').fill("3")
    page.get_by_role("button", name="Apply").click()
    expect(box).to_be_hidden()


def test_03_copy_link_while_playing_keeps_the_step(page, browser, base_url):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_inspector(page, "/scenarios/double_buffer_tma")
    page.locator('[data-control="speed"]').select_option("8")
    page.locator('#transport [data-action="play"]').click()
    expect(page.locator(".counter")).to_have_attribute("data-step", re.compile(r"^([5-9]|\d\d+)$"))
    page.locator("#copy-link").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    step = int(re.search(r"step=(\d+)", copied).group(1))
    assert step >= 5
    assert "speed=8" in copied


def test_04_ticked_but_unapplied_toggle_is_marked(page):
    open_inspector(page, "/scenarios/single_barrier")
    unapplied = page.locator("[data-unapplied]")
    expect(unapplied).to_be_hidden()
    page.locator('input[value="expect_tx_long"]').check()
    expect(unapplied).to_be_visible()
    label = page.locator("label", has=page.locator('input[value="expect_tx_long"]'))
    expect(label).to_have_attribute("data-pending", "on")
    shot(page, "unapplied-toggle", full_page=False)
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"bugs=expect_tx_long"))
    expect(unapplied).to_be_hidden()
    expect(label).to_have_attribute("data-pending", "")


def test_05_bad_permalink_says_what_was_wrong_and_keeps_the_rest(page):
    page.goto("/scenarios/double_buffer_tma?stages=abc&bugs=nonsense,forget_phase_toggle&step=99999"
              "&tiles=5")
    notice = page.locator("#permalink-notice")
    expect(notice).to_be_visible()
    expect(notice.locator("[data-problem]")).to_have_count(3)
    expect(notice).to_contain_text("stages=abc is not a whole number")
    expect(notice).to_contain_text("nonsense")
    expect(notice).to_contain_text("step must be in 0..")
    expect(page.locator("#inspector")).not_to_have_attribute("data-session", "")
    expect(page.locator('input[name="tiles"]')).to_have_value("5")
    expect(page.locator('input[value="forget_phase_toggle"]')).to_be_checked()
    shot(page, "bad-permalink", full_page=False)
    page.goto("/scenarios/single_barrier?bugs=expect_tx_short,expect_tx_long&step=3")
    expect(page.locator("#permalink-notice")).to_contain_text("exclude each other")
    expect_step(page, 3)
    expect(page.locator('input[name="bugs"]:checked')).to_have_count(0)


def test_06_loading_a_counterexample_sets_the_schedule_to_manual(page):
    open_inspector(page, "/scenarios/single_barrier?bugs=forget_phase_toggle&tiles=2")
    page.locator("#check-button").click()
    page.locator("#check-result [data-violation] button").first.click()
    expect(page.locator('select[name="schedule"]')).to_have_value("manual")
    expect(page.locator("[data-unapplied]")).to_be_hidden()


def test_07_back_after_apply_returns_to_the_previous_configuration(page):
    open_inspector(page, "/scenarios/double_buffer_tma?tiles=4")
    page.locator('input[name="tiles"]').fill("7")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"tiles=7"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"/scenarios/double_buffer_tma\?tiles=4"))
    expect(page.locator('input[name="tiles"]')).to_have_value("4")
    expect(page.locator(".counter .total")).not_to_have_text("0")


def test_08_embed_resizes_its_iframe_is_compact_and_takes_arrow_keys(page):
    open_inspector(page, "/scenarios/single_barrier?step=8", 8)
    page.locator("#copy-embed").click()
    page.locator('#embed-dialog input[value="agents"]').uncheck()
    page.locator('#embed-dialog input[value="controls"]').uncheck()
    page.locator('#embed-dialog input[value="diagnostics"]').uncheck()
    page.locator('#embed-dialog input[value="stages"]').uncheck()
    snippet = page.locator("#embed-code").input_value()
    assert "mbarrier-inspector:height" in snippet and "panels=barriers,timeline" in snippet
    page.keyboard.press("Escape")
    with lesson_site(f"<!doctype html><body style='margin:0;width:700px'>{snippet}</body>") as host:
        page.set_viewport_size({"width": 700, "height": 450})
        page.goto(host)
        frame = page.frame_locator("iframe")
        expect(frame.locator(".now-line")).to_contain_text("Step 8")
        iframe = page.locator("iframe")
        page.wait_for_function(
            "() => document.querySelector('iframe').style.height !== ''", timeout=10_000)
        height = int(iframe.evaluate("f => parseInt(f.style.height)"))
        inner = frame.locator("html").evaluate("e => e.scrollHeight")
        assert abs(height - inner) <= 4 and height < 1000, (height, inner)
        # Each fact of a card stays on one line at this width.
        heights = frame.locator('[data-barrier="bar"] .facts dt').evaluate_all(
            "els => els.map(e => e.getBoundingClientRect().height)")
        assert max(heights) < 24, heights
        frame.locator("#inspector").focus()
        page.keyboard.press("ArrowRight")
        expect(frame.locator(".now-line")).to_contain_text("Step 9")
        shot(page, "embed-700x450-auto-height")


def test_09_replay_shows_conformance_and_its_timeline_is_not_clipped(page):
    page.goto("/replays/double_buffer_tma_2stage_1consumer")
    note = page.locator("#divergence")
    expect(note).to_have_attribute("data-conformance", "passes")
    expect(note).to_contain_text("Matches the barrier model")
    expect(note).not_to_contain_text("First divergence")
    json_link = page.locator('#replay-downloads [data-download="json"]')
    expect(json_link).to_have_attribute(
        "href", "/api/v1/replays/double_buffer_tma_2stage_1consumer")
    expect(page.locator('#replay-downloads [data-download="svg"]')).to_be_visible()
    expect(page.locator(".divergence-mark[visibility=visible]")).to_have_count(0)
    for run in ("left", "right"):
        svg = page.locator(f'[data-run="{run}"] .timeline svg')
        width = float(svg.get_attribute("width"))
        right = svg.locator(".tick-label").last.evaluate("e => e.getBBox().x + e.getBBox().width")
        assert right <= width + 0.5, (run, right, width)
    page.goto("/compare/single_barrier?bugs=forget_phase_toggle")
    label = page.locator('[data-run="right"] .divergence-mark text')
    expect(label).to_be_visible()
    box = label.bounding_box()
    for mark in page.locator('[data-run="right"] .diag-mark').all():
        m = mark.bounding_box()
        overlap = not (box["x"] + box["width"] < m["x"] or m["x"] + m["width"] < box["x"]
                       or box["y"] + box["height"] < m["y"] or m["y"] + m["height"] < box["y"])
        assert not overlap


@pytest.mark.parametrize("width", [1400, 390])
def test_10_catalogue_never_scrolls_sideways(browser, base_url, width):
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=base_url)
    page = context.new_page()
    page.goto("/")
    expect(page.locator(".scenario-card")).to_have_count(5)
    expect(page.locator("#replay-list .replay-card").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shot(page, f"catalogue-{width}")
    context.close()


def test_11_dark_mode_chunk_labels_reach_4_5_to_1(browser, base_url):
    for scheme in ("dark", "light"):
        context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                      color_scheme=scheme)
        page = context.new_page()
        open_inspector(page, "/scenarios/double_buffer_tma?tiles=8&step=110", 110)
        ratios = contrast(page, ".chunk:not(.empty)")
        assert ratios and min(ratios) >= 4.5, (scheme, ratios)
        assert min(contrast(page, ".barrier-card h4, .now-line .who, .legend")) >= 4.5
        shot(page, f"chunks-{scheme}", full_page=False)
        context.close()


def test_12_dragging_on_the_timeline_selects_no_text(page):
    open_inspector(page, "/scenarios/double_buffer_tma")
    svg = page.locator('[data-run="main"] .timeline svg')
    svg.scroll_into_view_if_needed()
    box = svg.bounding_box()
    page.mouse.move(box["x"] + 5, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    assert page.evaluate("getSelection().toString()") == ""
    expect(page.locator(".counter")).not_to_have_attribute("data-step", "0")


def test_13_a_run_that_ends_with_diagnostics_is_not_a_green_done(page):
    open_inspector(page, "/scenarios/proxy_fence_store?bugs=missing_proxy_fence")
    page.keyboard.press("End")
    pill = page.locator(".status-pill")
    expect(pill).to_have_attribute("data-status", "done_with_diagnostics")
    expect(pill).to_contain_text("done, 4 diagnostics")
    open_inspector(page, "/scenarios/proxy_fence_store")
    page.keyboard.press("End")
    expect(pill).to_have_attribute("data-status", "done")


def test_14_toggles_lesson_legend_and_words(page):
    open_inspector(page, "/scenarios/double_buffer_tma")
    expect(page.locator("#bugdoc-consumer_skips_release")).to_have_text(
        "the consumers never arrive on empty_barrier, so the producer waits forever")
    expect(page.locator("#bugdoc-consumer_skips_release")).to_be_visible()
    expect(page.locator(".lesson details")).to_have_attribute("open", "")
    expect(page.locator('[data-legend="timeline"]')).to_contain_text("a wait returned")
    expect(page.locator('[data-legend="agents"]')).to_contain_text("the line it runs next")
    expect(page.locator('[data-legend="agents"]')).to_contain_text("the line that just ran")
    page.goto("/scenarios/double_buffer_tma?step=5")
    expect(page.locator('[data-run="main"] .now-line')).to_contain_text(
        re.compile(r"pipe_state is now .*phase 1 \(its phase register\)"))


def test_15_quiet_steps_are_narrated_and_the_missing_commit_says_nothing_arrives(page):
    open_inspector(page, "/scenarios/kloop_tma_mma?step=18", 18)
    expect(page.locator('[data-run="main"] .now-line')).to_contain_text("queued on the tensor core")
    open_inspector(page, "/scenarios/kloop_tma_mma?bugs=missing_mma_commit&step=24", 24)
    expect(page.locator("[data-callout]")).to_contain_text("nothing will ever arrive")


def test_16_step_limit_is_explained_and_many_barriers_are_grouped(page):
    open_inspector(page, "/scenarios/single_barrier?tiles=100000")
    note = page.locator("[data-step-limit]")
    expect(note).to_contain_text("stopped at the step limit")
    open_inspector(page, "/scenarios/double_buffer_tma?stages=16&tiles=40&step=30", 30)
    cards = page.locator('[data-run="main"] [data-barrier]')
    expect(cards).to_have_count(32)
    visible = page.locator('[data-run="main"] [data-barrier]:visible')
    assert 0 < visible.count() <= 8
    toggle = page.locator("[data-show-all-barriers]")
    toggle.click()
    expect(visible).to_have_count(32)
    height = page.evaluate("document.documentElement.scrollHeight")
    toggle.click()
    assert page.evaluate("document.documentElement.scrollHeight") < height


def test_17_seven_toggles_leave_no_blank_block_and_long_names_fit(page):
    open_inspector(page, "/scenarios/double_buffer_tma")
    fieldset = page.locator("fieldset.bugs").bounding_box()
    apply = page.get_by_role("button", name="Apply").bounding_box()
    assert apply["y"] >= fieldset["y"] + fieldset["height"] - 1  # a row of its own, below
    labels = page.locator("fieldset.bugs label").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().right)")
    assert max(labels) <= fieldset["x"] + fieldset["width"] + 1
    open_inspector(page, "/scenarios/kloop_tma_mma")
    name = page.locator('[data-run="main"] .row-label', has_text="accum_full_barrier")
    right = name.evaluate("e => e.getBBox().x + e.getBBox().width")
    first_tick = page.locator('[data-run="main"] .tick').first.get_attribute("x1")
    assert right < float(first_tick), (right, first_tick)


def test_18_skip_links_name_their_target(page):
    page.goto("/")
    expect(page.locator("a.skip")).to_have_text("Skip to the scenarios")
    expect(page.locator("[data-start-here]")).to_have_attribute("href", "/barrier")
    page.goto("/scenarios/single_barrier")
    expect(page.locator("a.skip")).to_have_text("Skip to the inspector")


def test_19_manual_mode_and_speed_survive_reload_and_compare_keeps_the_step(page):
    open_inspector(page, "/scenarios/double_buffer_tma")
    page.locator("#manual-mode").check()
    page.locator('[data-control="speed"]').select_option("8")
    page.locator('[data-run="main"] button[data-mover="producer"]').click()
    expect_step(page, 1)
    expect(page).to_have_url(re.compile(r"manual=1"))
    expect(page).to_have_url(re.compile(r"speed=8"))
    expect(page).to_have_url(re.compile(r"step=1"))  # the URL follows the cursor within 120 ms
    page.reload()
    expect_step(page, 1)
    expect(page.locator("#manual-mode")).to_be_checked()
    expect(page.locator('[data-control="speed"]')).to_have_value("8")
    page.goto("/compare/single_barrier?bugs=forget_phase_toggle&step=3")
    expect_step(page, 3)
    page.keyboard.press("ArrowRight")
    expect_step(page, 4)
    expect(page.locator("#open-inspector")).to_have_attribute("href", re.compile(r"step=4"))


def test_json_download_on_every_inspector_and_compare_takes_the_parameters(page, base_url):
    for scenario in ("single_barrier", "double_buffer_tma", "cluster_multicast", "kloop_tma_mma",
                     "proxy_fence_store"):
        open_inspector(page, f"/scenarios/{scenario}")
        link = page.locator('[data-download="json"]')
        expect(link).to_have_attribute("href", re.compile(r"^/api/v1/"))
        href = link.get_attribute("href")
        doc = httpx.get(base_url + href).json()
        assert doc["scenario"]["id"] == scenario
    page.goto("/compare/double_buffer_tma?stages=3&tiles=5&bugs=consumer_skips_release")
    expect(page.locator('#compare-config input[name="stages"]')).to_have_value("3")
    expect(page.locator('[data-run="left"] [data-barrier]')).to_have_count(6)
    page.locator('#compare-config input[name="tiles"]').fill("8")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"stages=3&tiles=8"))
    expect(page.locator('[data-run="right"] [data-barrier]')).to_have_count(6)


def test_page_weights_stay_under_the_budget(browser, base_url):
    """docs/ui.md: 300 KB for the inspector or an embed with everything it loads (markdown-it
    included, once a callout shows), 100 KB for /barrier; no request leaves the server. Each
    page in a browser of its own: static assets are cached as immutable."""
    for path, budget in (("/scenarios/single_barrier?bugs=forget_phase_toggle&step=14", 300_000),
                         ("/embed/single_barrier?step=14&bugs=forget_phase_toggle", 300_000),
                         ("/barrier", 100_000)):
        context = browser.new_context(base_url=base_url)
        page = context.new_page()
        sizes = {}

        def on_response(response, sizes=sizes):
            if "/api/" not in response.url:
                try:
                    sizes[response.url] = len(response.body())
                except Exception:  # noqa: BLE001 - redirects have no body
                    pass

        page.on("response", on_response)
        page.goto(path)
        page.wait_for_load_state("networkidle")
        page.remove_listener("response", on_response)
        if "step=14" in path:
            assert any("markdown-it" in url for url in sizes), sizes
        assert all(url.startswith(base_url) for url in sizes)
        assert sum(sizes.values()) < budget, (path, sum(sizes.values()), json.dumps(sizes))
        context.close()


def test_15_missing_proxy_fence_shows_the_bytes_in_doubt(page):
    open_inspector(page, "/scenarios/proxy_fence_store?bugs=missing_proxy_fence&step=4", 4)
    cell = page.locator('[data-stage="smem[0]"] .chunk[data-chunk="0"]')
    expect(cell).to_have_class(re.compile("stale-risk"))
    expect(cell).to_have_text("t0?")
    expect(cell).to_have_attribute("title", re.compile("may read the old bytes"))
    expect(page.locator("[data-callout]")).to_contain_text("may read the old bytes")
    shot(page, "proxy-fence-missing-stale-bytes", full_page=False)
    open_inspector(page, "/scenarios/proxy_fence_store?step=5", 5)
    expect(page.locator(".chunk.stale-risk")).to_have_count(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_learning_panels_text_reaches_4_5_to_1(browser, base_url, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                  color_scheme=scheme)
    page = context.new_page()
    page.goto("/barrier#ops=" + '[{"op":"init","count":1},{"op":"arrive","count":2}]')
    expect(page.locator("p[data-ub]")).to_be_visible()
    assert min(contrast(page, ".ub-stop, .ub-stop b, .history li")) >= 4.5
    open_inspector(page, "/scenarios/single_barrier?predict=1&step=1", 1)
    page.locator('input[value="expect_tx_long"]').check()
    page.keyboard.press("Escape")
    page.locator('[data-action="step"]').click()
    page.locator('[data-choice="1"]').click()
    expect(page.locator("[data-predict-result]")).to_be_visible()
    ratios = contrast(page, "[data-unapplied], .predict-result, .predict-result b, .predict-q, "
                            ".callout-body, .callout-where, .choice")
    assert min(ratios) >= 4.5, ratios
    context.close()


LOW_CONTRAST = r"""() => {
  const rgba = (s) => {
    const m = s.match(/[\d.]+/g).map(Number);
    const scale = s.startsWith("color(") ? 255 : 1;  // color(srgb r g b / a): 0..1 channels
    return [m[0] * scale, m[1] * scale, m[2] * scale, m.length > 3 ? m[3] : 1];
  };
  const lum = ([r, g, b]) => [r, g, b].map(c => { c /= 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; })
    .reduce((a, c, i) => a + c * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (e) => {
    for (let n = e; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0.5) return c;
    }
    return rgba(getComputedStyle(document.body).backgroundColor);
  };
  const low = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  while (walker.nextNode()) {
    const e = walker.currentNode.parentElement;
    if (!walker.currentNode.textContent.trim() || seen.has(e)) continue;
    seen.add(e);
    if (!e.offsetParent || e.closest("svg, :disabled, [aria-hidden=true], .skip")) continue;
    const s = getComputedStyle(e);
    if (s.visibility === "hidden") continue;
    const a = lum(rgba(s.color)), b = lum(background(e));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const text = e.textContent.trim().slice(0, 30);
    if (ratio < 4.5) low.push(`${ratio.toFixed(2)} ${e.tagName}.${e.className}: ${text}`);
  }
  return low;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_11_every_text_reaches_4_5_to_1(browser, base_url, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                  color_scheme=scheme)
    page = context.new_page()
    for path in ("/scenarios/single_barrier?bugs=forget_phase_toggle&step=16",
                 "/scenarios/kloop_tma_mma?bugs=missing_mma_commit&step=24",
                 "/compare/double_buffer_tma?bugs=forget_phase_toggle&step=54",
                 "/replays/double_buffer_tma_2stage_1consumer", "/", "/barrier"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(300)
        assert page.evaluate(LOW_CONTRAST) == [], (scheme, path)
    context.close()


def test_a_permalink_that_spells_out_a_default_is_not_an_unapplied_change(page):
    open_inspector(page, "/scenarios/double_buffer_tma?bugs=forget_phase_toggle&stages=2&tiles=4")
    expect(page.locator("[data-unapplied]")).to_be_hidden()
    # The toggles' text is the pipeline's own (its bug blocks), not a copy kept in the page.
    doc = page.locator("#bugdoc-forget_phase_toggle")
    expect(doc).to_have_text("the consumers never flip their phase bit: they wait for parity 0 on "
                             "every pass")
    page.locator('input[name="tiles"]').fill("5")
    expect(page.locator("[data-unapplied]")).to_be_visible()
