"""Load, unload and roll back from the page: the library calls of ``edge-repo load/unload/rollback``, with their
rules (set-aside versions put back on load, what loads recorded as proven, the model's lock, rollback only where
the version policy serves the latest)."""

from __future__ import annotations

from pathlib import Path

from orinkit.ui.errors import RequestError

ACTIONS = ("load", "unload", "rollback")


def run_action(action: str, name: str, *, url: str, repository: Path, timeout_s: float = 300.0) -> dict:
    """Do ``action`` to model ``name`` on the server at ``url``; what happened, as JSON. ``name`` must already be
    known to be in the server's repository index (it becomes part of a path)."""
    from orinkit.repo.deploy import load_versions, rollback
    from orinkit.repo.server_api import RepositoryAPI

    said: list[str] = []
    if action == "load":
        result = load_versions(repository, name, server=url, timeout_s=timeout_s, progress=said.append)
        done = {"serving": list(result.serving), "reinstated": list(result.reinstated),
                "refused": list(result.refused)}
    elif action == "unload":
        with RepositoryAPI(url) as api:
            api.unload(name)
            api.wait_unloaded(name, 60.0)
        said.append(f"unloaded {name} from {url}")
        done = {}
    elif action == "rollback":
        result = rollback(repository, name, server=url, timeout_s=timeout_s, progress=said.append)
        done = {"rolled_back": result.rolled_back, "now_latest": result.now_latest, "serving": list(result.serving)}
    else:
        raise RequestError(404, f"no control action '{action}'", hint=f"use one of {', '.join(ACTIONS)}")
    return {"model": name, "action": action, **done, "progress": said}
