"""Turn a Hugging Face model folder (config.json, *.safetensors, tokenizer.json) into a Glassbox bundle.

Supported: the architectures of core.config.FAMILY (Llama, Mistral, Mixtral, Qwen2, Qwen3) with
float32/float16/bfloat16 safetensors weights. Everything else is refused with one line naming what
was found; pytorch_model.bin is never opened (it is a pickle). The weights are checked against the
config before anything is written, converted to float32 one tensor at a time, and go to
model.onnx.data beside the graph when they are large, so both runners map them instead of copying.

import_model() writes a bundle where it is told; cached_import() keeps one per source folder under
~/.cache/glassbox/imports/<content hash>/ and reuses it (the GUI's File -> Import calls the same).
Both take `share`, told how much of the work is done (0..1) as the weights are converted; it may
raise to stop the import, and then nothing is left behind (both write into a staging folder first).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from core.bundle import CARD_FILE, MAX_CARD_BYTES, MODEL_FILE, TOKENIZER_FILE, write_bundle
from core.config import FAMILY, ModelConfig
from core.model import weight_shapes
from core.safetensors_io import open_checkpoint
from core.tokenizer import BPETokenizer, load_tokenizer as load_hf_tokenizer

# Above this many float32 bytes the weights go to model.onnx.data: protobuf cannot hold more than
# 2 GB, and well below that a mapped side file already saves the copies an inline graph costs.
EXTERNAL_DATA_ABOVE = 256 * 2**20
TOKENIZER_EXTRAS = ("tokenizer_config.json", "generation_config.json", "special_tokens_map.json")
_UNSUPPORTED_WEIGHTS = {
    "pytorch_model.bin": "pytorch_model.bin (a PyTorch pickle, which Glassbox never unpickles)",
    "pytorch_model.bin.index.json": "sharded pytorch_model-*.bin files (PyTorch pickles, never unpickled)",
    "tf_model.h5": "tf_model.h5 (TensorFlow weights)",
    "flax_model.msgpack": "flax_model.msgpack (Flax weights)",
}
_SUPPORTED_TEXT = ("supported: config.json with one of " + ", ".join(FAMILY)
                   + ", weights as model.safetensors or model.safetensors.index.json (float32/float16/bfloat16)")
Progress = Callable[[str], None]   # one line for the user
Share = Callable[[float], None]    # the part of the import done, 0..1; raising in it stops the import
HASH_SHARE = 0.2                   # of a cached import: reading every byte for the key, before converting


class HFImportError(ValueError):
    """A folder that cannot be imported; str() is one line for the user."""


def is_hf_folder(folder: str | os.PathLike) -> bool:
    """A Hugging Face model folder (config.json and weights, no model.onnx), as opposed to a Glassbox bundle.

    A config.json alone is neither: a bundle that lost its model.onnx has one too, and calling it a
    Hugging Face folder would send its user off to import it."""
    folder = Path(folder)
    return (folder / "config.json").is_file() and not (folder / MODEL_FILE).is_file() and has_weight_files(folder)


def has_weight_files(folder: Path) -> bool:
    """Any weights a Hugging Face folder keeps, readable by Glassbox or not (import names the unreadable)."""
    return any((folder / name).is_file() for name in ("model.safetensors.index.json", *_UNSUPPORTED_WEIGHTS)) \
        or any(folder.glob("*.safetensors")) or any(folder.glob("*.gguf"))


def load_tokenizer(folder: Path) -> BPETokenizer:
    """The model's tokenizer from its tokenizer.json (the one place import reads a tokenizer)."""
    return load_hf_tokenizer(folder)  # tokenizer.json with the tokenizer_config.json beside it


