"""Writes that never leave a half-written file or folder behind: build beside the target, then rename."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` so that readers see either the old content or the new, never a part."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file's or a folder's entries to disk (a rename is durable only once its folder is synced)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if Path(path).is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: str | os.PathLike[str]) -> None:
    """fsync everything below ``folder``, deepest first, then ``folder`` itself."""
    for path in sorted(Path(folder).rglob("*"), key=lambda p: len(p.parts), reverse=True):
        fsync_path(path)
    fsync_path(folder)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mode: int = 0o644) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


@contextlib.contextmanager
def building_directory(
    target: str | os.PathLike[str], *, staging_parent: str | os.PathLike[str] | None = None
) -> Iterator[Path]:
    """Yield a temporary folder (beside ``target``, or in ``staging_parent`` on the same filesystem); on success
    it is renamed to ``target``.

    If ``target`` appeared meanwhile (another process built it), the new build is discarded and the existing
    folder is kept: callers build only content that is the same whoever builds it.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    parent = Path(staging_parent) if staging_parent is not None else final.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=parent))
    # mkdtemp makes the folder private (0700); the finished folder gets the permissions of any new folder.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)
    try:
        yield staging
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if staging_parent is not None:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only when empty: another build may be using it


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The file's sha256 (hex), read in 1 MiB blocks: a model file may be gigabytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
