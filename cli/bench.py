"""``edge-bench``: load against a running Triton server through orinkit and plain tritonclient side by side."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from orinkit.cli.base import CommandError, OrinkitCommand, url_option
from orinkit.client.bench import bench
from orinkit.client.errors import BenchError, InvalidInputError
from orinkit.core.errors import OrinkitError


def _levels(text: str) -> list[int]:
    try:
        levels = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise InvalidInputError(f"--concurrency '{text}' is not a list of positive numbers", hint="write e.g. 1,2,4")
    return levels


def _load_inputs(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{path} is not a readable .npz file: {exc}",
                                hint="save one array per input name with numpy.savez") from exc


def _read_payload(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read --image {path}: {exc.strerror or exc}", hint="check the path") from None


def _sampler(power: bool | None):
    import shutil

    if power is False or (power is None and shutil.which("tegrastats") is None):
        return None
    from orinkit.jetson.sampler import TegrastatsSampler

    return TegrastatsSampler


@click.command(cls=OrinkitCommand)
@url_option()
@click.option("--model", required=True)
@click.option("--concurrency", default="1,4", show_default=True, help="Levels to run, comma-separated.")
@click.option("--duration", type=float, default=None, help="Seconds per level and client (default 5).")
@click.option("--requests", type=int, default=None, help="Requests per level and client, instead of a duration.")
@click.option("--data", type=click.Path(path_type=Path), default=None, help=".npz with one array per input.")
@click.option("--image", type=click.Path(path_type=Path), default=None,
              help="A file whose bytes fill the model's BYTES inputs (an encoded image for an image pipeline).")
@click.option("--shared-memory/--no-shared-memory", default=False, show_default=True,
              help="orinkit's client uses system shared memory (server on this host).")
@click.option("--power/--no-power", default=None,
              help="Sample tegrastats for average power and energy per inference (default: on a Jetson).")
@click.option("--json", "as_json", is_flag=True)
def main(url, model, concurrency, duration, requests, data, image, shared_memory, power, as_json) -> None:
    """Throughput and p50/p90/p95/p99 latency per concurrency level, orinkit vs plain tritonclient, each beside
    the server's own time per request (queue and compute, from its statistics for --model over the run)."""
    echo = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    try:
        if duration is not None and requests is not None:
            raise InvalidInputError("give --duration or --requests, not both", hint="drop one of them")
        if data is not None and image is not None:
            raise InvalidInputError("give --data or --image, not both", hint="--image fills BYTES inputs; --data all")
        report = bench(url, model, levels=_levels(concurrency),
                       duration_s=duration if duration is not None else (None if requests else 5.0),
                       requests=requests, inputs=_load_inputs(data) if data else None,
                       payload=_read_payload(image) if image else None,
                       shared_memory="system" if shared_memory else None, power_sampler=_sampler(power),
                       progress=echo)
    except BenchError as exc:
        if as_json and exc.report is not None:
            click.echo(json.dumps(exc.report, indent=2))
        raise CommandError(exc) from exc
    except OrinkitError as exc:
        raise CommandError(exc) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
