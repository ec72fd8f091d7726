"""edge-fleet: a fleet of Orins from one bucket (the device agent, ring rollouts, status, Kubernetes manifests)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import click

from orinkit.cli.base import OrinkitGroup, url_option

_BUCKET = click.option("--bucket", required=True, metavar="s3://BUCKET/PREFIX",
                       help="The fleet's bucket (credentials: boto3's standard chain).")
_ENDPOINT = click.option("--endpoint-url", default=None, metavar="URL",
                         help="An S3-compatible store (MinIO): http://HOST:PORT. Default: AWS_ENDPOINT_URL, or AWS.")


def _open(bucket: str, endpoint_url: str | None):
    from orinkit.fleet.bucket import Bucket

    return Bucket(bucket, endpoint_url=endpoint_url)


def _say(line: str) -> None:
    click.echo(line, err=True)


@click.group(cls=OrinkitGroup)
def main() -> None:
    """A fleet of Orins served from one S3 bucket."""


@main.command()
@click.option("--ring", required=True, help="The ring this device belongs to (its desired state: rings/RING.json).")
@_BUCKET
@_ENDPOINT
@click.option("--repository", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The model repository the local tritonserver serves (explicit model control).")
@url_option("server", help="The local server's gRPC address.")
@click.option("--device", default=None, help="This device's name in reports. Default: the hostname.")
@click.option("--interval", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between polls (one S3 request each when nothing changed).")
@click.option("--once", is_flag=True, help="Poll once, print what the device serves, and exit.")
@click.option("--state-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="The agent's staging and gates folder; on the repository's filesystem, outside it. "
                   "Default: .<repository>.fleet beside the repository.")
@click.option("--heartbeat-every", default=10, show_default=True, type=click.IntRange(min=1),
              help="Write the report at least every N polls.")
@click.option("--gate-requests", default=20, show_default=True, type=click.IntRange(min=1),
              help="Golden requests per gate and health measurement (their p99 is reported).")
@click.option("--memory-factor", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="MemAvailable must exceed this x a version's size + --memory-margin-mb to load it.")
@click.option("--memory-margin-mb", default=256.0, show_default=True, type=click.FloatRange(min=0))
@click.option("--max-backoff", default=600.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Longest wait between polls while the bucket does not answer.")
def agent(ring, bucket, endpoint_url, repository, server, device, interval, once, state_dir, heartbeat_every,
          gate_requests, memory_factor, memory_margin_mb, max_backoff) -> None:
    """Keep the local server on RING's desired state and report to the bucket (run it as a service:
    edge-fleet's systemd unit, orinkit.fleet.agent_unit)."""
    from orinkit.core.errors import EXIT_RUNTIME
    from orinkit.fleet.agent import Agent, describe

    worker = Agent(_open(bucket, endpoint_url), ring, repository, server, device=device, interval_s=interval,
                   heartbeat_every=heartbeat_every, state_dir=state_dir, gate_requests=gate_requests,
                   memory_factor=memory_factor, memory_margin_mb=memory_margin_mb, max_backoff_s=max_backoff,
                   tell_outages=not once, progress=_say)
    if once:
        result = worker.poll_once()
        click.echo(describe(result))
        if result.errors:
            sys.exit(EXIT_RUNTIME)
        return
    _say(f"agent {worker.device} on ring {ring}: polling {bucket} every {interval:g} s")
    try:
        worker.run(threading.Event())
    except KeyboardInterrupt:
        _say("agent stopped")  # SIGTERM from systemd: a clean stop, not a failure


@main.command()
@click.argument("name")
@click.option("--model", required=True)
@click.option("--version", required=True, type=click.IntRange(min=1))
@click.option("--rings", required=True, metavar="RING,RING,...", help="In order, e.g. canary,wave1,all.")
@_BUCKET
@_ENDPOINT
@click.option("--soak", default=60.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds each ring must hold after every device is READY.")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(min=1),
              help="Seconds to wait for a ring's devices to become READY (and to come back on a rollback).")
