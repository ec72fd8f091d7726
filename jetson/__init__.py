"""Facts about the Jetson this runs on (L4T/JetPack release, board, power mode, memory, tegrastats).

>>> from orinkit.jetson import device_info, warnings_for
>>> info = device_info()  # doctest: +SKIP
>>> warnings_for(info, triton_version="2.49.0-igpu")  # doctest: +SKIP

Everything here is standard library only (TensorRT is imported lazily, for its DLA count); the tritonserver
locator lives in :mod:`orinkit.server`.
"""

from orinkit.jetson.checks import warnings_for
from orinkit.jetson.device import DeviceInfo, device_info
from orinkit.jetson.errors import JetsonError, MonitorError, NotAJetsonError, SamplerError, TegrastatsError
from orinkit.jetson.monitor import BoardMonitor
from orinkit.jetson.release import find_l4t, jetpack_for, l4t_release, parse_nv_tegra_release
from orinkit.jetson.sampler import PowerSummary, TegrastatsSampler
from orinkit.jetson.tegrastats import Sample, parse_line, parse_lines
from orinkit.jetson.triton import TritonMatch, triton_mismatch, triton_release_for

__all__ = [
    "DeviceInfo",
    "device_info",
    "warnings_for",
    "JetsonError",
    "NotAJetsonError",
    "SamplerError",
    "TegrastatsError",
    "find_l4t",
    "jetpack_for",
    "l4t_release",
    "parse_nv_tegra_release",
    "PowerSummary",
    "TegrastatsSampler",
    "Sample",
    "parse_line",
    "parse_lines",
    "TritonMatch",
    "triton_mismatch",
    "triton_release_for",
    "BoardMonitor",
    "MonitorError",
]
