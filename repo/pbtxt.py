"""config.pbtxt through Triton's own schema (``model_config_pb2``), never through string templates."""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from orinkit.core.files import atomic_write_text
from orinkit.repo.errors import ConfigParseError

ModelConfig = model_config_pb2.ModelConfig
CONFIG_NAME = "config.pbtxt"


def parse_config(text: str, *, source: str = "config.pbtxt") -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigParseError(
            f"{source} is not a valid Triton model config: {exc}",
            hint="fix that line; the schema is Triton's model_config.proto",
        ) from exc
    return config


def read_config(path: str | os.PathLike[str]) -> model_config_pb2.ModelConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigParseError(f"cannot read {path}: {exc.strerror or exc}", hint="check the path") from exc
    return parse_config(text, source=str(path))


def format_config(config: model_config_pb2.ModelConfig) -> str:
    return text_format.MessageToString(config, as_utf8=True, use_short_repeated_primitives=True)


def write_config(path: str | os.PathLike[str], config: model_config_pb2.ModelConfig) -> Path:
    return atomic_write_text(path, format_config(config))
