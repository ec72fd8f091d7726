"""A model's serving options changed in place, under the deploy rules: checked first, written atomically, loaded
and judged on the server, put back if anything fails, and undone later with :func:`revert_config`.

Instance groups and batching belong to the model, not to a version (config.pbtxt sits beside the version
folders), so such a change is a new config rather than a new version. The config it replaces is kept beside it as
``config.pbtxt.previous`` (Triton reads only config.pbtxt and the numbered folders); reverting swaps the two.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.core.files import atomic_write_bytes, fsync_path
from orinkit.repo.check import check_version_folder
from orinkit.repo.errors import DeployError, DeployLoadError
from orinkit.repo.journal import model_lock
from orinkit.repo.layout import version_folders
from orinkit.repo.pbtxt import CONFIG_NAME, format_config, parse_config
from orinkit.repo.server_api import RepositoryAPI

PREVIOUS_NAME = CONFIG_NAME + ".previous"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ConfigChange:
    name: str
    path: Path  # the config.pbtxt written
    previous: Path  # the config it replaced, kept for revert_config
    serving: tuple[int, ...] = ()  # READY versions after the load; empty without a server
    load_seconds: float | None = None


def change_config(repository: str | os.PathLike[str], name: str, config: mc.ModelConfig, *,
                  server: str | None = None, accept: Callable[[], None] | None = None, timeout_s: float = 300.0,
                  lock_wait_s: float = 30.0, progress: Progress = lambda message: None) -> ConfigChange:
    """Serve ``name`` with ``config``. Refused before anything is written when a version on disk does not fit it.
    With ``server`` (gRPC URL, explicit model control) the model is loaded with the new file and ``accept`` runs
    once it is READY; if either fails, the old config is written back and loaded again, and DeployLoadError says
    why."""
    folder = _model_folder(repository, name)
    if config.name and config.name != name:
        raise DeployError(f"the config names model '{config.name}', not '{name}'", hint="set its name field")
    text = format_config(config).encode()
    parse_config(text.decode(), source=f"the new config of '{name}'")
    with model_lock(folder, wait_s=lock_wait_s, what="a config change"):
        for version in sorted(version_folders(folder)):
            errors = [f for f in check_version_folder(folder, folder / str(version), config) if f.severity == "error"]
            if errors:
                raise DeployError(f"version {version} of '{name}' does not fit the new config: {errors[0].problem}",
                                  hint=errors[0].fix)
        current, previous = folder / CONFIG_NAME, folder / PREVIOUS_NAME
        old = current.read_bytes()
        older = previous.read_bytes() if previous.is_file() else None
        atomic_write_bytes(previous, old)
        atomic_write_bytes(current, text)
        fsync_path(folder)
        progress(f"wrote {current} (the old one kept as {previous.name})")
        if server is None:
            return ConfigChange(name, current, previous)
        with RepositoryAPI(server) as api:
            try:
                seconds = api.load(name, timeout_s)
                serving = tuple(api.versions(name))
                if not serving:
                    raise DeployError(f"'{name}' has no version READY with the new config",
                                      hint="the server log says why")
                if accept is not None:
                    accept()
            except Exception as exc:
                atomic_write_bytes(current, old)
                if older is None:
                    previous.unlink(missing_ok=True)
                else:
                    atomic_write_bytes(previous, older)
                fsync_path(folder)
                _load_quietly(api, name)
                reason = getattr(exc, "message", None) or str(exc)
                raise DeployLoadError(f"the new config of '{name}' was taken back and the old one serves again: "
                                      f"{reason}", hint=getattr(exc, "hint", None)) from exc
    progress(f"{name} loaded with the new config in {seconds:.1f} s; serving {list(serving)}")
    return ConfigChange(name, current, previous, serving, seconds)


def revert_config(repository: str | os.PathLike[str], name: str, *, server: str | None = None,
                  timeout_s: float = 300.0, progress: Progress = lambda message: None) -> ConfigChange:
    """Serve ``name`` with the config the last change replaced (the two swap places, so reverting twice brings
    the change back)."""
    folder = _model_folder(repository, name)
    previous = folder / PREVIOUS_NAME
    if not previous.is_file():
        raise DeployError(f"'{name}' has no previous config to go back to ({previous} is missing)",
                          hint="only a config written by a config change (edge-tune --apply) can be reverted")
    config = parse_config(previous.read_text(encoding="utf-8"), source=str(previous))
    return change_config(folder.parent, name, config, server=server, timeout_s=timeout_s, progress=progress)


def _model_folder(repository: str | os.PathLike[str], name: str) -> Path:
    folder = Path(repository) / name
    if not (folder / CONFIG_NAME).is_file():
        raise DeployError(f"model '{name}' is not in {repository}",
                          hint=f"place it first: edge-repo add ARTIFACT --name {name} --repo {repository}")
    return folder


def _load_quietly(api: RepositoryAPI, name: str) -> None:
    # The way back after a failure: the error being raised says what went wrong, so this one stays quiet.
    with contextlib.suppress(Exception):
        api.load(name)
