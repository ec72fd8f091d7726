"""Triton's repository API over gRPC: load, unload, readiness, the repository index and inference statistics."""

from __future__ import annotations

import time
from dataclasses import dataclass

from orinkit.repo.errors import ServerAPIError


@dataclass(frozen=True)
class ModelState:
    name: str
    version: str
    state: str
    reason: str


class RepositoryAPI:
    """A small wrapper over ``tritonclient.grpc`` that turns its one exception type into ServerAPIError."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        import tritonclient.grpc as grpcclient

        self.url = url
        self.timeout_s = timeout_s
        self._client = grpcclient.InferenceServerClient(url)

    def _call(self, what: str, fn, *args, **kwargs):
        from tritonclient.utils import InferenceServerException

        from orinkit.client.server_text import one_line

        try:
            return fn(*args, **kwargs)
        except InferenceServerException as exc:
            message = exc.message() or str(exc)
            hint = "is the server running there, with its gRPC port?"
            if "polling is enabled" in message or "not allowed" in message:
                hint = "start the server with --model-control-mode explicit to load through the API"
            elif exc.status() != "StatusCode.UNAVAILABLE":
                hint = "the server log says more"
            # A Python model's load failure carries its stack over many lines: one line, the exception first.
            raise ServerAPIError(f"{what} on {self.url} failed: {one_line(message)}", hint=hint) from exc

    def load(self, name: str, timeout_s: float | None = None, *, config: str | None = None) -> float:
        """Load ``name`` (the server answers once the load has ended); the seconds it took. ``config`` (the JSON
        of a ModelConfig) replaces the repository's config.pbtxt for this load only: the file is not touched, and
        a later load without it reads the file again."""
        started = time.monotonic()
        self._call(f"loading '{name}'", self._client.load_model, name, config=config, client_timeout=timeout_s)
        return time.monotonic() - started

    def unload(self, name: str) -> None:
        self._call(f"unloading '{name}'", self._client.unload_model, name, client_timeout=self.timeout_s)

    def index(self) -> list[ModelState]:
        response = self._call("reading the repository index", self._client.get_model_repository_index,
                              client_timeout=self.timeout_s)
        return [ModelState(m.name, m.version, m.state, m.reason) for m in response.models]

    def statistics(self, name: str = "") -> dict:
        """Inference statistics by (model, version) of ``name`` (every loaded model when empty): counts of
        successful and failed requests and cumulative times, as :class:`orinkit.client.statistics.ModelStatistics`."""
        from orinkit.client.statistics import from_response

        response = self._call("reading inference statistics", self._client.get_inference_statistics, name,
                              client_timeout=self.timeout_s)
        return from_response(response)

    def versions(self, name: str, state: str = "READY") -> list[int]:
        return sorted(int(m.version) for m in self.index() if m.name == name and m.state == state and m.version)

    def wait_ready(self, name: str, version: int, timeout_s: float) -> float:
        """Seconds until ``name`` version ``version`` was READY; ServerAPIError when it is not in time."""
        started = time.monotonic()
        while True:
            if version in self.versions(name):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                states = [m for m in self.index() if m.name == name]
                raise ServerAPIError(
                    f"'{name}' version {version} was not READY after {timeout_s:g} s ({states})",
                    hint="the server log says why it did not load",
                )
            time.sleep(0.2)

    def wait_unloaded(self, name: str, timeout_s: float) -> None:
        """Until no version of ``name`` is READY or UNLOADING any more."""
        deadline = time.monotonic() + timeout_s
        while any(m.name == name and m.state in ("READY", "UNLOADING") for m in self.index()):
            if time.monotonic() > deadline:
                raise ServerAPIError(f"'{name}' was still loaded after {timeout_s:g} s",
                                     hint="requests in flight keep it; the server log says more")
            time.sleep(0.1)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RepositoryAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
