"""One sequence of a stateful model (Triton's sequence batcher): the requests that share a correlation id.

The first step carries the start flag, the step called with ``end=True`` the end flag. Triton takes no request
without inputs, so a sequence left without an explicit end is ended by sending its last step's inputs again with
the end flag (the answer is dropped); a model with side effects per step should be ended explicitly.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Sequence as Names

from orinkit.client.errors import ClientError, InvalidInputError, SequenceError

# The largest id each CORRID type holds (tritonclient sends numbers as uint64; 63 bits stay clear of signedness).
_LIMITS = {"INT32": 2**31 - 1, "UINT32": 2**32 - 1}
_DEFAULT_LIMIT = 2**63 - 1
# Counting on from a random start keeps the ids of one process distinct and those of two processes apart.
_counter = itertools.count(secrets.randbelow(2**62) + 1)
_counter_lock = threading.Lock()


def new_sequence_id(correlation_type: str | None) -> int | str:
    """A fresh correlation id of the model's CORRID type (a string for TYPE_STRING)."""
    with _counter_lock:
        number = next(_counter)
    if correlation_type == "STRING":
        return f"orinkit-{number:x}-{secrets.token_hex(4)}"
    limit = _LIMITS.get(correlation_type or "", _DEFAULT_LIMIT)
    return 1 + (number - 1) % limit


def check_sequence_id(sequence_id: int | str) -> int | str:
    # 0 and "" are tritonclient's "no sequence": the request would silently leave the sequence.
    if isinstance(sequence_id, bool) or not isinstance(sequence_id, (int, str)) or not sequence_id or (
            isinstance(sequence_id, int) and not 0 < sequence_id < 2**64):
        raise InvalidInputError(f"sequence id {sequence_id!r} is not usable", given=sequence_id,
                                hint="pass an int from 1 to 2**64-1, a non-empty str, or None for a fresh one")
    return sequence_id


class Sequence:
    """Steps of one sequence, each one sample (as ``Client.infer_sample``): ``seq(frame)``, then
    ``seq(frame, end=True)`` or ``seq.end(frame)`` for the last. A context manager: leaving the block ends a
    sequence no step ended (see the module's doc). Steps from several threads take turns, in call order."""

    def __init__(self, client, sequence_id: int | str) -> None:
        self.client = client
        self.id = sequence_id
        self.started = False
        self.ended = False
        self._last: tuple[tuple, dict] | None = None
        self._lock = threading.Lock()

    def __call__(self, *arrays, outputs: Names[str] | None = None, end: bool = False, **named):
        with self._lock:
            if self.ended:
                raise SequenceError(f"sequence {self.id!r} of '{self.client.model}' has ended",
                                    hint="start another with client.sequence()")
            result = self._step(arrays, named, outputs, end)
            self._last = (arrays, named)
            return result

    def end(self, *arrays, outputs: Names[str] | None = None, **named):
        """The last step: its request carries the end flag, and the server drops the sequence's state."""
        return self(*arrays, outputs=outputs, end=True, **named)

    def _step(self, arrays: tuple, named: dict, outputs, end: bool):
        start = not self.started
        flags = {"sequence_id": self.id, "sequence_start": start, "sequence_end": end}
        # The first step is retried like any call (starting again resets the state); a later step is not: if the
        # connection dropped after the server ran it, a retry would apply it twice.
        result = self.client._run(arrays, named, outputs, "sample", sequence=flags, attempts=None if start else 1)
        self.started = True
        self.ended = end
        return result

    def close(self) -> None:
        """End the sequence on the server unless a step did (or none started it)."""
        with self._lock:
            try:
                if self.started and not self.ended and self._last is not None:
                    arrays, named = self._last
                    self._step(arrays, named, [self.client.info.outputs[0].name], True)
            finally:
                self.ended = True

    def __enter__(self) -> Sequence:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except ClientError:  # the block's own error is the one to see; the server drops the sequence when idle
            pass

    def __repr__(self) -> str:
        state = "ended" if self.ended else "started" if self.started else "new"
        return f"Sequence({self.id!r}, model={self.client.model!r}, {state})"
