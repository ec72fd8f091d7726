"""Who may use the page: the bind rule, the token, and the checks every request passes before its route runs.

* Off loopback the page needs a token (given, read from a file, or generated and printed once at start).
* With a token every ``/api`` request carries ``Authorization: Bearer <token>``; the page itself and its static
  files are not secret and need none (the page learns the token from its URL once). The live view's MJPEG,
  loaded by an ``<img>`` that cannot send a header, takes it as ``?token=`` instead.
* On a loopback bind the Host header must name the loopback address and port: a DNS-rebinding page on another
  site reaches 127.0.0.1 under its own host name and is refused.
* A state change is a POST; a browser's cross-site POST (Origin or Sec-Fetch-Site says so) is refused, so another
  site open in the same browser cannot drive a token-less loopback page.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from pathlib import Path
from urllib.parse import parse_qs

from orinkit.ui.errors import RequestError, UnsafeBindError

# What the browser may load and run: this server's script, style and API only; images also as data: URLs (a model's
# PNG output, the empty favicon). Each is named and everything else is 'none', rather than one default-src 'self':
# a refusal then names the directive it broke, where Chromium would report a fallback ("'script-src' was not
# explicitly set, so 'default-src' is used"), and nothing the page does not use (fonts, frames, workers, media) is
# allowed by default. tests/test_ui_browser.py fails on any violation in any flow of the page.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
                           "form-action 'self'")
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",  # the first URL carries the token
    "Cross-Origin-Resource-Policy": "same-origin",
}
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def is_loopback(host: str) -> bool:
    """The same rule as the page's systemd unit: ``localhost`` or any loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None = None, token_file: str | Path | None = None,
                  *, generate: bool = False) -> str | None:
    """The token the page will require, or None (loopback without one). ``generate`` makes one where the bind
    needs it and none was given; without it, a non-loopback bind without a token is refused."""
    if token is not None and token_file is not None:
        raise UnsafeBindError("both a token and a token file given", hint="give one of --token and --token-file")
    if token_file is not None:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:
            raise UnsafeBindError(f"cannot read the token file {token_file}: {exc.strerror}",
                                  hint="check the path and that this user may read it") from exc
        if not token:
            raise UnsafeBindError(f"the token file {token_file} is empty", hint="write a long random token into it")
    if token is not None:
        if len(token) < 16 or any(c.isspace() for c in token):
            raise UnsafeBindError("the token is shorter than 16 characters or holds spaces",
                                  hint="use a long random one, e.g. python3 -c 'import secrets; "
                                       "print(secrets.token_urlsafe(24))'")
        return token
    if is_loopback(host):
        return None
    if generate:
        return secrets.token_urlsafe(24)
    raise UnsafeBindError(f"the page on {host} would be open to the network without a token",
                          hint="give --token, --token-file or --generate-token, or keep --host "
                               "127.0.0.1 and use an SSH tunnel")


def check_host(host_header: str | None, bound_host: str, port: int) -> None:
    """Refuse a request to a loopback bind whose Host is not a loopback name (DNS rebinding)."""
    names = {*_LOOPBACK_NAMES, f"[{bound_host}]" if ":" in bound_host else bound_host}
    allowed = {f"{name}:{port}" for name in names} | (names if port == 80 else set())
    if (host_header or "").lower() not in allowed:
        raise RequestError(403, f"this page answers only as localhost:{port} (the request named "
                                f"'{(host_header or '')[:80]}')",
                           hint=f"open http://127.0.0.1:{port}/; a site that resolves to this machine is refused")


def check_token(authorization: str | None, token: str | None) -> None:
    if token is None:
        return
    scheme, _, given = (authorization or "").partition(" ")
    # compare_digest: the time taken does not tell how much of a guess was right.
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise RequestError(401, "this page needs its token" if not authorization else "the token is wrong",
                           hint="open the URL edge-serve ui printed at start (it carries ?token=...), or send "
                                "'Authorization: Bearer <token>'")


def query_token(query: str) -> str | None:
    """``?token=T`` as an Authorization value, for the one route a browser loads without headers: the live view's
    ``<img>``. Not logged (the page logs paths only) nor sent on (Referrer-Policy: no-referrer)."""
    values = parse_qs(query, max_num_fields=16).get("token")
    return f"Bearer {values[0]}" if values and len(values) == 1 else None


def check_same_origin(origin: str | None, fetch_site: str | None, host_header: str | None) -> None:
    """A POST from a page of another site: refused (browsers send Origin and Sec-Fetch-Site; curl sends neither)."""
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise RequestError(403, f"a {fetch_site} request may not change anything here",
                           hint="use the page itself, or a client that is not a browser")
    if origin is not None and origin != f"http://{host_header}":
        raise RequestError(403, f"a request from {origin[:80]} may not change anything here",
                           hint="use the page itself, or a client that is not a browser")
