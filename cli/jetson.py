"""``edge-jetson``: what this Jetson is, what it runs, and what will get in the way of serving on it.

``edge-jetson info`` prints the facts as a table and then the warnings; ``--json`` prints them as one JSON
object (``{"facts": {...}, "warnings": [...]}``). Off a Jetson both exit 3 with a one-line ``Error: not a Jetson
(…)`` on stderr and print nothing on stdout: a script asking for facts should not get a half-empty object.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from orinkit.cli.base import OrinkitGroup
from orinkit.jetson.checks import warnings_for
from orinkit.jetson.device import DeviceInfo, device_info
from orinkit.jetson.triton import triton_version_at
from orinkit.server.locate import HOME_ENV


def _mib(kb: int | None) -> str:
    return "unknown" if kb is None else f"{kb / 1024:,.0f} MiB"


def _known(value: object) -> str:
    return "unknown" if value is None else str(value)


def _rows(info: DeviceInfo, triton_version: str | None) -> list[tuple[str, str]]:
    memory = info.memory
    mode = info.power_mode
    rows = [
        ("L4T", f"{info.l4t} (from {info.l4t_source})"),
        ("JetPack", _known(info.jetpack)),
        ("board", _known(info.model)),
        ("module", _known(info.module)),
        ("DLA cores", "unknown" if info.dla_cores is None else f"{info.dla_cores} (from {info.dla_source})"),
        ("power mode", "unknown" if mode is None else f"{mode.name} (id {_known(mode.id)})"),
        ("clocks pinned", {True: "yes", False: "no", None: "unknown"}[info.clocks_pinned]),
        ("memory", "unknown" if memory is None else f"{_mib(memory.total_kb)}, {_mib(memory.available_kb)} available"),
        ("swap", "unknown" if memory is None else _mib(memory.swap_total_kb)),
    ]
    if memory is not None and memory.nvmap_used_kb is not None:
        rows.append(("NvMap used", _mib(memory.nvmap_used_kb)))
    rows += [
        ("TensorRT", _known(info.tensorrt)),
        ("CUDA", _known(info.cuda)),
        ("Python", _known(info.python)),
        ("Triton for this JetPack", "unknown" if info.triton is None else
         f"{info.triton.release or 'none'} ({info.triton.note})"),
    ]
    if triton_version:
        rows.append(("Triton in use", triton_version))
    return rows


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def _triton_in_use(given: str | None) -> str | None:
    if given:
        return given
    home = os.environ.get(HOME_ENV)
    return triton_version_at(Path(home)) if home else None


@click.group(cls=OrinkitGroup)
def main() -> None:
    """Facts about this Jetson: L4T/JetPack, board, power mode, memory, TensorRT/CUDA, matching Triton."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts and warnings as JSON.")
@click.option("--triton-version", default=None,
              help=f"Check this Triton release against the JetPack (default: the one at ${HOME_ENV}).")
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("/"),
              hidden=True, help="Read a captured device tree instead of this machine (commands from ROOT/commands).")
def info(as_json: bool, triton_version: str | None, root: Path) -> None:
    """Print what this Jetson is and runs, then what to fix before benchmarking or serving."""
    facts = device_info(root)
    in_use = _triton_in_use(triton_version)
    warnings = warnings_for(facts, triton_version=in_use)
    if as_json:
        click.echo(json.dumps({"facts": facts.to_dict(), "triton_in_use": in_use, "warnings": warnings}, indent=2))
        return
    click.echo(_table(_rows(facts, in_use)))
    if warnings:
        click.echo("")
        for warning in warnings:
            click.echo(f"warning: {warning}")


if __name__ == "__main__":
    main()
