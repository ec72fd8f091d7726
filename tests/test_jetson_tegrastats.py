"""tegrastats lines of JetPack 5, 6 and 7 (captured, see tests/data/jetson/SOURCES.md), and the sampler run for
real against tests/data/jetson/fake_tegrastats.py, a test double replaying those lines in place of the Jetson-only
tegrastats binary."""

from __future__ import annotations

import os
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from orinkit.core.processes import live_group_members
from orinkit.jetson import NotAJetsonError, SamplerError, TegrastatsError, TegrastatsSampler, parse_line, parse_lines
from orinkit.jetson.sampler import summarize

DATA = Path(__file__).resolve().parent / "data" / "jetson"
LINES = DATA / "tegrastats"
FAKE_TEGRASTATS = DATA / "fake_tegrastats.py"


def lines(name: str) -> list[str]:
    return (LINES / name).read_text().splitlines()


@pytest.mark.parametrize("name, count", [
    ("jp5_agx_orin.txt", 3), ("jp6_orin_nano.txt", 6), ("jp6_agx_orin.txt", 3), ("jp7_agx_orin.txt", 2),
    ("jp7_thor.txt", 2),
])
def test_every_captured_line_parses(name, count):
    samples, skipped = parse_lines(lines(name))
    assert (len(samples), skipped) == (count, 0)
    assert all(s.timestamp is not None and s.ram_total_mb > s.ram_used_mb > 0 and s.cpus for s in samples)


def test_jetpack5_agx_orin():
    sample = parse_line(lines("jp5_agx_orin.txt")[0])
    assert sample.timestamp == datetime(2023, 4, 24, 0, 1, 24)
    assert (sample.ram_used_mb, sample.ram_total_mb, sample.lfb) == (1282, 62795, "15152x4MB")
    assert (sample.swap_used_mb, sample.swap_total_mb, sample.swap_cached_mb) == (0, 31398, 0)
    assert len(sample.cpus) == 12 and all(c.online and c.load_percent == 0 and c.freq_mhz == 729 for c in sample.cpus)
    assert (sample.emc.load_percent, sample.emc.freq_mhz) == (0, 2133)
    assert (sample.gr3d.load_percent, sample.gr3d.freqs_mhz) == (0, (0,))
    # JetPack 5 gives the second GPC its own field, and engines a bare clock.
    assert sample.engine("GR3D2").freq_mhz == 0
    assert (sample.engine("VIC").on, sample.engine("VIC").freq_mhz, sample.engine("APE").freq_mhz) == (True, 729, 174)
    # Powered-off sensors read -256C and are left out.
    assert sample.temperature("CV0") is None and sample.temperature("GPU") is None
    assert (sample.temperature("tj"), sample.temperature("Tboard"), sample.temperature("cpu")) == (42.593, 32, 42.593)
    assert [r.name for r in sample.rails] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert (sample.rail("VDD_GPU_SOC").current_mw, sample.rail("VDD_GPU_SOC").average_mw) == (2399, 2399)
    assert sample.rail("NC") is None  # unconnected monitor channels
    assert sample.input_power_mw == 2399 + 400 + 4032  # AGX Orin: the module rails, no VDD_IN
    assert parse_line(lines("jp5_agx_orin.txt")[1]).engine("NVJPG1").freq_mhz == 729


def test_jetpack6_orin_nano():
    sample = parse_line(lines("jp6_orin_nano.txt")[0])  # ends in a space, as tegrastats printed it
    assert sample.timestamp == datetime(2026, 4, 27, 14, 59, 41)
    assert (sample.ram_used_mb, sample.ram_total_mb, sample.lfb, sample.swap_total_mb) == (775, 7620, "3x4MB", 3810)
    assert [c.load_percent for c in sample.cpus] == [1, 0, 0, 0, 0, 0]
    assert sample.emc is None
    assert (sample.gr3d.load_percent, sample.gr3d.freqs_mhz, sample.gr3d.freq_mhz) == (0, (), None)
    assert sample.engines == ()
    assert (sample.temperature("cpu"), sample.temperature("soc2"), sample.temperature("tj")) == (48.468, 47.531, 49.156)
    vdd_in = sample.rail("VDD_IN")
    assert (vdd_in.current_mw, vdd_in.average_mw, vdd_in.peak_mw) == (4761, 4778, None)
    assert sample.rail("VDD_CPU_GPU_CV").current_mw == 515 and sample.rail("VDD_SOC").average_mw == 1428
    assert sample.input_power_mw == 4761
    pinned = parse_line(lines("jp6_orin_nano.txt")[3])
    assert pinned.cpus[0].freq_mhz == 1344 and pinned.input_power_mw == 6626


