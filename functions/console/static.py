"""The console's static files (functions/console/static: the vendored htmx, Pico CSS and uPlot, and the console's
own script and styles), served with their content types, public and cached for an hour; nothing else is served."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from .web import Answer

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@cache
def files() -> dict[str, tuple[str, str]]:
    """Every servable file by name: (its text, its content type)."""
    return {
        path.name: (path.read_text(encoding="utf-8"), CONTENT_TYPES[path.suffix])
        for path in STATIC.iterdir()
        if path.suffix in CONTENT_TYPES
    }


def serve(name: str) -> Answer:
    found = files().get(name)
    if found is None:
        return Answer(404, f"no static file {name[:80]!r}", "text/plain; charset=utf-8")
    text, content_type = found
    return Answer(200, text, content_type, headers={"cache-control": "public, max-age=3600"})
