"""WCAG 2.1 AA by axe-core (issue 21): 0 violations on the home page, every inspector at step 0
and at a step with a diagnostic, compare, a replay, /author, /p, /barrier and an exported lesson,
in the light and the dark theme. axe-core is npm's, pinned, installed by `make test` into
test-artifacts/axe (the Makefile's AXE_VERSION); pages run it with their CSP bypassed."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, ROOT
from tests.browser.server import HTTP

pytestmark = pytest.mark.browser

AXE_DIR = ARTIFACTS / "axe" / "node_modules" / "axe-core"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
RUN = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return result.violations.map((v) => ({rule: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 4).map((n) =>
      `${n.target.join(" ")}: ${n.failureSummary.split("\\n")[1] || ""}`)}));
}"""


def pinned_version() -> str:
    return re.search(r"^AXE_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def axe_source() -> str:
    script = AXE_DIR / "axe.min.js"
    if not script.exists():
        pytest.skip("axe-core is not installed (make test installs it into test-artifacts/axe)")
    version = json.loads((AXE_DIR / "package.json").read_text())["version"]
    assert version == pinned_version(), f"axe-core {version}, the Makefile pins {pinned_version()}"
    return script.read_text()


@pytest.fixture(params=["light", "dark"])
def scheme_page(request, browser, base_url):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                  color_scheme=request.param, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page, request.param
    context.close()


def violations(page, axe_source: str) -> list[dict]:
    # On the settled page: a chunk that just landed fades in (its colours mid-animation are not
    # the ones it keeps).
    page.evaluate("() => Promise.all(document.getAnimations().map((a) => a.finished))")
    page.add_script_tag(content=axe_source)
    return page.evaluate(RUN, TAGS)


def audit(page, axe_source: str, found: dict, where: str) -> None:
    problems = violations(page, axe_source)
    if problems:
        found[where] = problems


def ready_inspector(page, path: str, step: int) -> None:
    page.goto(path)
    expect(page.locator("#inspector")).not_to_have_attribute("data-session", "")
    expect(page.locator(".counter")).to_have_attribute("data-step", str(step))


def diagnostic_step(base_url: str, scenario: dict) -> tuple[str, int] | None:
    """The first bug toggle of `scenario` and the first step with a diagnostic in its run."""
    for bug in scenario["bugs"]:
        doc = HTTP.get(f"{base_url}/api/v1/traces/{scenario['id']}",
                        params={"bugs": bug, "snapshots": "false"}, timeout=60).json()
        if doc.get("diagnostics"):
            return bug, doc["diagnostics"][0]["step"]
    return None


def fragment(state: dict) -> str:
    """share.js's encoding: base64url of the deflate-raw bytes of the JSON state."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = packer.compress(json.dumps(state).encode()) + packer.flush()
    return "v1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_every_inspector_meets_wcag_aa(scheme_page, axe_source, base_url):
    page, scheme = scheme_page
    found: dict = {}
    scenarios = HTTP.get(f"{base_url}/api/v1/scenarios", timeout=30).json()["scenarios"]
    for scenario in scenarios:
        ready_inspector(page, f"/scenarios/{scenario['id']}", 0)
        audit(page, axe_source, found, f"{scenario['id']} at step 0")
        at = diagnostic_step(base_url, scenario)
        if at:
            bug, step = at
            ready_inspector(page, f"/scenarios/{scenario['id']}?bugs={bug}&step={step}", step)
            expect(page.locator("[data-diagnostic]").first).to_be_visible()
            audit(page, axe_source, found, f"{scenario['id']} with {bug} at step {step}")
    assert not found, f"{scheme}: {json.dumps(found, indent=1)}"


def test_the_other_pages_meet_wcag_aa(scheme_page, axe_source, base_url, tmp_path: Path):
    page, scheme = scheme_page
    found: dict = {}
    page.goto("/")
    expect(page.locator(".cards a").first).to_be_visible()
    audit(page, axe_source, found, "home")
    page.goto("/compare/single_barrier?bugs=forget_phase_toggle")
    expect(page.locator("#divergence")).to_have_attribute("data-divergence", re.compile(r"\d+"))
    audit(page, axe_source, found, "compare")
    page.goto("/replays/single_barrier_forget_phase_toggle")
    expect(page.locator("#divergence")).to_have_attribute("data-conformance", re.compile(r"\w+"))
    audit(page, axe_source, found, "replay")
    page.goto("/author")
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))
    audit(page, axe_source, found, "/author")
    source = HTTP.get(f"{base_url}/api/v1/scenarios/single_barrier", timeout=30).json()["source"]
    page.goto("/p#" + fragment({"source": source, "title": "One barrier",
                                "bugs": ["forget_phase_toggle"], "step": 13}))
    expect(page.locator("#inspector")).to_have_attribute("data-ran", re.compile(r"^[0-9a-f]{64}$"))
    audit(page, axe_source, found, "/p")
    page.goto("/barrier")
    page.locator('[data-op="init"]').click()
    page.locator('[data-op="arrive_expect_tx"]').click()
    expect(page.locator("[data-history] li")).to_have_count(2)
    audit(page, axe_source, found, "/barrier")
    page.goto("/reference/language")
    audit(page, axe_source, found, "/reference/language")
    lesson = HTTP.get(f"{base_url}/export/single_barrier",
                       params={"bugs": "forget_phase_toggle", "step": 13}, timeout=60)
    assert lesson.status_code == 200
    exported = tmp_path / "lesson.html"
    exported.write_bytes(lesson.content)
    page.goto(exported.as_uri())
    expect(page.locator("#inspector")).to_have_attribute("data-ready", "true")
    audit(page, axe_source, found, "exported lesson")
    assert not found, f"{scheme}: {json.dumps(found, indent=1)}"
