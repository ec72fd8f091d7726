"""The gRPC client users embed: ``Client(url, model)(*arrays)`` runs inference on a Triton server.

Importing it stays light: no torch, tensorrt, pycuda or onnxruntime.
"""

from orinkit.client.client import Client, Retry
from orinkit.client.errors import (
    ClientClosedError,
    ClientError,
    DeadlineExceededError,
    InferenceFailedError,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotReadyError,
    ServerUnavailableError,
    SharedMemoryError,
    SharedMemoryRegionLostError,
)

__all__ = [
    "Client", "Retry", "ClientError", "ServerUnavailableError", "DeadlineExceededError", "ModelNotFoundError",
    "ModelNotReadyError", "InvalidInputError", "InferenceFailedError", "SharedMemoryError",
    "SharedMemoryRegionLostError",
    "ClientClosedError",
]
