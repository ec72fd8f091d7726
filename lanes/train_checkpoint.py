"""A lane training run's checkpoint, and how a run stops to write one.

``OUT/checkpoint.pt`` holds the model, the optimiser, the options and the run's position (step, images seen,
training time, F1 history, sessions), written whole then renamed into place. SIGTERM and Ctrl-C set a flag the
loop reads between steps (:class:`Stop`), so the checkpoint it then writes is whole; :class:`Paused` says the run
stopped before its end and ``--resume`` continues it.
"""

from __future__ import annotations

import dataclasses
import io
import signal
from pathlib import Path

from orinkit.lanes.errors import LaneError
from orinkit.lanes.train_options import RESUMABLE_CHANGES, TrainOptions

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 2


def _options_dict(options: TrainOptions) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(options).items()}


def _options_from(saved: dict, changes: dict) -> TrainOptions:
    fields = {f.name for f in dataclasses.fields(TrainOptions)}
    # A pause belongs to the process that was asked to pause, not to the run.
    values = {k: v for k, v in saved.items() if k in fields and k not in ("pause_minutes", "pause_at_step")}
    values.setdefault("data", "synth-v1")  # a run from before data versions drew the first renderer's roads
    for key in ("init", "frames", "out"):
        if values.get(key) is not None:
            values[key] = Path(values[key])
    values.update(changes)
    return TrainOptions(**values)


def resume_options(out: Path, changes: dict | None = None) -> TrainOptions:
    """The options of the run whose checkpoint is in ``out``, with ``changes`` (only
    :data:`~orinkit.lanes.train_options.RESUMABLE_CHANGES`) applied; refuses a change that would make the resumed
    run another run."""
    changes = dict(changes or {})
    refused = sorted(set(changes) - set(RESUMABLE_CHANGES))
    if refused:
        names = ", ".join("--" + k.replace("_", "-") for k in refused)
        raise LaneError(f"--resume continues the run as it was started; {names} would change it",
                        hint="drop those options, or start a new run in another --out folder")
    state = _read_checkpoint(Path(out) / CHECKPOINT)
    return _options_from(state["options"], {"out": Path(out), **changes})


def _read_checkpoint(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise LaneError(f"no checkpoint to resume from at {path}",
                        hint="give --out the folder of the run to resume, or start a run without --resume")
    try:
        # weights_only: the checkpoint holds tensors, numbers, strings and lists only.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - truncated or foreign files raise many types
        raise LaneError(f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}",
                        hint="it is written whole then renamed: restore it from git, or start the run again") from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise LaneError(f"{path} is not an orinkit training checkpoint (format {CHECKPOINT_FORMAT})",
                        hint="resume from a checkpoint.pt written by python -m orinkit.lanes.train")
    return state


def _write_checkpoint(path: Path, model, optimizer, options: TrainOptions, run: dict) -> None:
    import torch

    from orinkit.core.files import atomic_write_bytes

    buffer = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "options": _options_dict(options), "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), **run}, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def optimizer_to(optimizer, device: str) -> None:
    """Move an optimiser's state (loaded on the CPU) to ``device``."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if hasattr(value, "to") and key != "step":
                state[key] = value.to(device)


class Stop:
    """SIGTERM and SIGINT set a flag that the loop reads between steps, so the checkpoint it then writes is
    whole; a second signal interrupts at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict = {}

    def __enter__(self):
        def handle(signum, frame):
            if self.signum is not None:
                raise KeyboardInterrupt
            self.signum = signum

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, handle)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self.previous.items():
            signal.signal(sig, previous)


class Paused(Exception):
    """The run stopped with a checkpoint before its end (a pause or a signal); ``--resume`` continues it."""

    def __init__(self, checkpoint: Path, step: int, signum: int | None) -> None:
        super().__init__(f"paused at step {step}; checkpoint {checkpoint}")
        self.checkpoint, self.step, self.signum = checkpoint, step, signum