def test_jetpack6_agx_orin():
    sample = parse_line(lines("jp6_agx_orin.txt")[0])
    assert (sample.gr3d.load_percent, sample.gr3d.freqs_mhz) == (0, (0, 0))
    assert [c.freq_mhz for c in sample.cpus][:4] == [2188, 2112, 2035, 2201]
    nvenc = sample.engine("NVENC")
    assert (nvenc.on, nvenc.load_percent, nvenc.freq_mhz) == (True, 79, 166)
    assert (sample.engine("VIC").load_percent, sample.engine("VIC").freq_mhz) == (36, 115)
    assert [e.name for e in sample.engines if not e.on] == ["NVDEC", "NVJPG", "NVJPG1", "OFA", "NVDLA0", "NVDLA1",
                                                           "PVA0"]
    assert sample.swap_used_mb == 86 and sample.temperature("soc1") == 49.656
    assert parse_line(lines("jp6_agx_orin.txt")[1]).rail("VIN_SYS_5V0").average_mw == 4657


def test_jetpack7_agx_orin():
    sample = parse_line(lines("jp7_agx_orin.txt")[0])
    assert (sample.swap_used_mb, sample.swap_total_mb, sample.swap_cached_mb) == (None, None, None)
    assert (sample.lfb, sample.emc.load_percent, sample.emc.freq_mhz) == ("1x2MB", 3, 3199)
    # GR3D_FREQ 12%@[1300,1300]: one load, a clock per GPC.
    assert (sample.gr3d.load_percent, sample.gr3d.freqs_mhz, sample.gr3d.freq_mhz) == (12, (1300, 1300), 1300)
    assert not sample.engine("NVDLA0").on and not sample.engine("NVDLA1").on and not sample.engine("NVENC0").on
    cpu = next(t for t in sample.temperatures if t.name == "cpu")
    assert (cpu.celsius, cpu.max_celsius) == (52.968, 52.968)
    rail = sample.rail("VDD_GPU_SOC")
    assert (rail.current_mw, rail.average_mw, rail.peak_mw) == (5139, 5139, 5139)
    assert sample.input_power_mw == 5139 + 3268 + 5500
    offline = parse_line(lines("jp7_agx_orin.txt")[1])
    assert [c.online for c in offline.cpus] == [True] * 8 + [False] * 4
    assert offline.cpus[-1].load_percent is None and offline.cpus[0].load_percent == 78


def test_jetpack7_thor_forms():
    sample = parse_line(lines("jp7_thor.txt")[1])
    assert (sample.gr3d.load_percent, sample.gr3d.freqs_mhz) == (None, (314, 314, 314))  # no load at all
    nvenc = sample.engine("NVENC0")
    assert (nvenc.on, nvenc.load_percent, nvenc.freq_mhz) == (True, None, 1556)
    assert (sample.engine("VIC").load_percent, sample.engine("VIC").freq_mhz) == (59, 423)
    assert sample.rail("VDD_CPU_SOC_MSS").peak_mw == 8710
    assert sample.input_power_mw == 4925 + 8710 + 6767


def test_malformed_lines_are_skipped_and_counted():
    samples, skipped = parse_lines(lines("malformed.txt"))
    assert (len(samples), skipped) == (4, 5)  # the blank line is neither
    assert [s.timestamp.second for s in samples] == [41, 42, 43, 54]


@pytest.mark.parametrize("index, reason", [
    (1, "SWAP value '0/38'"),
    (3, "unexpected 'Warning:'"),
    (6, "unexpected 'VDD_CPU_GPU_CV'"),
    (7, "RAM value '7x9/7620MB'"),
    (8, "CPU list"),
])
def test_a_malformed_line_raises(index, reason):
    with pytest.raises(TegrastatsError) as caught:
        parse_line(lines("malformed.txt")[index])
    assert reason in caught.value.reason and caught.value.exit_code == 4
    assert caught.value.line == lines("malformed.txt")[index]


def test_lines_that_are_not_tegrastats():
    for text in ("", "   ", "CPU [1%@729]", "13-45-2026 99:00:00 RAM 775/7620MB"):
        with pytest.raises(TegrastatsError):
            parse_line(text)
    assert parse_lines([]) == ([], 0)
    assert parse_lines(["\n", "garbage\n"]) == ([], 1)


