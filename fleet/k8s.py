"""Kubernetes manifests for a fleet of Jetson nodes: one DaemonSet per ring, a Namespace, a Secret template.

Each DaemonSet runs on the nodes labelled ``orinkit.io/ring=<ring>`` (and ``kubernetes.io/arch=arm64``) with
``runtimeClassName: nvidia`` (k3s installs that RuntimeClass when it finds nvidia-container-runtime), and holds two
containers:

- ``tritonserver`` in explicit model control mode on ``/models``, a hostPath folder so that the models survive pod
  restarts; probes on Triton's HTTP ``/v2/health/live`` and ``/v2/health/ready``; ``/dev/shm`` an in-memory emptyDir
  (the Python backend fails with the 64 MB default);
- ``agent``, the sidecar that copies the ring's desired versions from the bucket into ``/models`` and loads them
  through Triton's gRPC port on localhost; the bucket's credentials come from a Secret (``envFrom``), seen by the
  agent only.

The image is a parameter: a Triton build for the board's JetPack (an ``-igpu`` container, or one made from the
Jetson release tarball, with ``backend_directory`` where its backends are). The agent's image must hold orinkit
with ``orinkit[fleet]``; without ``agent_image`` it is the Triton image (one image holding both).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from orinkit.fleet.errors import ManifestError

RING_LABEL = "orinkit.io/ring"
APP = "orinkit-triton"
SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
MODELS = "/models"
# Kubernetes object names, container names and port names are DNS-1123 labels: 63 characters at most.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_label(kind: str, name: str, *, room: int = 0) -> str:
    """``name`` if it is a DNS-1123 label (with ``room`` characters left for a prefix), else ManifestError."""
    if not _DNS_LABEL.match(name or "") or len(name) > 63 - room:
        raise ManifestError(f"{kind} name {name!r} cannot name a Kubernetes object",
                            hint=f"use lowercase letters, digits and '-', starting and ending with a letter or digit, "
                                 f"at most {63 - room} characters")
    return name


def daemonset_name(ring: str) -> str:
    return f"orinkit-{dns_label('ring', ring, room=len('orinkit-'))}"


def namespace(name: str = "orinkit") -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dns_label("namespace", name)}}


def secret_template(name: str = "orinkit-bucket", *, namespace: str = "orinkit") -> dict:
    """The Secret the agents read their bucket credentials from, with placeholders: fill it in (add
    ``AWS_ENDPOINT_URL`` for MinIO or another S3 store) and apply it once; the ring manifests never contain it."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": dns_label("secret", name), "namespace": dns_label("namespace", namespace)},
            "stringData": {"AWS_ACCESS_KEY_ID": "<access key id>", "AWS_SECRET_ACCESS_KEY": "<secret access key>",
                           "AWS_DEFAULT_REGION": "us-east-1"}}


