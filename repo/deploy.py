"""Versioned deploys that never break what is serving, or the next start, and rollbacks.

A deploy holds the model's lock (:func:`orinkit.repo.journal.model_lock`) from choosing its version number to its
end, so two deploys of one model never share a number: the second is refused at once. The version is built in a
hidden folder inside the model folder (Triton ignores non-numeric folders there; the same filesystem makes the
final rename atomic), fsynced, checked against the model's config, and only then renamed to its number. With a
server, the model is loaded through the repository API: Triton keeps serving the old version until the new one is
READY, then serves what the version policy says, and the version is recorded as proven. A version that was never
loaded (the deploy was killed, or ran without a server) is set aside at the next start of the server instead of
serving (see :mod:`orinkit.repo.journal`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orinkit.core.failpoints import reach, reach_later
from orinkit.core.files import atomic_write_bytes, building_directory, fsync_path, fsync_tree
from orinkit.repo.add import fill_version, resolve_runtime
from orinkit.repo.check import ROLLED_BACK_PREFIX, check_version_folder
from orinkit.repo.configs import runtime_of
from orinkit.repo.errors import DeployError, DeployLoadError, RepoError
from orinkit.repo.journal import (
    QUARANTINED_PREFIX,
    mark_quarantined,
    model_lock,
    record_proven,
    reinstate,
    start_journal,
)
from orinkit.repo.layout import version_folders
from orinkit.repo.pbtxt import CONFIG_NAME, read_config
from orinkit.repo.server_api import RepositoryAPI

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DeployResult:
    name: str
    version: int
    path: Path
    serving: tuple[int, ...] = ()  # READY versions after the load; empty without a server
    load_seconds: float | None = None


def _model_dir(repository: Path, name: str) -> Path:
    folder = repository / name
    if not (folder / CONFIG_NAME).is_file():
        raise DeployError(
            f"model '{name}' is not in {repository}",
            hint=f"place its first version with: edge-repo add ARTIFACT --name {name} --repo {repository}",
        )
    return folder


def _used_numbers(folder: Path) -> list[int]:
    """Version numbers in use, rolled-back and quarantined ones included, so a number never comes back with other
    content."""
    numbers = list(version_folders(folder))
    for prefix in (ROLLED_BACK_PREFIX, QUARANTINED_PREFIX):
        for path in folder.glob(f"{prefix}*"):
            suffix = path.name[len(prefix):].split(".")[0]
            if suffix.isdigit():
                numbers.append(int(suffix))
    return numbers


def deploy_version(
    repository: str | os.PathLike[str],
    name: str,
    artifact: str | os.PathLike[str],
    *,
    server: str | None = None,
    timeout_s: float = 300.0,
    progress: Progress = lambda message: None,
) -> DeployResult:
    """Add ``artifact`` as version N+1 of ``name``; with ``server`` (a gRPC URL), load it and wait for READY."""
    repository, artifact = Path(repository), Path(artifact)
    folder = _model_dir(repository, name)
    config = read_config(folder / CONFIG_NAME)
    runtime = runtime_of(config)
    if runtime is None:
        raise DeployError(f"model '{name}' has a config orinkit cannot place versions for",
                          hint="set its backend or platform")
    if not artifact.exists():
        raise DeployError(f"{artifact} does not exist", hint="check the path")
    resolve_runtime(artifact, runtime)
    with model_lock(folder):
        # A model orinkit did not deploy to before: what it holds now is what serves.
        start_journal(folder, proven=version_folders(folder))
        return _deploy_locked(folder, name, artifact, runtime, server, timeout_s, progress)


def _deploy_locked(folder: Path, name: str, artifact: Path, runtime, server, timeout_s, progress) -> DeployResult:
    version = max(_used_numbers(folder), default=0) + 1
    target = folder / str(version)
    progress(f"staging {name} version {version} from {artifact}")
    with building_directory(target) as staging:
        fill_version(staging, artifact, runtime)
        reach("deploy.staged")
        errors = [f for f in check_version_folder(folder, staging) if f.severity == "error"]
        if errors:
            # The findings name the staging folder; the user knows the version by its number.
            raise DeployError(
                f"{artifact} does not fit model '{name}': "
                + "; ".join(f.problem.replace(staging.name, str(version)) for f in errors),
                hint=errors[0].fix.replace(staging.name, str(version)),
            )
        if target.exists():  # only a hand-made folder can be there: the lock keeps other deploys out
            raise DeployError(f"{target} appeared while the deploy ran", hint="remove or rename it, then deploy again")
    fsync_path(folder)
    reach("deploy.renamed")
    progress(f"placed {target}")
    if server is None:
        progress(f"{name} version {version} is placed but not loaded: the next start of the server sets it aside "
                 "unless a server loads it first (deploy with --url, or edge-repo load --url)")
        return DeployResult(name, version, target)

    progress(f"loading {name} on {server} (version {version}); the serving version answers meanwhile")
    with RepositoryAPI(server) as api:
        reach_later("deploy.loading", 0.3)  # test hook: killed while the server loads the new version
        try:
            seconds = api.load(name, timeout_s)  # the server answers once the load has ended
            seconds += api.wait_ready(name, version, timeout_s)
        except RepoError as exc:
            _withdraw(target)
            _reload_quietly(api, name)
            raise DeployLoadError(
                f"version {version} of '{name}' did not load, so it was withdrawn and the serving version kept: "
                f"{exc.message}", hint=exc.hint,
            ) from exc
        serving = tuple(api.versions(name))
    record_proven(folder, serving, locked=True)
    _regions_private()
    progress(f"{name} version {version} READY in {seconds:.1f} s; serving {list(serving)}")
    return DeployResult(name, version, target, serving, seconds)


def _regions_private() -> None:
    """A loaded version brings new Python-backend regions, created 0644: make them private to their owner."""
    from orinkit.server.regions import make_private

    make_private(any_owner=True)


def _withdraw(version_folder: Path) -> None:
    hidden = version_folder.with_name(f".withdrawn-{version_folder.name}")
    os.rename(version_folder, hidden)
    shutil.rmtree(hidden, ignore_errors=True)


def _reload_quietly(api: RepositoryAPI, name: str) -> None:
    try:
        api.load(name)
    except RepoError:
        pass  # the old version kept serving through the failed load; this only tidies Triton's version list


@dataclass(frozen=True)
class RollbackResult:
    name: str
    rolled_back: int
    now_latest: int
    serving: tuple[int, ...] = ()


def rollback(
    repository: str | os.PathLike[str],
    name: str,
    *,
    server: str | None = None,
    timeout_s: float = 300.0,
    progress: Progress = lambda message: None,
) -> RollbackResult:
    """Take the latest version out of service (kept as ``rolled-back-N``) so the previous one serves again."""
    repository = Path(repository)
    folder = _model_dir(repository, name)
    config = read_config(folder / CONFIG_NAME)
    if config.version_policy.HasField("specific"):
        raise DeployError(f"model '{name}' serves specific versions by its config",
                          hint="change version_policy in its config.pbtxt to choose the served version")
    versions = sorted(version_folders(folder))
    if len(versions) < 2:
        raise DeployError(f"model '{name}' has {len(versions)} version(s): nothing to roll back to",
                          hint="deploy a version first")
    latest, previous = versions[-1], versions[-2]
    with model_lock(folder, what="a rollback"):
        os.rename(folder / str(latest), folder / f"{ROLLED_BACK_PREFIX}{latest}")
        fsync_path(folder)
    progress(f"{name}: version {latest} set aside as {ROLLED_BACK_PREFIX}{latest}; latest is now {previous}")
    if server is None:
        return RollbackResult(name, latest, previous)
    with RepositoryAPI(server) as api:
        api.load(name)
        api.wait_ready(name, previous, timeout_s)
        serving = tuple(api.versions(name))
    progress(f"{name}: serving {list(serving)}")
    return RollbackResult(name, latest, previous, serving)


@dataclass(frozen=True)
class LoadResult:
    name: str
    serving: tuple[int, ...]
    reinstated: tuple[int, ...]  # set-aside versions put back and now serving
    refused: tuple[int, ...]  # set-aside versions put back that failed to load again (set aside once more)


def _set_aside(folder: Path, versions, reason: str) -> None:
    for version in versions:
        os.rename(folder / str(version), folder / f"{QUARANTINED_PREFIX}{version}")
    if versions:
        fsync_path(folder)
        mark_quarantined(folder, tuple(versions), reason)


def load_versions(
    repository: str | os.PathLike[str],
    name: str,
    *,
    server: str,
    timeout_s: float = 300.0,
    progress: Progress = lambda message: None,
) -> LoadResult:
    """Load ``name`` on ``server`` (explicit model control), putting back its set-aside (quarantined) versions
    first; what loads READY is recorded as proven, a put-back version that fails is set aside again."""
    repository = Path(repository)
    folder = _model_dir(repository, name)
    with model_lock(folder, what="a load"), RepositoryAPI(server) as api:
        # Ask the server first: set-aside versions are put back only while a server can judge them.
        api.versions(name)
        back = reinstate(folder)
        if back:
            progress(f"{name}: put back versions {back} to try them again")
        try:
            try:
                api.load(name)
            except RepoError as exc:
                if not back:
                    raise
                progress(f"{name}: loading failed ({exc.message}); setting versions {back} aside again")
            ready = set(api.versions(name))
        except BaseException:
            _set_aside(folder, back, "put back, but the server could not be asked whether they load")
            raise
        refused = tuple(v for v in back if v not in ready)
        if refused:
            _set_aside(folder, refused, "failed to load again when put back")
            _reload_quietly(api, name)
            ready = set(api.versions(name))
        if not ready:
            raise DeployLoadError(f"'{name}' has no version READY on {server}", hint="the server log says why")
        record_proven(folder, ready, locked=True)
    _regions_private()
    progress(f"{name}: serving {sorted(ready)}")
    return LoadResult(name, tuple(sorted(ready)), tuple(v for v in back if v in ready), refused)


def place_version(
    repository: str | os.PathLike[str],
    name: str,
    version: int,
    source: str | os.PathLike[str] | None,
    *,
    server: str,
    model_files: Mapping[str, bytes] | None = None,
    accept: Callable[[], None] | None = None,
    keep_older: int = 1,
    timeout_s: float = 300.0,
    lock_wait_s: float = 30.0,
    progress: Progress = lambda message: None,
) -> DeployResult:
    """Serve exactly version ``version`` of ``name``: the finished folder ``source`` (None: the version folder is
    already in place) is renamed to that number, newer versions are set aside as ``rolled-back-N`` so the default
    version policy serves this one, the model folder's own files (``model_files``, config.pbtxt and labels) are
    written, and the model is loaded in explicit mode. ``accept`` (the health gate) runs once the version is READY;
    if the load or ``accept`` fails, the version is set aside as ``quarantined-N`` (the next start never loads it),
    everything else is put back as it was, the old version is loaded again and DeployLoadError says why. A model
    the repository did not hold is removed again. On success ``keep_older`` older versions stay on disk (the
    rollback targets); older ones are deleted."""
    repository = Path(repository)
    folder = repository / name
    created = not (folder / CONFIG_NAME).is_file()
    if created:
        if not model_files or CONFIG_NAME not in model_files:
            raise DeployError(f"model '{name}' is not in {repository} and no config.pbtxt was given for it",
                              hint="push the model folder's files with the version")
        folder.mkdir(parents=True, exist_ok=True)
    with model_lock(folder, wait_s=lock_wait_s, what="placing a version"):
        start_journal(folder, proven=version_folders(folder))
        return _place_locked(folder, name, int(version), Path(source) if source else None, server,
                             dict(model_files or {}), accept, created, keep_older, timeout_s, progress)


def set_aside_version(
    repository: str | os.PathLike[str],
    name: str,
    version: int,
    source: str | os.PathLike[str] | None,
    reason: str,
    *,
    lock_wait_s: float = 30.0,
) -> Path | None:
    """Set version ``version`` of ``name`` aside as ``quarantined-N`` without loading it (its gate failed before it
    was placed: the fleet agent gates in a shadow model), as :func:`place_version` does with a version that failed:
    the number is never reused with other content and the next start does not load it. ``source`` is the finished
    folder (None: the version folder is in place). The serving versions and the model's files are not touched. A
    model the repository does not hold gets no folder (nothing of it would be loadable); None then."""
    repository = Path(repository)
    folder = repository / name
    if not (folder / CONFIG_NAME).is_file():
        return None
    version = int(version)
    with model_lock(folder, wait_s=lock_wait_s, what="setting a version aside"):
        start_journal(folder, proven=version_folders(folder))
        target = folder / f"{QUARANTINED_PREFIX}{version}"
        if source is None:
            if not (folder / str(version)).is_dir():
                raise DeployError(f"version {version} of '{name}' is not in {folder}", hint="give its folder")
            _set_aside(folder, [version], reason)
            return target
        _drop_set_aside(folder, version)
        if (folder / str(version)).exists():  # the same number from the bucket is the same content
            _withdraw(folder / str(version))
        _rename_in(Path(source), target)
        fsync_path(folder)
        mark_quarantined(folder, [version], reason)
    return target


def _place_locked(folder: Path, name: str, version: int, source: Path | None, server: str,
                  model_files: dict[str, bytes], accept, created: bool, keep_older: int, timeout_s: float,
                  progress: Progress) -> DeployResult:
    target = folder / str(version)
    if source is not None:
        _drop_set_aside(folder, version)
        if target.exists():  # the same number from the bucket is the same content: replace it whole
            _withdraw(target)
    elif not target.is_dir():
        raise DeployError(f"version {version} of '{name}' is not in {folder}", hint="give its folder to place")
    newer = [v for v in version_folders(folder) if v > version]
    moved = [_move_aside(folder, v, ROLLED_BACK_PREFIX) for v in sorted(newer)]
    previous_files = _write_model_files(folder, model_files)
    if source is not None:
        _rename_in(source, target)
    fsync_path(folder)
    progress(f"placed {name} version {version}" + (f"; newer versions {newer} set aside" if newer else ""))
    with RepositoryAPI(server) as api:
        try:
            seconds = api.load(name, timeout_s)
            seconds += api.wait_ready(name, version, timeout_s)
            if accept is not None:
                accept()
        except Exception as exc:  # a load refused, or the gate: the old version serves again either way
            reason = getattr(exc, "message", None) or str(exc)
            _put_back(api, folder, name, version, moved, previous_files, created, reason)
            raise DeployLoadError(f"version {version} of '{name}' was set aside and the serving version kept: "
                                  f"{reason}", hint=getattr(exc, "hint", None)) from exc
        serving = tuple(api.versions(name))
    record_proven(folder, serving, locked=True)
    _prune(folder, version, keep_older)
    _regions_private()
    progress(f"{name} version {version} READY in {seconds:.1f} s; serving {list(serving)}")
    return DeployResult(name, version, target, serving, seconds)


def _put_back(api: RepositoryAPI, folder: Path, name: str, version: int, moved: list[tuple[int, Path]],
              previous_files: dict[str, bytes | None], created: bool, reason: str) -> None:
    if created:  # nothing served before: a model folder without a loadable version would fail the next start
        with contextlib.suppress(RepoError):
            api.unload(name)
        _withdraw(folder)
        return
    _set_aside(folder, [version], reason)
    for number, path in moved:
        os.rename(path, folder / str(number))
    _write_model_files(folder, previous_files)
    fsync_path(folder)
    _reload_quietly(api, name)


def _move_aside(folder: Path, version: int, prefix: str) -> tuple[int, Path]:
    target = folder / f"{prefix}{version}"
    if target.exists():
        target = folder / f"{prefix}{version}.{time.time_ns()}"
    os.rename(folder / str(version), target)
    return version, target


def _drop_set_aside(folder: Path, version: int) -> None:
    """Earlier copies of this number set aside (rolled back, quarantined) give way to the fresh one."""
    for prefix in (ROLLED_BACK_PREFIX, QUARANTINED_PREFIX):
        for path in [*folder.glob(f"{prefix}{version}"), *folder.glob(f"{prefix}{version}.*")]:
            _withdraw(path)


def _write_model_files(folder: Path, files: Mapping[str, bytes | None]) -> dict[str, bytes | None]:
    """Write (None: remove) the model folder's own files; what was there before, to put it back."""
    previous: dict[str, bytes | None] = {}
    for relative, data in files.items():
        path = folder / relative
        old = path.read_bytes() if path.is_file() else None
        if old == data:
            continue
        previous[relative] = old
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
    return previous


def _rename_in(source: Path, target: Path) -> None:
    """Atomic where the staging folder shares the repository's filesystem; otherwise copied into a hidden folder
    of the model (Triton ignores it) and renamed from there."""
    try:
        os.rename(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        hidden = target.with_name(f".placing-{target.name}")
        shutil.copytree(source, hidden)
        fsync_tree(hidden)
        os.rename(hidden, target)
        shutil.rmtree(source, ignore_errors=True)


def _prune(folder: Path, version: int, keep_older: int) -> None:
    older = sorted((v for v in version_folders(folder) if v < version), reverse=True)
    for number in older[max(keep_older, 0):]:
        _withdraw(folder / str(number))
