"""The main job (python -m orinkit.lanes.demo) as a user runs it: output, cleanup, signals and bad arguments."""

from __future__ import annotations

import getpass
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

# What libraries keep in the temporary folder across runs, whoever calls them: onnxruntime's 51-byte session id
# file and torch's (empty) inductor cache folder. Anything else there was left by the demo.
LIBRARY_CACHES = {".ses", f"torchinductor_{getpass.getuser()}"}


def _left(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name not in LIBRARY_CACHES)


def _demo(tmp_path, *args, timeout=600):
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "orinkit.lanes.demo", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=tmp_path)


def test_the_demo_runs_end_to_end_scores_the_drawn_road_and_leaves_nothing(tmp_path):
    """Without --out the overlay goes to a new file in the temporary folder, never into the current folder (often
    the clone); everything else the demo made is gone."""
    result = _demo(tmp_path, "--runs", "2")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "against the drawn road's" in result.stdout and "F1" in result.stdout
    assert "RANDOM weights" in result.stdout or "shipped weights" in result.stdout
    # The shipped cards carry no calibrated threshold: served at LaneATT's 0.5, and the demo says whose it is.
    assert "lanes kept above 0.50 (the weights card's threshold)" in result.stdout
    assert "latency over 2 requests" in result.stdout and re.search(r"^done in \d+ s$", result.stdout, re.M)
    written = re.search(r"^wrote (\S+\.png) ", result.stdout, re.M)
    assert written, result.stdout
    overlay = Path(written[1])
    assert overlay.parent == tmp_path / "tmp" and overlay.name.startswith("orinkit-lanes-")
    assert Image.open(overlay).size == (1280, 720)
    assert _left(tmp_path) == [overlay.name], "the demo's temporary folder must be gone"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"], "nothing written in the current folder"


def test_the_help_says_where_the_overlay_goes_and_how_many_requests_are_timed(tmp_path):
    result = _demo(tmp_path, "--help", timeout=120)
    text = " ".join(result.stdout.split())
    assert result.returncode == 0 and "in the system's temporary folder" in text and "(default 10)" in text


@pytest.mark.parametrize("args, message", [
    (["--image", "missing.jpg"], "--image missing.jpg does not exist"),
    (["--image", "notes.jpg"], "is not an image Pillow can read"),
    (["--checkpoint", "bad.pt"], "cannot read checkpoint bad.pt"),
    (["--checkpoint", "missing.pt"], "--checkpoint missing.pt does not exist"),
    (["--random-weights", "--checkpoint", "bad.pt"], "exclude each other"),
    (["--runs", "0"], "--runs 0 is below 1"),
    (["--conf-threshold", "1.5"], "--conf-threshold 1.5 is not in [0, 1]"),
    (["--out", "nowhere/lanes.png"], "the folder of --out nowhere/lanes.png does not exist"),
])
def test_bad_arguments_are_one_line_and_exit_4(tmp_path, args, message):
    (tmp_path / "notes.jpg").write_text("not a picture")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    started = time.monotonic()
    result = _demo(tmp_path, *args, timeout=300)
    assert result.returncode == 4, result.stderr + result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr + result.stdout
    if "checkpoint bad.pt" not in message:
        assert time.monotonic() - started < 30, "refused before the slow work"
    assert _left(tmp_path) == []


def test_sigterm_stops_the_server_and_removes_the_work_folder(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    process = subprocess.Popen([sys.executable, "-m", "orinkit.lanes.demo", "--runs", "1000", "--out",
                                str(tmp_path / "lanes.png")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=tmp_path)
    seen = ""
    for line in process.stdout:
        seen += line
        if line.startswith("[5/5]"):
            break
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, seen + out + err
    assert "interrupted: stopped the server" in err and "Traceback" not in err
    assert _left(tmp_path) == []
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "no tritonserver or stub of the demo may survive it"
