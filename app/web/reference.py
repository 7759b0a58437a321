"""The language reference in the app (issue 21, item 8): `/reference/language` and
`/reference/semantics` are docs/language.md and docs/semantics.md as HTML, rendered on the
server with markdown-it-py (raw HTML off: what the Markdown holds shows as text), so an
installed wheel or the Docker image carries the reference it is documented by. `/docs` stays
the OpenAPI page.

Headings get GitHub's anchors (the documents link to `#bug-toggles`), and links between the two
documents go to their routes; a link to any other repository file becomes plain text.
"""

from __future__ import annotations

import re
from functools import cache

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt

from app.resources import folder

DOCUMENTS = {"language": ("language.md", "The pipeline language"),
             "semantics": ("semantics.md", "mbarrier semantics, rule by rule")}
ROUTES = {file: f"/reference/{name}" for name, (file, _) in DOCUMENTS.items()}


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(state) -> None:
    seen: dict[str, int] = {}
    tokens = state.tokens
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        base = slug(tokens[i + 1].content)
        count = seen.get(base, 0)
        seen[base] = count + 1
        token.attrSet("id", base if not count else f"{base}-{count}")


def _links(state) -> None:
    """Links to the other document go to its route; links to other repository files (which
    the app does not serve) become their text."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children, out, skipping = block.children, [], 0
        for token in children:
            if token.type == "link_open":
                href = token.attrGet("href") or ""
                path, _, anchor = href.partition("#")
                target = path.rsplit("/", 1)[-1]
                if target in ROUTES and not re.match(r"^[a-z]+:", path):
                    token.attrSet("href", ROUTES[target] + (f"#{anchor}" if anchor else ""))
                elif path and not re.match(r"^(https?:|mailto:)", path):
                    skipping += 1
                    continue
            elif token.type == "link_close" and skipping:
                skipping -= 1
                continue
            out.append(token)
        block.children = out


@cache
def renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.core.ruler.push("anchors", _anchors)
    md.core.ruler.push("repo_links", _links)
    return md


@cache
def rendered(name: str) -> str:
    file, _ = DOCUMENTS[name]
    return renderer().render((folder("docs") / file).read_text(encoding="utf-8"))


def install(app: FastAPI, page) -> None:
    @app.get("/reference/{name}", response_class=HTMLResponse, include_in_schema=False)
    def reference_page(request: Request, name: str) -> HTMLResponse:
        if name not in DOCUMENTS:
            raise HTTPException(404, f"no reference named {name[:40]!r}; there are "
                                     f"{', '.join(ROUTES.values())}")
        return page(request, "reference.html", body=rendered(name), title=DOCUMENTS[name][1],
                    doc_name=name, documents=DOCUMENTS, boot={"page": "reference"})
