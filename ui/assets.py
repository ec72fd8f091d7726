"""The page's files: a fixed table, read into memory once. A request names a key of the table or gets a 404;
no part of a URL is ever joined to a path."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


def load_assets() -> dict[str, tuple[bytes, str]]:
    """``{name: (content, content type)}`` for every file the page ships."""
    return {name: ((STATIC / name).read_bytes(), kind) for name, kind in TYPES.items()}
