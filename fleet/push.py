"""Push model versions from a local Triton repository to the bucket, immutably (``edge-repo push``).

A version goes up files first, each hashed (sha256) as it streams, and its ``MANIFEST.json`` last, written only if
absent: a reader that finds the manifest finds every file it lists, and a push that died half-way left no manifest,
so the version is invisible and may be pushed again (its files are simply overwritten). A version whose manifest
is in the bucket is never overwritten: pushing it again with the same files is a no-op, with different files (or a
different gate) a :class:`VersionExistsError`.

Only versions a local server has loaded READY (the repository journal's ``proven``) are pushed unless
``unproven=True``: a fleet should never be the first place a version is tried.

The health gate is a ``.npz`` file holding arrays named ``input:<NAME>`` for the model's inputs and
``output:<NAME>`` for (some of) its outputs: the golden input and the answer the device must give to it within
``rtol``/``atol`` (numpy ``allclose``). It is stored as ``gate.npz`` and the manifest's ``gate`` says
``{"rtol", "atol", "inputs", "outputs"}``.
"""

from __future__ import annotations

import fnmatch
import getpass
import hashlib
import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orinkit.core.files import file_sha256
from orinkit.fleet.bucket import Bucket
from orinkit.fleet.errors import VersionExistsError
from orinkit.fleet.layout import GATE, MANIFEST, FileEntry, VersionManifest, checked_name, version_prefix
from orinkit.repo.check import ROLLED_BACK_PREFIX
from orinkit.repo.errors import RepoError
from orinkit.repo.journal import QUARANTINED_PREFIX, read_journal
from orinkit.repo.layout import model_dirs, version_folders

Progress = Callable[[str], None]
_LOUD_BYTES = 8 * 2**20  # a file this large gets its own progress line
_CHUNK = 2**20
# Never part of a model, and different from one machine to the next: Triton's Python backend compiles model.py
# into the version folder (__pycache__) at its first load, macOS and editors leave their files. Pushed, they would
# make a version pushed before its first load differ from itself pushed after.
LITTER_FOLDERS = frozenset({"__pycache__", ".ipynb_checkpoints"})
LITTER_FILES = ("*.pyc", "*.pyo", ".DS_Store", "._*", "Thumbs.db", "desktop.ini", "*.swp", "*.swo", "*.swx", "*~",
                ".#*", "#*#")


def is_litter(relative: str) -> bool:
    """A path (``version/__pycache__/model.cpython-311.pyc``) that is build or editor litter, not the model's."""
    parts = PurePosixPath(relative).parts
    return any(part in LITTER_FOLDERS for part in parts[:-1]) or any(
        fnmatch.fnmatchcase(parts[-1], pattern) for pattern in LITTER_FILES)


@dataclass(frozen=True)
class GateFile:
    """A golden ``.npz`` (``input:<NAME>`` / ``output:<NAME>`` arrays) and the tolerances the device applies."""

    path: Path
    rtol: float = 1e-3
    atol: float = 1e-5


def push_repository(repository: str | Path, bucket: Bucket, *, models: Iterable[str] | None = None,
                    versions: Iterable[int] | None = None, gates: Mapping[str, GateFile | Path] | None = None,
                    unproven: bool = False, progress: Progress = print) -> list[VersionManifest]:
    """Push the chosen versions of the chosen models (default: every proven version of every model) and return
    their manifests, in the bucket now (pushed by this call, or there already with the same files)."""
    repository = Path(repository)
    if not repository.is_dir():
        raise RepoError(f"the repository {repository} does not exist", hint="check the path")
    gates = {name: g if isinstance(g, GateFile) else GateFile(Path(g)) for name, g in (gates or {}).items()}
    names = list(models) if models else [p.name for p in model_dirs(repository)]
    stray = sorted(set(gates) - set(names))
    if stray:
        raise RepoError(f"--gate names {', '.join(stray)}, not a model being pushed",
                        hint="write --gate MODEL=golden.npz for a model of the repository (or --model MODEL)")
    plan = [(name, v) for name in names for v in _chosen(repository, name, versions, unproven, explicit=bool(models),
                                                         progress=progress)]
    if not plan:
        raise RepoError(f"nothing to push from {repository}: no model has a version a server has loaded",
                        hint="load the versions first (edge-repo load NAME --url URL), or pass --unproven")
    checked = {name: check_gate(repository / name, gate) for name, gate in gates.items()}
    return [push_version(repository / name, version, bucket, gate=gates.get(name), gate_names=checked.get(name),
                         progress=progress) for name, version in plan]


