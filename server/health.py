"""Readiness and metadata over Triton's HTTP endpoint, with the standard library only (it runs on the device
and inside a systemd ExecStartPost, where nothing heavy should load)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

# Loopback health checks must not go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout_s: float) -> tuple[int, bytes]:
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def is_ready(http_url: str, *, timeout_s: float = 1.0) -> bool:
    """True when the server answers 200 on /v2/health/ready (every model it was asked to load is ready)."""
    try:
        status, _ = _get(f"{http_url}/v2/health/ready", timeout_s)
    except (OSError, urllib.error.URLError):
        return False
    return status == 200


def is_model_ready(http_url: str, model: str, version: str | None = None, *, timeout_s: float = 1.0) -> bool:
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/ready"
    try:
        status, _ = _get(f"{http_url}{path}", timeout_s)
    except (OSError, urllib.error.URLError):
        return False
    return status == 200


def server_metadata(http_url: str, *, timeout_s: float = 2.0) -> dict[str, Any]:
    """The server's /v2 metadata: name, version and extensions."""
    status, body = _get(f"{http_url}/v2", timeout_s)
    if status != 200:
        raise OSError(f"{http_url}/v2 answered HTTP {status}")
    return json.loads(body)


def repository_index(http_url: str, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """Every model version the server knows: ``[{"name", "version", "state", "reason"}, …]``."""
    request = urllib.request.Request(f"{http_url}/v2/repository/index", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise OSError(f"{http_url}/v2/repository/index answered HTTP {exc.code}") from exc


def wait_until(predicate, *, timeout_s: float, interval_s: float = 0.2) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passes; True when it became true."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
