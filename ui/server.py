"""The page server: the standard library's ThreadingHTTPServer, the checks every request passes, and the routes.

Routes (``/api`` ones need the token when there is one):

=======  =================================  ============================================================
GET      /                                   the page
GET      /static/<file>                      its script and style (a fixed table, never a path)
GET      /api/models                         the repository index, I/O, image input, counts and latencies
GET      /api/board?since=T                  the board monitor's samples after T
GET      /api/live                           the live view's figures, or {"live": false} without one
GET      /live.mjpg[?token=T]                the live view as MJPEG (an <img> sends no header: token in the query)
POST     /api/try?model=M[&version=V]        the raw image as the body -> the try panel's answer and an id
GET      /api/try/<id>/<output>.npy          one output of a kept answer
POST     /api/control/{load,unload,rollback}?model=M   only with allow_control
=======  =================================  ============================================================

Every error is JSON (``{"error": {type, message, hint, exit_code}}``): orinkit's own errors with their message,
anything else as an internal error whose traceback goes to the log only.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from orinkit.core.errors import OrinkitError
from orinkit.ui import api
from orinkit.ui.assets import load_assets
from orinkit.ui.errors import AddressInUseError, RequestError, UiError, error_body, http_status
from orinkit.ui.results import TryResults
from orinkit.ui.security import (
    HEADERS,
    check_host,
    check_same_origin,
    check_token,
    is_loopback,
    query_token,
    resolve_token,
)

if TYPE_CHECKING:  # the video package brings numpy: the page imports it only when given a view
    from orinkit.video.live import LiveView

log = logging.getLogger("orinkit.ui")
# The image step's own limits (orinkit.repo.pymodels.image_preprocess), written out: importing that module brings
# numpy and Pillow, which the page server loads only to try a model. tests/test_ui_light.py keeps them equal.
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 25_000_000
# A control request carries no body; anything bigger is not one of the page's.
_SMALL_BODY = 4096


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck browser connection must not hold the stop
    page: UiServer


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "orinkit-ui"
    protocol_version = "HTTP/1.1"
    timeout = 60  # a client that stops sending mid-request gives its thread back

    def version_string(self) -> str:
        return self.server_version  # without http.server's Python version: nobody's business

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        page = self.server.page
        self._body_read = False
        try:
            response = self._route(page, method)
        except Exception as exc:  # the boundary: every failure becomes a JSON answer, never a traceback page
            if isinstance(exc, OrinkitError):
                log.info("%s %s: %s", method, self._plain_path(), exc)
            else:
                log.exception("%s %s failed", method, self._plain_path())
            response = api.json_response(error_body(exc), http_status(exc))
        if method == "POST" and not self._body_read:
            self.close_connection = True  # the unread body would be taken for the next request
        if isinstance(response, api.StreamResponse):
            self._send_stream(response)
        else:
            self._send(response)

    def _route(self, page: UiServer, method: str) -> api.Response:
        url = urlsplit(self.path)
        path = url.path
        if page.check_host:
            check_host(self.headers.get("Host"), page.host, page.port)
        if path == "/live.mjpg":
            if method != "GET":
                raise RequestError(405, f"{method} {path} is not allowed", hint="the live view is GET only")
            check_token(self.headers.get("Authorization") or query_token(url.query), page.token)
            return api.live_mjpeg(page, page.stopping)
        if not path.startswith("/api/"):
            if method != "GET":
                raise RequestError(405, f"{method} {path[:80]} is not allowed", hint="the page's files are GET only")
            name = "index.html" if path == "/" else path[len("/static/"):] if path.startswith("/static/") else None
            if name not in page.assets:  # a fixed table: "../x", "%2e%2e/x" and the like are simply not in it
                raise RequestError(404, f"no such page: {path[:120]}", hint="open /")
            content, kind = page.assets[name]
            return api.Response(200, content, kind, {"Cache-Control": "no-cache"})
        check_token(self.headers.get("Authorization"), page.token)
        query = parse_qs(url.query, keep_blank_values=True, max_num_fields=16)
        if method == "POST":
            check_same_origin(self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site"),
                              self.headers.get("Host"))
        if method == "GET":
            if path == "/api/models":
                return api.models(page, query)
            if path == "/api/board":
                return api.board(page, query)
            if path == "/api/live":
                return api.live(page, query)
            if path.startswith("/api/try/"):
                return api.try_npy(page, path)
        elif path == "/api/try":
            return api.try_model(page, query, self._body(page.max_upload_bytes))
        elif path.startswith("/api/control/"):
            self._body(_SMALL_BODY)
            return api.control(page, path[len("/api/control/"):], query)
        known = {"/api/models": "GET", "/api/board": "GET", "/api/live": "GET", "/api/try": "POST"}
        if path in known or path.startswith(("/api/control/", "/api/try/")):
            raise RequestError(405, f"{method} {path[:80]} is not allowed", hint="see the page server's routes")
        raise RequestError(404, f"no such route: {method} {path[:120]}", hint="see the page server's routes")

    def _body(self, limit: int) -> bytes:
        """The request body, refused before it is read when it is over ``limit`` bytes."""
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(411, "a chunked body is not taken", hint="send Content-Length with the body")
        text = self.headers.get("Content-Length", "0")
        if not text.isdigit():
            raise RequestError(400, f"Content-Length '{text[:20]}' is not a number", hint="send the body's length")
        size = int(text)
        if size > limit:
            raise RequestError(413, f"the body is {size / 2**20:.1f} MiB, above the page server's limit of "
                                    f"{limit / 2**20:.1f} MiB",
                               hint="send a smaller image, or start edge-serve ui with a higher --max-upload-bytes")
        data = self.rfile.read(size) if size else b""
        if len(data) != size:
            raise RequestError(400, f"the body ended after {len(data)} of {size} bytes", hint="send it again")
        self._body_read = True
        return data

    def _send(self, response: api.Response) -> None:
        self.send_response(response.status)
        headers = {**HEADERS, "Content-Type": response.content_type, "Content-Length": str(len(response.body)),
                   "Cache-Control": "no-store", **response.headers}
        if self.close_connection:
            headers["Connection"] = "close"
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _send_stream(self, response: api.StreamResponse) -> None:
        """Headers, then each part as a chunk as it comes, until the parts end (the last chunk) or the viewer goes
        away. Chunked: a body of unknown length that ends at a closed connection reads as cut short to FFmpeg
        (PyAV, OpenCV), where the last chunk is a clean end."""
        self.close_connection = True
        self.send_response(200)
        for key, value in {**HEADERS, "Content-Type": response.content_type, "Cache-Control": "no-store",
                           "Transfer-Encoding": "chunked", "Connection": "close"}.items():
            self.send_header(key, value)
        self.end_headers()
        try:
            for part in response.parts:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (ConnectionError, TimeoutError):  # the viewer closed its tab, or stopped reading for `timeout`
            pass
        finally:
            response.parts.close()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line, an unknown method, headers too long) as JSON."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        body = {"error": {"type": "HTTPError", "message": f"{code} {message or phrase}",
                          "hint": "the page server takes GET and POST only", "exit_code": 4}}
        self.close_connection = True
        self._send(api.Response(code, json.dumps(body).encode()))

    def _plain_path(self) -> str:
        return urlsplit(getattr(self, "path", "")).path[:200]  # never the query: the first URL carries the token

    def log_request(self, code="-", size="-") -> None:
        log.info("%s %s %s %s", self.client_address[0], self.command, self._plain_path(), code)

    def log_message(self, format: str, *args) -> None:
        log.info("%s %s", self.client_address[0], format % args)


class UiServer:
    """The page server for the Triton at ``url`` (gRPC: the try panel and control) and ``http_url`` (its HTTP/REST
    API: the models panel, read without tritonclient or numpy; default: found from ``url`` by
    :func:`orinkit.ui.models.http_url_for`, its host and the HTTP port of that same server; ``http_how`` says how).
    ``start()`` binds and serves in a thread; ``stop()`` ends it and the board monitor. Refused at construction: a
    non-loopback ``host`` without a token (unless ``generate_token``), control without a repository. ``live``
    (an :class:`orinkit.video.live.LiveView` a pipeline writes to) adds the live view: ``/live.mjpg`` and
    ``/api/live``, and the page's Live section."""

    def __init__(self, url: str = "localhost:8001", *, http_url: str | None = None, host: str = "127.0.0.1",
                 port: int = 8080,
                 token: str | None = None, token_file: str | Path | None = None, generate_token: bool = False,
                 repository: str | Path | None = None, allow_control: bool = False,
                 max_upload_bytes: int | None = None, max_pixels: int | None = None, monitor=None,
                 board_interval_s: float = 1.0, board_history_s: float = 300.0, stats_window_s: float = 10.0,
                 try_timeout_s: float = 60.0, control_timeout_s: float = 300.0, live: LiveView | None = None) -> None:
        from orinkit.ui.models import HttpAddress, TritonHTTP, http_url_for

        self.url, self.host, self.port = url, host, port
        found = HttpAddress(http_url, "given") if http_url else http_url_for(url)
        self.http_url, self.http_how = found.url, found.how
        TritonHTTP(self.http_url)  # a malformed address is refused here, not at the first poll
        self.token = resolve_token(host, token, token_file, generate=generate_token)
        self.token_generated = generate_token and token is None and token_file is None and self.token is not None
        self.repository = Path(repository) if repository is not None else None
        if allow_control and self.repository is None:
            raise UiError("control needs the model repository", hint="give --repository with --allow-control")
        if self.repository is not None and not self.repository.is_dir():
            raise UiError(f"model repository '{self.repository}' does not exist", hint="check --repository")
        self.allow_control = allow_control
        # By default the image step's own limits: the page takes no image the server's pre-processing would refuse.
        max_upload_bytes = MAX_IMAGE_BYTES if max_upload_bytes is None else max_upload_bytes
        max_pixels = MAX_PIXELS if max_pixels is None else max_pixels
        if max_upload_bytes <= 0 or max_pixels <= 0:
            raise UiError("the upload limits must be above 0", hint="e.g. --max-upload-bytes 16777216")
        self.max_upload_bytes, self.max_pixels = max_upload_bytes, max_pixels
        self.check_host = is_loopback(host)  # off loopback the token guards, and the host name is anyone's
        self.try_timeout_s, self.control_timeout_s = try_timeout_s, control_timeout_s
        self._monitor_given = monitor
        self._board = (board_interval_s, board_history_s)
        self._stats_window_s = stats_window_s
        self.assets = load_assets()
        self.results = TryResults()
        self.live = live
        self.stopping = threading.Event()  # ends the live view's streams, which would otherwise wait for frames
        self.monitor = self.models = None
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``http://host:port/`` as a browser would open it."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> UiServer:
        if self._httpd is not None:
            raise UiError("the page server was already started", hint="use a new UiServer")
        from orinkit.jetson import BoardMonitor
        from orinkit.ui.models import ModelsView

        cls = _Server6 if ":" in self.host else _Server
        try:
            httpd = cls((self.host, self.port), _Handler)
        except OSError as exc:
            raise AddressInUseError(f"cannot listen on {self.host}:{self.port}: {exc.strerror}",
                                    hint="pick another --port (or --host), or stop what listens there") from exc
        httpd.page = self
        self.port = httpd.server_address[1]  # port 0: the one the system chose
        self.models = ModelsView(self.http_url, window_s=self._stats_window_s)
        self.monitor = self._monitor_given or BoardMonitor(*self._board).start()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="orinkit-ui", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        if self._monitor_given is None:
            self.monitor.stop()
        self.models.close()
        self._httpd = None

    def __enter__(self) -> UiServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def serve_ui(url: str = "localhost:8001", *, echo=print, **options) -> None:
    """Run the page server until SIGINT/SIGTERM (KeyboardInterrupt); ``options`` are :class:`UiServer`'s."""
    page = UiServer(url, **options).start()
    try:
        echo(f"orinkit page for {url} (HTTP {page.http_url}: {page.http_how}) on {page.address}")
        # Bound to every interface: a laptop opens it by the board's name, not by 127.0.0.1.
        where = f"http://{socket.gethostname()}:{page.port}/" if page.host in ("0.0.0.0", "::") else page.address
        if page.token_generated:  # printed once, here: it is in no log or file
            echo(f"  open {where}?token={page.token}")
        elif page.token is not None:
            echo(f"  open {where}?token=<your token>")
        echo("  control (load/unload/rollback) is " + ("on" if page.allow_control else "off"))
        echo("Ctrl-C or SIGTERM stops it.")
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        page.stop()
