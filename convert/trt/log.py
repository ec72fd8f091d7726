"""A TensorRT logger that keeps the messages, so that a failed build can say why and be told apart from OOM."""

from __future__ import annotations

from types import ModuleType


def capturing_logger(trt: ModuleType, *, echo=None):
    """An ``ILogger`` whose ``messages`` lists ``(severity name, text)`` of warnings and errors.

    ``echo(text)``, when given, also receives each kept message as it arrives. VERBOSE and INFO messages are
    dropped: a build emits thousands of them and none decides anything here.
    """
    return _logger_class(trt)(echo)


def _logger_class(trt: ModuleType) -> type:
    severity = trt.ILogger.Severity
    kept = {severity.INTERNAL_ERROR: "INTERNAL_ERROR", severity.ERROR: "ERROR", severity.WARNING: "WARNING"}

    class CapturingLogger(trt.ILogger):
        def __init__(self, echo) -> None:
            # pybind11 raises TypeError later when an overriding __init__ skips the base one.
            trt.ILogger.__init__(self)
            self.messages: list[tuple[str, str]] = []
            self._echo = echo

        def log(self, severity, msg) -> None:
            name = kept.get(severity)
            if name is None:
                return
            self.messages.append((name, str(msg)))
            if self._echo is not None:
                self._echo(f"[{name}] {msg}")

        def errors(self) -> list[str]:
            return [text for name, text in self.messages if name != "WARNING"]

        def clear(self) -> None:
            self.messages.clear()

    return CapturingLogger
