"""A model bundle: one folder holding model.onnx, tokenizer.json, config.json, MODEL_CARD.md.

Loading checks everything up front and fails with one BundleError whose message names
the file and the problem; nothing is ever unpickled. The NumPy reference reads its
weights from model.onnx's initializers, so the graph is the one source of truth.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from core.atomic import atomic_write_bytes
from core.config import ModelConfig
from core.onnx_export import CONFIG_KEY, build_model, read_weights
from core.tokenizer import BPETokenizer
from core.trace import output_names

MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE, CARD_FILE = "model.onnx", "tokenizer.json", "config.json", "MODEL_CARD.md"
REQUIRED_FILES = (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE)
DATA_FILE = "model.onnx.data"
DEFAULT_BUNDLE = Path(__file__).resolve().parent.parent / "resources" / "model"


class BundleError(ValueError):
    """A bundle that cannot be used; str(error) is the one-line message for the user."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    config: ModelConfig
    tokenizer: BPETokenizer
    weights: Mapping[str, np.ndarray] = field(repr=False)
    model_bytes: bytes = field(repr=False)   # the validated graph, handed to onnxruntime as is
    model_card: str = ""

    @property
    def name(self) -> str:
        return self.path.name


def load_bundle(path: str | os.PathLike | None = None) -> Bundle:
    """Open and validate a bundle folder (the shipped one when path is None)."""
    folder = Path(path) if path is not None else DEFAULT_BUNDLE
    if not folder.is_dir():
        raise BundleError(f"{folder}: not a folder (a bundle is a folder holding {', '.join(REQUIRED_FILES)})")
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise BundleError(f"{folder / name}: missing")
    try:
        config = ModelConfig.load(folder / CONFIG_FILE)
    except ValueError as exc:
        raise BundleError(f"{folder / CONFIG_FILE}: {exc}") from None
    model = _load_onnx(folder)
    _check_graph(folder, model, config)
    try:
        weights = read_weights(model, config, folder)
    except ValueError as exc:
        raise BundleError(f"{folder / MODEL_FILE}: {exc} (config.json and the weights disagree)") from None
    try:
        tokenizer = BPETokenizer.load(folder / TOKENIZER_FILE)
    except (ValueError, OSError) as exc:
        raise BundleError(f"{folder / TOKENIZER_FILE}: {exc}") from None
    if tokenizer.vocab_size > config.vocab_size:  # fewer is fine: real checkpoints pad the embedding
        raise BundleError(f"{folder / TOKENIZER_FILE}: vocabulary has {tokenizer.vocab_size} tokens, "
                          f"config.json says vocab_size {config.vocab_size}")
    card = (folder / CARD_FILE).read_text(encoding="utf-8", errors="replace") if (folder / CARD_FILE).is_file() else ""
    return Bundle(folder.resolve(), config, tokenizer, weights, model.SerializeToString(), card)


def _load_onnx(folder: Path) -> onnx.ModelProto:
    path = folder / MODEL_FILE
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        raise BundleError(f"{path}: not an ONNX model, or truncated ({type(exc).__name__})") from None
    if not model.graph.node:
        raise BundleError(f"{path}: not an ONNX model (no graph in it), or truncated")
    _check_external_data(folder, model)
    try:
        if any(uses_external_data(t) for t in model.graph.initializer):
            onnx.checker.check_model(str(path), full_check=True)  # by path: the weights stay on disk, mapped later
        else:
            onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # onnx raises several unrelated types for a broken file
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleError(f"{path}: the ONNX checker rejects it: {first_line}") from None
    return model


def _check_external_data(folder: Path, model: onnx.ModelProto) -> None:
    # A weight stored beside the graph must stay inside the bundle: no ../ or absolute paths.
    root = folder.resolve()
    for tensor in model.graph.initializer:
        if not uses_external_data(tensor):
            continue
        location = ExternalDataInfo(tensor).location
        target = (root / location).resolve()
        if Path(location).is_absolute() or root not in target.parents:
            raise BundleError(f"{folder / MODEL_FILE}: weight {tensor.name} points outside the bundle ({location})")
        if not target.is_file():
            raise BundleError(f"{folder / MODEL_FILE}: weight {tensor.name} needs {location}, which is missing")


def _check_graph(folder: Path, model: onnx.ModelProto, config: ModelConfig) -> None:
    path = folder / MODEL_FILE
    props = {p.key: p.value for p in model.metadata_props}
    if CONFIG_KEY in props:
        try:
            stored = ModelConfig.from_dict(json.loads(props[CONFIG_KEY]))
        except (ValueError, json.JSONDecodeError) as exc:
            raise BundleError(f"{path}: unreadable config in metadata ({exc})") from None
        if stored != config:
            raise BundleError(f"{path}: its metadata config differs from config.json")
    have = {o.name for o in model.graph.output}
    missing = [n for n in output_names(config.num_hidden_layers) if n not in have]
    if missing:
        raise BundleError(f"{path}: not a Glassbox graph, {len(missing)} trace output(s) missing, e.g. {missing[0]}")
    if "input_ids" not in {i.name for i in model.graph.input}:
        raise BundleError(f"{path}: the graph has no input_ids input")


# ---------------------------------------------------------------- writing

def write_bundle(folder: str | os.PathLike, config: ModelConfig, weights: Mapping[str, np.ndarray],
                 tokenizer: BPETokenizer, model_card: str, external_data: bool = False) -> Path:
    """Export weights through core's ONNX builder and write a complete bundle folder.

    external_data puts the weights in model.onnx.data beside the graph (needed past protobuf's 2 GB).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = build_model(config, weights, folder / DATA_FILE if external_data else None)
    atomic_write_bytes(folder / MODEL_FILE, model.SerializeToString())
    tokenizer.save(folder / TOKENIZER_FILE)
    atomic_write_bytes(folder / CONFIG_FILE, (json.dumps(config.to_dict(), indent=2) + "\n").encode())
    atomic_write_bytes(folder / CARD_FILE, model_card.encode("utf-8"))
    return folder
