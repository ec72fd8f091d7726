"""Bring one model version from the bucket to a local staging folder, every file checked against its manifest.

The staging folder lies beside the repository, never inside it (Triton treats every folder of a repository as a
model), and on the same filesystem, so placing the version is one rename. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orinkit.core.files import file_sha256
from orinkit.fleet.errors import IntegrityError
from orinkit.fleet.layout import GATE, VersionManifest, version_prefix

MODEL_PART, VERSION_PART = "model", "version"


@dataclass(frozen=True)
class FetchedVersion:
    manifest: VersionManifest
    folder: Path  # the version folder's files, ready to be renamed to <repository>/<model>/<version>
    model_files: dict[str, bytes]  # config.pbtxt, labels: the model folder's own files (small)
    gate: Path | None  # gate.npz, when the version has one


def version_bytes(manifest: VersionManifest) -> int:
    """What a load brings into memory, roughly: the version's own files (the model folder's are configs)."""
    return sum(f.size for f in manifest.files if f.path.startswith(f"{VERSION_PART}/"))


def _safe_relative(path: str) -> PurePosixPath:
    # The manifest comes from the bucket: a path that climbs out would write anywhere on the device.
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise IntegrityError(f"the manifest names the file {path!r}, outside the version",
                             hint="push the version again with edge-repo push")
    if relative.parts[0] not in (MODEL_PART, VERSION_PART) and path != GATE:
        raise IntegrityError(f"the manifest names {path!r}, which is not part of a version's layout",
                             hint="push the version again with edge-repo push")
    return relative


def fetch_version(bucket, manifest: VersionManifest, staging: Path) -> FetchedVersion:
    """Download every file of ``manifest`` under ``staging`` (emptied first) and check its size and sha256;
    IntegrityError names the first file that differs (the staging folder is then removed)."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    prefix = version_prefix(manifest.model, manifest.version)
    try:
        for entry in manifest.files:
            relative = _safe_relative(entry.path)
            local = staging.joinpath(*relative.parts)
            local.parent.mkdir(parents=True, exist_ok=True)
            bucket.download_file(f"{prefix}/{entry.path}", local)
            size, digest = local.stat().st_size, file_sha256(local)
            if (size, digest) != (entry.size, entry.sha256):
                raise IntegrityError(
                    f"{manifest.model} version {manifest.version}: {entry.path} is {size} bytes with sha256 "
                    f"{digest[:12]}…, the manifest says {entry.size} bytes with sha256 {entry.sha256[:12]}…",
                    hint="the object changed after the push: push the model again as a new version")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    folder = staging / VERSION_PART
    folder.mkdir(exist_ok=True)  # a version of config-only models (ensembles) has an empty folder
    model_dir = staging / MODEL_PART
    model_files = {str(p.relative_to(model_dir)): p.read_bytes() for p in sorted(model_dir.rglob("*"))
                   if p.is_file()} if model_dir.is_dir() else {}
    gate = staging / GATE
    return FetchedVersion(manifest, folder, model_files, gate if gate.is_file() else None)
