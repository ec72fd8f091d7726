"""The models panel's data: every model of the server's repository index, its state, what it takes and gives, and
its request counts and latencies over the last seconds.

All of it is read from Triton's HTTP/REST API with the standard library (:class:`TritonHTTP`): serving the page and
its panels loads neither tritonclient nor gRPC nor Pillow; they come with the first try or control request, which
need the gRPC client. numpy comes with the first READY model: the task kits, which say what a model is ("detector,
3 classes"), read its ``orinkit.client.ModelInfo`` (:mod:`orinkit.ui.tasks`).

Triton's statistics are cumulative since a version loaded; the latencies over an interval are differences of two
snapshots. Several pages (or tabs) may poll at once, so the snapshots are kept here, server-side, for a sliding
window: each answer is measured against the oldest snapshot of the last ``window_s`` seconds, whoever asked.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from orinkit.core.errors import OrinkitError
from orinkit.ui.errors import UiError

log = logging.getLogger("orinkit.ui")

# Triton's states, most telling first: a model is READY when one version is.
_ORDER = ("READY", "LOADING", "UNLOADING", "UNAVAILABLE")
_HTTP_HINT = ("is tritonserver running there, with its HTTP endpoint (not its gRPC port)? edge-serve ui says at start "
              "how it chose the address; --http-url names another")


# The same row as orinkit.repo.server_api.ModelState, kept here: importing orinkit.repo (or orinkit.formats) loads
# tritonclient's gRPC and numpy, which the page must not pay for to show its models panel.
@dataclass(frozen=True)
class ModelState:
    """One row of the repository index (a model without a loaded version has version "")."""

    name: str
    version: str
    state: str
    reason: str


GRPC_DEFAULT_PORT = 8001


@dataclass(frozen=True)
class HttpAddress:
    """Triton's HTTP address and, in words, how it was found (the page prints it at start)."""

    url: str
    how: str


def _split(grpc_url: str) -> tuple[str, int | None]:
    """(host, port) of "host:port", "[::1]:8001", "grpcs://host:port" or "host" (port None)."""
    address = grpc_url.split("://", 1)[-1].split("/", 1)[0]
    host, colon, port = address.rpartition(":")
    if not colon or address.endswith("]") or not port.isdigit():  # "board", "[::1]": no port
        return address, None
    return host, int(port)


def _flag(argv: tuple[str, ...], name: str) -> str | None:
    """The value of tritonserver's ``--name=V`` or ``--name V`` (getopt_long takes both); the last one wins."""
    value = None
    for index, arg in enumerate(argv):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and index + 1 < len(argv):
            value = argv[index + 1]
    return value


def _local(host: str) -> bool:
    import socket

    from orinkit.ui.security import is_loopback

    return is_loopback(host) or host.lower() in (socket.gethostname().lower(), socket.getfqdn().lower())


def http_url_for(grpc_url: str) -> HttpAddress:
    """Triton's HTTP address for the server whose gRPC address is ``grpc_url``: always on the same host; the port is
    asked of the tritonserver that listens on that gRPC port when it runs on this machine (its command line's
    --http-port, Triton's 8000 when it has none); otherwise (another machine, a container's proxy, a process this
    user cannot read) the port just below gRPC's, as Triton's own defaults pair them (8000 beside 8001)."""
    host, port = _split(grpc_url)
    host = host or "localhost"
    if port is None:
        return HttpAddress(f"http://{host}:{GRPC_DEFAULT_PORT - 1}",
                           f"Triton's default HTTP port: {grpc_url} names no port, so gRPC's default "
                           f"{GRPC_DEFAULT_PORT}")
    if _local(host):
        from orinkit.server.ports import port_holder

        holder = port_holder(port)
        if holder is not None and holder.is_tritonserver:
            allowed = (_flag(holder.argv, "allow-http") or "true").lower()
            if allowed in ("false", "off", "0", "no"):
                raise UiError(f"the tritonserver on gRPC port {port} (pid {holder.pid}) runs without HTTP "
                              "(--allow-http=false), which the models panel reads",
                              hint="start it with its HTTP endpoint, or give --http-url of a server that has one")
            given = _flag(holder.argv, "http-port")
            if given is not None and given.isdigit():
                return HttpAddress(f"http://{host}:{given}",
                                   f"the --http-port of the tritonserver on gRPC port {port} (pid {holder.pid})")
            return HttpAddress(f"http://{host}:8000", f"Triton's default HTTP port: the tritonserver on gRPC port "
                                                      f"{port} (pid {holder.pid}) sets no --http-port")
    return HttpAddress(f"http://{host}:{port - 1}", f"the port below gRPC's {port}, as Triton pairs 8000 with 8001 "
                                                    "(--http-url names another)")


