"""What a lane training run sees: image ``index`` of data seed ``seed``, the same pair whenever it is asked for.

A training image is a road drawn by :mod:`orinkit.lanes.synth` in the run's data version (``--data``,
:func:`~orinkit.lanes.augment.training_road`), or (a share of ``--frames-share``) an image of your frames or of a
lane dataset (:mod:`orinkit.lanes.datasets`) picked by the same generator; then augmented and mirrored from a
generator seeded by (``seed``, ``index``). Batches come in index order from worker processes.
"""

from __future__ import annotations

import signal

import numpy as np

from orinkit.lanes.datasets import problem_of
from orinkit.lanes.errors import DatasetError
from orinkit.lanes.train_options import IMG_H, IMG_W, SYNTH_LANES, TrainOptions


def _pair(image: np.ndarray, lanes, flip: bool, max_lanes: int = SYNTH_LANES):
    """A BGR CHW uint8 image (scaled to 0..1 on the device, which is cheaper than in the drawing workers) and its
    [max_lanes, 77] targets, mirrored left-right when ``flip``."""
    from orinkit.lanes.targets import lane_targets

    lanes = [np.asarray(lane, dtype=np.float64) for lane in lanes]
    if flip:
        image = image[:, ::-1]
        lanes = [np.stack([(IMG_W - 1) - lane[:, 0], lane[:, 1]], axis=1) for lane in lanes]
    if len(lanes) > max_lanes:
        # A rare image annotated with more lanes than its dataset's usual most: its longest lanes teach most.
        lanes = sorted(lanes, key=lambda lane: -np.ptp(np.clip(lane[:, 1], 0, IMG_H)))[:max_lanes]
    return np.ascontiguousarray(image.transpose(2, 0, 1)), lane_targets(lanes, max_lanes, IMG_W, IMG_H)


def _sample(seed: int, flip: bool, data: str = "wide-v1"):
    """One training pair from the road of ``seed`` in data version ``data``, as drawn (no augmentation)."""
    from orinkit.lanes.augment import training_road

    return _pair(*training_road(data, seed, IMG_W, IMG_H), flip)


def training_pair(index: int, seed: int, *, augmented: bool = True, frames=None, share: float = 0.0,
                  max_lanes: int = SYNTH_LANES, data: str = "wide-v1", strength: float = 1.0, ramp: int = 0):
    """Training image ``index`` of data seed ``seed``: the same pair whenever and wherever it is asked for.
    ``frames`` is a :class:`~orinkit.lanes.datasets.LaneDataset` that ``share`` of the images come from;
    ``strength`` and ``ramp`` the augmentation's (:func:`~orinkit.lanes.augment.augment_strength`)."""
    from orinkit.lanes.augment import augment, augment_strength, training_road

    rng = np.random.default_rng([seed, index])
    if frames is not None and rng.random() < share:
        bgr, lanes = frames.load(int(rng.integers(len(frames))), IMG_W, IMG_H)
    else:
        bgr, lanes = training_road(data, seed * 10**8 + index, IMG_W, IMG_H)
    if augmented:
        bgr, lanes = augment(np.ascontiguousarray(bgr), lanes, rng, augment_strength(index, strength, ramp))
    return _pair(bgr, lanes, bool(rng.random() < 0.5), max_lanes)


def open_training_data(options: TrainOptions, progress):
    """The frames or dataset a run mixes in (None for drawn roads only), opened and checked, and said."""
    from orinkit.lanes.datasets import open_dataset

    if options.frames is not None:
        frames = open_dataset(f"frames:{options.frames}")
        progress(f"fine-tuning on {len(frames)} labelled frames from {options.frames} "
                 f"({options.share:.0%} of the images) and drawn roads")
        return frames
    if options.dataset is not None:
        data = open_dataset(options.dataset, "train")
        rest = "" if options.share == 1 else f" ({options.share:.0%} of the images; the rest drawn roads)"
        progress(f"training on the {data.describe()}{rest}")
        return data
    return None


def target_lanes(frames) -> int:
    """Targets per image of a run: every batch has one shape, so drawn roads are padded to a dataset's most."""
    return SYNTH_LANES if frames is None else max(SYNTH_LANES, frames.max_lanes)


# The mark of a problem that skips its image rather than stop the run: drawing one road failed (a renderer bug,
# reported with the image's index so that it can be drawn again alone), where a dataset's bad file stops the run.
SKIPPED = "skipped: "


def skipped_images(problems) -> tuple[list[str], list[bool]]:
    """The batch's ``problems`` less the skipped images, and per image whether it was skipped."""
    skipped = [problem.startswith(SKIPPED) for problem in problems]
    return [p for p, skip in zip(problems, skipped) if not skip], skipped


def _loader(options: TrainOptions, start: int, frames):
    """Batches (images, targets, problems) of images ``start``, ``start + 1``, … in order, drawn by
    ``options.workers`` processes; ``problems`` holds, per image, the dataset error that replaced it, a
    :data:`SKIPPED` road the renderer failed to draw, or ''."""
    import torch

    lanes = target_lanes(frames)
    share = options.share

    class Roads(torch.utils.data.Dataset):
        def __getitem__(self, index):
            try:
                image, targets = training_pair(index, options.seed, augmented=options.augment, frames=frames,
                                               share=share, max_lanes=lanes, data=options.data,
                                               strength=options.augment_strength, ramp=options.augment_ramp)
            except DatasetError as exc:
                problem = problem_of(exc)
            except Exception as exc:  # noqa: BLE001 - a renderer bug on one road must not end a run of hours
                problem = f"{SKIPPED}image {index}: {type(exc).__name__}: {exc}"
            else:
                return torch.from_numpy(image), torch.from_numpy(targets), ""
            return torch.zeros(3, IMG_H, IMG_W, dtype=torch.uint8), torch.zeros(lanes, 77), problem

    class From(torch.utils.data.Sampler):
        def __iter__(self):
            index = start
            while True:
                yield index
                index += 1

    return torch.utils.data.DataLoader(Roads(), batch_size=options.batch, sampler=From(),
                                       num_workers=options.workers, pin_memory=options.device == "cuda",
                                       prefetch_factor=4 if options.workers else None,
                                       worker_init_fn=_leave_stopping_to_the_trainer)


def _leave_stopping_to_the_trainer(worker: int) -> None:
    """Ctrl-C and ``systemctl stop``/``kill -- -PGID`` signal the whole process group: a drawing worker that died of
    it would end the run before the trainer wrote its last checkpoint. The trainer stops the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
