"""The board monitor: /proc and /sys readings against trees built here, the real /proc of this machine, and
tegrastats replayed by tests/data/jetson/fake_tegrastats.py (a test double for the Jetson-only binary) placed on
PATH as ``tegrastats``.

The sysfs trees are **constructed** from the kernel's documented formats (hwmon: millidegrees, microwatts,
millivolts and milliamps; thermal zones: millidegrees; the GPU ``load`` file: per mille), named as on an Orin
Nano running JetPack 6: INA3221 rails VDD_IN, VDD_CPU_GPU_CV and VDD_SOC (the rails of
tests/data/jetson/tegrastats/jp6_orin_nano.txt), zones ``cpu-thermal`` and the like, a powered-down ``cv0-thermal``
reading -256000. The values are made up; the meminfo is the captured Orin Nano one (see SOURCES.md).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from orinkit.core.processes import live_group_members
from orinkit.jetson import BoardMonitor, MonitorError, hwmon, parse_line
from orinkit.jetson.monitor import reading_from_sample
from orinkit.jetson.tegrastats import module_input_mw

DATA = Path(__file__).resolve().parent / "data" / "jetson"
LINES = DATA / "tegrastats"
FAKE_TEGRASTATS = DATA / "fake_tegrastats.py"
# user nice system idle iowait irq softirq steal guest guest_nice; the second is 100 jiffies later, 25 of them busy
# (10 user + 5 system + 5 irq + 5 steal), 70 idle and 5 iowait.
STAT_BEFORE = "cpu  1000 20 300 5000 100 10 10 5 40 0\ncpu0 500 10 150 2500 50 5 5 2 20 0\nintr 1 2 3\n"
STAT_AFTER = "cpu  1010 20 305 5070 105 15 10 10 40 0\ncpu0 505 10 152 2535 52 8 5 5 20 0\nintr 1 2 3\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # a reader in the monitor's thread never sees half a file


def orin_nano_tree(root: Path) -> Path:
    write(root / "proc/stat", STAT_BEFORE)
    write(root / "proc/meminfo", (DATA / "orin_nano/proc/meminfo").read_text())
    zones = [("cpu-thermal", "48468"), ("gpu-thermal", "48562"), ("cv0-thermal", "-256000"), ("tj-thermal", "49156")]
    for number, (kind, milli) in enumerate(zones):
        write(root / f"sys/class/thermal/thermal_zone{number}/type", kind + "\n")
        write(root / f"sys/class/thermal/thermal_zone{number}/temp", milli + "\n")
    ina = root / "sys/class/hwmon/hwmon1"
    write(ina / "name", "ina3221\n")
    for channel, (label, millivolts, milliamps) in enumerate(
            [("VDD_IN", 5072, 938), ("VDD_CPU_GPU_CV", 5064, 101), ("VDD_SOC", 5064, 282)], start=1):
        write(ina / f"in{channel}_label", label)
        write(ina / f"in{channel}_input", str(millivolts))
        write(ina / f"curr{channel}_input", str(milliamps))
    write(ina / "in4_input", "12")  # a shunt voltage: no current pairs with it
    write(root / "sys/class/hwmon/hwmon0/name", "cpu_thermal\n")  # the thermal core's copy of cpu-thermal
    write(root / "sys/class/hwmon/hwmon0/temp1_input", "48468\n")
    write(root / "sys/devices/platform/gpu.0/load", "436\n")
    return root


def test_cpu_load_from_two_proc_stat_snapshots(tmp_path):
    write(tmp_path / "proc/stat", STAT_BEFORE)
    before = hwmon.read_cpu_times(tmp_path)
    assert (before.busy, before.total) == (1000 + 20 + 300 + 10 + 10 + 5, 6445)  # guest is inside user
    write(tmp_path / "proc/stat", STAT_AFTER)
    after = hwmon.read_cpu_times(tmp_path)
    assert hwmon.cpu_load_pct(before, after) == 25.0
    assert hwmon.cpu_load_pct(after, after) is None  # no time passed: no load, not 0 %
    assert hwmon.cpu_load_pct(None, after) is None
    assert hwmon.read_cpu_times(tmp_path / "nowhere") is None


def test_temperatures_from_thermal_zones_and_hwmon(tmp_path):
    root = orin_nano_tree(tmp_path)
    nvme = root / "sys/class/hwmon/hwmon10"  # after hwmon2, though it sorts before it as text
    write(nvme / "name", "nvme")
    write(nvme / "temp1_input", "38850")
    write(nvme / "temp1_label", "Composite")
    write(nvme / "temp2_input", "41850")
    write(root / "sys/class/hwmon/hwmon2/name", "acpitz")
    write(root / "sys/class/hwmon/hwmon2/temp1_input", "27800")
    write(root / "sys/class/hwmon/hwmon2/temp2_input", "not a number")
    write(root / "sys/class/thermal/thermal_zone4/type", "cpu-thermal")  # a type seen twice
    write(root / "sys/class/thermal/thermal_zone4/temp", "50000")
    temps = hwmon.read_temperatures(root)
    # °C from millidegrees; the -256000 of a powered-down zone and the hwmon copy of cpu-thermal are left out.
    assert temps == {"cpu-thermal": 48.468, "gpu-thermal": 48.562, "tj-thermal": 49.156, "cpu-thermal#2": 50.0,
                     "acpitz/temp1": 27.8, "nvme/Composite": 38.85, "nvme/temp2": 41.85}
    assert list(temps)[4:] == ["acpitz/temp1", "nvme/Composite", "nvme/temp2"]
    assert hwmon.read_temperatures(tmp_path / "nowhere") == {}


def test_power_from_ina3221_and_power_inputs(tmp_path):
    root = orin_nano_tree(tmp_path)
    rails = hwmon.read_power(root)
    assert rails == {"VDD_IN": 4757.5, "VDD_CPU_GPU_CV": 511.5, "VDD_SOC": 1428.0}  # mV × mA / 1000
    assert module_input_mw(rails) == 4757.5
    other = root / "sys/class/hwmon/hwmon3"
    write(other / "name", "ina3221")
    write(other / "in1_label", "NC")  # an unconnected channel, as tegrastats' NC
    write(other / "in1_input", "0")
    write(other / "curr1_input", "0")
    write(other / "in2_input", "1800")  # no label: named after the device and channel
    write(other / "curr2_input", "167")
    write(other / "in3_input", "1800")  # no current: no power
    write(root / "sys/class/hwmon/hwmon4/name", "gpu_power")
    write(root / "sys/class/hwmon/hwmon4/power1_input", "12345678")  # microwatts
    rails = hwmon.read_power(root)
    assert {name: rails[name] for name in ("ina3221/in2", "gpu_power/power1")} == {
        "ina3221/in2": 300.6, "gpu_power/power1": 12345.7}
    assert "NC" not in rails and len(rails) == 5


def test_module_input_follows_tegrastats_rule():
    agx = {"VDD_GPU_SOC": 2399, "VDD_CPU_CV": 400, "VIN_SYS_5V0": 4032, "VDDQ_VDD2_1V8AO": 301}
    assert module_input_mw(agx) == parse_line((LINES / "jp5_agx_orin.txt").read_text().splitlines()[0]) \
        .input_power_mw == 6831
    assert module_input_mw({"VDD_CPU_CV": 400}) is None  # part of the module is not its total


def test_gpu_load_per_mille(tmp_path):
    assert hwmon.read_gpu_load(tmp_path) is None
    write(tmp_path / "sys/devices/gpu.0/load", "999\n")
    assert hwmon.read_gpu_load(tmp_path) == 99.9
    write(tmp_path / "sys/devices/platform/gpu.0/load", "436\n")
    assert hwmon.read_gpu_load(tmp_path) == 43.6


# ---- the monitor on /proc and /sys --------------------------------------------------------------------------


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_monitor_on_a_fake_orin_tree(tmp_path):
    root = orin_nano_tree(tmp_path)
    with BoardMonitor(interval_s=0.05, history_s=10, root=root, tegrastats=None) as board:
        wait_for(lambda: len(board.snapshot()["samples"]) >= 2)
        write(root / "proc/stat", STAT_AFTER)
        wait_for(lambda: board.snapshot()["latest"]["cpu_load_pct"] is not None)
        snap = board.snapshot()
    assert (snap["source"], snap["note"], snap["interval_s"], snap["history_s"]) == ("proc", None, 0.05, 10.0)
    assert snap["samples"][0]["cpu_load_pct"] is None  # /proc/stat had not moved: no load, never a made-up 0
    assert 25.0 in [s["cpu_load_pct"] for s in snap["samples"]]
    latest = snap["latest"]
    assert latest["power_mw"] == {"total": 4757.5, "VDD_IN": 4757.5, "VDD_CPU_GPU_CV": 511.5, "VDD_SOC": 1428.0}
    assert latest["temps_c"] == {"cpu-thermal": 48.468, "gpu-thermal": 48.562, "tj-thermal": 49.156}
    assert latest["gpu_load_pct"] == 43.6
    # The captured Orin Nano meminfo: MemTotal 7802736 kB, MemAvailable 6245596 kB; used is total - available.
    assert (latest["mem_total_mb"], latest["mem_used_mb"]) == (7619.9, 1520.6)
    assert snap["rails"] == ["total", "VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"] == board.rails
    assert snap["sensors"] == ["cpu-thermal", "gpu-thermal", "tj-thermal"] == board.sensors
    assert snap["running"] and not board.snapshot()["running"]
    assert json.loads(json.dumps(snap)) == snap


def test_missing_readings_stay_missing(tmp_path):
    with BoardMonitor(interval_s=0.05, root=tmp_path, tegrastats=None) as board:
        wait_for(lambda: board.snapshot()["latest"] is not None)
    assert board.snapshot()["latest"] == {"t": board.snapshot()["latest"]["t"], "power_mw": {}, "temps_c": {},
                                          "cpu_load_pct": None, "gpu_load_pct": None, "mem_used_mb": None,
                                          "mem_total_mb": None}
    assert board.rails == [] and board.sensors == []


def test_monitor_on_this_machine():
    with BoardMonitor(interval_s=0.1, tegrastats=None) as board:
        wait_for(lambda: len(board.snapshot()["samples"]) >= 3)
    samples = board.snapshot()["samples"]
    assert all(0 <= s["cpu_load_pct"] <= 100 for s in samples)
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    assert all(s["mem_total_mb"] == pytest.approx(total_mb, abs=0.1) for s in samples)
    assert all(0 < s["mem_used_mb"] < s["mem_total_mb"] for s in samples)


def test_history_is_bounded_and_since_keeps_polls_small(tmp_path):
    with BoardMonitor(interval_s=0.05, history_s=0.2, root=tmp_path, tegrastats=None) as board:
        wait_for(lambda: len(board.snapshot()["samples"]) == 4)
        first = board.snapshot()["samples"][0]["t"]
        wait_for(lambda: board.snapshot()["samples"][0]["t"] > first)  # the oldest made room for a new one
    snap = board.snapshot()
    assert len(snap["samples"]) == 4 == board._history.maxlen and snap["samples"][0]["t"] > first
    times = [s["t"] for s in snap["samples"]]
    assert times == sorted(set(times)) and snap["latest"] == snap["samples"][-1]
    assert [s["t"] for s in board.snapshot(since=times[1])["samples"]] == times[2:]
    since_latest = board.snapshot(since=times[-1])
    assert since_latest["samples"] == [] and since_latest["latest"] == snap["latest"]  # latest comes every poll
    assert board.snapshot(since=0)["samples"] == snap["samples"]


def test_bad_settings_and_a_second_start(tmp_path):
    for interval_s, history_s in ((0, 10), (-1, 10), (1.0, 0.5), (math.nan, 10)):
        with pytest.raises(MonitorError, match="cannot keep"):
            BoardMonitor(interval_s=interval_s, history_s=history_s)
    board = BoardMonitor(interval_s=0.05, root=tmp_path, tegrastats=None)
    with board:
        with pytest.raises(MonitorError, match="already started"):
            board.start()
    board.stop()  # twice is fine
    BoardMonitor().stop()  # never started


# ---- the monitor on tegrastats (the test double) ------------------------------------------------------------


@pytest.fixture
def tegrastats_on_path(tmp_path, monkeypatch):
    """Put a ``tegrastats`` on PATH that runs the fake with ``fixture`` and ``extra`` options; returns a setter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def install(fixture: str, *extra: str, script: str | None = None) -> None:
        program = bin_dir / "tegrastats"
        body = script or (f'exec "{sys.executable}" "{FAKE_TEGRASTATS}" --fixture "{LINES / fixture}" '
                          + " ".join(extra) + ' "$@"')
        program.write_text("#!/bin/sh\n" + body + "\n")
        program.chmod(0o755)
    return install


