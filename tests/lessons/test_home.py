"""The home page shows the real bugs as their own group, each linked to its upstream report."""


from pathlib import Path

import pytest
from fastapi.templating import Jinja2Templates
from fastapi.testclient import TestClient
from markupsafe import escape

from app.main import create_app
from app.scenarios import catalogue

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture
def this_checkout(monkeypatch):
    """The templates of the checkout these tests belong to (an editable install may point at
    another one)."""
    from app.web import pages

    monkeypatch.setattr(pages, "templates", Jinja2Templates(directory=CHECKOUT / "templates"))


def test_the_home_page_lists_real_bugs_apart_with_their_reports(this_checkout):
    with TestClient(create_app()) as client:
        html = client.get("/").text
    scenarios, _, real = html.partition('<h2 id="real-bugs-title">Real bugs</h2>')
    assert real, "a Real bugs group"
    real = real.split("</section>")[0]
    for s in catalogue().values():
        link = f'href="/scenarios/{s.id}"'
        if s.group == "real_bugs":
            assert link in real and f'href="{s.source_url}"' in real and escape(s.summary) in real
            assert link not in scenarios
        else:
            assert link in scenarios and link not in real
    assert real.count('class="card real-bug-card"') == sum(
        s.group == "real_bugs" for s in catalogue().values())
