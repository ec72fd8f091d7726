"""What the page learns of a model from the task kits (``orinkit.core.kits``): the models table's few words and
the try panel's answer for a task the generic reading does not know (a detector's boxes).

The page never imports a task's package: it builds the model's ``ModelInfo`` from the config JSON it already read
and asks :func:`orinkit.core.kits.kit_for`, so a new task is a new kit, not an edit here.

Importing this module stays light; the first call brings numpy (``ModelInfo`` and the kits need it).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

# The models panel asks about every READY model at every poll: a config seen before is not read again.
_KEEP = 64
_cache: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
_lock = threading.Lock()


def kit_and_info(config: Mapping, version: str = ""):
    """``(kit, info)`` for the model whose config (Triton's JSON) is ``config``; kit None when none recognizes it."""
    key = json.dumps(config, sort_keys=True, default=str) + "\0" + (version or "")
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    from orinkit.client.model import ModelInfo
    from orinkit.core.kits import kit_for

    info = ModelInfo.from_config(config, version or "")
    found = (kit_for(info), info)
    with _lock:
        _cache[key] = found
        while len(_cache) > _KEEP:
            _cache.popitem(last=False)
    return found


def describe(config: Mapping, version: str = "") -> str | None:
    """The kit's words for the model ("detector, 3 classes"), or None when no kit recognizes it."""
    kit, info = kit_and_info(config, version)
    return None if kit is None else str(kit.describe(info))


def tryout(config: Mapping, outputs: Mapping[str, Any], image_size: tuple[int, int], notes: list[str],
           version: str = "") -> tuple[str, dict] | None:
    """``(kind, answer)`` from the kit that recognizes the model, when it reads these outputs; else None (the
    page's generic reading answers). The answer is made JSON-ready here: NaN and infinities become null."""
    kit, info = kit_and_info(config, version)
    if kit is None:
        return None
    answer = kit.tryout(info, outputs, (int(image_size[0]), int(image_size[1])))
    if answer is None:
        return None
    replaced = [0]
    answer = _json_ready(dict(answer), replaced)
    notes.append(f"read by the '{kit.name}' task kit ({kit.describe(info)})")
    if replaced[0]:
        notes.append(f"{replaced[0]} value(s) that were NaN or infinite are shown as null")
    return str(answer.get("kind") or kit.name), answer


def _json_ready(value, replaced: list[int]):
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v, replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v, replaced) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _json_ready(value.tolist(), replaced)
    if isinstance(value, float) and not math.isfinite(value):
        replaced[0] += 1
        return None
    return value
