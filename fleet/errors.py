"""Errors of ``orinkit.fleet``.

::

    FleetError
    ├── BucketError            the bucket cannot be reached or refuses a request (exit 6)
    │   └── BucketUnreachableError   no answer from the endpoint (the agent retries with backoff)
    ├── BucketLayoutError      a key, URL, ring or device name the bucket layout cannot hold (exit 4)
    ├── VersionExistsError     pushing a model version the bucket already holds: versions are immutable (exit 4)
    ├── IntegrityError         a downloaded file whose size or sha256 is not the manifest's (exit 6)
    ├── GateError              a version failed its health gate: its answer to the golden input is wrong (exit 6)
    └── RolloutError           a ring did not become healthy; the rings moved were put back (exit 6)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_RUNTIME, OrinkitError


class FleetError(OrinkitError):
    exit_code = EXIT_RUNTIME


class BucketError(FleetError):
    pass


class BucketUnreachableError(BucketError):
    pass


class BucketLayoutError(FleetError):
    exit_code = EXIT_BAD_INPUT


class VersionExistsError(FleetError):
    exit_code = EXIT_BAD_INPUT


class IntegrityError(FleetError):
    pass


class GateError(FleetError):
    pass


class RolloutError(FleetError):
    """``report`` holds what each device of the failing ring said."""

    def __init__(self, message: str, *, report=None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


# Added with orinkit.fleet.bucket, push, rings and k8s (issue 18).
class UnknownVersionError(BucketLayoutError):
    """A desired state (or a command) names a model version whose manifest is not in the bucket (exit 4)."""


class StaleWriteError(BucketError):
    """A compare-and-swap write lost: the object (a ring's desired state) was replaced since it was read (exit 6);
    reading it again and redoing the change is safe."""


class ManifestError(FleetError):
    """A Kubernetes manifest cannot be written as asked: a ring or resource name that is not a DNS-1123 label,
    a port out of range (exit 4)."""

    exit_code = EXIT_BAD_INPUT
