"""Read .safetensors checkpoints without PyTorch: a JSON header, then raw little-endian arrays.

The header is checked against the file before any array is touched (dtype known, offsets inside
the file and consistent with shape x dtype), and arrays are memory-mapped, so a 2 GB checkpoint
costs no memory until a tensor is converted. bfloat16 comes from ml_dtypes. A sharded checkpoint
(model.safetensors.index.json) is the union of its shards, each checked the same way.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16)}
_HEADER_LIMIT = 100 * 1024 * 1024  # the format's own cap on the JSON header


class SafetensorsError(ValueError):
    """A checkpoint file that cannot be read as it claims; str() is one line naming the file."""


def read_header(path: Path) -> tuple[dict, int]:
    """The tensor entries of a .safetensors file and where its data starts; raise SafetensorsError."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path.name}: too short to be a safetensors file ({size} bytes)")
        (length,) = struct.unpack("<Q", head)
        if length > min(_HEADER_LIMIT, size - 8):
            raise SafetensorsError(f"{path.name}: header length {length} runs past the end of the file ({size} bytes)")
        raw = f.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SafetensorsError(f"{path.name}: the header is not JSON") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path.name}: the header is not a JSON object")
    header.pop("__metadata__", None)
    start = 8 + length
    for name, entry in header.items():
        _check_entry(path.name, name, entry, size - start)
    return header, start


def _check_entry(file: str, name: str, entry, data_size: int) -> None:
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise SafetensorsError(f"{file}: tensor {name} has no dtype/shape/data_offsets")
    if entry["dtype"] not in DTYPES:
        raise SafetensorsError(f"{file}: tensor {name} has dtype {entry['dtype']}, which is not supported "
                               f"(supported: {', '.join(DTYPES)}; quantised checkpoints are not)")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise SafetensorsError(f"{file}: tensor {name} has shape {shape!r}, not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        raise SafetensorsError(f"{file}: tensor {name} has data_offsets {offsets!r}, not [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise SafetensorsError(f"{file}: tensor {name} has data_offsets {offsets} past the end of the data "
                               f"({data_size} bytes)")
    expected = int(np.prod(shape, dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize
    if end - begin != expected:
        raise SafetensorsError(f"{file}: tensor {name} holds {end - begin} bytes, its shape {shape} "
                               f"and dtype {entry['dtype']} need {expected}")


def open_file(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of one file as a read-only memory-mapped array in its stored dtype."""
    header, start = read_header(path)
    if not header:
        return {}
    mapped = np.memmap(path, dtype=np.uint8, mode="r")
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = mapped[start + begin: start + end].view(DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def open_checkpoint(folder: Path) -> dict[str, np.ndarray]:
    """model.safetensors, or the shards a model.safetensors.index.json names, as one name -> array map."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return open_file(folder / "model.safetensors")
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise SafetensorsError(f"{index.name}: not a safetensors index (no weight_map)") from None
    tensors: dict[str, np.ndarray] = {}
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard or not (folder / shard).is_file():
            raise SafetensorsError(f"{index.name}: shard {shard!r} is not a file in {folder}")
        tensors.update(open_file(folder / shard))
    missing = [name for name in weight_map if name not in tensors]
    if missing:
        raise SafetensorsError(f"{index.name}: tensor {missing[0]} is not in {weight_map[missing[0]]}")
    return tensors
