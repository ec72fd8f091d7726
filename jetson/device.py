"""Every device fact in one place: :func:`device_info` reads them, :class:`DeviceInfo` holds them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from orinkit.jetson.board import identify_module, read_compatible, read_model
from orinkit.jetson.commands import Runner, runner_for
from orinkit.jetson.errors import NotAJetsonError
from orinkit.jetson.memory import Memory, read_memory
from orinkit.jetson.power import PowerMode, clocks_pinned, read_power_mode
from orinkit.jetson.release import find_l4t, jetpack_for
from orinkit.jetson.software import cuda_version, python_version, tensorrt_dla_cores, tensorrt_version
from orinkit.jetson.triton import TritonMatch, triton_release_for


@dataclass(frozen=True)
class DeviceInfo:
    """What a Jetson is and runs. Any fact that could not be read is None."""

    l4t: str
    l4t_source: str
    jetpack: str | None
    model: str | None
    module: str | None
    dla_cores: int | None
    dla_source: str | None  # "tensorrt" (the device's own count) or "board table"
    power_mode: PowerMode | None
    clocks_pinned: bool | None
    memory: Memory | None
    tensorrt: str | None
    cuda: str | None
    python: str | None
    triton: TritonMatch | None

    def to_dict(self) -> dict:
        return asdict(self)


def device_info(root: Path = Path("/"), run: Runner | None = None, *, use_tensorrt: bool | None = None) -> DeviceInfo:
    """Read the facts of the Jetson at ``root`` (``/`` for this machine, or a captured tree whose command
    outputs sit in ``root/commands``). Raises :class:`NotAJetsonError` when no L4T release is found there.

    ``use_tensorrt`` asks TensorRT for the DLA count; by default only for this machine, since the TensorRT that
    imports here says nothing about a captured tree.
    """
    run = run or runner_for(root)
    live = root.resolve() == Path("/")
    l4t = find_l4t(root, run)
    if l4t is None:
        where = "/etc/nv_tegra_release" if live else f"{root}/etc/nv_tegra_release"
        raise NotAJetsonError(f"not a Jetson (no {where} and no nvidia-l4t-core package)")
    memory = read_memory(root)
    model = read_model(root)
    module = identify_module(model, read_compatible(root), memory.total_kb if memory else None)
    dla_cores, dla_source = None, None
    ask_tensorrt = live if use_tensorrt is None else use_tensorrt
    if ask_tensorrt:
        dla_cores = tensorrt_dla_cores()
        dla_source = "tensorrt" if dla_cores is not None else None
    if dla_cores is None and module is not None and module.dla_cores is not None:
        dla_cores, dla_source = module.dla_cores, "board table"
    return DeviceInfo(
        l4t=l4t.version,
        l4t_source=l4t.source,
        jetpack=jetpack_for(l4t.version),
        model=model,
        module=module.name if module else None,
        dla_cores=dla_cores,
        dla_source=dla_source,
        power_mode=read_power_mode(run),
        clocks_pinned=clocks_pinned(root),
        memory=memory,
        tensorrt=tensorrt_version(root, run),
        cuda=cuda_version(root, run),
        python=python_version(root, run),
        triton=triton_release_for(l4t.version),
    )
