"""A Triton message as one line, the cause first: for errors shown to a person, reports, logs and notes.

Triton passes a Python model's exception on as the backend formats it: ``Internal: ValueError: ...`` after its own
words (``load failed for model 'm': version 3 is at UNAVAILABLE state: ``), then a blank line, ``At:`` and one line
per stack frame. A ring's note, a device report's reason and a journal line must each stay one line, and what a
person needs first is the exception, not Triton's preamble. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import re
from pathlib import PurePath

_FRAME = re.compile(r"^\s+(?P<file>.+?)\((?P<line>\d+)\): (?P<function>\S.*)$")
# An exception as Python prints it: "ValueError: ", "pb_utils.TritonModelException: ", "MyError: ".
_EXCEPTION = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning): ")
# Triton's status name, or the client's "message:", right before the backend's own text: where Triton's words end.
_GLUE = re.compile(r"[\s:,]*\b(?:Internal|Unknown|Invalid argument|Not found|Unavailable|Unsupported|"
                   r"Failed precondition|message)[\s:,]*$")
LIMIT = 400  # a report's reason, not a log file: a numpy array printed into an exception can be megabytes


def one_line(text: str, limit: int = LIMIT) -> str:
    """``text`` without its stack (the innermost frame kept as "raised in F at FILE:LINE"), on one line, the
    exception first and Triton's words after it in parentheses; clipped to ``limit`` characters."""
    parts: list[str] = []
    frame = None
    in_stack = False
    for raw in str(text).splitlines():
        line = raw.strip()
        if line == "At:":
            in_stack = True
            continue
        if in_stack:
            match = _FRAME.match(raw)
            if match:
                frame = frame or match  # Triton lists the innermost frame first: where it was raised
                continue
            in_stack = False
        if line == ";":  # Triton's separator between versions that failed
            if parts and not parts[-1].endswith(";"):
                parts[-1] += ";"
        elif line:
            parts.append(line)
    flat = " ".join(parts).strip().rstrip(";").strip()
    raised = f"raised in {frame['function']} at {PurePath(frame['file']).name}:{frame['line']}" if frame else ""
    exception = _EXCEPTION.search(flat)
    glue = _GLUE.search(flat, 0, exception.start()) if exception else None
    if glue is None:  # not Triton's wording around an exception (or a line made by this function): kept in order
        return _clip(f"{flat} ({raised})" if raised else flat, limit)
    context = [c for c in (raised, flat[:glue.start()]) if c]
    cause = flat[exception.start():]
    return _clip(f"{cause} ({'; '.join(context)})" if context else cause, limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


__all__ = ["one_line"]
