"""System shared memory for a client: one input and one output region, registered once and reused.

Large tensors then skip gRPC's protobuf copy. Regions are created from the model's largest shapes, grown
(re-registered) if an input with dynamic dims needs more, and unregistered and destroyed on close.
"""

from __future__ import annotations

import os
import uuid

import numpy as np

from orinkit.client.errors import SharedMemoryError
from orinkit.client.model import ModelInfo
from orinkit.formats.tensors import TensorSpec

ALIGN = 64


def _aligned(size: int) -> int:
    return (size + ALIGN - 1) // ALIGN * ALIGN


def max_bytes(tensor: TensorSpec, max_batch_size: int) -> int | None:
    """Bytes of the tensor's largest shape, or None when a dim is dynamic or the type has no fixed size."""
    if tensor.dtype == "BYTES" or any(d < 0 for d in tensor.dims):
        return None
    count = int(np.prod(tensor.dims or (1,))) * max(1, max_batch_size)
    return count * np.dtype(tensor.numpy_dtype).itemsize


class Region:
    def __init__(self, client, tag: str) -> None:
        self._client = client
        self.name = f"orinkit_{os.getpid()}_{uuid.uuid4().hex[:12]}_{tag}"
        self.key = f"/{self.name}"
        self.size = 0
        self.handle = None

    def ensure(self, size: int) -> None:
        if size <= self.size:
            return
        import tritonclient.utils.shared_memory as shm

        self.release()
        size = _aligned(max(size, 1))
        try:
            self.handle = shm.create_shared_memory_region(self.name, self.key, size)
            self.size = size
            self._client.register_system_shared_memory(self.name, self.key, size)
        except Exception as exc:
            self.release()
            raise SharedMemoryError(f"cannot set up shared memory region {self.name} ({size} bytes): {exc}",
                                    hint="start tritonserver with --allow-client-shm=true (Triton 2.69+); on the "
                                         "same host only; or use shared_memory=None") from exc

    def register_again(self) -> None:
        """Tell a restarted server about this region again (it forgets every registration)."""
        if self.handle is None:
            return
        try:
            self._client.unregister_system_shared_memory(self.name)
        except Exception:  # noqa: BLE001 - the server may not know it: that is why it is registered again
            pass
        try:
            self._client.register_system_shared_memory(self.name, self.key, self.size)
        except Exception as exc:  # noqa: BLE001 - tritonclient raises its one exception type, or gRPC's
            raise SharedMemoryError(f"cannot register shared memory region {self.name} again: {exc}",
                                    hint="is the server on the same host, and does it allow client shared "
                                         "memory (--allow-client-shm=true from Triton 2.69)?") from exc

    def release(self) -> None:
        import tritonclient.utils.shared_memory as shm

        if self.handle is None:
            return
        try:
            self._client.unregister_system_shared_memory(self.name)
        except Exception:  # the server may be gone; the local region must still be destroyed
            pass
        try:
            shm.destroy_shared_memory_region(self.handle)
        finally:
            self.handle, self.size = None, 0


class SharedMemoryIO:
    """Puts inputs into the input region and asks for outputs into the output region."""

    def __init__(self, client, info: ModelInfo) -> None:
        self.info = info
        self.inputs = Region(client, "in")
        self.outputs = Region(client, "out")
        self.output_slots: dict[str, tuple[int, int]] = {}
        offset = 0
        for tensor in info.outputs:
            size = max_bytes(tensor, info.max_batch_size)
            if size is not None:
                self.output_slots[tensor.name] = (offset, size)
                offset += _aligned(size)
        try:
            initial = sum(_aligned(s) for s in (max_bytes(t, info.max_batch_size) for t in info.inputs) if s)
            self.inputs.ensure(initial or ALIGN)
            self.outputs.ensure(offset or ALIGN)
        except BaseException:
            self.close()
            raise

    def bind_inputs(self, arrays: dict[str, np.ndarray], grpc_inputs: dict) -> None:
        import tritonclient.utils.shared_memory as shm

        numeric = {n: a for n, a in arrays.items() if a.dtype != np.object_}
        needed = sum(_aligned(a.nbytes) for a in numeric.values())
        self.inputs.ensure(needed)
        offset = 0
        for name, array in numeric.items():
            shm.set_shared_memory_region(self.inputs.handle, [array], offset=offset)
            grpc_inputs[name].set_shared_memory(self.inputs.name, array.nbytes, offset=offset)
            offset += _aligned(array.nbytes)

    def bind_output(self, requested, name: str) -> bool:
        slot = self.output_slots.get(name)
        if slot is None:
            return False
        requested.set_shared_memory(self.outputs.name, slot[1], offset=slot[0])
        return True

    def read_output(self, result, name: str) -> np.ndarray:
        import tritonclient.utils.shared_memory as shm

        output = result.get_output(name)
        tensor = next(t for t in self.info.outputs if t.name == name)
        return shm.get_contents_as_numpy(self.outputs.handle, tensor.numpy_dtype, list(output.shape),
                                         offset=self.output_slots[name][0]).copy()

    def register_again(self) -> None:
        self.inputs.register_again()
        self.outputs.register_again()

    def close(self) -> None:
        self.inputs.release()
        self.outputs.release()
