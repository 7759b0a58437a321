"""`/docs` (Swagger UI) and `/redoc` served offline under the CSP: the assets come from the pinned
`fastapi-offline` package (no CDN), and the scripts that start them are files, not inline code."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response

ASSETS = {"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"}

SWAGGER = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{title} - API</title><link rel="icon" href="/docs/assets/favicon.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>"""

REDOC = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{title} - API</title><link rel="icon" href="/docs/assets/favicon.png"></head>
<body><div id="redoc"></div>
<script src="/docs/assets/redoc.standalone.js"></script>
<script src="/redoc/init.js"></script></body></html>"""

SWAGGER_INIT = """SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout", deepLinking: true});"""
REDOC_INIT = """Redoc.init("/openapi.json", {}, document.getElementById("redoc"));"""


def _folder() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def install(app: FastAPI) -> None:
    title = app.title.replace("<", "").replace("&", "")

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return HTMLResponse(SWAGGER.format(title=title))

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return HTMLResponse(REDOC.format(title=title))

    @app.get("/docs/init.js", include_in_schema=False)
    def swagger_init() -> Response:
        return Response(SWAGGER_INIT, media_type="text/javascript")

    @app.get("/redoc/init.js", include_in_schema=False)
    def redoc_init() -> Response:
        return Response(REDOC_INIT, media_type="text/javascript")

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def asset(name: str) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(404, "no such asset")
        return FileResponse(_folder() / name, headers={"Cache-Control": "max-age=86400"})
