"""What one call sends, worked out once per input signature (:class:`Plan`), and request sizes as text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.client.model import ModelInfo


@dataclass(frozen=True)
class Plan:
    """What a call with a known input signature sends: the checks' answer (``single``: add and drop the batch
    axis), the inputs' names and types, and the requested outputs (read only by infer(): shared by threads)."""

    single: bool
    names: tuple[str, ...]
    datatypes: tuple[str, ...]
    wanted: tuple[str, ...]
    requested: list
    input_class: type
    server_exception: type

    @classmethod
    def of(cls, info: ModelInfo, single: bool, wanted: Sequence[str]) -> Plan:
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        return cls(single, tuple(t.name for t in info.inputs), tuple(t.dtype for t in info.inputs), tuple(wanted),
                   [grpcclient.InferRequestedOutput(name) for name in wanted], grpcclient.InferInput,
                   InferenceServerException)


def size_text(count: int) -> str:
    """``count`` bytes in the largest unit it fills (bytes, KiB, MiB, GiB), to one decimal, dropping ".0"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


def sizes(given: int, limit: int) -> tuple[str, str]:
    """Both sizes as text that tells them apart: in bytes where rounding would make them read the same."""
    texts = size_text(given), size_text(limit)
    if texts[0] == texts[1]:
        return f"{given:,} bytes", f"{limit:,} bytes"
    return texts


def grpc_inputs(info: ModelInfo, prepared: dict[str, np.ndarray]) -> dict:
    import tritonclient.grpc as grpcclient

    return {t.name: grpcclient.InferInput(t.name, list(prepared[t.name].shape), t.dtype) for t in info.inputs}