def _chosen(repository: Path, name: str, versions, unproven: bool, *, explicit: bool, progress: Progress):
    model_dir = repository / checked_name("model", name)
    present = version_folders(model_dir)
    if not present:
        raise RepoError(f"{model_dir} is not a model folder with versions", hint="check --model and the repository")
    wanted = sorted(set(versions)) if versions else sorted(present)
    missing = [v for v in wanted if v not in present]
    if missing:
        raise RepoError(f"model {name} has no version {', '.join(map(str, missing))} in {repository}",
                        hint=f"its versions: {', '.join(map(str, sorted(present)))}")
    if unproven:
        return wanted
    proven = read_journal(model_dir).proven
    unloaded = [v for v in wanted if v not in proven]
    if unloaded and (versions or explicit) and len(unloaded) == len(wanted):
        raise RepoError(f"model {name} version {', '.join(map(str, unloaded))} was never loaded by a server here",
                        hint=f"load it first (edge-repo load {name} --url URL), or pass --unproven")
    if unloaded:
        progress(f"{name}: skipping version {', '.join(map(str, unloaded))} (never loaded by a server; --unproven "
                 "pushes it)")
    return [v for v in wanted if v in proven]


def push_version(model_dir: Path, version: int, bucket: Bucket, *, gate: GateFile | None = None,
                 gate_names: tuple[list[str], list[str]] | None = None,
                 progress: Progress = print) -> VersionManifest:
    """Push one version of the model in ``model_dir``; the manifest goes last and only where there is none."""
    model = model_dir.name
    prefix = version_prefix(model, version)
    files, litter = _version_files(model_dir, version)
    if litter:
        progress(f"{model} version {version}: leaving out {len(litter)} build or editor file(s) "
                 f"({', '.join(litter[:3])}{', ...' if len(litter) > 3 else ''})")
    if gate is not None:
        gate_names = gate_names or check_gate(model_dir, gate)
        files.append((GATE, gate.path))
    gate_doc = _gate_doc(gate, gate_names) if gate is not None else None
    existing = bucket.read(f"{prefix}/{MANIFEST}")
    if existing is not None:
        return _already_there(VersionManifest.from_json(existing), files, gate_doc, bucket, progress)
    total = sum(path.stat().st_size for _, path in files)
    progress(f"pushing {model} version {version}: {len(files)} files, {total / 1e6:.1f} MB to {bucket.url}/{prefix}")
    started = time.monotonic()
    entries = []
    for relative, path in files:
        if path.stat().st_size >= _LOUD_BYTES:
            progress(f"  {relative} ({path.stat().st_size / 1e6:.1f} MB)")
        entries.append(_upload(bucket, f"{prefix}/{relative}", relative, path))
    # Leftovers of an earlier push that died before its manifest, under names this push does not have: no reader
    # trusts them (no manifest lists them), but they would confuse a person browsing the bucket.
    listed = {f"{prefix}/{e.path}" for e in entries}
    for key in bucket.keys(prefix):
        if key not in listed:
            bucket.delete(key)
    manifest = VersionManifest(model, version, tuple(sorted(entries, key=lambda e: e.path)), gate=gate_doc,
                               pushed_at=time.time(), pushed_by=_who())
    try:
        bucket.write(f"{prefix}/{MANIFEST}", manifest.to_json(), if_absent=True)
    except VersionExistsError as exc:
        raise _exists_error(model, version, bucket, "another push finished it first") from exc
    elapsed = time.monotonic() - started
    progress(f"pushed {model} version {version} ({total / 1e6:.1f} MB in {elapsed:.1f} s)")
    return manifest


def local_files(model_dir: Path, version: int) -> list[tuple[str, Path]]:
    """``(path in the manifest, local file)``: the model folder's own files under ``model/`` (not the version
    folders, set-aside versions or orinkit's hidden journal and lock) and the version folder's under ``version/``,
    without build and editor litter (:func:`is_litter`)."""
    return _version_files(model_dir, version)[0]


def _version_files(model_dir: Path, version: int) -> tuple[list[tuple[str, Path]], list[str]]:
    """The version's files, and the litter left out of them."""
    folders = version_folders(model_dir)
    if version not in folders:
        raise RepoError(f"model {model_dir.name} has no version {version}", hint="check --version")
    model_level = [p for p in sorted(model_dir.iterdir())
                   if not p.name.startswith(".") and p not in folders.values()
                   and not p.name.startswith((QUARANTINED_PREFIX, ROLLED_BACK_PREFIX))]
    found = []
    for top in model_level:
        for path in ([top] if top.is_file() else sorted(top.rglob("*"))):
            if path.is_file():
                found.append((f"model/{path.relative_to(model_dir).as_posix()}", path))
    version_dir = folders[version]
    found += [(f"version/{p.relative_to(version_dir).as_posix()}", p)
              for p in sorted(version_dir.rglob("*")) if p.is_file()]
    return [f for f in found if not is_litter(f[0])], [f[0] for f in found if is_litter(f[0])]


class _Hashing:
    """A file read once, in order, hashing what is read: the sha256 in the manifest is of the bytes that were
    sent, even if the file changed meanwhile. Not seekable, so boto3 reads it strictly in order (its parts are kept
    in memory for retries, never read twice)."""

    def __init__(self, stream) -> None:
        self.stream, self.sha256, self.size = stream, hashlib.sha256(), 0

    def read(self, amount: int = -1) -> bytes:
        data = self.stream.read(amount)
        self.sha256.update(data)
        self.size += len(data)
        return data

    def seekable(self) -> bool:
        return False


