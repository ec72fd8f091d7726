"""Which versions of a model a server has loaded, kept in the model folder, and what a start does with the rest.

A version counts as serving only once a server has loaded it READY. ``<model>/.orinkit-versions.json`` records
those (``proven``) and the versions set aside (``quarantined``, with the reason). A model folder without the file
is one orinkit never deployed to: nothing is known about it and nothing is changed there.

At a start of the server (``edge-serve run``, the unit's ``ExecStartPre``), :func:`quarantine_unproven` renames each
version that was placed but never loaded to ``quarantined-N`` (Triton ignores non-numeric folders), as long as a
proven version remains to serve: an interrupted deploy, or one whose version cannot load, can then never fail the
next start. ``edge-repo load NAME --url`` puts quarantined versions back and loads them.

Version numbers are reserved under a per-model lock (:func:`model_lock`), so two deploys can never both succeed on
one number; the lock is a kernel file lock, released by the kernel when its holder dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.core.files import atomic_write_text, fsync_path
from orinkit.repo.errors import DeployBusyError
from orinkit.repo.layout import version_folders

JOURNAL = ".orinkit-versions.json"
LOCK = ".orinkit-deploy.lock"
QUARANTINED_PREFIX = "quarantined-"


@dataclass
class Journal:
    proven: set[int] = field(default_factory=set)
    quarantined: dict[int, str] = field(default_factory=dict)  # version → why
    exists: bool = True

    def unproven(self, model_dir: Path) -> list[int]:
        """Numeric version folders no server has loaded (empty when the model has no journal)."""
        if not self.exists:
            return []
        return sorted(v for v in version_folders(model_dir) if v not in self.proven)


def read_journal(model_dir: Path) -> Journal:
    path = model_dir / JOURNAL
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Journal(exists=False)
    except (OSError, ValueError):
        # A journal that cannot be read proves nothing; the versions are treated as never loaded.
        return Journal()
    return Journal({int(v) for v in data.get("proven", [])},
                   {int(k): str(v) for k, v in data.get("quarantined", {}).items()})


def write_journal(model_dir: Path, journal: Journal) -> None:
    data = {"format": 1, "proven": sorted(journal.proven),
            "quarantined": {str(k): v for k, v in sorted(journal.quarantined.items())}}
    atomic_write_text(model_dir / JOURNAL, json.dumps(data, indent=2) + "\n")


@contextlib.contextmanager
def model_lock(model_dir: Path, *, wait_s: float = 0.0, what: str = "a deploy") -> Iterator[None]:
    """Hold ``model_dir``'s deploy lock; DeployBusyError if another process holds it for longer than ``wait_s``."""
    handle = open(model_dir / LOCK, "a+")  # noqa: SIM115 - held for the whole block, closed in finally
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    holder = _holder(handle)
                    raise DeployBusyError(
                        f"{what} of '{model_dir.name}' cannot start: another deploy of it is in progress"
                        + (f" (pid {holder})" if holder else ""),
                        hint="wait for it to finish (a killed deploy releases the lock at once), then try again",
                    ) from None
                time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()


def _holder(handle) -> str:
    try:
        handle.seek(0)
        return handle.read().strip()
    except OSError:
        return ""


def record_proven(model_dir: Path, versions: Iterable[int], *, locked: bool = False) -> None:
    """Record that a server loaded ``versions`` of this model READY (creating the journal if there is none).
    ``locked``: the caller holds the model's lock already."""
    versions = set(versions)
    if not versions:
        return
    with contextlib.nullcontext() if locked else model_lock(model_dir, wait_s=30.0, what="recording loads"):
        journal = read_journal(model_dir)
        if versions <= journal.proven and journal.exists:
            return
        journal.proven |= versions
        for version in versions:
            journal.quarantined.pop(version, None)
        write_journal(model_dir, journal)


def start_journal(model_dir: Path, *, proven: Iterable[int] = ()) -> None:
    """Give a model folder orinkit just made its journal: from now on its versions must prove they load."""
    if not (model_dir / JOURNAL).exists():
        write_journal(model_dir, Journal(set(proven)))


@dataclass(frozen=True)
class Quarantined:
    model: str
    version: int
    reason: str

    def describe(self) -> str:
        return (f"{self.model} version {self.version} set aside as {QUARANTINED_PREFIX}{self.version}: {self.reason}; "
                f"edge-repo load {self.model} --url URL tries it again")


