"""The page's JSON API: one function per route, each given the running page and the request's parts, each
answering a :class:`Response`. Security checks (host, token, origin, body size) happen before these run, in
:mod:`orinkit.ui.server`."""

from __future__ import annotations

import json
import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote

from orinkit.ui.control import ACTIONS, run_action
from orinkit.ui.errors import RequestError
from orinkit.ui.labels import read_labels


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamResponse:
    """A response written as it comes (the live view's MJPEG): parts of one multipart body, never a length."""

    content_type: str
    parts: Generator[bytes, None, None]


def json_response(payload, status: int = 200) -> Response:
    # allow_nan=False: a NaN would make the whole answer unreadable to the page's JSON.parse; fail here instead.
    return Response(status, json.dumps(payload, allow_nan=False).encode())


def one(query: dict[str, list[str]], key: str, default: str | None = None) -> str:
    values = query.get(key)
    if not values:
        if default is None:
            raise RequestError(400, f"the request needs ?{key}=", hint=f"e.g. ?{key}=NAME")
        return default
    if len(values) > 1:
        raise RequestError(400, f"?{key}= given {len(values)} times", hint="give it once")
    return values[0]


def models(page, query) -> Response:
    return json_response({
        "server": page.url,
        "http": page.http_url,
        "control": page.allow_control,
        "window_s": page.models.window_s,
        "max_upload_bytes": page.max_upload_bytes,
        "models": page.models.models(),
    })


def board(page, query) -> Response:
    text = one(query, "since", "")
    since = None
    if text:
        try:
            since = float(text)
        except ValueError:
            since = math.nan
        if not math.isfinite(since):
            raise RequestError(400, f"?since={text[:40]} is not a time", hint="pass the last sample's t")
    return json_response(page.monitor.snapshot(since=since))


def _known(page, name: str) -> None:
    if name not in page.models.names():
        raise RequestError(404, f"the server's repository has no model '{name[:80]}'",
                           hint="the models panel lists what it has")


def try_model(page, query, body: bytes) -> Response:
    from orinkit.client import Client
    from orinkit.ui.tryout import try_image

    name, version = one(query, "model"), one(query, "version", "")
    if not body:
        raise RequestError(400, "no image in the request", hint="send the image file itself as the POST body")
    config = page.models.config(name, version)  # an unknown model fails here, with the client's error
    labels = None
    if page.repository is not None:
        _known(page, name)  # the name becomes part of a path
        labels = read_labels(page.repository, name, config)
    with Client(page.url, name, version or None, timeout_s=page.try_timeout_s, ready_timeout_s=5.0) as client:
        result = try_image(client, body, config=config, labels=labels, max_bytes=page.max_upload_bytes,
                           max_pixels=page.max_pixels, version=version)
    key = page.results.add(result)
    answer = result.to_json()
    answer["id"] = key
    answer["npy"] = {o["name"]: f"/api/try/{key}/{_quote(o['name'])}.npy" for o in answer["outputs"]}
    return json_response(answer)


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def try_npy(page, path: str) -> Response:
    parts = path.split("/")  # "", "api", "try", id, "output.npy"
    if len(parts) != 5 or not parts[4].endswith(".npy"):
        raise RequestError(404, f"no such download: {path[:120]}", hint="use the links the try panel shows")
    output = unquote(parts[4][:-4])
    data = page.results.npy(parts[3], output)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in output) or "output"
    return Response(200, data, "application/octet-stream",
                    {"Content-Disposition": f'attachment; filename="{safe}.npy"'})


def control(page, action: str, query) -> Response:
    if not page.allow_control:
        raise RequestError(403, "control is off; start with --allow-control",
                           hint="edge-serve ui --allow-control --repository MODELS")
    if action not in ACTIONS:
        raise RequestError(404, f"no control action '{action[:40]}'", hint=f"use one of {', '.join(ACTIONS)}")
    name = one(query, "model")
    _known(page, name)
    return json_response(run_action(action, name, url=page.url, repository=page.repository,
                                    timeout_s=page.control_timeout_s))


def live(page, query) -> Response:
    """The live view's newest figures, or ``{"live": false}`` when this page has none (not an error: the page
    polls it and shows the section only when there is a view)."""
    if page.live is None:
        return json_response({"live": False})
    return json_response(page.live.status())


def live_mjpeg(page, stop) -> StreamResponse:
    """The live view as MJPEG (multipart/x-mixed-replace, one image/jpeg part with its length per new frame), until
    the view is closed or the page server stops (``stop``)."""
    if page.live is None:
        raise RequestError(404, "this page has no live view",
                           hint="a page started with one has it: UiServer(..., live=LiveView())")
    from orinkit.video.live import BOUNDARY

    def parts() -> Iterator[bytes]:
        for jpeg in page.live.frames(stop=stop):
            yield (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n".encode()
                   + jpeg + b"\r\n")
        # No closing "--boundary--": FFmpeg's MJPEG reader takes it for a part and fails; the last chunk ends it.

    return StreamResponse(f"multipart/x-mixed-replace; boundary={BOUNDARY}", parts())
