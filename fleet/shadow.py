"""A version's health gate in a shadow model, before the version serves anything.

Triton sends a request without a version to the newest READY version, so gating a version after it was loaded into
the live model lets real traffic reach it until the gate fails. Instead the agent copies the staged version into a
model folder of its own, ``<model>.fleet-gate`` (a name Triton loads like any other: it does not start with '.',
which orinkit's own checks skip), with the model's config renamed and its version policy pinned to that version,
loads it through the repository API, gates it there, and unloads and removes it whatever happened. Only a passed
gate lets the version into the live model. The folder holds a marker file so that leftovers (the agent killed
mid-gate) are told apart from a real model of that name and removed at the agent's next start.

The version's files are hard-linked where the filesystem allows (a model can be gigabytes on an 8 GB Orin's eMMC);
nothing writes into them, the staged folder is renamed into place later. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from orinkit.core.files import atomic_write_bytes, fsync_path, fsync_tree
from orinkit.fleet.errors import FleetError
from orinkit.fleet.gate import GATE_REQUESTS, Gate, GateResult, run_gate

SHADOW_SUFFIX = ".fleet-gate"
MARKER = ".orinkit-fleet-gate"  # inside a shadow folder: the agent made it and may remove it
_BUILDING = ".building-"  # hidden temporary folders in the repository: skipped by model_dirs and check


class ShadowLoadError(FleetError):
    """The shadow model did not load (or not READY in time): the version cannot serve (exit 6)."""


def shadow_name(model: str) -> str:
    return f"{model}{SHADOW_SUFFIX}"


def is_shadow(name: str) -> bool:
    return name.endswith(SHADOW_SUFFIX)


def _link_or_copy(source: str, target: str) -> str:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(source, target)
    return target


def _model_files(live: Path, model_files: Mapping[str, bytes] | None) -> dict[str, bytes]:
    """The model folder's own files the version will be placed with: pushed with it, or the live folder's
    (config.pbtxt, labels; orinkit's hidden journal and lock are not the model's)."""
    if model_files is not None:
        return dict(model_files)
    return {p.name: p.read_bytes() for p in sorted(live.iterdir()) if p.is_file() and not p.name.startswith(".")}


def build_shadow(repository: Path, model: str, version: int, version_dir: Path,
                 model_files: Mapping[str, bytes] | None) -> Path:
    """Place ``<model>.fleet-gate`` holding only ``version`` (a copy of ``version_dir``) atomically: built in a
    hidden folder of the repository (the same filesystem: the rename is atomic), then renamed to its name."""
    from orinkit.repo.pbtxt import CONFIG_NAME, parse_config, write_config

    name = shadow_name(model)
    target = repository / name
    remove_shadow(repository, model)  # a leftover of an earlier attempt
    files = _model_files(repository / model, model_files)
    if CONFIG_NAME not in files:
        raise ShadowLoadError(f"version {version} of '{model}' has no config.pbtxt to gate it with")
    building = repository / f".{name}{_BUILDING}{os.getpid()}-{time.time_ns()}"
    try:
        building.mkdir()
        for relative, data in files.items():
            path = building / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        config = parse_config(files[CONFIG_NAME].decode("utf-8"), source=f"{model}/{CONFIG_NAME}")
        config.name = name  # Triton refuses a config whose name is not its folder's
        config.version_policy.specific.versions[:] = [version]  # exactly the version under test, whatever else
        write_config(building / CONFIG_NAME, config)
        shutil.copytree(version_dir, building / str(version), copy_function=_link_or_copy)
        (building / MARKER).write_text(f"{model} {version}\n")
        fsync_tree(building)
        os.rename(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    fsync_path(repository)
    return target


def remove_shadow(repository: Path, model: str) -> None:
    """Remove the shadow folder of ``model`` (only one the agent made: it holds the marker)."""
    target = repository / shadow_name(model)
    if (target / MARKER).is_file():
        hidden = repository / f".{target.name}{_BUILDING}removing-{time.time_ns()}"
        try:
            os.rename(target, hidden)  # gone from Triton's view at once; the slow delete happens hidden
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            return
        shutil.rmtree(hidden, ignore_errors=True)


def clear_leftovers(repository: Path) -> list[str]:
    """Remove the shadow folders (and half-built ones) a killed agent left in ``repository``; their names."""
    names = []
    if not repository.is_dir():
        return names
    for path in sorted(repository.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith(".") and SHADOW_SUFFIX + _BUILDING in path.name:
            shutil.rmtree(path, ignore_errors=True)
        elif is_shadow(path.name) and (path / MARKER).is_file():
            names.append(path.name)
            remove_shadow(repository, path.name[:-len(SHADOW_SUFFIX)])
    return names


def unload_leftovers(api, repository: Path, names: list[str]) -> list[str]:
    """Unload shadow models still known to the server whose folder is gone (a real model that happens to end in
    the suffix keeps its folder, without the marker, and is left alone); the names unloaded."""
    from orinkit.repo.errors import RepoError

    known = {e.name for e in api.index() if is_shadow(e.name) and e.state in ("READY", "LOADING", "UNLOADING")}
    stale = sorted(n for n in known | set(names) if not (repository / n).is_dir())
    for name in stale:
        with contextlib.suppress(RepoError):
            api.unload(name)
    return stale


def gate_in_shadow(server: str, repository: Path, model: str, version: int, version_dir: Path,
                   model_files: Mapping[str, bytes] | None, gate: Gate | None, *, requests: int = GATE_REQUESTS,
                   timeout_s: float = 300.0, progress: Callable[[str], None] = lambda line: None) -> GateResult:
    """Gate ``version`` (its folder ``version_dir``) in the shadow model; the live model is never touched.
    ShadowLoadError when it does not load. The shadow is unloaded and removed on every way out."""
    from orinkit.repo.errors import RepoError
    from orinkit.repo.server_api import RepositoryAPI

    name = shadow_name(model)
    with RepositoryAPI(server) as api:
        try:
            build_shadow(repository, model, version, version_dir, model_files)
            progress(f"{model}: gating version {version} as '{name}' before it serves")
            try:
                api.load(name, timeout_s)
                api.wait_ready(name, version, timeout_s)
            except RepoError as exc:
                raise ShadowLoadError(_load_failure(api, name, version, exc.message)) from exc
            result = run_gate(server, name, version, gate, requests=requests)
            # The shadow is the agent's momentary copy: a person looks for the model and the version.
            return replace(result, reason=result.reason.replace(f"'{name}'", f"'{model}' version {version}")
                           .replace(name, model))
        finally:
            with contextlib.suppress(RepoError):
                api.unload(name)
                # Its memory back before the live load: the memory check counted the old and the new version only.
                api.wait_unloaded(name, min(timeout_s, 60.0))
            remove_shadow(repository, model)


def _load_failure(api, name: str, version: int, message: str) -> str:
    """Why the shadow did not load, one line, the cause first: the server's reason for that version (the model's
    own exception, when it raised), else the load's error. Named without the shadow's suffix: a person knows the
    model, not the agent's temporary copy of it."""
    from orinkit.client.server_text import one_line
    from orinkit.repo.errors import RepoError

    try:
        reasons = [e.reason for e in api.index() if e.name == name and e.version == str(version) and e.reason]
    except RepoError:
        reasons = []
    model = name[:-len(SHADOW_SUFFIX)]
    return one_line(reasons[0] if reasons else message).replace(f"'{name}'", f"'{model}' version {version}")


__all__ = ["SHADOW_SUFFIX", "ShadowLoadError", "build_shadow", "clear_leftovers", "gate_in_shadow", "is_shadow",
           "remove_shadow", "shadow_name", "unload_leftovers"]