def read_source_config(folder: Path) -> tuple[dict, ModelConfig]:
    path = folder / "config.json"
    if not folder.is_dir():
        raise HFImportError(f"{folder}: not a folder")
    if not path.is_file():
        raise HFImportError(f"{folder}: not a Hugging Face model folder (no config.json; {_SUPPORTED_TEXT})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HFImportError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HFImportError(f"{path}: expected a JSON object")
    try:
        return data, ModelConfig.from_dict(data)
    except ValueError as exc:
        raise HFImportError(f"{folder}/{exc}") from None


def _check_weight_files(folder: Path) -> None:
    if (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file():
        return
    found = [text for name, text in _UNSUPPORTED_WEIGHTS.items() if (folder / name).is_file()]
    found += [f"{p.name} (GGUF, a quantised format)" for p in sorted(folder.glob("*.gguf"))[:1]]
    what = found[0] if found else "no weights file"
    raise HFImportError(f"{folder}: found {what}; {_SUPPORTED_TEXT}")


def source_weights(folder: Path, config: ModelConfig) -> dict[str, np.ndarray]:
    """The checkpoint's tensors under Glassbox's names (the same as HF's), shapes checked against the config."""
    try:
        tensors = open_checkpoint(folder)
    except (ValueError, OSError) as exc:
        raise HFImportError(f"{folder}/{exc}" if not isinstance(exc, OSError) else f"{folder}: {exc}") from None
    wanted = weight_shapes(config)
    # Tied checkpoints sometimes store lm_head anyway; old ones keep RoPE's inv_freq buffer. Neither is a weight.
    ignorable = {"lm_head.weight"} if config.tie_word_embeddings else set()
    extra = [n for n in tensors if n not in wanted and n not in ignorable and not n.endswith("rotary_emb.inv_freq")]
    if extra:
        raise HFImportError(f"{folder}: the checkpoint holds {extra[0]}, which {config.architecture} with this "
                           f"config.json does not have ({len(extra)} unexpected tensor(s))")
    for name, shape in wanted.items():
        if name not in tensors:
            raise HFImportError(f"{folder}: the checkpoint lacks {name}")
        if tuple(tensors[name].shape) != shape:
            raise HFImportError(f"{folder}: {name} has shape {tuple(tensors[name].shape)}, config.json says {shape}")
    return {name: tensors[name] for name in wanted}


class _ReportedTensor:
    """A source tensor that reports when it is converted (np.asarray), the slow step of an import."""

    def __init__(self, array: np.ndarray, report: Callable[[int], None]) -> None:
        self._array, self._report = array, report

    # Only what a shape check reads: delegating every attribute would hand NumPy the array's
    # __array_interface__, and the conversion would then bypass __array__ and its report.
    shape = property(lambda self: self._array.shape)
    dtype = property(lambda self: self._array.dtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        self._report(self._array.size)
        return np.asarray(self._array, dtype)


def reported(weights: dict[str, np.ndarray], share: Share) -> dict[str, _ReportedTensor]:
    """The weights, each telling `share` the fraction of all elements converted once it is read."""
    total, done = max(1, sum(a.size for a in weights.values())), [0]

    def report(size: int) -> None:
        share(done[0] / total)   # before converting: a cancel lands before the next tensor's work
        done[0] += size

    return {name: _ReportedTensor(array, report) for name, array in weights.items()}


def check_folder(folder: str | os.PathLike) -> tuple[dict, ModelConfig]:
    """The quick checks (config, architecture, weight files, tokenizer present): config.json as read and
    as a ModelConfig; HFImportError with one line. The weights' shapes are checked by the import itself."""
    folder = Path(folder)
    data, config = read_source_config(folder)
    _check_weight_files(folder)
    if not (folder / TOKENIZER_FILE).is_file():
        raise HFImportError(f"{folder}: tokenizer.json missing (supported: a Hugging Face tokenizer.json)")
    return data, config


def model_card(data: dict, config: ModelConfig, folder: Path, dtypes: set[str]) -> str:
    name = data.get("_name_or_path") or folder.name
    params = sum(int(np.prod(s)) for s in weight_shapes(config).values())
    options = [label for label, on in (("mixture of experts", config.is_moe), ("dense SwiGLU MLP", not config.is_moe),
                                       ("q/k/v biases", config.qkv_bias), ("o_proj bias", config.o_bias),
                                       ("per-head q/k RMSNorm", config.qk_norm),
                                       ("tied embeddings", config.tie_word_embeddings),
                                       (f"RoPE scaling {config.rope_scaling_dict.get('rope_type')}", bool(config.rope_scaling)),
                                       (f"sliding window {config.sliding_window}", bool(config.sliding_window)),
                                       ("grouped-query attention", config.num_key_value_heads < config.num_attention_heads))
               if on]
    return (f"# {name}\n\nImported from a Hugging Face model folder by `python main.py import`.\n\n"
            f"- Source architecture: {config.architecture} (model_type {config.model_type})\n"
            f"- Original model: {name} (folder {folder.name})\n"
            f"- {params:,} parameters, {config.num_hidden_layers} layers, d {config.hidden_size}, "
            f"{config.num_attention_heads} query / {config.num_key_value_heads} key-value heads of {config.head_dim}, "
            f"vocabulary {config.vocab_size}\n"
            f"- {', '.join(options)}\n"
            f"- Weights stored as {', '.join(sorted(dtypes))} in the source, float32 here\n\n"
            "## Licence\n\nThe weights and tokenizer are the original model's, under the original model's "
            "licence; read it where you downloaded the model. Glassbox only converted the file format.\n")


def import_model(folder: str | os.PathLike, out: str | os.PathLike, progress: Progress | None = None,
                 share: Share | None = None) -> Path:
    """Check a Hugging Face folder and write it as a bundle in `out`; raise HFImportError with one line."""
    folder, out = Path(folder), Path(out)
    say = progress or (lambda _line: None)
    data, config = check_folder(folder)
    weights = source_weights(folder, config)
    try:
        tokenizer = load_tokenizer(folder)
    except (ValueError, OSError) as exc:
        raise HFImportError(f"{folder / TOKENIZER_FILE}: {exc}") from None
    if tokenizer.vocab_size > config.vocab_size:
        raise HFImportError(f"{folder / TOKENIZER_FILE}: {tokenizer.vocab_size} tokens, but the model's "
                           f"embedding has only vocab_size {config.vocab_size} rows")
    nbytes = 4 * sum(int(np.prod(a.shape)) for a in weights.values())
    say(f"converting {len(weights)} tensors to {nbytes / 2**20:,.0f} MB of float32 weights")
    card = model_card(data, config, folder, {str(a.dtype) for a in weights.values()})
    converted = reported(weights, share) if share is not None else weights
    write_bundle(out, config, converted, tokenizer, card, external_data=nbytes > EXTERNAL_DATA_ABOVE,
                 verbatim=verbatim_tokenizer_files(folder))
    return out


def verbatim_tokenizer_files(folder: Path) -> dict[str, bytes]:
    """The source's tokenizer files as they are: exactly what the model shipped with, written with the rest of
    the bundle (all or none). tokenizer.json was read whole already; a side file past a model card's limit is
    refused here, as the bundle would refuse it at load (MAX_CARD_BYTES), before its bytes are held."""
    files = {}
    try:
        for name in (TOKENIZER_FILE,) + TOKENIZER_EXTRAS:
            path = folder / name
            if not path.is_file():
                continue
            if name != TOKENIZER_FILE and path.stat().st_size > MAX_CARD_BYTES:
                raise HFImportError(f"{path}: {path.stat().st_size:,} bytes, over the {MAX_CARD_BYTES:,} a "
                                    "tokenizer side file may have")
            files[name] = path.read_bytes()
    except OSError as exc:
        raise HFImportError(f"{folder}: cannot read its tokenizer files ({exc.strerror or exc})") from None
    return files


def content_hash(folder: Path, share: Share | None = None) -> str:
    """SHA-256 over the names and bytes of every file an import reads (config, weights, tokenizer)."""
    digest = hashlib.sha256()
    paths = sorted(p for p in folder.iterdir() if p.is_file() and _read_by_import(p.name))
    total, done = max(1, sum(p.stat().st_size for p in paths)), 0
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
                done += len(chunk)
                if share is not None:
                    share(done / total)
        digest.update(b"\0")
    return digest.hexdigest()


def _read_by_import(name: str) -> bool:
    return name in ("config.json", TOKENIZER_FILE, "model.safetensors.index.json") + TOKENIZER_EXTRAS \
        or name.endswith(".safetensors")


def default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "glassbox" / "imports"


def cache_target(folder: str | os.PathLike, cache_root: str | os.PathLike | None = None,
                 share: Share | None = None) -> Path:
    """Where the cache keeps (or would keep) the bundle of a Hugging Face folder: named by its content."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return root / content_hash(Path(folder), share)[:24]


def is_cached(target: Path) -> bool:
    return (target / CARD_FILE).is_file()  # staging is renamed into place only once complete


def cached_import(folder: str | os.PathLike, cache_root: str | os.PathLike | None = None,
                  progress: Progress | None = None, share: Share | None = None) -> Path:
    """The bundle for a Hugging Face folder, imported into the cache the first time, reused after."""
    folder = Path(folder)
    check_folder(folder)  # fail fast, before hashing gigabytes
    target = cache_target(folder, cache_root, None if share is None else (lambda f: share(HASH_SHARE * f)))
    if is_cached(target):
        return target
    later = None if share is None else (lambda f: share(HASH_SHARE + (1 - HASH_SHARE) * f))
    return import_staged(folder, target, progress, later)


def import_staged(folder: str | os.PathLike, target: str | os.PathLike, progress: Progress | None = None,
                  share: Share | None = None) -> Path:
    """import_model into a hidden sibling of `target`, renamed into place once complete: an import that
    fails or is stopped leaves nothing behind. `target` must not exist yet, or be an empty folder."""
    target = Path(target)
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise HFImportError(f"{target}: already exists and is not empty; choose an empty or a new folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".importing-", dir=target.parent))
    try:
        import_model(folder, staging, progress, share)
        if is_cached(target):  # another import of the same folder into the cache finished first
            shutil.rmtree(staging)
            return target
        if target.is_dir():
            target.rmdir()
        staging.replace(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def resolve_model(model: str | None, import_to_cache: bool, progress: Progress | None = None) -> str | None:
    """What a --model argument names: a bundle as is, a Hugging Face folder imported when asked."""
    if model is None or not is_hf_folder(model):
        return model
    if not import_to_cache:
        raise HFImportError(f"{model}: a Hugging Face model folder, not a bundle; import it with "
                           f"`python main.py import {model} --out BUNDLE` or add --import-to-cache")
    return str(cached_import(model, progress=progress))
