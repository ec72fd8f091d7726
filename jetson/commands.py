"""The few commands the device facts come from, and the runners that answer them.

A runner takes a :class:`Command` and returns its standard output, or None when the program is missing, fails
without printing anything, or hangs. Tests and ``--root`` trees use :func:`captured_runner`: a tree that stands
for another device must never be described by the commands of the machine reading it, so its answers are the
captured outputs in ``ROOT/commands/NAME.txt``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]


Runner = Callable[[Command], "str | None"]

NVPMODEL_QUERY = Command("nvpmodel", ("nvpmodel", "-q"))
# dpkg-query takes the long --showformat=…: its short -f would read "=${Version}" as the format.
L4T_CORE_PACKAGE = Command("dpkg-l4t-core", ("dpkg-query", "--show", "--showformat=${Version}", "nvidia-l4t-core"))
TENSORRT_PACKAGES = Command(
    "dpkg-tensorrt", ("dpkg-query", "--show", "--showformat=${Package} ${Version}\\n", "tensorrt", "libnvinfer[0-9]*")
)
CUDA_PACKAGES = Command("dpkg-cuda", ("dpkg-query", "--show", "--showformat=${Package} ${Version}\\n",
                                      "cuda-cudart-[0-9]*"))
# JetPack installs nvcc outside PATH.
NVCC_VERSION = Command("nvcc", ("/usr/local/cuda/bin/nvcc", "--version"))
PYTHON3_VERSION = Command("python3", ("python3", "--version"))


def run_command(command: Command, *, timeout_s: float = 10.0) -> str | None:
    """Run ``command`` here. dpkg-query exits 1 when one of several patterns matches nothing yet still prints the
    others, so what it printed counts, whatever the exit status."""
    try:
        done = subprocess.run(list(command.argv), capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.stdout.strip() else None


def captured_runner(directory: Path) -> Runner:
    """Answers from ``directory/NAME.txt``; a command without a file there is one the device did not have."""

    def run(command: Command) -> str | None:
        try:
            return (directory / f"{command.name}.txt").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    return run


def runner_for(root: Path) -> Runner:
    if root.resolve() == Path("/"):
        return run_command
    return captured_runner(root / "commands")