def test_summary_of_parsed_samples():
    samples, _ = parse_lines(lines("jp6_orin_nano.txt"))
    summary = summarize(samples, wall_time_s=6.0)
    assert summary.samples == 6 and summary.rails_mw["VDD_IN"] == (4761 * 3 + 6626 * 3) / 6
    assert summary.input_power_mw == pytest.approx(5693.5)
    assert summary.energy_j == pytest.approx(5.6935 * 6.0)
    assert summary.energy_per_inference_j(1000) == pytest.approx(5.6935 * 6.0 / 1000)
    with pytest.raises(SamplerError):
        summary.energy_per_inference_j(0)
    no_power = summarize([parse_line("RAM 775/7620MB (lfb 3x4MB) CPU [1%@729]")], wall_time_s=1.0)
    assert no_power.input_power_mw is None and no_power.energy_j is None and no_power.energy_per_inference_j(5) is None


# ---- the sampler, with a real subprocess ------------------------------------------------------------------


def fake(fixture: str, *extra: str, interval_ms: int = 50) -> list[str]:
    return [sys.executable, str(FAKE_TEGRASTATS), "--interval", str(interval_ms), "--fixture", str(LINES / fixture),
            *extra]


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def zombies(pgid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] == "Z":
            found.append(int(stat.parent.name))
    return found


def assert_group_gone(pgid: int) -> None:
    """No process of the group runs. A grandchild killed with the group is reparented to PID 1, and this
    sandbox's PID 1 never reaps, so its zombie (dead, holding nothing) may keep the group id alive."""
    assert live_group_members(pgid) == []
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return
    assert zombies(pgid), f"process group {pgid} still has members"


def test_sampler_measures_a_block_and_stops_tegrastats():
    with TegrastatsSampler(command=fake("jp6_orin_nano.txt")) as power:
        pgid = power.pgid
        assert live_group_members(pgid)
        wait_for(lambda: len(power.samples) >= 8)  # more than one pass over the six lines
    with pytest.raises(ProcessLookupError):  # tegrastats was reaped and left nothing in its group
        os.killpg(pgid, 0)
    assert power._process.returncode is not None
    summary = power.summary()
    assert summary.samples >= 8 and summary.skipped == 0
    assert 4761 <= summary.input_power_mw <= 6626
    assert set(summary.rails_mw) == {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"}
    assert summary.wall_time_s >= 0.3
    assert summary.energy_j == pytest.approx(summary.input_power_mw / 1000 * summary.wall_time_s)
    assert summary.energy_per_inference_j(100) == pytest.approx(summary.energy_j / 100)
    count = len(power.samples)
    time.sleep(0.2)
    assert len(power.samples) == count and power.wall_time_s == summary.wall_time_s  # nothing after the block


def test_sampler_counts_malformed_lines():
    with TegrastatsSampler(command=fake("malformed.txt", interval_ms=20)) as power:
        wait_for(lambda: power.skipped >= 5 and len(power.samples) >= 4)  # one pass over the file
    assert power.summary().skipped >= 5 and power.summary().samples >= 4


def test_sampler_kills_a_tegrastats_that_ignores_sigterm_and_its_children():
    sampler = TegrastatsSampler(command=fake("jp6_agx_orin.txt", "--ignore-sigterm", "--child"), stop_timeout_s=0.5)
    with sampler:
        wait_for(lambda: len(sampler.samples) >= 1 and len(live_group_members(sampler.pgid)) == 2)
    assert_group_gone(sampler.pgid)
    assert sampler.summary().input_power_mw > 0


def test_sampler_when_tegrastats_ends_by_itself():
    with TegrastatsSampler(command=fake("jp7_agx_orin.txt", "--once", interval_ms=10)) as power:
        wait_for(lambda: power._process.poll() is not None)
    assert len(power.samples) == 2
    assert_group_gone(power.pgid)


def test_sampler_with_no_usable_output():
    command = [sys.executable, "-c", "import sys; print('tegrastats: cannot open /dev/nvhost', file=sys.stderr)"]
    with TegrastatsSampler(command=command) as power:
        wait_for(lambda: power._process.poll() is not None)
    with pytest.raises(SamplerError, match="no usable sample.*cannot open /dev/nvhost"):
        power.summary()


def test_no_tegrastats_means_not_a_jetson():
    assert TegrastatsSampler(interval_ms=250).command == ("tegrastats", "--interval", "250")
    if shutil.which("tegrastats"):
        pytest.skip("this machine has tegrastats")
    with pytest.raises(NotAJetsonError, match="tegrastats was not found on PATH") as caught:
        with TegrastatsSampler():
            pass
    assert caught.value.exit_code == 3
    with pytest.raises(NotAJetsonError, match="/nonexistent/tegrastats was not found"):
        TegrastatsSampler(command=["/nonexistent/tegrastats"]).start()
