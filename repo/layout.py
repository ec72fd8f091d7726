"""Where things are in a Triton model repository: model folders, version folders, the model file."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from orinkit.core.files import building_directory
from orinkit.repo.errors import ModelExistsError, RepoError

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def check_model_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise RepoError(
            f"model name '{name}' cannot be a folder Triton loads",
            hint="use letters, digits, '_', '-' and '.', not starting with '.' or '-'",
        )
    return name


def version_folders(model_dir: Path) -> dict[int, Path]:
    """Numeric subfolders, the only ones Triton treats as versions."""
    if not model_dir.is_dir():
        return {}
    return {int(p.name): p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()}


def model_dirs(repository: Path) -> list[Path]:
    """Every folder Triton would try to load as a model (hidden ones are skipped by orinkit's own staging)."""
    return sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith("."))


def staging_area(repository: Path) -> Path:
    """Where a new model folder is built before it is renamed into ``repository``.

    Not inside the repository when that can be avoided: Triton tries to load every folder there, hidden ones
    too. Beside it, then, when that is the same filesystem (a rename is atomic only within one) and writable.
    """
    repository = repository.resolve()
    parent = repository.parent
    try:
        same_device = os.stat(parent).st_dev == os.stat(repository).st_dev
    except OSError:
        same_device = False
    if same_device and os.access(parent, os.W_OK):
        return parent / f".{repository.name}.orinkit-staging"
    return repository


@contextlib.contextmanager
def new_model_folder(repository: Path, name: str, *, hint: str) -> Iterator[Path]:
    """Yield a staging folder that becomes ``<repository>/<name>`` whole, or not at all."""
    check_model_name(name)
    target = repository / name
    if target.exists():
        raise ModelExistsError(f"model '{name}' already exists in {repository}", hint=hint)
    created = not repository.exists()
    repository.mkdir(parents=True, exist_ok=True)
    from orinkit.repo.journal import start_journal

    try:
        with building_directory(target, staging_parent=staging_area(repository)) as staging:
            yield staging
            # From its first version on, a model's versions must be loaded by a server before they count as serving.
            start_journal(staging)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                repository.rmdir()  # only if still empty: a repository this call started and did not fill
        raise


@contextlib.contextmanager
def placing_together(repository: Path) -> Iterator[Path]:
    """Yield a staging repository for several models that go into ``repository`` together: each model folder is
    renamed into place only once all were built, and if a rename fails the ones already moved are moved back.
    A name already in ``repository`` is refused before anything moves. Models may refer to each other (an
    ensemble reads its steps' configs) because they are all in the staging repository while being built."""
    repository = Path(repository)
    created = not repository.exists()
    repository.mkdir(parents=True, exist_ok=True)
    parent = staging_area(repository)
    parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    staging = Path(tempfile.mkdtemp(prefix=".together.", dir=parent))
    moved: list[Path] = []
    try:
        yield staging
        names = sorted(p.name for p in staging.iterdir() if p.is_dir())
        clashes = [n for n in names if (repository / n).exists()]
        if clashes:
            raise ModelExistsError(f"models {', '.join(clashes)} already exist in {repository}",
                                   hint="remove them, or place the set into another repository")
        for name in names:
            os.rename(staging / name, repository / name)
            moved.append(repository / name)
    except BaseException:
        for path in reversed(moved):
            with contextlib.suppress(OSError):
                os.rename(path, staging / path.name)
        if created:
            with contextlib.suppress(OSError):
                repository.rmdir()
        raise
    finally:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        if parent != repository:
            with contextlib.suppress(OSError):
                parent.rmdir()
