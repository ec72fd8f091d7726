"""``edge-tune``: a model's serving configuration measured under latency and memory budgets, and applied."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orinkit.cli.base import CommandError, OrinkitCommand, url_option
from orinkit.core.errors import MissingExtraError, OrinkitError
from orinkit.tune.errors import BudgetUnmetError, TuneInputError
from orinkit.tune.measure import DEFAULT_LEVELS
from orinkit.tune.space import DEFAULT_DELAYS_US, DEFAULT_INSTANCES, KINDS


def _numbers(option: str, text: str, low: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < low:
        raise TuneInputError(f"{option} '{text}' is not a list of numbers >= {low}", hint=f"write e.g. {option} 1,2,4")
    return values


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(v.strip().lower() for v in text.split(",") if v.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if not kinds or unknown:
        raise TuneInputError(f"--kinds '{text}' names an unknown instance kind", hint=f"use {', '.join(KINDS)}")
    return kinds


def _inputs(data: Path | None, image: Path | None):
    if data is not None and image is not None:
        raise TuneInputError("give --data or --image, not both", hint="--image fills BYTES inputs; --data all")
    from orinkit.cli.bench import _load_inputs, _read_payload

    return (_load_inputs(data) if data else None), (_read_payload(image) if image else None)


def _write_outputs(report: dict, out: Path, echo) -> None:
    from orinkit.tune.report import plot, table, write_json

    echo(table(report))
    out.mkdir(parents=True, exist_ok=True)
    echo(f"wrote {write_json(report, out / 'report.json')}")
    try:
        echo(f"wrote {plot(report, out / 'plot.png')}")
    except MissingExtraError as exc:
        echo(f"no plot: {exc}")


@click.command(cls=OrinkitCommand)
@click.argument("name")
@click.option("--repo", "repository", type=click.Path(path_type=Path), required=True,
              help="The model repository that holds NAME.")
@url_option(default=None,
            help="gRPC address of a running server with --model-control-mode explicit (default: edge-tune starts "
                   "one for --repo).")
@click.option("--latency-budget-ms", type=float, default=None, help="p99 latency the pick must stay under.")
@click.option("--memory-budget-mb", type=float, default=None,
              help="Memory the pick must stay under: the server's processes here, the board's used memory on a "
                   "Jetson.")
@click.option("--exhaustive", is_flag=True, help="Measure the whole grid instead of the greedy walk.")
@click.option("--instances", default=",".join(map(str, DEFAULT_INSTANCES)), show_default=True,
              help="Instance counts to try.")
@click.option("--max-batch-size", type=int, default=None,
              help="Largest max_batch_size to try (default: the model's own); powers of two up to it.")
@click.option("--delays-us", default=",".join(map(str, DEFAULT_DELAYS_US)), show_default=True,
              help="Dynamic batching queue delays to try, in microseconds.")
@click.option("--kinds", default="auto", show_default=True,
              help="Instance kinds: auto (as configured), cpu, gpu, dla0, dla1 (DLA: TensorRT engines on a Jetson).")
@click.option("--concurrency", default=",".join(map(str, DEFAULT_LEVELS)), show_default=True,
              help="Concurrency levels, climbed until throughput stops rising or p99 leaves the budget.")
@click.option("--duration", type=float, default=2.0, show_default=True, help="Seconds per level.")
@click.option("--data", type=click.Path(path_type=Path), default=None, help=".npz with one array per input.")
@click.option("--image", type=click.Path(path_type=Path), default=None,
              help="A file whose bytes fill the model's BYTES inputs (an encoded image).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Folder for report.json and plot.png (default: edge-tune-NAME).")
@click.option("--apply", "apply_", is_flag=True,
              help="Write the pick to NAME's config.pbtxt (checked, atomic, undone with --revert) and measure it "
                   "again.")
@click.option("--revert", is_flag=True, help="Put back the config the last --apply replaced, and nothing else.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (progress goes to stderr).")
def main(name, repository, url, latency_budget_ms, memory_budget_mb, exhaustive, instances, max_batch_size,
         delays_us, kinds, concurrency, duration, data, image, out, apply_, revert, as_json) -> None:
    """Measure NAME's serving configurations (instance count, max batch size, queue delay) at rising concurrency
    and pick the highest throughput within the budgets. The greedy walk measures a fraction of the grid."""
    echo = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    if revert:
        _revert(name, repository, url, locals(), echo)
        return
    from orinkit.tune.tuner import TuneOptions, tune

    try:
        inputs, payload = _inputs(data, image)
        options = TuneOptions(name, repository, url=url, latency_budget_ms=latency_budget_ms,
                              memory_budget_mb=memory_budget_mb, exhaustive=exhaustive,
                              instances=_numbers("--instances", instances, 1), max_batch_size=max_batch_size,
                              delays_us=_numbers("--delays-us", delays_us, 0), kinds=_kinds(kinds),
                              levels=_numbers("--concurrency", concurrency, 1), duration_s=duration, inputs=inputs,
                              payload=payload, apply=apply_)
        target = out or Path(f"edge-tune-{name}")
        try:
            report = tune(options, progress=echo)
        except BudgetUnmetError as exc:
            if exc.report is not None:
                _write_outputs(exc.report, target, echo)
            raise
        _write_outputs(report, target, echo)
    except OrinkitError as exc:
        raise CommandError(exc) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))


_SWEEP_DEFAULTS = {"latency_budget_ms": None, "memory_budget_mb": None, "exhaustive": False,
                   "instances": ",".join(map(str, DEFAULT_INSTANCES)), "max_batch_size": None,
                   "delays_us": ",".join(map(str, DEFAULT_DELAYS_US)), "kinds": "auto",
                   "concurrency": ",".join(map(str, DEFAULT_LEVELS)), "duration": 2.0, "data": None, "image": None,
                   "out": None, "apply_": False, "as_json": False}


def _revert(name, repository, url, given: dict, echo) -> None:
    changed = [k for k, default in _SWEEP_DEFAULTS.items() if given[k] != default]
    if changed:
        option = "--" + changed[0].rstrip("_").replace("_", "-").replace("as-json", "json")
        raise CommandError(TuneInputError(f"--revert puts the previous config back and measures nothing: {option} "
                                          "does not apply", hint=f"drop {option}"))
    from orinkit.repo.config_change import revert_config

    try:
        change = revert_config(repository, name, server=url, progress=echo)
    except OrinkitError as exc:
        raise CommandError(exc) from exc
    if url is None:
        echo(f"{change.path} is the previous config again; a running server serves it after edge-repo load {name} "
             "(or its next start)")


if __name__ == "__main__":
    main()
