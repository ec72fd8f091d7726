"""Lane datasets on disk: CULane, TuSimple and CurveLanes folders written here in each one's own format (drawn
roads at 1640x590 and 1280x720 as JPEG, their true lanes as the dataset annotates them), read back at the network
input, trained on through ``python -m orinkit.lanes.train --dataset`` (and resumed), scored per category by
``python -m orinkit.lanes.evaluate``, and bad folders refused in one line with exit 4."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from orinkit.lanes.culane import write_annotation
from orinkit.lanes.datasets import open_dataset
from orinkit.lanes.errors import DatasetError, LaneError
from orinkit.lanes.synth import render_road

TUSIMPLE_ROWS = np.arange(160, 720, 10)


def _write_road(image_path, seed: int, width: int, height: int):
    road = render_road(seed, width, height)
    image_path.parent.mkdir(parents=True, exist_ok=True)
    image_path.write_bytes(road.encode("JPEG"))
    return road


def _culane(root, *, train=3, test=4):
    """A CULane root: list/train_gt.txt, list/test.txt, three test categories (cross: a crossroad, no lane)."""
    roads = {}
    (root / "list" / "test_split").mkdir(parents=True)
    names = {"train": [f"driver_23_30frame/05151649_0422.MP4/{i:05d}.jpg" for i in range(train)],
             "test": [f"driver_37_30frame/05181432_0203.MP4/{i:05d}.jpg" for i in range(test)]}
    for split, seeds in (("train", 10), ("test", 20)):
        for i, name in enumerate(names[split]):
            road = _write_road(root / name, seeds + i, 1640, 590)
            lanes = [] if split == "test" and i == test - 1 else road.lanes
            write_annotation(root / name.replace(".jpg", ".lines.txt"), lanes)
            roads[name] = lanes
    (root / "list" / "train_gt.txt").write_text("".join(
        f"/{n} /laneseg_label_w16/{n[:-4]}.png 1 1 1 1\n" for n in names["train"]))
    (root / "list" / "test.txt").write_text("".join(f"/{n}\n" for n in names["test"]))
    split = root / "list" / "test_split"
    (split / "test0_normal.txt").write_text("".join(f"{n}\n" for n in names["test"][:2]))
    (split / "test7_cross.txt").write_text(f"{names['test'][-1]}\n")
    (split / "test8_night.txt").write_text(f"{names['test'][2]}\n")
    return roads, names


def _tusimple_entry(road, raw_file: str) -> dict:
    lanes = []
    for lane in road.lanes:
        order = np.argsort(lane[:, 1])
        ys, xs = lane[order, 1], lane[order, 0]
        inside = (TUSIMPLE_ROWS >= ys.min()) & (TUSIMPLE_ROWS <= ys.max())
        lanes.append(np.where(inside, np.round(np.interp(TUSIMPLE_ROWS, ys, xs)), -2).astype(int).tolist())
    return {"lanes": lanes, "h_samples": TUSIMPLE_ROWS.tolist(), "raw_file": raw_file}


def _tusimple(root):
    """train_set/label_data_0313.json (3 clips) and test_set/test_label.json (1 clip), 1280x720 frames."""
    roads = {}
    for folder, label, seeds in (("train_set", "label_data_0313.json", (30, 31, 32)),
                                 ("test_set", "test_label.json", (33,))):
        lines = []
        for seed in seeds:
            raw = f"clips/0313-1/{seed}/20.jpg"
            roads[raw] = _write_road(root / folder / raw, seed, 1280, 720)
            lines.append(json.dumps(_tusimple_entry(roads[raw], raw)))
        (root / folder / label).write_text("\n".join(lines) + "\n")
    return roads


def _curvelanes(root):
    roads = {}
    for split, seeds in (("train", (40, 41)), ("valid", (42,))):
        names = []
        for seed in seeds:
            name = f"{seed:032x}"
            roads[name] = _write_road(root / split / "images" / f"{name}.jpg", seed, 1280, 720)
            lines = [[{"x": f"{x:.2f}", "y": f"{y:.2f}"} for x, y in lane[::-1]] for lane in roads[name].lanes]
            (root / split / "labels").mkdir(parents=True, exist_ok=True)
            (root / split / "labels" / f"{name}.lines.json").write_text(json.dumps({"Lines": lines}))
            names.append(f"images/{name}.jpg")
        (root / split / f"{split}.txt").write_text("\n".join(names) + "\n")
    return roads


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("datasets")
    culane = _culane(base / "CULane")
    tusimple = _tusimple(base / "TuSimple")
    curvelanes = _curvelanes(base / "Curvelanes")
    return {"base": base, "culane": culane, "tusimple": tusimple, "curvelanes": curvelanes}


def test_culane_lists_read_at_the_network_input_with_their_categories(folders):
    roads, names = folders["culane"]
    train = open_dataset(f"culane:{folders['base'] / 'CULane'}")
    assert len(train) == 3 and train.max_lanes == 4 and not train.categories
    image, lanes = train.load(1)
    truth = roads[names["train"][1]]
    assert image.shape == (360, 640, 3) and image.dtype == np.uint8 and len(lanes) == len(truth)
    np.testing.assert_allclose(lanes[0], truth[0] * (640 / 1640, 360 / 590), atol=0.01)
    test = open_dataset(f"culane:{folders['base'] / 'CULane'}", "test")
    assert [(name, list(indices)) for name, indices in test.categories] == [
        ("normal", [0, 1]), ("cross", [3]), ("night", [2])]
    assert test.lanes(3) == [] and "CULane test split (4 images, 3 categories)" in test.describe()


def test_tusimple_rows_become_lanes_and_absent_rows_are_dropped(folders):
    roads = folders["tusimple"]
    train = open_dataset(f"tusimple:{folders['base'] / 'TuSimple'}")
    test = open_dataset(f"tusimple:{folders['base'] / 'TuSimple'}", "test")
    assert (len(train), len(test), train.max_lanes) == (3, 1, 5)
    image, lanes = test.load(0)
    truth = roads["clips/0313-1/33/20.jpg"].lanes
    assert image.shape == (360, 640, 3) and len(lanes) == len(truth)
    for found, lane in zip(lanes, truth):
        # Every point on a TuSimple row inside the lane, x rounded to a pixel as TuSimple writes it, halved.
        assert set(found[:, 1] * 2) <= set(TUSIMPLE_ROWS.tolist()) and len(found) >= 2
        order = np.argsort(lane[:, 1])
        np.testing.assert_allclose(found[:, 0], np.interp(found[:, 1] * 2, lane[order, 1], lane[order, 0]) / 2,
                                   atol=0.26)


def test_curvelanes_labels_with_string_coordinates_read_back(folders):
    roads = folders["curvelanes"]
    train = open_dataset(f"curvelanes:{folders['base'] / 'Curvelanes'}")
    valid = open_dataset(f"curvelanes:{folders['base'] / 'Curvelanes'}", "test")
    assert (len(train), len(valid), valid.split) == (2, 1, "test")
    image, lanes = valid.load(0)
    truth = roads[f"{42:032x}"].lanes
    assert image.shape == (360, 640, 3) and len(lanes) == len(truth)
    np.testing.assert_allclose(lanes[1], truth[1][::-1] * 0.5, atol=0.01)


def test_fine_tuning_on_a_dataset_through_the_command_resumes_exactly(folders, tmp_path, capsys):
    """Two runs of 2 steps from the shipped lite weights on the TuSimple folder, one unbroken, one paused at step
    1 and resumed with ``--resume``: the same weights, and a card that says what it trained on."""
    from orinkit.lanes.train import CHECKPOINT, Paused, TrainOptions, main, train
    from orinkit.lanes.weights import shipped_card

    spec = f"tusimple:{folders['base'] / 'TuSimple'}"
    common = ["--dataset", spec, "--init", str(shipped_card("lite")), "--steps", "2", "--batch", "2",
              "--workers", "0", "--warmup-steps", "1", "--eval-images", "0", "--eval-minutes", "0"]
    assert main([*common, "--out", str(tmp_path / "whole")]) == 0
    printed = capsys.readouterr().out
    assert "training on the TuSimple train split (3 images)" in printed
    assert f"python -m orinkit.lanes.evaluate --dataset {spec}" in printed
    card = json.loads((tmp_path / "whole" / "laneatt_lite_tusimple.json").read_text())
    assert card["dataset"] == {"spec": spec, "kind": "tusimple", "split": "train", "images": 3, "share": 1.0}
    assert card["steps"] == 2 and card["images"] == 4 and card["init"] == str(shipped_card("lite"))

    options = TrainOptions(dataset=spec, init=shipped_card("lite"), steps=2, batch=2, workers=0, warmup_steps=1,
                           eval_images=0, eval_minutes=0, pause_at_step=1, out=tmp_path / "split")
    with pytest.raises(Paused):
        train(options, progress=lambda m: None)
    assert main(["--resume", "--out", str(tmp_path / "split"), "--workers", "1"]) == 0
    assert "resuming lite at step 1 of 2" in capsys.readouterr().out
    a = torch.load(tmp_path / "whole" / CHECKPOINT, weights_only=True)
    b = torch.load(tmp_path / "split" / CHECKPOINT, weights_only=True)
    assert a["step"] == b["step"] == 2 and b["sessions"] == 2
    for key, value in a["model"].items():
        torch.testing.assert_close(b["model"][key], value, rtol=0, atol=0, msg=key)


def test_evaluate_prints_f1_per_culane_category(folders, tmp_path, capsys):
    """The shipped lite model on the 4-image CULane test list: a row per category, the crossroad's false
    positives alone, and counts that add up to the true lanes written."""
    from orinkit.lanes.evaluate import main

    roads, names = folders["culane"]
    root = folders["base"] / "CULane"
    assert main(["--dataset", f"culane:{root}", "--arch", "lite", "--workers", "0", "--batch", "3",
                 "--json", str(tmp_path / "scores.json")]) == 0
    printed = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in printed.splitlines() if line.split()}
    assert rows["normal"][0] == "2" and rows["night"][0] == "1" and rows["overall"][0] == "4"
    assert rows["cross"][:4] == ["1", "-", "-", "-"] and "false positives" in printed
    figures = json.loads((tmp_path / "scores.json").read_text())
    true_lanes = sum(len(roads[name]) for name in names["test"])
    assert figures["matched"] + figures["missed"] == true_lanes
    assert float(rows["overall"][3]) == pytest.approx(figures["f1"], abs=1e-4)
    assert figures["categories"]["cross"]["matched"] == 0
    parts = figures["categories"]
    assert sum(parts[c]["extra"] for c in parts) == figures["extra"]
    assert figures["f1"] > 0.5, figures  # drawn roads like its training roads: it finds most lanes


def _bad(base, name: str):
    """A copy of the small CULane root, to break one thing in."""
    import shutil

    target = base / name
    shutil.copytree(base / "CULane", target)
    return target


@pytest.mark.parametrize("case", ["unknown kind", "list missing", "list line", "image missing", "tusimple json",
                                  "lines.txt in a worker", "init of another arch"])
def test_bad_datasets_are_refused_in_one_line_with_exit_4(folders, tmp_path, capsys, case):
    from orinkit.lanes import evaluate, train

    base = folders["base"]
    run = ["--steps", "2", "--batch", "2", "--workers", "0", "--eval-images", "0", "--out", str(tmp_path / "out")]
    if case == "unknown kind":
        code, expected = evaluate.main(["--dataset", f"llamas:{base}"]), "unknown dataset 'llamas:"
    elif case == "list missing":
        root = _bad(base, "no-list")
        (root / "list" / "test.txt").unlink()
        code, expected = evaluate.main(["--dataset", f"culane:{root}"]), "test.txt is missing; give culane:PATH"
    elif case == "list line":
        root = _bad(base, "bad-line")
        with open(root / "list" / "train_gt.txt", "a") as listing:
            listing.write("laneseg_label_w16 1 1 1 1\n")
        code, expected = train.main(["--dataset", f"culane:{root}", *run]), "train_gt.txt:4 is not a CULane list line"
    elif case == "image missing":
        root = _bad(base, "no-image")
        (root / "driver_23_30frame" / "05151649_0422.MP4" / "00001.jpg").unlink()
        code, expected = train.main(["--dataset", f"culane:{root}", *run]), "00001.jpg is missing"
    elif case == "tusimple json":
        root = tmp_path / "TuSimple"
        (root / "train_set").mkdir(parents=True)
        (root / "train_set" / "label_data_0601.json").write_text('{"lanes": [[1, 2]], "h_samples": [\n')
        code, expected = train.main(["--dataset", f"tusimple:{root}", *run]), "label_data_0601.json:1 is not JSON"
    elif case == "init of another arch":
        from orinkit.lanes.weights import shipped_card

        code = train.main(["--dataset", f"culane:{base / 'CULane'}", "--arch", "r18", "--init",
                           str(shipped_card("lite")), *run])
        expected = "holds lite weights, not --arch r18; give --arch lite"
    else:
        root = _bad(base, "bad-lines")
        for number in range(3):
            (root / "driver_23_30frame" / "05151649_0422.MP4" / f"{number:05d}.lines.txt").write_text("1 2 3\n")
        code = train.main(["--dataset", f"culane:{root}", *run[:4], "--workers", "1", *run[6:]])
        expected = ".lines.txt:1 has an odd count of numbers (3); each line is one lane"
    errors = capsys.readouterr().err.strip().splitlines()
    assert code == 4 and len(errors) == 1 and errors[0].startswith("Error: ") and expected in errors[0], errors
    assert "; " in errors[0]  # and its hint


def test_the_evaluate_command_ends_without_a_traceback(tmp_path):
    run = subprocess.run([sys.executable, "-m", "orinkit.lanes.evaluate", "--dataset", f"curvelanes:{tmp_path}"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip() == (f"Error: CurveLanes list {tmp_path}/valid/valid.txt is missing; give "
                                  "curvelanes:PATH with the folder holding train/ and valid/ as unpacked")


def test_a_training_spec_names_a_known_kind():
    from orinkit.lanes.train import TrainOptions

    with pytest.raises(DatasetError, match="unknown dataset 'culane/data'"):
        TrainOptions(dataset="culane/data")
    with pytest.raises(LaneError, match="--frames and --dataset both"):
        TrainOptions(dataset="culane:/data", frames="/frames")