@click.option("--poll", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between reads of the device reports.")
@click.option("--p99-ratio", default=1.5, show_default=True, type=click.FloatRange(min=1))
@click.option("--p99-slack-ms", default=5.0, show_default=True, type=click.FloatRange(min=0))
@click.option("--json", "as_json", is_flag=True, help="The result as JSON on standard output.")
def rollout(name, model, version, rings, bucket, endpoint_url, soak, timeout, poll, p99_ratio, p99_slack_ms,
            as_json) -> None:
    """Roll MODEL version VERSION out ring by ring; on any failure put the moved rings back (exit 6)."""
    from orinkit.fleet.rolling import SoakRule
    from orinkit.fleet.rolling import rollout as run_rollout

    ring_list = [r.strip() for r in rings.split(",") if r.strip()]
    result = run_rollout(_open(bucket, endpoint_url), model, version, ring_list, name=name, soak_s=soak,
                         timeout_s=timeout, poll_s=poll, rule=SoakRule(p99_ratio=p99_ratio, p99_slack_ms=p99_slack_ms),
                         progress=_say)
    if as_json:
        click.echo(json.dumps({"name": result.name, "model": result.model, "version": result.version,
                               "rings": list(result.rings), "devices": {k: list(v) for k, v in result.devices.items()},
                               "seconds": round(result.seconds, 1), "soak": result.soak}, indent=2))
    else:
        click.echo(f"rollout {name}: {model} version {version} serves on {', '.join(result.rings)} "
                   f"({sum(len(d) for d in result.devices.values())} devices, {result.seconds:.0f} s)")


@main.command()
@_BUCKET
@_ENDPOINT
@click.option("--json", "as_json", is_flag=True, help="Every device's report as JSON on standard output.")
def status(bucket, endpoint_url, as_json) -> None:
    """Every device: its ring, versions, gates and the age of its last report."""
    from orinkit.fleet.status import fleet_status, format_status

    found = fleet_status(_open(bucket, endpoint_url))
    click.echo(json.dumps(found.as_json(), indent=2) if as_json else format_status(found))



@main.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--rings", required=True, help="Comma-separated rings, one DaemonSet each (e.g. canary,wave1,all).")
@click.option("--image", required=True, help="The tritonserver image for the boards' JetPack (an -igpu image).")
@_BUCKET
@click.option("--agent-image", default=None, help="The agent's image (with orinkit[fleet]); default: --image.")
@click.option("--namespace", default="orinkit", show_default=True)
@click.option("--secret", default="orinkit-bucket", show_default=True, help="The Secret holding the bucket's keys.")
@click.option("--models-host-path", default="/var/lib/orinkit/models", show_default=True,
              help="Where each board keeps its models, so they survive pod restarts.")
@click.option("--shm-size", default="1Gi", show_default=True, help="/dev/shm for the Python backend.")
@click.option("--backend-directory", default="/opt/tritonserver/backends", show_default=True)
@click.option("--gpu", is_flag=True, help="Also limit nvidia.com/gpu: 1 (NVIDIA's device plugin >= 0.13).")
def k8s(folder, rings, image, bucket, agent_image, namespace, secret, models_host_path, shm_size,
        backend_directory, gpu) -> None:
    """Write Kubernetes manifests for Jetson nodes: a DaemonSet per ring, the namespace, Helm values and a
    Secret template (k3s on the Orin: runtimeClassName nvidia)."""
    from orinkit.fleet.k8s import write_manifests

    written = write_manifests(folder, rings.split(","), image=image, bucket_url=bucket, agent_image=agent_image,
                              namespace=namespace, secret=secret, models_host_path=models_host_path,
                              shm_size=shm_size, backend_directory=backend_directory, gpu=gpu)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"label each board: kubectl label node NODE orinkit.io/ring=RING; fill in and apply "
               f"{Path(folder) / 'secret.yaml.example'} once")


if __name__ == "__main__":
    main()