class TritonHTTP:
    """JSON calls to Triton's HTTP/REST API, with orinkit's client errors.

    http.client rather than urllib.request: urllib would send the board's own Triton requests through an
    ``http_proxy`` set in the environment. A connection per call: the page's threads call at once, and a connection
    to a local server costs well under a millisecond."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise UiError(f"Triton's HTTP address '{url}' is not an http://HOST[:PORT] URL",
                          hint="e.g. --http-url http://localhost:8000")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._connection = (http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection,
                            parts.hostname, port)
        self._prefix = parts.path.rstrip("/")

    def call(self, method: str, path: str, *, what: str, model: str | None = None):
        """The parsed JSON answer to ``method path``; ServerUnavailableError when the server cannot be reached,
        DeadlineExceededError after ``timeout_s``, ModelNotFoundError and the like for its refusals."""
        from orinkit.client.errors import DeadlineExceededError, ServerUnavailableError

        cls, host, port = self._connection
        connection = cls(host, port, timeout=self.timeout_s)
        try:
            # POST with an empty body: Triton's index takes no options the page needs.
            connection.request(method, self._prefix + path, body=b"" if method == "POST" else None,
                               headers={"Accept": "application/json"})
            response = connection.getresponse()
            data = response.read()
        except TimeoutError as exc:
            raise DeadlineExceededError(f"{what} on {self.url} took longer than {self.timeout_s:g} s",
                                        hint="look at the server's load") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise ServerUnavailableError(f"cannot reach Triton's HTTP API at {self.url}: {exc or type(exc).__name__}",
                                         hint=_HTTP_HINT) from exc
        finally:
            connection.close()
        try:
            answer = json.loads(data) if data else None
        except ValueError:
            answer = None
            if response.status == 200:
                raise ServerUnavailableError(f"{self.url} did not answer {what} with JSON: is it Triton's HTTP API?",
                                             hint=_HTTP_HINT) from None
        if response.status != 200:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise _refused(self.url, response.status, str(message or response.reason), what, model)
        return answer


def _refused(url: str, status: int, message: str, what: str, model: str | None) -> OrinkitError:
    """The client's error for Triton's refusal, as its gRPC answer would have been mapped (orinkit.client.errors)."""
    from orinkit.client.errors import ClientError, ModelNotFoundError, ModelNotReadyError

    if "no available versions" in message:
        return ModelNotReadyError(f"'{model}' has no version loaded on {url}: {message}",
                                  hint="edge-repo status shows its state")
    if status == 404 or "unknown model" in message:
        return ModelNotFoundError(message, hint="check the model name and version (edge-repo status)")
    return ClientError(f"{what} on {url} failed: HTTP {status}: {message}", hint="the server log says more")


class ModelsView:
    def __init__(self, url: str, *, window_s: float = 10.0, timeout_s: float = 10.0) -> None:
        """``url``: Triton's HTTP address (``http://localhost:8000``)."""
        self.url = url
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.http = TritonHTTP(url, timeout_s=timeout_s)
        self._snapshots: deque[tuple[float, dict]] = deque(maxlen=256)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Nothing is held between calls; kept so that the page server's stop reads the same for any view."""

    def index(self) -> list[ModelState]:
        answer = self.http.call("POST", "/v2/repository/index", what="reading the repository index")
        return [ModelState(str(m.get("name", "")), str(m.get("version", "")), str(m.get("state", "")),
                           str(m.get("reason", ""))) for m in answer or ()]

    def config(self, name: str, version: str = "") -> dict:
        """The model's config as JSON (Triton's own field names, as gRPC's ``as_json``), with orinkit's errors."""
        # Quoted whole: a name or version from a request never becomes another path of Triton's API.
        path = f"/v2/models/{quote(name, safe='')}"
        if version:
            path += f"/versions/{quote(version, safe='')}"
        return self.http.call("GET", path + "/config", what=f"reading the config of '{name}'", model=name)

    def statistics(self) -> dict:
        """Every loaded version's counters, by (model, version), as orinkit.client.statistics.ModelStatistics."""
        from orinkit.client.statistics import from_json

        return from_json(self.http.call("GET", "/v2/models/stats", what="reading the statistics") or {})

    def names(self) -> set[str]:
        return {m.name for m in self.index()}

    def models(self) -> list[dict]:
        index = self.index()
        # Read after the index: a version loaded in between has counts and no state, and is left out.
        now = time.monotonic()
        statistics = self.statistics()
        window, base = self._window(now, statistics)
        by_name: dict[str, list] = {}
        for state in index:
            by_name.setdefault(state.name, []).append(state)
        return [self._model(name, states, statistics, base, window) for name, states in sorted(by_name.items())]

    def _window(self, now: float, statistics: dict) -> tuple[float | None, dict | None]:
        with self._lock:
            while self._snapshots and now - self._snapshots[0][0] > self.window_s:
                self._snapshots.popleft()
            base = self._snapshots[0] if self._snapshots else None
            self._snapshots.append((now, statistics))
        if base is None or now - base[0] < 0.2:  # nothing before this poll to measure against
            return None, None
        return round(now - base[0], 2), base[1]

    def _model(self, name: str, states: list, statistics: dict, base: dict | None, window: float | None) -> dict:
        present = [s.state for s in states if s.state]
        state = next((s for s in _ORDER if s in present), present[0] if present else "NOT LOADED")
        reason = next((s.reason for s in states if s.reason and s.state == state), "")
        versions = [{"version": s.version, "state": s.state, "reason": s.reason,
                     **_counts(statistics.get((name, s.version)), base, window)}
                    for s in sorted(states, key=lambda s: int(s.version) if s.version.isdigit() else -1)
                    if s.version]
        model = {"name": name, "state": state, "reason": reason, "versions": versions}
        if state == "READY":
            model.update(self._described(name))
        return model

    def _described(self, name: str) -> dict:
        try:
            config = self.config(name)
        except OrinkitError as exc:  # unloaded between the index and this call: the next poll shows it
            return {"config_error": exc.message}
        return {
            "backend": config.get("backend", ""),
            "platform": config.get("platform", ""),
            "max_batch_size": config.get("max_batch_size", 0),
            "inputs": [_tensor(t) for t in config.get("input", [])],
            "outputs": [_tensor(t) for t in config.get("output", [])],
            "image_input": image_input_json(config),
            "kind": kind_of(name, config),
        }


