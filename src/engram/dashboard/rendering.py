"""Templates of the dashboard: the Jinja2 environment, its filters, and ``render``.

Templates and static files ship inside the package (no build step, nothing
loaded from the network). Autoescaping is on for every template; the only
HTML built in Python is :func:`engram.dashboard.views.highlight`'s ``<mark>``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from engram.compaction.citations import marker
from engram.dashboard.views import cite_links, cited_groups, highlight, pretty_json
from engram.intake.images import describe, parse_data_url
from engram.sections.summary import section_label

__all__ = ["STATIC_DIR", "TEMPLATES_DIR", "render"]

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"


def _number(value: int | float | None) -> str:
    return "–" if value is None else f"{value:,}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value.replace("T", " ")[:19]
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _inline_image(image: Any) -> str | None:
    """The data URL to show as a thumbnail; None for a remote image (never loaded)."""
    url = image.get("url") if isinstance(image, dict) else None
    return url if isinstance(url, str) and parse_data_url(url) is not None else None


def _url_part(value: str) -> str:
    return quote(str(value), safe="")


templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.filters.update(
    number=_number,
    percent=_percent,
    when=_when,
    highlight=highlight,
    pretty_json=pretty_json,
    u=_url_part,
    image_line=describe,
    inline_image=_inline_image,
    section_label=section_label,
    cite_links=cite_links,
    cite_marker=marker,
    cited_groups=cited_groups,
)


def render(request: Request, name: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The template ``name`` rendered with ``context`` (and the request)."""
    return templates.TemplateResponse(request, name, context, status_code=status_code)
