"""The confidence threshold a weights card carries (orinkit.lanes.calibrate), on the shipped trained weights."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from orinkit.lanes.calibrate import (
    CALIBRATION_SEED,
    THRESHOLDS,
    calibrate,
    calibrate_card,
    card_data,
    card_threshold,
    main,
)
from orinkit.lanes.errors import LaneError
from orinkit.lanes.model import build_lane_model
from orinkit.lanes.train import evaluate
from orinkit.lanes.weights import shipped_card

ROADS = 24


class Doubtful(torch.nn.Module):
    """A trained model made under-confident, as a long low-rate fine-tune leaves one: every proposal's positive
    logit lowered by ``shift``; where it points and how long it is stay the model's own."""

    def __init__(self, model, shift: float):
        super().__init__()
        self.model, self.shift = model, shift

    def forward(self, images):
        out = self.model(images).clone()
        out[..., 1] -= self.shift
        return out


@pytest.fixture(scope="module")
def lite():
    torch.set_num_threads(2)
    return build_lane_model(checkpoint=shipped_card("lite"))


def test_an_under_confident_model_gets_a_lower_threshold_and_finds_more(lite):
    plain = calibrate(lite, "synth-v1", ROADS)
    doubtful = calibrate(Doubtful(lite, 1.5), "synth-v1", ROADS)
    assert set(plain.f1) == set(THRESHOLDS) and plain.threshold in THRESHOLDS
    assert plain.f1[plain.threshold] == max(plain.f1.values())
    assert plain.f1[plain.threshold] > 0.8  # trained weights on their own kind of road
    # exp(-1.5) scales the odds by 0.22: a lane at 0.5 before scores 0.18 now.
    assert doubtful.threshold < plain.threshold
    assert doubtful.f1[doubtful.threshold] > doubtful.f1[0.5] + 0.05
    assert doubtful.f1[doubtful.threshold] >= plain.f1[plain.threshold] - 0.05  # the same lanes, found again


def test_calibrating_a_card_rewrites_its_threshold_and_its_figures(lite, tmp_path):
    source = shipped_card("lite")
    for path in source.parent.glob(source.stem + ".*"):
        shutil.copy(path, tmp_path / path.name)
    card = tmp_path / source.name
    before = json.loads(card.read_text())
    for key in ("conf_threshold", "calibration"):  # the shipped card is calibrated: made one from before that
        before.pop(key, None)
    card.write_text(json.dumps(before))
    assert card_threshold(before) == 0.5 and card_data(before) == "synth-v1"
    info = calibrate_card(card, roads=ROADS, eval_images=8, judge_images=3, progress=lambda m: None)
    again = json.loads(card.read_text())
    assert again == info and again["conf_threshold"] in THRESHOLDS and card_threshold(again) == again["conf_threshold"]
    assert again["calibration"]["seed"] == CALIBRATION_SEED and again["calibration"]["roads"] == ROADS
    assert again["before_calibration"]["f1"] == before["f1"] and again["held_out_images"] == 8
    held = evaluate(lite, 8, threshold=again["conf_threshold"])
    assert again["f1"] == round(held.f1, 4) and again["judge_images"] == 3
    assert build_lane_model(checkpoint=card).card["conf_threshold"] == again["conf_threshold"]


def test_the_data_version_of_a_card_comes_from_its_record_or_its_command():
    assert card_data({"data": "mix-v1"}) == "mix-v1"
    assert card_data({"command": "python -m orinkit.lanes.train --init a.json --data wide-v1 --lr 3e-4"}) == "wide-v1"
    assert card_data({"command": "python -m orinkit.lanes.train --data=mix-v1"}) == "mix-v1"
    assert card_data({"command": "python -m orinkit.lanes.train --steps 10"}) == "synth-v1"


def test_the_command_refuses_what_is_not_a_card_on_one_line(tmp_path, capsys):
    assert main(["--weights", str(tmp_path / "nothing.json")]) == LaneError.exit_code
    err = capsys.readouterr().err
    assert "is not a weights card" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    dataset_card = tmp_path / "culane.json"
    shutil.copy(shipped_card("lite"), dataset_card)
    for shard in shipped_card("lite").parent.glob(shipped_card("lite").stem + ".*.pt"):
        shutil.copy(shard, tmp_path / shard.name.replace(shipped_card("lite").stem, "culane"))
    info = json.loads(dataset_card.read_text())
    info.update(dataset={"spec": "culane:/data"}, shards=[name.replace(shipped_card("lite").stem, "culane")
                                                          for name in info["shards"]])
    dataset_card.write_text(json.dumps(info))
    assert main(["--weights", str(dataset_card), "--roads", "2"]) == LaneError.exit_code
    assert "trained on a lane dataset" in capsys.readouterr().err
    assert json.loads(dataset_card.read_text()) == info  # refused: untouched