def expected(fixture: str) -> list[dict]:
    """What each replayed line must become, without the time it was read at."""
    return [{k: v for k, v in reading_from_sample(parse_line(line), 0.0).to_dict().items() if k != "t"}
            for line in (LINES / fixture).read_text().splitlines()]


def without_time(samples: list[dict]) -> list[dict]:
    return [{k: v for k, v in s.items() if k != "t"} for s in samples]


@pytest.mark.parametrize("fixture", ["jp6_orin_nano.txt", "jp6_agx_orin.txt", "jp5_agx_orin.txt"])
def test_monitor_reads_tegrastats(tegrastats_on_path, tmp_path, fixture):
    tegrastats_on_path(fixture)
    threads = set(threading.enumerate())
    lines = expected(fixture)
    with BoardMonitor(interval_s=0.05, history_s=60, root=tmp_path) as board:
        pgid = board._sampler.pgid
        assert board._sampler.command[1:] == ("--interval", "50")
        wait_for(lambda: len(board.snapshot()["samples"]) >= len(lines) + 2)  # round the file and on
        snap = board.snapshot()
    assert (snap["source"], snap["note"]) == ("tegrastats", None)
    # The fake replays the file from its first line, in a loop.
    assert without_time(snap["samples"]) == [lines[i % len(lines)] for i in range(len(snap["samples"]))]
    assert live_group_members(pgid) == [] and set(threading.enumerate()) == threads


