"""Device facts read from captured Jetson trees (tests/data/jetson, see SOURCES.md), and this machine's own answer."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from fake_tensorrt import make_fake_tensorrt

from orinkit.jetson import NotAJetsonError, device_info, warnings_for
from orinkit.jetson.board import identify_module, read_compatible, read_model
from orinkit.jetson.commands import Command, captured_runner, run_command, runner_for
from orinkit.jetson.memory import parse_meminfo, read_memory
from orinkit.jetson.power import clocks_pinned, parse_nvpmodel_query, read_power_mode
from orinkit.jetson.release import find_l4t, jetpack_for, parse_l4t_core_version
from orinkit.jetson.software import cuda_version, python_version, tensorrt_dla_cores, tensorrt_version
from orinkit.jetson.triton import triton_mismatch, triton_release_for, triton_version_at

DATA = Path(__file__).resolve().parent / "data" / "jetson"
JP5_RELEASE = ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
               "DATE: Tue Aug  1 19:57:35 UTC 2023\n")

# What each captured board says, fact by fact.
BOARDS = {
    "agx_orin": dict(
        l4t="36.4.3", jetpack="6.2", model="NVIDIA Jetson AGX Orin Developer Kit", module="Jetson AGX Orin",
        dla_cores=2, mode=("MAXN", 0), total_kb=64349184, available_kb=58720256, swap_kb=32174080,
        tensorrt="10.3.0.30", cuda=None, python="3.10.12",
    ),
    "orin_nx": dict(
        l4t="36.4.4", jetpack="6.2.1", model="NVIDIA Jetson Orin NX Engineering Reference Developer Kit",
        module="Jetson Orin NX 8GB", dla_cores=1, mode=("MAXN_SUPER", 2), total_kb=7802748, available_kb=1572864,
        swap_kb=3901360, tensorrt=None, cuda=None, python=None,
    ),
    "orin_nano": dict(
        l4t="36.4.3", jetpack="6.2", model="NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
        module="Jetson Orin Nano 8GB", dla_cores=0, mode=("MAXN_SUPER", 2), total_kb=7802736, available_kb=6245596,
        swap_kb=3901344, tensorrt=None, cuda="12.6.68", python=None,
    ),
}


def copy_board(tmp_path: Path, board: str) -> Path:
    root = tmp_path / board
    shutil.copytree(DATA / board, root)
    return root


def pin_clocks(root: Path, *, cpu_min: int = 1728000, gpu_min: int = 1020000000, offline_min: int = 729600) -> None:
    """A sysfs tree as jetson_clocks leaves it (min == max) or not (min at the lowest step)."""
    for index, online in ((0, None), (1, "1"), (2, "0")):
        cpu = root / f"sys/devices/system/cpu/cpu{index}"
        (cpu / "cpufreq").mkdir(parents=True)
        if online is not None:
            (cpu / "online").write_text(online + "\n")
        (cpu / "cpufreq/scaling_min_freq").write_text(f"{offline_min if online == '0' else cpu_min}\n")
        (cpu / "cpufreq/scaling_max_freq").write_text("1728000\n")
    gpu = root / "sys/class/devfreq/17000000.gpu"
    gpu.mkdir(parents=True)
    (gpu / "min_freq").write_text(f"{gpu_min}\n")
    (gpu / "max_freq").write_text("1020000000\n")


# ---- every fact of every board ----------------------------------------------------------------------------


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_every_fact_of_each_board(board):
    expected = BOARDS[board]
    info = device_info(DATA / board)
    assert (info.l4t, info.l4t_source, info.jetpack) == (expected["l4t"], "/etc/nv_tegra_release", expected["jetpack"])
    assert info.model == expected["model"]
    assert info.module == expected["module"]
    assert (info.dla_cores, info.dla_source) == (expected["dla_cores"], "board table")
    assert (info.power_mode.name, info.power_mode.id) == expected["mode"]
    assert info.power_mode.is_maxn
    assert info.clocks_pinned is None  # the captures hold no sysfs
    assert info.memory.total_kb == expected["total_kb"]
    assert info.memory.available_kb == expected["available_kb"]
    assert info.memory.swap_total_kb == expected["swap_kb"]
    assert info.memory.nvmap_used_kb is None  # JetPack 6 kernels do not report it
    assert (info.tensorrt, info.cuda, info.python) == (expected["tensorrt"], expected["cuda"], expected["python"])
    assert info.triton.release == "2.49.0-igpu"
    as_json = json.loads(json.dumps(info.to_dict()))
    assert as_json["power_mode"] == {"name": expected["mode"][0], "id": expected["mode"][1]}


def test_device_tree_strings_end_in_nul_and_are_read_without_it():
    assert (DATA / "agx_orin/proc/device-tree/model").read_bytes().endswith(b"\x00")
    assert read_model(DATA / "agx_orin") == "NVIDIA Jetson AGX Orin Developer Kit"
    assert read_compatible(DATA / "orin_nano") == (
        "nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005", "nvidia,tegra234")
    assert read_model(DATA / "nowhere") is None and read_compatible(DATA / "agx_orin") == ()


def test_the_module_comes_from_the_part_number_then_from_the_name_and_memory():
    assert identify_module(None, ("nvidia,p3737-0000+p3701-0005", "nvidia,tegra234")).name == "Jetson AGX Orin 64GB"
    assert identify_module(None, ("nvidia,p3767-0001",)).dla_cores == 1
    assert identify_module(None, ("nvidia,p3767-0000",)).dla_cores == 2
    nx = "NVIDIA Jetson Orin NX Engineering Reference Developer Kit"
    assert identify_module(nx, (), 15_992_000).name == "Jetson Orin NX 16GB"
    assert identify_module(nx, (), 15_992_000).dla_cores == 2
    assert identify_module(nx, (), 7_802_748).dla_cores == 1
    assert identify_module(nx).dla_cores is None  # no memory, no telling 8GB from 16GB
    assert identify_module("NVIDIA Jetson Orin Nano Developer Kit").dla_cores == 0
    assert identify_module("NVIDIA Jetson Xavier NX Developer Kit") is None and identify_module(None) is None


def test_dla_count_comes_from_tensorrt_when_it_imports(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("10.3.0", dla_cores=2))
    info = device_info(DATA / "orin_nx", use_tensorrt=True)
    assert (info.dla_cores, info.dla_source) == (2, "tensorrt")  # the device's count beats the 8GB table entry
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # makes `import tensorrt` fail
    assert tensorrt_dla_cores() is None
    assert device_info(DATA / "orin_nx", use_tensorrt=True).dla_source == "board table"


# ---- L4T release and JetPack ------------------------------------------------------------------------------


def test_l4t_falls_back_to_the_l4t_core_package(tmp_path):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands/dpkg-l4t-core.txt").write_text("36.4.7-20250918154033")
    release = find_l4t(tmp_path)
    assert (release.version, release.source) == ("36.4.7", "nvidia-l4t-core package")
    assert release.major_minor == (36, 4)
    assert find_l4t(tmp_path, run=lambda command: None) is None
    info = device_info(tmp_path)
    assert (info.l4t, info.jetpack, info.model, info.memory, info.power_mode) == ("36.4.7", "6.2.1", None, None, None)


def test_l4t_core_versions_as_dpkg_prints_them():
    assert parse_l4t_core_version("36.4.7-20250918154033") == "36.4.7"
    assert parse_l4t_core_version("nvidia-l4t-core 36.4.4-20250616085344\n") == "36.4.4"
    assert parse_l4t_core_version("nvidia-l4t-core\t38.4.0-20251230160601") == "38.4.0"
    assert parse_l4t_core_version("dpkg-query: no packages found matching nvidia-l4t-core") is None


def test_release_file_wins_over_the_package(tmp_path):
    root = copy_board(tmp_path, "orin_nano")
    (root / "commands/dpkg-l4t-core.txt").write_text("36.4.7-20250918154033")
    assert find_l4t(root).version == "36.4.3"
    (root / "etc/nv_tegra_release").write_text(JP5_RELEASE)
    assert (find_l4t(root).version, jetpack_for("35.4.1")) == ("35.4.1", "5.1.2")


def test_jetpack_of_later_releases():
    assert jetpack_for("36.5.0") == "6.2.2" and jetpack_for("39.2.0") == "7.2" and jetpack_for("38.4.0") == "7.1"
    assert jetpack_for("36.4.3") == "6.2" and jetpack_for("34.1.0") is None


# jetson_stats' jetson_variables.py and jetson-containers' l4t_version.py agree on these rows.
@pytest.mark.parametrize("l4t,jetpack", [
    ("35.6.0", "5.1.4"), ("35.6.1", "5.1.5"), ("35.6.2", "5.1.5"), ("35.6.4", "5.1.6"),
    ("35.6.9", "5.1.4/5.1.5/5.1.6"),  # an unlisted patch names every JetPack of its minor release
    ("36.4.4", "6.2.1"), ("36.4.7", "6.2.1"), ("36.4.0", "6.1"), ("36.4.3", "6.2"), ("36.4.1", "6.1/6.2"),
    # JetPack 7.2 is R39.2.0, 7.2.1 R39.2.1 (OE4T/meta-tegra #2224, #2339); a later patch keeps the minor's name.
    ("39.2.0", "7.2"), ("39.2.1", "7.2.1"), ("39.2.3", "7.2"), ("39.0.0", None),
])
def test_jetpack_of_patch_releases(l4t, jetpack):
    assert jetpack_for(l4t) == jetpack


# ---- power mode and clocks --------------------------------------------------------------------------------


def test_nvpmodel_query_outputs():
    assert parse_nvpmodel_query("NV Power Mode: MAXN\n0\n").id == 0
    warned = parse_nvpmodel_query("NVPM WARN: fan mode is not set!\nNV Power Mode: MAXN\n0\n")
    assert (warned.name, warned.id) == ("MAXN", 0)
    verbose = parse_nvpmodel_query("NVPM VERB: Config file: /etc/nvpmodel.conf\n"
                                   "NVPM VERB: Current mode: NV Power Mode: MAXN_SUPER\n2\n"
                                   "NVPM VERB: PARAM CPU_ONLINE: ARG CORE_0: PATH "
                                   "/sys/devices/system/cpu/cpu0/online\n")
    assert (verbose.name, verbose.id, verbose.is_maxn) == ("MAXN_SUPER", 2, True)
    low = parse_nvpmodel_query("NV Power Mode: 15W\n0\n")
    assert (low.name, low.id, low.is_maxn) == ("15W", 0, False)
    assert parse_nvpmodel_query("NV Power Mode: 25W\n").id is None
    assert parse_nvpmodel_query("nvpmodel: command not found") is None
    assert read_power_mode(lambda command: None) is None
    assert read_power_mode(captured_runner(DATA / "orin_nano/commands")).name == "MAXN_SUPER"


def test_clocks_pinned_from_sysfs(tmp_path):
    assert clocks_pinned(tmp_path) is None
    pinned = tmp_path / "pinned"
    pin_clocks(pinned, offline_min=729600)  # an offline core keeps its old minimum and does not count
    assert clocks_pinned(pinned) is True
    scaling = tmp_path / "scaling"
    pin_clocks(scaling, cpu_min=729600)
    assert clocks_pinned(scaling) is False
    gpu_free = tmp_path / "gpu"
    pin_clocks(gpu_free, gpu_min=306000000)
    assert clocks_pinned(gpu_free) is False


def test_device_info_reports_pinned_clocks(tmp_path):
    root = copy_board(tmp_path, "orin_nano")
    pin_clocks(root)
    assert device_info(root).clocks_pinned is True


# ---- memory -----------------------------------------------------------------------------------------------


def test_meminfo():
    memory = read_memory(DATA / "orin_nano")
    assert (memory.total_kb, memory.available_kb, memory.swap_total_kb) == (7802736, 6245596, 3901344)
    assert memory.is_8gb_or_less and not read_memory(DATA / "agx_orin").is_8gb_or_less
    older = parse_meminfo("MemTotal:        7802736 kB\nSwapTotal:             0 kB\nNvMapMemFree:      94784 kB\n"
                          "NvMapMemUsed:     805068 kB\n")
    assert (older.nvmap_used_kb, older.available_kb, older.swap_total_kb) == (805068, None, 0)
    assert parse_meminfo("Architecture: aarch64\n") is None and read_memory(DATA / "nowhere") is None


# ---- TensorRT, CUDA, Python -------------------------------------------------------------------------------


def _write(root: Path, relative: str, text: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text)


def test_tensorrt_version_from_the_header_then_dpkg(tmp_path):
    header = "usr/include/aarch64-linux-gnu/NvInferVersion.h"
    _write(tmp_path / "trt8", header, "#define NV_TENSORRT_MAJOR 8 //!< TensorRT major version.\n"
                                      "#define NV_TENSORRT_MINOR 6 //!< TensorRT minor version.\n"
                                      "#define NV_TENSORRT_PATCH 1 //!< TensorRT patch version.\n"
                                      "#define NV_TENSORRT_BUILD 5 //!< TensorRT build number.\n")
    assert tensorrt_version(tmp_path / "trt8") == "8.6.1.5"
    _write(tmp_path / "trt10", header, "#define TRT_MAJOR_ENTERPRISE 10\n#define TRT_MINOR_ENTERPRISE 14\n"
                                       "#define TRT_PATCH_ENTERPRISE 1\n#define TRT_BUILD_ENTERPRISE 48\n"
                                       "#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE //!< TensorRT major version.\n"
                                       "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE //!< TensorRT minor version.\n"
                                       "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE //!< TensorRT patch version.\n"
                                       "#define NV_TENSORRT_BUILD TRT_BUILD_ENTERPRISE //!< TensorRT build number.\n")
    assert tensorrt_version(tmp_path / "trt10") == "10.14.1.48"
    assert tensorrt_version(DATA / "agx_orin", captured_runner(DATA / "agx_orin/commands")) == "10.3.0.30"
    only_lib = "libnvinfer8 8.5.2-1+cuda11.4\nlibnvinfer-bin \n"
    assert tensorrt_version(tmp_path, lambda command: only_lib) == "8.5.2"
    assert tensorrt_version(tmp_path, lambda command: None) is None


def test_cuda_version_from_version_json_txt_nvcc_then_dpkg(tmp_path):
    _write(tmp_path / "json", "usr/local/cuda/version.json",
           '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "12.2.140"\n   }\n}\n')
    assert cuda_version(tmp_path / "json") == "12.2.140"
    _write(tmp_path / "txt", "usr/local/cuda/version.txt", "CUDA Version 10.2.89\n")
    assert cuda_version(tmp_path / "txt") == "10.2.89"
    assert cuda_version(DATA / "orin_nano", captured_runner(DATA / "orin_nano/commands")) == "12.6.68"
    deb = {"nvcc": None, "dpkg-cuda": "cuda-cudart-12-6 12.6.68-1\ncuda-cudart-dev-12-6 \n"}
    assert cuda_version(tmp_path, lambda command: deb[command.name]) == "12.6.68"
    assert cuda_version(tmp_path) is None and cuda_version(tmp_path, lambda command: None) is None


def test_python_version():
    assert python_version(DATA / "agx_orin", captured_runner(DATA / "agx_orin/commands")) == "3.10.12"
    assert python_version(DATA / "orin_nx", captured_runner(DATA / "orin_nx/commands")) is None


# ---- Triton for the JetPack --------------------------------------------------------------------------------


def test_triton_release_for_each_jetpack():
    assert triton_release_for("35.1.0").release == "2.27.0"
    assert triton_release_for("35.2.1").release == "2.34.0-jetpack5.1"
    assert triton_release_for("35.4.1").release == "2.35.0-jetpack5.1.2"
    for l4t, release in (("36.2.0", "2.42.0-igpu"), ("36.3.0", "2.42.0-igpu"), ("36.4.3", "2.49.0-igpu"),
                         ("36.5.0", "2.49.0-igpu")):
        assert triton_release_for(l4t).release == release
    assert triton_release_for("38.2.0").release is None
    assert triton_release_for("39.2.0").release == "aarch64 (SBSA) release"
    assert triton_release_for("32.7.1") is None and triton_release_for(None) is None


@pytest.mark.parametrize("l4t, version, problem", [
    ("35.4.1", "2.35.0-jetpack5.1.2", None),
    ("35.4.1", "2.27.0", "use 2.35.0-jetpack5.1.2"),
    ("35.1.0", "2.27.0", None),
    ("35.2.1", "2.34.0-jetpack5.1", None),
    ("35.2.1", "2.35.0-jetpack5.1.2", "use 2.34.0-jetpack5.1"),
    ("36.3.0", "2.42.0-igpu", None),
    ("36.3.0", "2.49.0-igpu", "use 2.42.0-igpu"),
    ("36.4.3", "2.49.0-igpu", None),
    ("36.4.3", "2.42.0-igpu", "use 2.49.0-igpu"),
    ("36.4.3", "2.52.0-igpu", "glibc 2.36"),
    ("36.4.4", "2.60.0", "glibc 2.36"),
    ("38.4.0", "2.49.0-igpu", "do not support Orin"),
    ("39.2.0", "2.49.0-igpu", "standard aarch64 build"),
    ("39.2.0", "2.61.0", None),
    ("32.7.1", "2.19.0", None),  # not an Orin release: nothing to say
    ("36.4.3", "latest", None),  # not a version: nothing to compare
])
def test_triton_mismatch(l4t, version, problem):
    found = triton_mismatch(l4t, version)
    if problem is None:
        assert found is None
    else:
        assert problem in found and version in found


@pytest.mark.parametrize("l4t, version, refused", [
    ("39.2.0", "2.66.0-igpu", "R39 runs the Orin as an SBSA device"),  # 26.02, the last Jetson build
    ("39.2.1", "2.35.0-jetpack5.1.2", "R39 runs the Orin as an SBSA device"),
    ("39.2.0", "2.66.0", None),  # the SBSA build
    ("38.4.0", "2.66.0", "do not support the Orin"),
    ("36.4.3", "2.52.0-igpu", "glibc 2.36"),
    ("36.4.3", "2.42.0-igpu", None),  # not the best fit (triton_mismatch says so), but it runs
    ("36.4.3", None, None), (None, "2.49.0-igpu", None),
])
def test_a_server_that_cannot_run_on_this_jetpack_is_refused(l4t, version, refused):
    from orinkit.jetson.triton import triton_refusal

    found = triton_refusal(l4t, version)
    assert (found is None) == (refused is None), found
    if refused:
        assert refused in found[0] and version in found[0] and found[1]


def test_edge_serve_refuses_a_jetpack_6_server_on_a_jetpack_7_2_orin(tmp_path, monkeypatch):
    """A captured AGX Orin tree moved to L4T R39.2 and a tritonserver unpacked from the 26.02 -igpu tarball: the
    server would die at load on a missing libnvdla_compiler.so; edge-serve says why and how to get the SBSA one."""
    from click.testing import CliRunner

    from orinkit.cli import serve

    root = copy_board(tmp_path, "agx_orin")
    (root / "etc/nv_tegra_release").write_text("# R39 (release), REVISION: 2.0, GCID: 1, BOARD: generic\n")
    home = tmp_path / "tritonserver2.66.0-igpu"
    (home / "bin").mkdir(parents=True)
    (home / "backends" / "python").mkdir(parents=True)
    (home / "bin" / "tritonserver").write_text("#!/bin/sh\n")
    (home / "bin" / "tritonserver").chmod(0o755)
    (home / "TRITON_VERSION").write_text("2.66.0-igpu\n")
    (tmp_path / "models" / "m").mkdir(parents=True)
    monkeypatch.setattr(serve, "DEVICE_ROOT", root)
    result = CliRunner().invoke(serve.main, ["command", str(tmp_path / "models"), "--triton-home", str(home)])
    assert result.exit_code == 3, result.output
    assert "Triton 2.66.0-igpu cannot run on JetPack 7.2 (L4T 39.2.0)" in result.output
    assert "nvcr.io/nvidia/tritonserver:<YY.MM>-py3" in result.output and "Traceback" not in result.output
    (home / "TRITON_VERSION").write_text("2.66.0\n")  # the SBSA build copied out of the arm64 image
    sbsa = home.rename(tmp_path / "tritonserver")
    result = CliRunner().invoke(serve.main, ["command", str(tmp_path / "models"), "--triton-home", str(sbsa)])
    assert result.exit_code == 0, result.output


def test_triton_version_at_a_home(tmp_path):
    ngc = tmp_path / "tritonserver"
    ngc.mkdir()
    (ngc / "TRITON_VERSION").write_text("2.49.0\n")
    assert triton_version_at(ngc) == "2.49.0"
    tarball = tmp_path / "tritonserver2.42.0-igpu"
    (tarball / "bin").mkdir(parents=True)
    assert triton_version_at(tarball) == "2.42.0-igpu"
    assert triton_version_at(tmp_path / "opt") is None


# ---- warnings ---------------------------------------------------------------------------------------------


def test_the_captured_boards_raise_no_warning():
    for board in BOARDS:
        assert warnings_for(device_info(DATA / board)) == []


def test_no_swap_on_an_8gb_board(tmp_path):
    for board, warned in (("orin_nano", True), ("agx_orin", False)):
        root = copy_board(tmp_path, board)
        meminfo = root / "proc/meminfo"
        meminfo.write_text("".join(
            "SwapTotal:             0 kB\n" if line.startswith("SwapTotal:") else line
            for line in meminfo.read_text().splitlines(keepends=True)))
        found = warnings_for(device_info(root))
        assert any("no swap on an 8 GB board" in w for w in found) is warned


def test_power_mode_not_maxn_and_clocks_not_pinned(tmp_path):
    root = copy_board(tmp_path, "orin_nano")
    (root / "commands/nvpmodel.txt").write_text("NV Power Mode: 15W\n0\n")
    pin_clocks(root, cpu_min=729600)
    found = warnings_for(device_info(root))
    assert len(found) == 2
    assert "power mode is 15W, not MAXN" in found[0]
    assert "clocks are not pinned" in found[1] and "jetson_clocks" in found[1]


def test_a_triton_tarball_that_does_not_match(tmp_path):
    info = device_info(DATA / "orin_nano")
    (found,) = warnings_for(info, triton_version="2.52.0-igpu")
    assert found.startswith("Triton 2.52.0-igpu does not match JetPack 6.2 (L4T 36.4.3)")
    assert warnings_for(info, triton_version="2.49.0-igpu") == []


# ---- this machine, and the command runners -----------------------------------------------------------------


def test_this_machine_is_not_a_jetson():
    if Path("/etc/nv_tegra_release").exists():
        pytest.skip("this machine is a Jetson")
    assert find_l4t() is None
    with pytest.raises(NotAJetsonError) as caught:
        device_info()
    assert caught.value.exit_code == 3
    assert str(caught.value).startswith("not a Jetson (no /etc/nv_tegra_release and no nvidia-l4t-core package)")


def test_a_tree_without_a_release_is_not_a_jetson(tmp_path):
    with pytest.raises(NotAJetsonError, match=f"no {tmp_path}/etc/nv_tegra_release"):
        device_info(tmp_path)


def test_runners():
    assert runner_for(Path("/")) is run_command
    assert run_command(Command("echo", ("echo", "hello"))) == "hello\n"
    assert run_command(Command("true", ("true",))) is None  # nothing printed
    assert run_command(Command("missing", ("/nonexistent/nvpmodel", "-q"))) is None
    assert runner_for(DATA / "agx_orin")(Command("nvpmodel", ("nvpmodel", "-q"))) == "NV Power Mode: MAXN\n0\n"
    assert captured_runner(DATA / "agx_orin/commands")(Command("nvcc", ("nvcc",))) is None
