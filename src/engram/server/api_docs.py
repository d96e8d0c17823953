"""The API documentation at ``/docs``: Swagger UI served from files inside the package.

FastAPI's default page loads Swagger UI from a CDN, which leaves a blank page
offline and tells a third party who reads the docs. Here the script, style and
icon are vendored in ``static/`` (versions and licenses in ``static/VENDORED.md``)
and served at ``/docs/static``; the online validator badge is off, so the page
makes no request beyond this server.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: The vendored Swagger UI files.
STATIC_DIR = Path(__file__).parent / "static"
DOCS_PATH = "/docs"
ASSETS_PATH = f"{DOCS_PATH}/static"


def install_docs(app: FastAPI, openapi_url: str) -> None:
    """Serve Swagger UI over ``openapi_url`` at :data:`DOCS_PATH` (for ``docs_url=None``)."""

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")  # behind a proxy's prefix
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/swagger-ui-favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from swagger.io
        )

    app.add_route(DOCS_PATH, swagger_ui, include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=STATIC_DIR), name="api_docs_static")
