"""edge-jetson: the facts table, JSON, warnings and exit codes, on captured trees and on this machine."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orinkit.cli.jetson import main

DATA = Path(__file__).resolve().parent / "data" / "jetson"
NOT_A_JETSON = "Error: not a Jetson (no /etc/nv_tegra_release and no nvidia-l4t-core package)"


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env={"ORINKIT_TRITONSERVER_HOME": "", **(env or {})})


def test_info_prints_an_aligned_table():
    result = invoke("info", "--root", str(DATA / "agx_orin"))
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert rows[0].split(None, 1) == ["L4T", "36.4.3 (from /etc/nv_tegra_release)"]
    column = len(rows[0]) - len(rows[0].split(None, 1)[1])
    assert all(row[column - 2:column] == "  " and row[column] != " " for row in rows)  # one value column
    table = dict(row.split("  ", 1) for row in rows)
    table = {name.strip(): value.strip() for name, value in table.items()}
    assert table["JetPack"] == "6.2"
    assert table["board"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert table["DLA cores"] == "2 (from board table)"
    assert table["power mode"] == "MAXN (id 0)"
    assert table["clocks pinned"] == "unknown"
    assert table["memory"] == "62,841 MiB, 57,344 MiB available"
    assert table["swap"] == "31,420 MiB"
    assert (table["TensorRT"], table["CUDA"], table["Python"]) == ("10.3.0.30", "unknown", "3.10.12")
    assert table["Triton for this JetPack"].startswith("2.49.0-igpu (")
    assert "warning:" not in result.output


def test_info_json():
    result = invoke("info", "--json", "--root", str(DATA / "orin_nano"))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    facts = document["facts"]
    assert (facts["l4t"], facts["module"], facts["dla_cores"], facts["cuda"]) == ("36.4.3", "Jetson Orin Nano 8GB", 0,
                                                                                  "12.6.68")
    assert facts["memory"]["total_kb"] == 7802736 and facts["power_mode"]["name"] == "MAXN_SUPER"
    assert facts["triton"]["release"] == "2.49.0-igpu"
    assert document["warnings"] == [] and document["triton_in_use"] is None


def test_warnings_follow_the_table(tmp_path):
    root = tmp_path / "nano"
    shutil.copytree(DATA / "orin_nano", root)
    (root / "commands/nvpmodel.txt").write_text("NV Power Mode: 15W\n0\n")
    result = invoke("info", "--root", str(root), "--triton-version", "2.52.0-igpu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 2 and lines[-3] == ""
    assert "power mode is 15W, not MAXN" in warnings[0]
    assert "Triton 2.52.0-igpu does not match JetPack 6.2" in warnings[1]
    assert "Triton in use" in result.stdout


def test_the_triton_in_use_comes_from_the_tritonserver_home(tmp_path):
    home = tmp_path / "tritonserver2.42.0-igpu"
    home.mkdir()
    result = invoke("info", "--json", "--root", str(DATA / "orin_nx"), env={"ORINKIT_TRITONSERVER_HOME": str(home)})
    document = json.loads(result.stdout)
    assert document["triton_in_use"] == "2.42.0-igpu"
    assert document["warnings"] == ["Triton 2.42.0-igpu does not match JetPack 6.2.1 (L4T 36.4.4): use 2.49.0-igpu "
                                    "(2.52 and later need glibc 2.36 and fail on JetPack 6)"]


@pytest.mark.parametrize("args", [["info"], ["info", "--json"]])
def test_not_a_jetson_exits_3_with_one_line(args):
    if Path("/etc/nv_tegra_release").exists():
        pytest.skip("this machine is a Jetson")
    result = invoke(*args)
    assert result.exit_code == 3
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(NOT_A_JETSON)


def test_not_a_jetson_as_a_process():
    if Path("/etc/nv_tegra_release").exists():
        pytest.skip("this machine is a Jetson")
    done = subprocess.run([sys.executable, "-c", "from orinkit.cli.jetson import main; main()", "info"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith(NOT_A_JETSON)


def test_a_root_that_is_not_a_device_tree(tmp_path):
    assert invoke("info", "--root", str(tmp_path / "missing")).exit_code == 2
    result = invoke("info", "--root", str(tmp_path))
    assert result.exit_code == 3 and f"no {tmp_path}/etc/nv_tegra_release" in result.stderr


def test_root_is_hidden_from_help():
    result = invoke("info", "--help")
    assert result.exit_code == 0 and "--json" in result.output and "--root" not in result.output