def _upload(bucket: Bucket, key: str, relative: str, path: Path) -> FileEntry:
    with open(path, "rb") as stream:
        hashing = _Hashing(stream)
        bucket.upload_fileobj(key, hashing)
    return FileEntry(relative, hashing.size, hashing.sha256.hexdigest())


def _already_there(remote: VersionManifest, files, gate_doc, bucket: Bucket, progress: Progress) -> VersionManifest:
    """A version in the bucket is immutable: the same files again is a no-op, other files a refusal."""
    local = {(relative, path.stat().st_size, file_sha256(path)) for relative, path in files}
    # A version pushed with its litter (by an orinkit that did not leave it out) is the same version without it.
    there = {(f.path, f.size, f.sha256) for f in remote.files if not is_litter(f.path)}
    if gate_doc is None:
        there = {f for f in there if f[0] != GATE}  # pushing again without --gate leaves the version's gate alone
    elif {k: gate_doc[k] for k in ("rtol", "atol")} != {k: (remote.gate or {}).get(k) for k in ("rtol", "atol")}:
        raise _exists_error(remote.model, remote.version, bucket, "with another gate tolerance")
    if local != there:
        changed = sorted({f[0] for f in local ^ there})
        raise _exists_error(remote.model, remote.version, bucket, f"with other files ({', '.join(changed[:5])})")
    progress(f"{remote.model} version {remote.version} is in the bucket already, with the same files")
    return remote


def _exists_error(model: str, version: int, bucket: Bucket, why: str) -> VersionExistsError:
    return VersionExistsError(
        f"{model} version {version} is in {bucket.url} already {why}; pushed versions are never overwritten",
        hint=f"place the change as a new version (edge-repo deploy {model} ARTIFACT --repo REPO) and push that")


def check_gate(model_dir: Path, gate: GateFile) -> tuple[list[str], list[str]]:
    """The gate's input and output names, refused unless they fit the model's config: every required input (and
    no unknown one), at least one output, each an output of the model."""
    import numpy as np

    from orinkit.repo.pbtxt import CONFIG_NAME, read_config

    if not gate.path.is_file():
        raise RepoError(f"the gate file {gate.path} does not exist", hint="give a .npz made with numpy.savez")
    try:
        with np.load(gate.path, allow_pickle=False) as data:
            names = list(data.files)
    except (OSError, ValueError) as exc:
        raise RepoError(f"the gate file {gate.path} is not a readable .npz: {exc}",
                        hint="write it with numpy.savez(path, **{'input:NAME': array, 'output:NAME': array})") from exc
    odd = [n for n in names if not re.match(r"^(input|output):.+$", n)]
    inputs = sorted(n.split(":", 1)[1] for n in names if n.startswith("input:"))
    outputs = sorted(n.split(":", 1)[1] for n in names if n.startswith("output:"))
    config_path = model_dir / CONFIG_NAME
    if not config_path.is_file():
        raise RepoError(f"model {model_dir.name} has no {CONFIG_NAME} to check the gate's names against",
                        hint="write the config (edge-repo add writes one), then push with --gate")
    config = read_config(config_path)
    declared = {t.name for t in config.input}
    required = {t.name for t in config.input if not t.optional}
    problems = []
    if odd:
        problems.append(f"arrays not named input:NAME or output:NAME: {', '.join(odd)}")
    if set(inputs) - declared:
        problems.append(f"inputs the model does not have: {', '.join(sorted(set(inputs) - declared))}")
    if required - set(inputs):
        problems.append(f"the model's inputs missing: {', '.join(sorted(required - set(inputs)))}")
    unknown_outputs = set(outputs) - {t.name for t in config.output}
    if unknown_outputs:
        problems.append(f"outputs the model does not have: {', '.join(sorted(unknown_outputs))}")
    if not outputs:
        problems.append("no output:NAME array to compare the answer with")
    if problems:
        raise RepoError(f"the gate {gate.path} does not fit model {model_dir.name}: {'; '.join(problems)}",
                        hint=f"inputs {sorted(declared)}, outputs {sorted(t.name for t in config.output)}; name "
                             "the arrays input:NAME and output:NAME")
    return inputs, outputs


def _gate_doc(gate: GateFile, names: tuple[list[str], list[str]] | None) -> dict:
    inputs, outputs = names or ([], [])
    return {"rtol": float(gate.rtol), "atol": float(gate.atol), "inputs": list(inputs), "outputs": list(outputs)}


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container with an arbitrary uid)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


# -- reading versions back -------------------------------------------------------------------------------------------

def list_versions(bucket: Bucket, model: str) -> list[int]:
    """The model's versions in the bucket: only those with a manifest (a half-finished push is not a version)."""
    pattern = re.compile(rf"^models/{re.escape(checked_name('model', model))}/(\d+)/{re.escape(MANIFEST)}$")
    return sorted(int(m.group(1)) for key in bucket.keys(f"models/{model}") if (m := pattern.match(key)))


def read_manifest(bucket: Bucket, model: str, version: int) -> VersionManifest | None:
    data = bucket.read(f"{version_prefix(model, version)}/{MANIFEST}")
    return VersionManifest.from_json(data) if data is not None else None