def test_tegrastats_values_in_the_snapshot(tegrastats_on_path, tmp_path):
    tegrastats_on_path("jp6_agx_orin.txt")
    with BoardMonitor(interval_s=0.05, root=tmp_path) as board:
        wait_for(lambda: len(board.snapshot()["samples"]) >= 2)
    first, second = board.snapshot()["samples"][:2]
    # 05-09-2026 18:42:06 … CPU [14%@2188,5%@2112,8%@2035,14%@2201,46%@1267,47%@1267,2%@1267,10%@1267,4%@1036,
    # 5%@1036,6%@1036,10%@1036] … GR3D_FREQ 0%@[0,0] … VDD_GPU_SOC 2412mW/2412mW VDD_CPU_CV 1607mW/1607mW
    # VIN_SYS_5V0 4707mW/4707mW; RAM 18207/62841MB; cpu@52.562C soc2@48.437C soc0@49.093C tj@52.562C soc1@49.656C
    assert first["power_mw"] == {"total": 2412 + 1607 + 4707, "VDD_GPU_SOC": 2412, "VDD_CPU_CV": 1607,
                                 "VIN_SYS_5V0": 4707}
    assert first["temps_c"] == {"cpu": 52.562, "soc2": 48.437, "soc0": 49.093, "tj": 52.562, "soc1": 49.656}
    assert first["cpu_load_pct"] == round((14 + 5 + 8 + 14 + 46 + 47 + 2 + 10 + 4 + 5 + 6 + 10) / 12, 1)
    assert (first["gpu_load_pct"], first["mem_used_mb"], first["mem_total_mb"]) == (0, 18207, 62841)
    assert second["power_mw"]["VIN_SYS_5V0"] == 4607 and second["t"] > first["t"]
    assert board.rails == ["total", "VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    assert board.sensors == ["cpu", "soc2", "soc0", "tj", "soc1"]


def test_offline_cores_and_no_gpu_load():
    thor = reading_from_sample(parse_line((LINES / "jp7_thor.txt").read_text().splitlines()[0]), 1.0)
    assert thor.gpu_load_pct is None  # GR3D_FREQ @[0,0,0]: Thor's tegrastats gives no GPU load
    offline = reading_from_sample(parse_line((LINES / "jp7_agx_orin.txt").read_text().splitlines()[1]), 1.0)
    assert offline.cpu_load_pct == round((78 + 33 + 46 + 55 + 49 + 48 + 37 + 57) / 8, 1)  # 4 cores off


@pytest.mark.parametrize("how", ["killed", "ended"])
def test_tegrastats_dying_falls_back_to_proc(tegrastats_on_path, tmp_path, how):
    root = orin_nano_tree(tmp_path / "root")
    tegrastats_on_path("jp6_orin_nano.txt", *(["--once"] if how == "ended" else []), "--child")
    threads = set(threading.enumerate())
    with BoardMonitor(interval_s=0.05, history_s=60, root=root) as board:
        pgid = board._sampler.pgid
        wait_for(lambda: len(board.snapshot()["samples"]) >= 3)
        if how == "killed":
            os.killpg(pgid, signal.SIGKILL)
        wait_for(lambda: board.snapshot()["source"] == "proc")
        wait_for(lambda: "VDD_IN" in board.snapshot()["latest"]["power_mw"]
                 and board.snapshot()["latest"]["temps_c"].get("cpu-thermal") == 48.468)
        snap = board.snapshot()
        assert snap["running"]
    reason = "was killed by SIGKILL" if how == "killed" else "exited with code 0"
    assert snap["note"] == f"tegrastats {reason}; reading /proc and /sys instead"
    assert snap["samples"][0]["temps_c"]["cpu"] == 48.468  # tegrastats' first line is still in the history
    assert snap["latest"]["power_mw"]["VDD_IN"] == 4757.5  # and the board's own files took over
    assert live_group_members(pgid) == [] and set(threading.enumerate()) == threads


def test_a_silent_tegrastats_is_given_up(tegrastats_on_path, tmp_path):
    tegrastats_on_path("", script='echo "tegrastats: cannot read the power monitors" >&2; exec sleep 600')
    with BoardMonitor(interval_s=0.05, root=tmp_path, stall_s=0.5) as board:
        pgid = board._sampler.pgid
        wait_for(lambda: board.snapshot()["source"] == "proc")
        assert live_group_members(pgid) == []
    assert board.snapshot()["note"] == ("tegrastats sent no usable line for 0.5 s (0 unparsable): "
                                        "tegrastats: cannot read the power monitors; reading /proc and /sys instead")


def test_a_tegrastats_that_cannot_run(tegrastats_on_path, tmp_path):
    tegrastats_on_path("", script="")
    program = Path(shutil.which("tegrastats"))
    program.write_text("#!/nonexistent/interpreter\n")
    with BoardMonitor(interval_s=0.05, root=tmp_path) as board:
        assert board._sampler is None
        wait_for(lambda: board.snapshot()["latest"] is not None)
    snap = board.snapshot()
    assert snap["source"] == "proc" and snap["note"].startswith("not a Jetson: cannot run ")
    assert snap["note"].endswith("; reading /proc and /sys instead")


def test_a_failing_reader_is_reported_not_lost(tmp_path, monkeypatch):
    def broken(root):
        raise RuntimeError("sysfs went away")
    monkeypatch.setattr(hwmon, "read_power", broken)
    with BoardMonitor(interval_s=0.05, root=tmp_path, tegrastats=None) as board:
        wait_for(lambda: not board.snapshot()["running"])
    assert board.snapshot()["note"] == "the monitor stopped: RuntimeError('sysfs went away')"
