"""Errors of ``orinkit.jetson``.

::

    JetsonError
    ├── NotAJetsonError   no L4T here (no /etc/nv_tegra_release, no nvidia-l4t-core), or no tegrastats (exit 3)
    ├── TegrastatsError   a tegrastats line that cannot be parsed (exit 4)
    ├── SamplerError      tegrastats started but died, or sent nothing usable (exit 1)
    ├── MonitorError      a board monitor with settings it cannot run, or started twice (exit 4)
    └── TritonMismatchError  the tritonserver found cannot run on this JetPack at all (exit 3)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_MISSING, OrinkitError


class JetsonError(OrinkitError):
    pass


class NotAJetsonError(JetsonError):
    exit_code = EXIT_MISSING

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(
            message,
            hint=hint or "run it on a Jetson with JetPack (L4T) installed",
        )


class TegrastatsError(JetsonError):
    """``line`` is the text that failed, ``reason`` what was wrong with it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, line: str, reason: str) -> None:
        shown = line if len(line) <= 80 else line[:77] + "..."
        super().__init__(f"malformed tegrastats line ({reason}): {shown!r}",
                         hint="pass the output of tegrastats (JetPack 5, 6 or 7), one sample per line")
        self.line = line
        self.reason = reason


class SamplerError(JetsonError):
    pass


class MonitorError(JetsonError):
    """A board monitor asked for what it cannot do: a bad interval or history, or a second start."""

    exit_code = EXIT_BAD_INPUT


class TritonMismatchError(JetsonError):
    """The tritonserver found is a build for another JetPack and cannot load on this one: the right one is missing."""

    exit_code = EXIT_MISSING

