"""A fleet of Orins served from one bucket: push model versions, a device agent, ring rollouts, Kubernetes.

The bucket (S3, MinIO or any S3-compatible store, reached with boto3's standard configuration) is the one source of
truth; each device copies what its ring's desired state names to local disk, because Triton's Jetson builds cannot
read ``s3://`` repositories. ``orinkit[fleet]`` installs boto3.
"""

from __future__ import annotations

from orinkit.fleet.errors import (
    BucketError,
    BucketLayoutError,
    BucketUnreachableError,
    FleetError,
    GateError,
    IntegrityError,
    RolloutError,
    UnknownVersionError,
    VersionExistsError,
)
from orinkit.fleet.layout import BucketURL, DesiredState, DeviceReport, ModelReport, VersionManifest

# Where each public name lives; the modules behind them (boto3, the gRPC client) load on first use.
_LAZY = {
    "Bucket": "orinkit.fleet.bucket",
    "GateFile": "orinkit.fleet.push",
    "push_repository": "orinkit.fleet.push",
    "list_versions": "orinkit.fleet.push",
    "read_desired_state": "orinkit.fleet.rings",
    "write_desired_state": "orinkit.fleet.rings",
    "Agent": "orinkit.fleet.agent",
    "rollout": "orinkit.fleet.rolling",
    "SoakRule": "orinkit.fleet.rolling",
    "fleet_status": "orinkit.fleet.status",
    "write_manifests": "orinkit.fleet.k8s",
    "AgentOptions": "orinkit.fleet.agent_unit",
    "render_agent_unit": "orinkit.fleet.agent_unit",
}

__all__ = [
    "BucketError", "BucketLayoutError", "BucketUnreachableError", "FleetError", "GateError", "IntegrityError",
    "RolloutError", "UnknownVersionError", "VersionExistsError", "BucketURL", "DesiredState", "DeviceReport",
    "ModelReport", "VersionManifest", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'orinkit.fleet' has no attribute {name!r}")
