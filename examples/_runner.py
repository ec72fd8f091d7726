"""What every example's ``main`` does: parse --work, run in a temporary folder removed at the end (or in --work),
turn an orinkit error into one ``error: …`` line and its exit code, and judge what the run measured."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from orinkit.core.errors import OrinkitError


def run_example(doc: str, run: Callable[[Path], dict], succeeded: Callable[[dict], bool], argv=None,
                facts: dict | None = None, *, prefix: str) -> int:
    """0 when ``succeeded(run(work))``; ``facts`` (for tests) receives what the run measured."""
    # The docstring's first paragraph, whole: its first line alone stopped mid-sentence in --help.
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    parser.add_argument("--work", type=Path, help="build everything in this folder and keep it (it must not hold "
                                                  "an earlier run's models/; default: a temporary folder, removed "
                                                  "at the end)")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix=f"orinkit-{prefix}-") as scratch:  # unused with --work
            work = args.work or Path(scratch)
            work.mkdir(parents=True, exist_ok=True)
            measured = run(work)
    except OrinkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if facts is not None:
        facts.update(measured)
    return 0 if succeeded(measured) else 1
