"""A pytest plugin that starts real tritonservers for tests: ``pytest -p orinkit.server.testing`` or
``pytest_plugins = ["orinkit.server.testing"]`` in a conftest.

Fixtures (session-scoped, one server per repository and options, on free ports):

* ``triton_server_factory(repository, **server_options) -> TritonProcess``

When a test that used a server fails, the end of each server's log is added to the failure report.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import pytest

from orinkit.server.local import start_on_free_ports
from orinkit.server.process import TritonProcess

__all__ = ["start_on_free_ports", "triton_server_factory"]

_SERVER_FIXTURES = "_orinkit_servers"
_LOG_LINES = 60


@pytest.fixture(scope="session")
def _orinkit_servers():
    servers: dict[tuple, TritonProcess] = {}
    yield servers
    # Together, not one after another: each server's graceful exit waits on its own backend stubs, and a suite's
    # dozen servers stopped in turn spent a minute of CI at the session's end.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        list(pool.map(TritonProcess.stop, servers.values()))


@pytest.fixture(scope="session")
def triton_server_factory(_orinkit_servers, tmp_path_factory):
    """Start (once per session and per repository/options) a real tritonserver; returns its TritonProcess."""

    def start(repository: str | os.PathLike[str], **options) -> TritonProcess:
        key = (str(Path(repository).resolve()), tuple(sorted(options.items())))
        process = _orinkit_servers.get(key)
        if process is None or process.returncode is not None:
            log_path = tmp_path_factory.mktemp("tritonserver") / "server.log"
            process = start_on_free_ports(Path(repository), log_path, **options)
            _orinkit_servers[key] = process
        return process

    return start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    servers = getattr(item, "funcargs", {}).get(_SERVER_FIXTURES) or {}
    for process in servers.values():
        tail = process.log_tail(_LOG_LINES)
        title = f"tritonserver log (last {_LOG_LINES} lines, {process.command.options.repository})"
        report.sections.append((title, tail or "(empty)"))
