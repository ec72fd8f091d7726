"""Named points where a test can kill the process for real, to prove that an interruption there is harmless.

Set ``ORINKIT_FAILPOINT=<name>`` and the process sends itself SIGKILL on reaching that point: no cleanup,
no ``finally``, exactly like a power cut or an OOM kill. Unset, a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "ORINKIT_FAILPOINT"


def reach(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
