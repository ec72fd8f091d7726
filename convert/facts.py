"""What a TensorRT plan is tied to on this machine: TensorRT version, GPU model and compute capability, L4T."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from orinkit.jetson.release import jetpack_for, l4t_release
from orinkit.jetson.software import tensorrt_module_version


@dataclass(frozen=True)
class DeviceFacts:
    tensorrt_version: str | None
    gpu_name: str | None
    compute_capability: str | None
    l4t: str | None
    jetpack: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def _gpu() -> tuple[str | None, str | None]:
    try:
        import pycuda.driver as cuda

        cuda.init()
        device = cuda.Device(0)
        major, minor = device.compute_capability()
        return str(device.name()), f"{major}.{minor}"
    except Exception:  # no pycuda, no driver, no GPU: each raises its own type
        return None, None


def current_facts() -> DeviceFacts:
    gpu, capability = _gpu()
    l4t = l4t_release()
    return DeviceFacts(tensorrt_module_version(), gpu, capability, l4t, jetpack_for(l4t))
