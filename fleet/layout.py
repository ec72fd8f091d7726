"""Where everything lives in the bucket, and the JSON documents kept there.

::

    s3://BUCKET/PREFIX/
      models/MODEL/VERSION/model/...      the model folder's own files (config.pbtxt, labels), as pushed
      models/MODEL/VERSION/version/...    the version folder's files (model.onnx, model.plan, model.py, ...)
      models/MODEL/VERSION/gate.npz       the health gate: a golden input and its expected output (optional)
      models/MODEL/VERSION/MANIFEST.json  written last: every file's size and sha256; no manifest, no version
      rings/RING.json                     a ring's desired state: the model versions its devices serve
      devices/DEVICE/report.json          what a device last said: versions, states, gate results, health

A version is immutable: it is written once, files first and the manifest last, so a reader that finds the manifest
finds every file, and one that does not ignores the version (a half-finished push is invisible). A ring's desired
state is one small object replaced whole (S3 PUTs are atomic), which is why a rollout is one write per ring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from urllib.parse import urlparse

from orinkit.fleet.errors import BucketLayoutError

MANIFEST = "MANIFEST.json"
GATE = "gate.npz"
MANIFEST_FORMAT = 1
# Names become key segments and Triton folder names: letters, digits, _ . - only, and no leading dot.
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")


def checked_name(kind: str, name: str) -> str:
    if not _NAME.match(name or ""):
        raise BucketLayoutError(f"{kind} name {name!r} cannot be a bucket key segment",
                                hint="use letters, digits, _ . - (not starting with a dot), up to 128 characters")
    return name


@dataclass(frozen=True)
class BucketURL:
    """``s3://bucket/prefix`` split; the prefix has no leading or trailing slash ("" for the bucket's root)."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> BucketURL:
        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise BucketLayoutError(f"{url!r} is not an s3:// URL",
                                    hint="write s3://BUCKET/PREFIX (--endpoint-url for MinIO and other S3 stores)")
        return cls(parsed.netloc, parsed.path.strip("/"))

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def version_prefix(model: str, version: int) -> str:
    return f"models/{checked_name('model', model)}/{int(version)}"


def ring_key(ring: str) -> str:
    return f"rings/{checked_name('ring', ring)}.json"


def report_key(device: str) -> str:
    return f"devices/{checked_name('device', device)}/report.json"


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the version prefix: "model/config.pbtxt", "version/model.onnx", "gate.npz"
    size: int
    sha256: str


@dataclass(frozen=True)
class VersionManifest:
    model: str
    version: int
    files: tuple[FileEntry, ...]
    gate: dict | None = None  # {"rtol": .., "atol": .., "inputs": [..], "outputs": [..]} when gate.npz was pushed
    pushed_at: float = 0.0
    pushed_by: str = ""
    format: int = MANIFEST_FORMAT

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> VersionManifest:
        try:
            raw = json.loads(data)
            files = tuple(FileEntry(**f) for f in raw.pop("files"))
            manifest = cls(files=files, **raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BucketLayoutError(f"a version manifest is unreadable: {exc}",
                                    hint="push the version again under a new number") from exc
        if manifest.format > MANIFEST_FORMAT:
            raise BucketLayoutError(f"manifest format {manifest.format} is newer than this orinkit's",
                                    hint="upgrade orinkit on this device")
        return manifest


@dataclass(frozen=True)
class DesiredState:
    """What a ring's devices serve: one version per model. ``generation`` grows with every write, so a device's
    report says which desired state it has reached."""

    ring: str
    models: Mapping[str, int] = field(default_factory=dict)
    generation: int = 0
    updated_at: float = 0.0
    note: str = ""  # who wrote it and why: "rollout lane 3", "rollback: canary-1 failed its gate"

    def to_json(self) -> bytes:
        return json.dumps({"ring": self.ring, "models": dict(self.models), "generation": self.generation,
                           "updated_at": self.updated_at, "note": self.note}, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> DesiredState:
        try:
            raw = json.loads(data)
            models = {checked_name("model", str(k)): int(v) for k, v in raw.get("models", {}).items()}
            return cls(checked_name("ring", raw["ring"]), models, int(raw.get("generation", 0)),
                       float(raw.get("updated_at", 0.0)), str(raw.get("note", "")))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BucketLayoutError(f"a ring's desired state is unreadable: {exc}",
                                    hint="write it again with edge-fleet rollout") from exc


@dataclass(frozen=True)
class ModelReport:
    version: int | None  # what serves now (None: nothing)
    state: str  # "READY", "FAILED", "PENDING", "UNMANAGED" (serving, but the ring does not name it)
    gate: str | None = None  # "passed", "failed", "none" (the version has no gate)
    reason: str = ""  # why a wanted version is not serving


@dataclass(frozen=True)
class DeviceReport:
    """What a device last wrote: the generation of its ring it has acted on, and per model what serves."""

    device: str
    ring: str
    generation: int
    models: Mapping[str, ModelReport]
    reported_at: float
    health: Mapping[str, float] = field(default_factory=dict)  # e.g. {"p99_ms": .., "failures": .., "requests": ..}
    note: str = ""
    # Since the agent started, per thing it polls ("bucket", "server"): {"count", "last_s", "last_failed_polls",
    # "ongoing_s"}; an outage of the bucket can only be reported once it is over, so it is counted here.
    outages: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({"device": self.device, "ring": self.ring, "generation": self.generation,
                           "models": {k: asdict(v) for k, v in self.models.items()},
                           "reported_at": self.reported_at, "health": dict(self.health), "note": self.note,
                           "outages": {k: dict(v) for k, v in self.outages.items()}},
                          indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> DeviceReport:
        try:
            raw = json.loads(data)
            outages = {str(k): {str(n): _number(x) for n, x in v.items()}
                       for k, v in raw.get("outages", {}).items()}  # absent from reports of older agents
            return cls(raw["device"], raw["ring"], int(raw["generation"]),
                       {k: ModelReport(**v) for k, v in raw.get("models", {}).items()}, float(raw["reported_at"]),
                       {k: float(v) for k, v in raw.get("health", {}).items()}, str(raw.get("note", "")), outages)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BucketLayoutError(f"a device report is unreadable: {exc}",
                                    hint="the device's agent writes it again at its next poll") from exc


def _number(value) -> int | float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TypeError(f"{value!r} is not a number")
    return value
