"""A page on the device: the server's models, the board's power and heat, and a panel to try any served model.

``edge-serve ui`` (or :func:`orinkit.ui.serve_ui`) runs a small standard-library web server beside tritonserver; the
page (plain HTML, JS and CSS shipped with orinkit, no CDN, no build step) talks only to it, and it talks to Triton.

>>> from orinkit.ui import UiServer
>>> with UiServer("localhost:8001", port=0) as page:  # doctest: +SKIP
...     print(page.address)

Importing this package stays light: the server, tritonclient and numpy are imported when first used.
"""

from __future__ import annotations

from orinkit.ui.errors import AddressInUseError, RequestError, UiError, UnsafeBindError

__all__ = ["UiServer", "serve_ui", "UiError", "UnsafeBindError", "AddressInUseError", "RequestError"]


def __getattr__(name: str):
    # The server module brings http.server and the API; `import orinkit.ui` for its errors need not.
    if name in ("UiServer", "serve_ui"):
        from orinkit.ui import server

        return getattr(server, name)
    raise AttributeError(f"module 'orinkit.ui' has no attribute {name!r}")