def quarantine_unproven(repository: str | os.PathLike[str]) -> list[Quarantined]:
    """Set aside every version no server has loaded, in every model that keeps a proven version to serve."""
    repository = Path(repository)
    done: list[Quarantined] = []
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and (p / JOURNAL).is_file()):
        if not to_set_aside(model_dir):
            continue  # nothing to do: no lock (the repository may be read-only for this user)
        try:
            with model_lock(model_dir, wait_s=5.0, what="setting aside unproven versions"):
                done += _quarantine(model_dir)
        except DeployBusyError:
            continue  # a deploy is running; it proves or withdraws its version itself
    return done


def served_by_policy(model_dir: Path, versions) -> set[int]:
    """The versions a server loads from ``versions`` under the model's version policy (default: the latest)."""
    from orinkit.repo.errors import RepoError
    from orinkit.repo.pbtxt import CONFIG_NAME, read_config

    versions = sorted(versions)
    try:
        policy = read_config(model_dir / CONFIG_NAME).version_policy
    except RepoError:
        return set(versions[-1:])
    if policy.HasField("all"):
        return set(versions)
    if policy.HasField("specific"):
        return set(versions) & set(policy.specific.versions)
    count = policy.latest.num_versions if policy.HasField("latest") else 1
    return set(versions[-max(count, 1):])


def to_set_aside(model_dir: Path, journal: Journal | None = None) -> list[int]:
    """The unproven versions a start would load, set aside one by one (newest first) until what the start loads
    is proven, and never the last proven one: an older unproven version (a rollback target) stays."""
    journal = journal or read_journal(model_dir)
    present = set(version_folders(model_dir))
    if not journal.exists or not present & journal.proven:
        return []  # nothing served before: setting versions aside would leave the model with none
    aside: list[int] = []
    while True:
        loaded = served_by_policy(model_dir, present - set(aside))
        unproven = sorted((v for v in loaded if v not in journal.proven), reverse=True)
        if not unproven or not served_by_policy(model_dir, present - set(aside) - {unproven[0]}):
            return sorted(aside)  # done, or the policy would serve nothing without this one
        aside.append(unproven[0])


def _quarantine(model_dir: Path) -> list[Quarantined]:
    journal = read_journal(model_dir)
    present = version_folders(model_dir)
    done = []
    for version in to_set_aside(model_dir, journal):
        reason = "placed but never loaded by a server (an interrupted deploy, or one made without --url)"
        target = model_dir / f"{QUARANTINED_PREFIX}{version}"
        if target.exists():
            target = model_dir / f"{QUARANTINED_PREFIX}{version}.{int(time.time())}"
        os.rename(present[version], target)
        journal.quarantined[version] = reason
        done.append(Quarantined(model_dir.name, version, reason))
    fsync_path(model_dir)
    write_journal(model_dir, journal)
    return done


def mark_quarantined(model_dir: Path, versions: Iterable[int], reason: str) -> None:
    """Record versions the caller (holding the lock) has just set aside."""
    journal = read_journal(model_dir)
    for version in versions:
        journal.quarantined[version] = reason
        journal.proven.discard(version)
    write_journal(model_dir, journal)


def reinstate(model_dir: Path) -> list[int]:
    """Put quarantined versions back in place (the caller holds the lock and then loads them)."""
    journal = read_journal(model_dir)
    back = []
    for version in sorted(journal.quarantined):
        source = model_dir / f"{QUARANTINED_PREFIX}{version}"
        if source.is_dir() and not (model_dir / str(version)).exists():
            os.rename(source, model_dir / str(version))
            back.append(version)
        journal.quarantined.pop(version)
    if back:
        fsync_path(model_dir)
    write_journal(model_dir, journal)
    return back


def prepare_start(repository: Path, *, owner: int | None = None) -> list[str]:
    """What a start does first: remove killed servers' shared memory (of user ``owner``, default this one), and
    set aside versions no server loaded."""
    from orinkit.server.regions import remove_stale_regions

    lines = []
    removed = remove_stale_regions(owner=owner)
    if removed.paths:
        lines.append(removed.describe())
    lines += [q.describe() for q in quarantine_unproven(repository)]
    return lines


def record_loaded(repository: Path, http_url: str) -> list[str]:
    """Record every version the server loaded READY as proven (see orinkit.repo.journal)."""
    from orinkit.server.health import repository_index

    ready: dict[str, set[int]] = {}
    for entry in repository_index(http_url):
        if entry.get("state") == "READY" and str(entry.get("version", "")).isdigit():
            ready.setdefault(entry["name"], set()).add(int(entry["version"]))
    lines = []
    for name, versions in ready.items():
        if (repository / name).is_dir():
            try:
                record_proven(repository / name, versions)
            except OSError as exc:  # a read-only repository: the server runs; only the record is missing
                lines.append(f"cannot record the loaded versions of {name} ({exc.strerror}): deploys to it are not "
                             "protected from failing the next start")
    return lines