def daemonset(ring: str, *, image: str, bucket_url: str, models_host_path: str = "/var/lib/orinkit/models",
              namespace: str = "orinkit", grpc_port: int = 8001, http_port: int = 8000,
              secret: str = "orinkit-bucket", agent_image: str | None = None, shm_size: str = "1Gi",
              node_selector: Mapping[str, str] | None = None,
              backend_directory: str = "/opt/tritonserver/backends", gpu: bool = False) -> dict:
    """The ring's DaemonSet. ``gpu``: also limit ``nvidia.com/gpu: 1`` (needs NVIDIA's device plugin ≥ 0.13, which
    advertises one GPU per Jetson board); without it the nvidia runtime class alone gives the GPU to the pod."""
    name = daemonset_name(ring)
    if grpc_port == http_port or not all(1 <= int(p) <= 65535 for p in (grpc_port, http_port)):
        raise ManifestError(f"ports {http_port} (HTTP) and {grpc_port} (gRPC) cannot both serve",
                            hint="give two different ports between 1 and 65535")
    labels = {"app.kubernetes.io/name": APP, "app.kubernetes.io/instance": name, RING_LABEL: ring}
    selector = {RING_LABEL: ring, "kubernetes.io/arch": "arm64", **(node_selector or {})}
    triton = {
        "name": "tritonserver",
        "image": image,
        "command": ["tritonserver"],
        "args": [f"--model-repository={MODELS}", "--model-control-mode=explicit",
                 f"--backend-directory={backend_directory}", f"--http-port={http_port}", f"--grpc-port={grpc_port}"],
        "ports": [{"name": "http", "containerPort": http_port, "protocol": "TCP"},
                  {"name": "grpc", "containerPort": grpc_port, "protocol": "TCP"}],
        "volumeMounts": [{"name": "models", "mountPath": MODELS, "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
        # Engine deserialisation and ONNX Runtime-TensorRT builds can take minutes on an Orin: the startup probe
        # allows 10 minutes before liveness takes over.
        "startupProbe": _probe("/v2/health/live", period=10, failures=60),
        "livenessProbe": _probe("/v2/health/live", period=10, failures=3),
        "readinessProbe": _probe("/v2/health/ready", period=5, failures=2),
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                      **({"limits": {"nvidia.com/gpu": 1}} if gpu else {})},
    }
    agent = {
        "name": "agent",
        "image": agent_image or image,
        "command": ["edge-fleet", "agent", "--ring", ring, "--bucket", bucket_url, "--repository", MODELS,
                    "--url", f"localhost:{grpc_port}"],
        "envFrom": [{"secretRef": {"name": dns_label("secret", secret)}}],
        "volumeMounts": [{"name": "models", "mountPath": MODELS}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": dns_label("namespace", namespace), "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            # One node at a time: a ring's rollout of a new image must not take every device down at once.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "runtimeClassName": "nvidia",
                    "nodeSelector": selector,
                    # Triton's default exit timeout is 30 s; leave it room to finish in-flight requests.
                    "terminationGracePeriodSeconds": 45,
                    "containers": [triton, agent],
                    "volumes": [
                        {"name": "models", "hostPath": {"path": models_host_path, "type": "DirectoryOrCreate"}},
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}},
                    ],
                },
            },
        },
    }


def _probe(path: str, *, period: int, failures: int) -> dict:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "failureThreshold": failures,
            "timeoutSeconds": 3}


def helm_values(rings: Iterable[str], **options) -> dict:
    """The same as Helm values. orinkit ships no Helm chart: these values follow the manifests' structure (per
    ring its DaemonSet's ``metadata`` and ``spec``, plus the namespace and the Secret's name), so a chart of one's
    own can render them with ``toYaml``. ``options`` are :func:`daemonset`'s keywords."""
    sets = {ring: daemonset(ring, **options) for ring in rings_list(rings)}
    return {"namespace": options.get("namespace", "orinkit"), "secretName": options.get("secret", "orinkit-bucket"),
            "secretKeys": list(SECRET_KEYS),
            "rings": {ring: {"metadata": ds["metadata"], "spec": ds["spec"]} for ring, ds in sets.items()}}


def rings_list(rings: Iterable[str]) -> list[str]:
    rings = list(rings)
    if not rings:
        raise ManifestError("no ring given", hint="name at least one ring, e.g. canary")
    if len(set(rings)) != len(rings):
        raise ManifestError(f"a ring is named twice in {rings}", hint="name each ring once")
    return rings


def write_manifests(folder: str | Path, rings: Iterable[str], **options) -> list[Path]:
    """Write ``namespace.yaml``, ``daemonset-<ring>.yaml`` per ring, ``values.yaml`` (Helm values) and
    ``secret.yaml.example`` (the credentials template: kubectl apply -f FOLDER skips it, so a filled-in Secret is
    never replaced by placeholders)."""
    import yaml

    rings = rings_list(rings)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ns = options.get("namespace", "orinkit")
    documents = {"namespace.yaml": [namespace(ns)],
                 "secret.yaml.example": [secret_template(options.get("secret", "orinkit-bucket"), namespace=ns)]}
    for ring in rings:
        documents[f"daemonset-{ring}.yaml"] = [daemonset(ring, **options)]
    documents["values.yaml"] = [helm_values(rings, **options)]
    written = []
    for name, docs in documents.items():
        path = folder / name
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False))
        written.append(path)
    return written
