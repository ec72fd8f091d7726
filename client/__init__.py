"""The gRPC client users embed: ``Client(url, model)(*arrays)`` runs inference on a Triton server.

Importing it stays light: no torch, tensorrt, pycuda or onnxruntime; numpy and tritonclient come with ``Client``,
on first use of the name.
"""

from orinkit.client.errors import (
    ClientClosedError,
    ClientError,
    DeadlineExceededError,
    DecoupledModelError,
    InferenceFailedError,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotLoadedError,
    ModelNotReadyError,
    SequenceError,
    ServerUnavailableError,
    SharedMemoryError,
    SharedMemoryRegionLostError,
)
from orinkit.client.statistics import ModelStatistics, delta, model_statistics

__all__ = [
    "Client", "Retry", "ClientError", "ServerUnavailableError", "DeadlineExceededError", "ModelNotFoundError",
    "ModelNotReadyError", "ModelNotLoadedError", "InvalidInputError", "InferenceFailedError", "SharedMemoryError",
    "SharedMemoryRegionLostError",
    "ClientClosedError", "DecoupledModelError", "SequenceError", "ModelStatistics", "delta", "model_statistics",
]


def __getattr__(name: str):
    # Client brings numpy: the errors and the statistics (the device page reads them over Triton's HTTP API, in a
    # process that must stay small) need neither.
    if name in ("Client", "Retry"):
        from orinkit.client import client

        return getattr(client, name)
    raise AttributeError(f"module 'orinkit.client' has no attribute {name!r}")
