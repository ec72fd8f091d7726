"""LaneATT weights in orinkit's own format: FP16 shards of a state dict and a JSON card beside them.

A trained LaneATT-R18 is about 27 MB in FP16; files that travel back from a training machine may be at most
16 MiB each, so the state dict is cut into shards (``NAME.00.pt``, ``NAME.01.pt``, …) of whole tensors, each
saved with ``torch.save`` and loaded with ``weights_only=True``. ``NAME.json`` records how the weights were made
(architecture, steps, data seed, held-out F1, the command that reproduces them). The weights that ship with
orinkit live in ``orinkit/lanes/weights/``; where several ship, the best by held-out F1 is the default.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from orinkit.core.files import atomic_write_bytes, atomic_write_text
from orinkit.lanes.errors import LaneError

SHARD_BYTES = 15 << 20


def shipped_folder() -> Path:
    return Path(str(resources.files("orinkit.lanes"))) / "weights"


def shipped_cards() -> list[Path]:
    """The cards of the weights that ship with orinkit (each with its shards), best held-out F1 first."""
    cards = [card for card in shipped_folder().glob("*.json") if _shards(card)]

    def f1(card: Path) -> float:
        try:
            return float(json.loads(card.read_text(encoding="utf-8")).get("f1") or 0.0)
        except (OSError, ValueError):
            return 0.0

    return sorted(cards, key=lambda card: (-f1(card), card.name))


def shipped_card(arch: str | None = None) -> Path | None:
    """The shipped card with the best held-out F1 (of architecture ``arch`` if given), or None."""
    for card in shipped_cards():
        if arch is None or card_arch(json.loads(card.read_text(encoding="utf-8"))) == arch:
            return card
    return None


def has_shipped_weights(arch: str | None = None) -> bool:
    return shipped_card(arch) is not None


def card_arch(info: dict) -> str:
    """The architecture a card's weights are for; cards written before there was a choice hold LaneATT-R18."""
    return str(info.get("arch") or "r18")


def _shards(card: Path) -> list[Path]:
    stem = card.name[: -len(".json")]
    return sorted(card.parent.glob(f"{stem}.[0-9][0-9].pt"))


def save_weights(state: dict, card: str | os.PathLike[str], info: dict, *, half: bool = True,
                 shard_bytes: int = SHARD_BYTES) -> list[Path]:
    """Write ``state`` (a state dict of tensors) as shards beside ``card`` (``NAME.json``), FP16 unless told not
    to, and the card with ``info``; returns the shard paths. Old shards of the same name are replaced."""
    import io

    import torch

    card = Path(card)
    if not card.name.endswith(".json"):
        raise LaneError(f"the weights card must be a .json path, got {card}", hint="e.g. weights/laneatt.json")
    stem = card.name[: -len(".json")]
    groups: list[dict] = [{}]
    size = 0
    for key, tensor in state.items():
        tensor = tensor.detach().cpu()
        if half and tensor.is_floating_point():
            tensor = tensor.half()
        nbytes = tensor.numel() * tensor.element_size()
        if groups[-1] and size + nbytes > shard_bytes:
            groups.append({})
            size = 0
        groups[-1][key] = tensor.contiguous()
        size += nbytes
    for old in _shards(card):
        old.unlink()
    paths = []
    for index, group in enumerate(groups):
        buffer = io.BytesIO()
        torch.save(group, buffer)
        paths.append(atomic_write_bytes(card.with_name(f"{stem}.{index:02d}.pt"), buffer.getvalue()))
    atomic_write_text(card, json.dumps({**info, "shards": [p.name for p in paths], "dtype": "float16" if half
                                        else "float32"}, indent=2) + "\n")
    return paths


def load_weights(card: str | os.PathLike[str]) -> tuple[dict, dict]:
    """The state dict (FP32 tensors) and the card's information of the weights described by ``card``."""
    import torch

    card = Path(card)
    if card.is_dir():
        cards = sorted(card.glob("*.json"))
        if len(cards) != 1:
            raise LaneError(f"{card} holds {len(cards)} weight cards (.json)", hint="name the .json file itself")
        card = cards[0]
    try:
        info = json.loads(card.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LaneError(f"cannot read the weights card {card}: {exc}",
                        hint="pass the .json written beside the shards by python -m orinkit.lanes.train") from exc
    state: dict = {}
    for name in info.get("shards", []):
        path = card.with_name(name)
        try:
            shard = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - truncated or foreign files raise many types
            raise LaneError(f"cannot read weight shard {path}: {type(exc).__name__}: {exc}",
                            hint="copy the shards again, all of them, next to their .json") from exc
        state.update({k: v.float() if v.is_floating_point() else v for k, v in shard.items()})
    if not state:
        raise LaneError(f"{card} lists no weight shards", hint="write weights with orinkit.lanes.weights.save_weights")
    return state, info
