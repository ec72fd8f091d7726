"""Kubernetes manifests for Jetson rings, validated offline against the real schemas (kubernetes-validate
--strict, the oldest and newest Kubernetes it knows), plus what schemas do not check: names, selectors, volumes,
probe ports."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orinkit.fleet.errors import ManifestError
from orinkit.fleet.k8s import RING_LABEL, daemonset, helm_values, namespace, secret_template, write_manifests

kubernetes_validate = pytest.importorskip("kubernetes_validate")
from kubernetes_validate.utils import all_versions  # noqa: E402

OPTIONS = {"image": "nvcr.io/nvidia/tritonserver:24.08-py3-igpu", "bucket_url": "s3://fleet/prod",
           "agent_image": "registry.local/orinkit-agent:1.0"}
VERSIONS = [all_versions()[0], all_versions()[-1]]  # 1.25 and 1.37 with kubernetes-validate 1.37
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _resources(**options):
    merged = {**OPTIONS, **options}
    return [namespace(), secret_template(), daemonset("canary", **merged), daemonset("prod", **merged)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("options", [{}, {"gpu": True, "node_selector": {"orinkit.io/board": "agx-orin"},
                                          "http_port": 9000, "grpc_port": 9001, "shm_size": "2Gi"}])
def test_every_manifest_passes_strict_schema_validation(version, options):
    for resource in _resources(**options):
        kubernetes_validate.validate(resource, version, strict=True)


def test_the_cli_validates_the_written_files_strictly(tmp_path):
    written = write_manifests(tmp_path, ["canary", "prod"], **OPTIONS)
    names = sorted(p.name for p in written)
    assert names == ["daemonset-canary.yaml", "daemonset-prod.yaml", "namespace.yaml", "secret.yaml.example",
                     "values.yaml"]
    manifests = [p for p in written if p.name != "values.yaml"]
    cli = Path(sys.executable).with_name("kubernetes-validate")
    for version in VERSIONS:
        result = subprocess.run([str(cli), "--strict", "-k", version, *map(str, manifests)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("passed") == len(manifests)


def test_names_are_dns_labels_and_the_selector_matches_the_template():
    for resource in _resources():
        assert DNS_LABEL.match(resource["metadata"]["name"])
    ds = daemonset("canary", **OPTIONS)
    selector = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert all(len(v) <= 63 for v in labels.values())
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {RING_LABEL: "canary", "kubernetes.io/arch": "arm64"}
    assert pod["runtimeClassName"] == "nvidia"
    for container in pod["containers"]:
        assert DNS_LABEL.match(container["name"])
        for port in container.get("ports", ()):
            assert DNS_LABEL.match(port["name"]) and len(port["name"]) <= 15  # IANA_SVC_NAME


def test_mounts_reference_declared_volumes_and_probes_reach_declared_ports():
    pod = daemonset("prod", **OPTIONS, http_port=9000, grpc_port=9001)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"]:
        for mount in container["volumeMounts"]:
            assert mount["name"] in volumes
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert volumes["models"]["hostPath"]["path"] == "/var/lib/orinkit/models"
    triton, agent = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in triton["ports"]}
    assert ports == {"http": 9000, "grpc": 9001}
    for kind, path in (("startupProbe", "/v2/health/live"), ("livenessProbe", "/v2/health/live"),
                       ("readinessProbe", "/v2/health/ready")):
        probe = triton[kind]["httpGet"]
        assert probe["path"] == path and probe["port"] in ports
    assert "--model-control-mode=explicit" in triton["args"] and "--model-repository=/models" in triton["args"]
    assert "--backend-directory=/opt/tritonserver/backends" in triton["args"]
    assert "--grpc-port=9001" in triton["args"]
    assert agent["command"] == ["edge-fleet", "agent", "--ring", "prod", "--bucket", "s3://fleet/prod",
                                "--repository", "/models", "--url", "localhost:9001"]
    assert agent["image"] == OPTIONS["agent_image"]
    assert agent["envFrom"] == [{"secretRef": {"name": "orinkit-bucket"}}]
    assert "envFrom" not in triton  # the credentials are the agent's alone


def test_the_secret_template_holds_no_real_values():
    data = secret_template()["stringData"]
    assert set(data) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}
    assert data["AWS_ACCESS_KEY_ID"].startswith("<") and data["AWS_SECRET_ACCESS_KEY"].startswith("<")


def test_helm_values_follow_the_manifests(tmp_path):
    values = helm_values(["canary", "prod"], **OPTIONS)
    assert values["rings"]["canary"]["spec"] == daemonset("canary", **OPTIONS)["spec"]
    assert values["namespace"] == "orinkit" and values["secretName"] == "orinkit-bucket"
    written = {p.name: p for p in write_manifests(tmp_path, ["canary"], **OPTIONS)}
    assert yaml.safe_load(written["values.yaml"].read_text()) == helm_values(["canary"], **OPTIONS)
    (ds,) = yaml.safe_load_all(written["daemonset-canary.yaml"].read_text())
    assert ds == daemonset("canary", **OPTIONS)


@pytest.mark.parametrize("ring", ["Canary", "lane_3", "-edge", "edge-", "", "x" * 60, "a.b"])
def test_a_ring_that_is_not_a_dns_label_is_refused(ring):
    with pytest.raises(ManifestError) as info:
        daemonset(ring, **OPTIONS)
    assert info.value.exit_code == 4 and "lowercase" in info.value.hint


def test_bad_ports_and_ring_lists_are_refused(tmp_path):
    with pytest.raises(ManifestError, match="ports"):
        daemonset("canary", **OPTIONS, http_port=8001, grpc_port=8001)
    with pytest.raises(ManifestError, match="no ring"):
        write_manifests(tmp_path, [], **OPTIONS)
    with pytest.raises(ManifestError, match="twice"):
        helm_values(["canary", "canary"], **OPTIONS)


def test_edge_fleet_k8s_writes_what_the_library_writes(tmp_path):
    from click.testing import CliRunner

    from orinkit.cli.fleet import main as edge_fleet

    result = CliRunner().invoke(edge_fleet, ["k8s", str(tmp_path / "out"), "--rings", "canary,prod", "--image",
                                             OPTIONS["image"], "--bucket", OPTIONS["bucket_url"]])
    assert result.exit_code == 0, result.output
    library = write_manifests(tmp_path / "lib", ["canary", "prod"], image=OPTIONS["image"],
                              bucket_url=OPTIONS["bucket_url"])
    for path in library:
        assert (tmp_path / "out" / path.name).read_text() == path.read_text(), path.name
    bad = CliRunner().invoke(edge_fleet, ["k8s", str(tmp_path / "bad"), "--rings", "Canary_1", "--image", "x",
                                          "--bucket", OPTIONS["bucket_url"]])
    assert bad.exit_code == 4 and "Error:" in bad.output and "Traceback" not in bad.output
