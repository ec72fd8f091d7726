"""The last few try results, kept so that the page can download each output as .npy after showing the answer.

A small LRU: each result holds its output tensors (a segmentation map can be megabytes), and the board has little
memory to spare beside the models.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict

from orinkit.ui.errors import RequestError


class TryResults:
    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        self._results: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, result) -> str:
        """Keep ``result`` (a TryResult); its id, unguessable so that one page cannot fetch another's results."""
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._results[key] = result
            while len(self._results) > self.capacity:
                self._results.popitem(last=False)
        return key

    def npy(self, key: str, output: str) -> bytes:
        with self._lock:
            result = self._results.get(key)
            if result is not None:
                self._results.move_to_end(key)
        if result is None:
            raise RequestError(404, f"no try result '{key[:40]}' (only the last {self.capacity} are kept)",
                               hint="run the model again")
        names = [o["name"] for o in result.to_json()["outputs"]]
        if output not in names:
            raise RequestError(404, f"the result has no output '{output[:80]}'",
                               hint=f"its outputs: {', '.join(names)}")
        return result.npy(output)

    def __len__(self) -> int:
        return len(self._results)