def kind_of(name: str, config: dict) -> str | None:
    """The task kit's words for the model, or None (no kit recognizes it, or the kit failed: the panel still shows
    the model, and the log says why)."""
    from orinkit.ui.tasks import describe

    try:
        return describe(config)
    except Exception:  # noqa: BLE001 - one kit's failure must not hide the models panel
        log.warning("the task kit failed to describe '%s'", name, exc_info=True)
        return None


def image_input_json(config: dict) -> dict | None:
    """What the try panel sends this model (None: it takes no image, or the panel cannot tell)."""
    # From tryout_inputs, not tryout: tryout brings numpy and Pillow, which the models panel does without.
    from orinkit.ui.tryout_inputs import image_input

    try:
        found = image_input(config)
    except OrinkitError:
        return None
    return found.to_json() if found is not None else None


def _tensor(t: dict) -> dict:
    dtype = t.get("data_type", "").removeprefix("TYPE_")
    # The config's TYPE_STRING is what Triton's API and orinkit call BYTES.
    return {"name": t.get("name", ""), "dtype": "BYTES" if dtype == "STRING" else dtype,
            "dims": [int(d) for d in t.get("dims", [])]}


def _counts(stats, base: dict | None, window: float | None) -> dict:
    """Totals since the version loaded, and over the window: requests, and mean queue and compute ms."""
    if stats is None:
        return {"success": None, "failure": None, "window": None}
    counts = {"success": stats.success_count, "failure": stats.failure_count, "window": None}
    if base is None:
        return counts
    before = base.get((stats.model, stats.version))
    change = stats if before is None else stats - before
    if change.success_count < 0 or change.failure_count < 0:  # reloaded in between: its counters started again
        change = stats
    compute = change.compute_input_ns + change.compute_infer_ns + change.compute_output_ns
    counts["window"] = {
        "seconds": window,
        "success": change.success_count,
        "failure": change.failure_count,
        "queue_ms": _round(change.mean_queue_ms),
        "compute_ms": _round(compute / change.success_count / 1e6 if change.success_count else None),
    }
    return counts


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
