"""Class names: from a labels file, a list, or the ``names`` Ultralytics writes into an ONNX file's metadata."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from orinkit.detect.errors import LabelsError


def names_from_mapping(value, where: str) -> tuple[str, ...]:
    """``{0: "person", 1: "bicycle"}`` (keys may be numeric text, as JSON makes them) or ``["person", ...]``,
    or either under a ``names`` key (an Ultralytics data YAML), as a tuple indexed by class id."""
    if isinstance(value, Mapping) and "names" in value:
        value = value["names"]
    if isinstance(value, Mapping):
        try:
            numbered = {int(key): str(name) for key, name in value.items()}
        except (TypeError, ValueError):
            raise LabelsError(f"{where}: class ids must be whole numbers, got keys like {next(iter(value))!r}",
                              hint="use {0: name, 1: name, ...} or a list of names") from None
        if sorted(numbered) != list(range(len(numbered))):
            raise LabelsError(f"{where}: class ids are not 0..{len(numbered) - 1} without gaps",
                              hint="number the classes from 0, one name each")
        return tuple(numbered[index] for index in range(len(numbered)))
    if isinstance(value, (list, tuple)) and all(isinstance(name, (str, int, float)) for name in value):
        return tuple(str(name) for name in value)
    raise LabelsError(f"{where} holds no list or mapping of class names", hint="one name per line, or a YAML/JSON "
                      "list, or a mapping of class id to name")


def parse_metadata_names(text: str) -> tuple[str, ...]:
    """Ultralytics writes ``str(dict)`` (a Python literal, not JSON) into ``metadata_props['names']``."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise LabelsError(f"the model's metadata 'names' is not a Python literal: {text[:60]!r}",
                          hint="pass labels= (--labels FILE) to name the classes") from None
    return names_from_mapping(value, "the model's metadata 'names'")


def read_labels_file(path: Path) -> tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabelsError(f"no labels file at {path}", hint="check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"cannot read the labels file {path}: {exc}", hint="give a UTF-8 text file") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            return names_from_mapping(json.loads(text), str(path))
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{path} is not valid JSON: {exc}", hint="fix the file, or use one name a line") from None
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            return names_from_mapping(yaml.safe_load(text), str(path))
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0]
            raise LabelsError(f"{path} is not valid YAML: {first}", hint="fix the file, or use one name a line") \
                from None
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise LabelsError(f"the labels file {path} is empty", hint="write one class name per line")
    return tuple(lines)


def load_labels(source: str | os.PathLike | Sequence[str]) -> tuple[str, ...]:
    """Class names from a file (one a line, or a ``.yaml``/``.yml``/``.json`` list or mapping) or a list."""
    if isinstance(source, (str, os.PathLike)):
        return read_labels_file(Path(source))
    if isinstance(source, Mapping):
        return names_from_mapping(source, "labels")
    if isinstance(source, Sequence):
        return names_from_mapping(list(source), "labels")
    raise LabelsError(f"labels must be a file path or a list of names, got {type(source).__name__}",
                      hint="pass labels='coco.txt' or labels=['person', 'car']")


def check_count(names: Sequence[str], num_classes: int, where: str) -> None:
    if num_classes and len(names) != num_classes:
        raise LabelsError(f"{where} has {len(names)} class names but the model predicts {num_classes} classes",
                          hint=f"give exactly {num_classes} names, one per class, in class-id order")
