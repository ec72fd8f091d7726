"""The root of orinkit's exception tree and the exit codes its commands end with.

Every package area (server, repo, convert, client, jetson, systemd) has one base class deriving from
:class:`OrinkitError` and specific subclasses below it. A command-line tool exits with the ``exit_code`` of the
error that ended it, so scripts can tell a missing dependency from bad input from a busy port:

====  ===========================================================
code  meaning
====  ===========================================================
1     any other orinkit error
2     wrong command-line usage (click's own code)
3     something that must be installed is missing
4     bad input: a path, file or option value that cannot be used
5     a resource is busy (a port already in use)
6     a server, an engine or a native library failed at run time
7     the FP16 accuracy gate failed
8     a TensorRT plan is stale for this device and cannot be rebuilt
9     a measurement cannot be trusted or met its goal nowhere (edge-tune: no configuration within the budgets)
130   stopped by SIGINT or SIGTERM (after cleaning up)
====  ===========================================================

Every code is defined here; packages only pick one for their error classes.
"""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_MISSING = 3
EXIT_BAD_INPUT = 4
EXIT_BUSY = 5
EXIT_SERVER = 6
EXIT_RUNTIME = EXIT_SERVER  # engine and native-library failures share the server's code: the run failed
EXIT_ACCURACY = 7
EXIT_STALE = 8
EXIT_BUDGET = 9
EXIT_INTERRUPTED = 130  # the shell's code for a command stopped by SIGINT


class OrinkitError(Exception):
    """Base of every error orinkit raises on purpose.

    ``message`` says what went wrong, ``hint`` how to fix it; ``str()`` gives both on one line.
    """

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message

    def __reduce__(self):
        # Subclasses take other constructor arguments: rebuild from the state, so errors cross process borders.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls, args, state):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class MissingExtraError(OrinkitError, ImportError):
    """An optional dependency is not installed; the message names the extra (or JetPack package) to install."""

    exit_code = EXIT_MISSING

    def __init__(self, module: str, *, hint: str) -> None:
        super().__init__(f"the Python package '{module}' is not installed", hint=hint)
        self.module = module


class BrokenDependencyError(OrinkitError, ImportError):
    """An optional dependency is installed but fails to import (a missing shared library, a version clash)."""

    exit_code = EXIT_MISSING

    def __init__(self, module: str, cause: BaseException) -> None:
        super().__init__(
            f"the Python package '{module}' is installed but fails to import: {cause}",
            hint=f"reinstall '{module}' or fix the library it names",
        )
        self.module = module


class ChildCrashedError(OrinkitError):
    """A child process running a native library (onnxruntime, onnxsim) died: a segfault, an abort, a kill.

    Raised by :mod:`orinkit.core.isolation`; each package turns it into an error of its own tree."""

    def __init__(self, what: str, how: str, tail: str = "") -> None:
        last = tail.strip().splitlines()[-1][:200] if tail.strip() else ""
        super().__init__(f"{what} crashed ({how}{': ' + last if last else ''})")
        self.what, self.how, self.tail = what, how, tail
