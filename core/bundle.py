"""A model bundle: one folder holding model.onnx, tokenizer.json, config.json, MODEL_CARD.md.

load_bundle is the one gate a bundle passes before anything reaches onnxruntime or is allocated
at a size a file asks for. Each step is cheap next to the one after it:
  1. every file the bundle names resolves inside the folder after symlinks, is a regular file,
     and is no larger than its budget (the model's budget follows from config.json);
  2. config.json: finite, whole where it counts, within core.config.BOUNDS; the weights and a
     full-context trace it implies fit their memory budgets;
  3. model.onnx, read without external data: every tensor anywhere in it (initializers, node
     attributes such as Constant's value, nested graphs) that keeps its bytes in another file is
     checked (location inside the folder, declared size against the budget and the file) and read
     here, never by onnx's own loader; standard-domain ops only; the ONNX checker; exactly the
     inputs and outputs the runners use, with the shapes config.json implies; the metadata config;
  4. the weights: the shapes config.json implies, every value finite;
  5. tokenizer.json: parses, no empty special token, vocabulary matches, tokenizes a probe text;
  6. a dry run of a few tokens through both runners with an intervention, each Trace validated
     and the two agreeing within core.parity's tolerances (this catches config values the graph
     does not share, such as rope_theta or rms_norm_eps when the metadata is stripped).
Any failure is one BundleError naming the file and the problem; nothing is ever unpickled.
The two slow checks, the ONNX checker and the dry run, are skipped for a bundle that passed them
before with the same files, code and libraries (core.validation_cache); the others run on every open.
"""
from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np
import onnx
from onnx import TensorProto

from core import validation_cache
from core.config import ModelConfig
from core.model import weight_shapes
from core.onnx_export import CONFIG_KEY, build_model, read_weights, release_pages
from core.raw_export import staged_export
from core.tokenizer import BPETokenizer
from core.attention_summary import SUMMARY_FIELDS, thumb_size
from core.trace import LAYER_FIELDS, MODEL_FIELDS, output_names

MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE, CARD_FILE = "model.onnx", "tokenizer.json", "config.json", "MODEL_CARD.md"
REQUIRED_FILES = (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE)
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # beside tokenizer.json in imported bundles
DATA_FILE = "model.onnx.data"  # weights beside the graph (imported models; past protobuf's 2 GB)
DEFAULT_BUNDLE = Path(__file__).resolve().parent.parent / "resources" / "model"

MAX_WEIGHT_BYTES = 8 << 30     # float32 parameters: 2B, past any model a laptop runs usefully (external data is mapped)
MAX_TRACE_BYTES = 2 << 30      # one full Trace (every field of every layer) at the context the app analyses
MAX_CARD_BYTES = 1 << 20       # shown in About; a larger file is not a model card
MAX_READ_EXTERNAL_BYTES = 256 << 20  # external data up to this is read into memory; more stays mapped
GRAPH_SLACK_BYTES = 1 << 20    # the graph's nodes and small constants, beyond weights (shipped: 22 KB)
STANDARD_DOMAINS = ("", "ai.onnx")
TOKENIZER_PROBE = "Hello, world! 你好，世界。 3.14 ✓ 🙂\n  tabs\tand spaces"


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

    @property
    def context(self) -> int:
        """How many tokens of a text the app analyses (see analysed_context)."""
        return analysed_context(self.config)


def load_bundle(path: str | os.PathLike | None = None) -> Bundle:
    """Open and validate a bundle folder (the shipped one when path is None); see the module doc."""
    folder = Path(path) if path is not None else DEFAULT_BUNDLE
    if not folder.is_dir():
        raise BundleError(f"{folder}: not a folder (a bundle is a folder holding {', '.join(REQUIRED_FILES)})")
    root = _resolve(folder)
    if not (root / MODEL_FILE).exists():
        no_hf = "no weights beside its config.json" if (root / CONFIG_FILE).exists() else f"no {CONFIG_FILE}"
        raise BundleError(f"{folder}: neither a Glassbox bundle (no {MODEL_FILE}) nor a Hugging Face model "
                          f"folder ({no_hf})")
    for name in REQUIRED_FILES:
        bundle_file(root, name)
    config = _load_config(root)
    limit = model_bytes_limit(config)
    graph = bundle_file(root, MODEL_FILE, max_bytes=limit).read_bytes()
    model, external, mapped = _load_onnx(root, graph, limit)
    # the graph as read, unless external data was read into it (a real model's stays mapped)
    model_bytes = model.SerializeToString() if external and not mapped else graph
    key = _validation_key(root, model_bytes, [source for _, source, _, _ in external] if mapped else [])
    checked_before = validation_cache.passed(key)
    if not mapped and not checked_before:
        _check_onnx(root / MODEL_FILE, model)
    weights = _load_weights(root, model, config)
    tokenizer = _load_tokenizer(root, config)
    bundle = Bundle(root, config, tokenizer, weights, model_bytes, _read_card(root))
    if not checked_before:
        _dry_run(bundle)
        validation_cache.remember(key)
    release_pages(weights)
    return bundle


def _validation_key(root: Path, model_bytes: bytes, mapped_files: list[Path]) -> str:
    """core.validation_cache's key: the graph, config.json and the tokenizer files; mapped data by its stat."""
    texts = [bundle_file(root, CONFIG_FILE), bundle_file(root, TOKENIZER_FILE)]
    if (root / TOKENIZER_CONFIG_FILE).exists() or (root / TOKENIZER_CONFIG_FILE).is_symlink():
        texts.append(bundle_file(root, TOKENIZER_CONFIG_FILE, max_bytes=MAX_CARD_BYTES))
    return validation_cache.bundle_key([model_bytes] + [path.read_bytes() for path in texts], mapped_files)


# ---------------------------------------------------------------- files and budgets

def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop is a RuntimeError before Python 3.13
        raise BundleError(f"{path}: cannot be resolved ({exc})") from None


def bundle_file(root: Path, name: str, what: str | None = None, max_bytes: int | None = None) -> Path:
    """root/name after symlinks: a regular file inside root, at most max_bytes long; else BundleError."""
    what = what or name
    if not name or Path(name).is_absolute():
        raise BundleError(f"{root / MODEL_FILE}: {what} points outside the bundle ({name!r})")
    target = _resolve(root / name)
    if root not in target.parents:
        raise BundleError(f"{root / name}: {what} points outside the bundle ({name} -> {target})")
    if not target.is_file():  # also refuses folders, FIFOs and devices, which could block or never end
        raise BundleError(f"{root / name}: missing (or not a regular file)")
    size = target.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise BundleError(f"{root / name}: {size:,} bytes, over this file's limit of {max_bytes:,} for this config")
    return target


def _load_config(root: Path) -> ModelConfig:
    try:
        config = ModelConfig.load(bundle_file(root, CONFIG_FILE))
    except ValueError as exc:  # its messages already start with "config.json: "
        raise BundleError(f"{root / CONFIG_FILE}: {str(exc).removeprefix(CONFIG_FILE + ': ')}") from None
    weight_bytes = weights_bytes(config)
    if weight_bytes > MAX_WEIGHT_BYTES:
        raise BundleError(f"{root / CONFIG_FILE}: its weights would take {weight_bytes / 2**20:,.0f} MiB, "
                          f"more than the {MAX_WEIGHT_BYTES >> 20} MiB this app allows")
    if trace_bytes(config, MIN_CONTEXT) > MAX_TRACE_BYTES:
        raise BundleError(f"{root / CONFIG_FILE}: one run of {MIN_CONTEXT} tokens would take "
                          f"{trace_bytes(config, MIN_CONTEXT) / 2**20:,.0f} MiB, more than the "
                          f"{MAX_TRACE_BYTES >> 20} MiB this app allows")
    return config


def weights_bytes(config: ModelConfig) -> int:
    """float32 bytes of every parameter config implies (config already within BOUNDS)."""
    return 4 * sum(math.prod(shape) for shape in weight_shapes(config).values())


MIN_CONTEXT = 16  # a model the app cannot analyse this many tokens of at once is refused


def trace_bytes(config: ModelConfig, n_tokens: int, names: list[str] | None = None, last_only: bool = False) -> int:
    """Bytes of one Trace of n_tokens tokens: every field, or only the output names given (a partial run;
    last_only: one row of logits)."""
    sym = dict(T=n_tokens, D=config.hidden_size, H=config.num_attention_heads, Dh=config.head_dim,
               E=config.num_local_experts, K=config.num_experts_per_tok, V=config.vocab_size, P=thumb_size(n_tokens))
    specs = {name: (spec, t) for name, spec, t in MODEL_FIELDS}
    specs.update({f"layers.{l}.{name}": (spec, t) for l in range(config.num_hidden_layers)
                  for name, spec, t in LAYER_FIELDS + SUMMARY_FIELDS})
    total = 0
    for name in specs if names is None else names:
        spec, dtype = specs[name]
        rows = {**sym, "T": 1} if name == "logits" and last_only else sym
        total += math.prod(rows[s] for s in spec.split()) * np.dtype(dtype).itemsize
    return total


def analysed_context(config: ModelConfig, names: list[str] | None = None, last_only: bool = False) -> int:
    """The most tokens the app analyses at once: the model's context, or fewer where a full Trace of
    that many (or the partial one of `names`) would pass MAX_TRACE_BYTES (a real model's 8k-128k
    context holds [H, T, T] per layer)."""
    return _context(config, None if names is None else tuple(names), last_only, MAX_TRACE_BYTES)


@functools.lru_cache(maxsize=64)  # every run asks; the search costs a few ms on a 30-layer model
def _context(config: ModelConfig, names: tuple[str, ...] | None, last_only: bool, budget: int) -> int:
    lo, hi = 1, config.max_position_embeddings
    while lo < hi:  # trace_bytes grows with n_tokens: the largest n that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if trace_bytes(config, mid, names and list(names), last_only) <= budget else (lo, mid - 1)
    return lo


def model_bytes_limit(config: ModelConfig) -> int:
    """The most bytes model.onnx and its external data may hold together for this config.

    Twice the float32 weights (a float64 export is fine), the expert_override default, and room
    for the nodes; a 400 MB file for a 2 MB config is refused from its size alone.
    """
    override = 8 * config.num_hidden_layers * config.max_position_embeddings * config.num_experts_per_tok
    nodes = 64 * 1024 * config.num_hidden_layers * (config.num_local_experts + 4)
    return 2 * weights_bytes(config) + override + nodes + GRAPH_SLACK_BYTES


# ---------------------------------------------------------------- model.onnx

def _load_onnx(root: Path, graph: bytes, limit: int) -> tuple[onnx.ModelProto, list, bool]:
    """model.onnx's bytes parsed, its ops and external data checked: (model, external tensors, whether that data
    stays mapped). Small external data is read into the model here."""
    path = root / MODEL_FILE
    try:
        model = onnx.load_from_string(graph)
    except Exception as exc:  # protobuf and onnx raise several unrelated types for a broken file
        raise BundleError(f"{path}: not an ONNX model, or truncated ({type(exc).__name__})") from None
    if not model.graph.node:
        raise BundleError(f"{path}: not an ONNX model (no graph in it), or truncated")
    _check_domains(path, model)
    external = check_external_data(root, model, limit - len(graph))
    if sum(nbytes for *_, nbytes in external) > MAX_READ_EXTERNAL_BYTES:
        # a real model's weights stay on disk at the locations checked above: read_weights maps them and
        # onnxruntime reads them from the bundle folder. The checker would resolve those paths itself
        # (refusing in-bundle symlinks), so it is not run; the signature checks and the dry run remain.
        return model, external, True
    _read_external_data(external)
    return model, external, False


def _check_onnx(path: Path, model: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # the checker raises several unrelated types for a broken graph
        raise BundleError(f"{path}: the ONNX checker rejects it: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """graph and every graph nested in a node attribute (If, Loop, Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            nested = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for sub in nested:
                yield from all_graphs(sub)


def all_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every TensorProto the model holds: initializers, sparse ones, and node attributes, at any depth."""
    nodes = [node for f in model.functions for node in f.node]
    for graph in all_graphs(model.graph):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        nodes += list(graph.node)
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            sparse = ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(attr.sparse_tensors)
            for s in sparse:
                yield from (s.values, s.indices)


def _check_domains(path: Path, model: onnx.ModelProto) -> None:
    # Custom ops would load under the NumPy backend and fail on the first switch to ONNX.
    if model.functions:
        raise BundleError(f"{path}: not a Glassbox graph (it defines its own functions)")
    for graph in all_graphs(model.graph):
        for node in graph.node:
            if node.domain not in STANDARD_DOMAINS:
                raise BundleError(f"{path}: node {node.name or node.op_type} uses the custom op domain "
                                  f"{node.domain!r}; only standard ONNX ops are supported")


def _external_info(path: Path, tensor: TensorProto) -> tuple[str, int, int]:
    """(location, offset, byte count) of a tensor stored outside model.onnx, checked against its shape."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    try:
        offset = int(entries.get("offset", "0"))
        nbytes = math.prod(tensor.dims) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        length = int(entries.get("length", str(nbytes)))
    except (ValueError, TypeError, KeyError) as exc:
        raise BundleError(f"{path}: tensor {tensor.name!r} has unreadable external data ({first_line(exc)})") from None
    if tensor.data_type == TensorProto.STRING or min(tensor.dims, default=0) < 0 or offset < 0 or length != nbytes:
        raise BundleError(f"{path}: tensor {tensor.name!r} declares {length} external bytes "
                          f"for a shape needing {nbytes}")
    return entries.get("location", ""), offset, nbytes


def check_external_data(root: Path, model: onnx.ModelProto, budget: int) -> list[tuple[TensorProto, Path, int, int]]:
    """Every tensor stored outside model.onnx, checked without reading it: [(tensor, file, offset, bytes)].

    Each location must resolve inside the bundle, each declared length must match the tensor's
    shape and lie within its file, and all of them together within `budget` bytes.
    """
    path = root / MODEL_FILE
    plan = []
    for tensor in all_tensors(model):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        location, offset, nbytes = _external_info(path, tensor)
        source = bundle_file(root, location, what=f"tensor {tensor.name!r}")
        if offset + nbytes > source.stat().st_size:
            raise BundleError(f"{path}: tensor {tensor.name!r} needs bytes {offset}..{offset + nbytes} "
                              f"of {location}, which is shorter")
        budget -= nbytes
        if budget < 0:
            raise BundleError(f"{path}: its external data is larger than config.json allows")
        plan.append((tensor, source, offset, nbytes))
    return plan


def _read_external_data(external: list[tuple[TensorProto, Path, int, int]]) -> None:
    """Read checked external tensors into the model by hand, so nothing else resolves their paths."""
    for tensor, source, offset, nbytes in external:
        with open(source, "rb") as f:
            f.seek(offset)
            tensor.raw_data = f.read(nbytes)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _value_signature(value: onnx.ValueInfoProto) -> tuple[int, list[int | None] | None]:
    """(element type, dims with None for a symbolic dim) of a graph input/output; dims None if undeclared."""
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return tensor_type.elem_type, None
    return tensor_type.elem_type, [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]


def _check_signature(path: Path, kind: str, value: onnx.ValueInfoProto, elem_type: int,
                     dims: list[int | None], meaning: str) -> None:
    have_type, have_dims = _value_signature(value)
    if have_type != elem_type:
        raise BundleError(f"{path}: {kind} {value.name} is {TensorProto.DataType.Name(have_type)}, "
                          f"expected {TensorProto.DataType.Name(elem_type)}")
    fits = have_dims is None or (len(have_dims) == len(dims) and all(
        want is None or have is None or have == want for have, want in zip(have_dims, dims)))
    if not fits:
        shown = lambda ds: "[" + ", ".join("T" if d is None else str(d) for d in ds) + "]"  # noqa: E731
        raise BundleError(f"{path}: {kind} {value.name} has shape {shown(have_dims)}, config.json implies "
                          f"{shown(dims)} ({meaning})")


def _check_graph(path: Path, model: onnx.ModelProto, config: ModelConfig) -> None:
    """Metadata config, and exactly the inputs and outputs the runners use, as config.json shapes them."""
    props = {p.key: p.value for p in model.metadata_props}
    if CONFIG_KEY in props:
        try:
            stored = ModelConfig.from_dict(json.loads(props[CONFIG_KEY]))
        except (ValueError, RecursionError, TypeError) as exc:
            raise BundleError(f"{path}: unreadable config in metadata ({first_line(exc)})") from None
        if stored != config:
            raise BundleError(f"{path}: its metadata config differs from config.json")
    L, H, P, K = (config.num_hidden_layers, config.num_attention_heads, config.max_position_embeddings,
                  config.num_experts_per_tok)
    wanted_inputs = {
        "input_ids": (TensorProto.INT64, [1, None], "batch 1, any length"),
        "head_mask": (TensorProto.FLOAT, [L, H], "num_hidden_layers, num_attention_heads"),
        "expert_override": (TensorProto.INT64, [L, P, K],
                            "num_hidden_layers, max_position_embeddings, num_experts_per_tok"),
    }
    outputs = {value.name: value for value in model.graph.output}
    missing = [name for name in output_names(L) if name not in outputs]
    if missing:
        raise BundleError(f"{path}: not a Glassbox graph, {len(missing)} trace output(s) missing, e.g. {missing[0]}")
    inputs = {value.name: value for value in model.graph.input}
    defaults = {t.name for t in model.graph.initializer}
    for name, (elem_type, dims, meaning) in wanted_inputs.items():
        if name not in inputs:
            raise BundleError(f"{path}: the graph has no {name} input (the runners feed "
                              f"{', '.join(wanted_inputs)})")
        _check_signature(path, "input", inputs[name], elem_type, dims, meaning)
    extra = [name for name in inputs if name not in wanted_inputs and name not in defaults]
    if extra:
        raise BundleError(f"{path}: the graph needs an input the runners do not feed: {extra[0]}")
    sym = dict(T=None, D=config.hidden_size, H=H, Dh=config.head_dim, E=config.num_local_experts, K=K,
               V=config.vocab_size)
    specs = {"embed": MODEL_FIELDS[0], "final_norm": MODEL_FIELDS[1], "logits": MODEL_FIELDS[2]}
    specs.update({f"layers.{l}.{f[0]}": f for l in range(L) for f in LAYER_FIELDS})
    for name in output_names(L):
        _, spec, dtype = specs[name]
        elem_type = TensorProto.INT64 if dtype is np.int64 else TensorProto.FLOAT
        _check_signature(path, "output", outputs[name], elem_type, [1] + [sym[s] for s in spec.split()], spec)


def _load_weights(root: Path, model: onnx.ModelProto, config: ModelConfig) -> dict[str, np.ndarray]:
    path = root / MODEL_FILE
    _check_graph(path, model, config)
    try:
        weights = read_weights(model, config, root)  # external data: memory-mapped, read-only
    except ValueError as exc:
        raise BundleError(f"{path}: {exc} (config.json and the weights disagree)") from None
    for name, value in weights.items():
        if not np.isfinite(value).all():
            raise BundleError(f"{path}: weight {name} holds NaN or infinite values")
    release_pages(weights)
    return weights


# ---------------------------------------------------------------- tokenizer, card, dry run

def tokenizer_bytes_limit(config: ModelConfig) -> int:
    # A vocab entry and its merge take ~60 bytes in ours, ~40 in Hugging Face's files.
    return (1 << 20) + 1024 * config.vocab_size


def _tokenizer_config(root: Path) -> dict | None:
    """An imported model's tokenizer_config.json, if the bundle has one: it says whether BOS/EOS are added."""
    if not ((root / TOKENIZER_CONFIG_FILE).exists() or (root / TOKENIZER_CONFIG_FILE).is_symlink()):
        return None
    source = bundle_file(root, TOKENIZER_CONFIG_FILE, max_bytes=MAX_CARD_BYTES)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BundleError(f"{root / TOKENIZER_CONFIG_FILE}: not readable JSON ({first_line(exc)})") from None
    if not isinstance(data, dict):
        raise BundleError(f"{root / TOKENIZER_CONFIG_FILE}: expected a JSON object")
    return data


def _load_tokenizer(root: Path, config: ModelConfig) -> BPETokenizer:
    source = bundle_file(root, TOKENIZER_FILE, max_bytes=tokenizer_bytes_limit(config))
    path = root / TOKENIZER_FILE
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{path}: not readable JSON ({first_line(exc)})") from None
    except RecursionError:
        raise BundleError(f"{path}: not readable JSON (nested too deeply)") from None
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if isinstance(added, list) and any(isinstance(t, dict) and t.get("content") == "" for t in added):
        raise BundleError(f"{path}: a special token is the empty string")
    try:
        tokenizer = BPETokenizer.from_json(data, _tokenizer_config(root))
    except ValueError as exc:
        raise BundleError(f"{path}: {exc}") from None
    if tokenizer.vocab_size > config.vocab_size:  # fewer is fine: real checkpoints pad the embedding
        raise BundleError(f"{path}: vocabulary has {tokenizer.vocab_size} tokens, "
                          f"config.json says vocab_size {config.vocab_size}")
    _probe_tokenizer(path, tokenizer)
    return tokenizer


def _probe_tokenizer(path: Path, tokenizer: BPETokenizer) -> None:
    # Only what every tokenizer must do; decode(encode(s)) == s is not required of every file's pipeline.
    probe = TOKENIZER_PROBE + "".join(tokenizer.special_tokens)
    try:
        ids = tokenizer.encode(probe) + tokenizer.encode_traced(probe).ids
        tokenizer.decode(ids)
    except Exception as exc:  # any failure on a plain text means the file is broken; say which
        raise BundleError(f"{path}: cannot tokenize a sample text ({type(exc).__name__}: {first_line(exc)})") from None
    if not ids or min(ids) < 0 or max(ids) >= tokenizer.vocab_size:
        raise BundleError(f"{path}: tokenizing a sample text gives ids outside the vocabulary")


def _read_card(root: Path) -> str:
    card = root / CARD_FILE
    if not (card.exists() or card.is_symlink()):
        return ""
    return bundle_file(root, CARD_FILE, max_bytes=MAX_CARD_BYTES).read_text(encoding="utf-8", errors="replace")


def _dry_run(bundle: Bundle) -> None:
    from core.runners import dry_run  # core.runners imports this module

    try:
        dry_run(bundle)
    except Exception as exc:  # onnxruntime's own exception types are not ValueErrors; any failure refuses the bundle
        raise BundleError(f"{bundle.path / MODEL_FILE}: a test run failed: {first_line(exc)}") from None


# ---------------------------------------------------------------- writing

def write_bundle(folder: str | os.PathLike, config: ModelConfig, weights: Mapping[str, np.ndarray],
                 tokenizer: BPETokenizer, model_card: str, external_data: bool = False,
                 verbatim: Mapping[str, bytes] | None = None) -> Path:
    """Export weights through core's ONNX builder and write a complete bundle folder.

    external_data puts the weights in model.onnx.data beside the graph (needed past protobuf's 2 GB).
    verbatim: files written as given, in place of the ones made here (an import's own tokenizer files).
    All or nothing (core.raw_export.staged_export): a failure, a full disk say, leaves no folder or half a
    bundle behind, an existing folder as it was, and says "cannot write <file>: <why>; nothing was written".
    """
    config.validate()   # before anything is written: config.json must describe these weights exactly
    files = {TOKENIZER_FILE: tokenizer.json_bytes(),
             CONFIG_FILE: (json.dumps(config.to_dict(), indent=2) + "\n").encode(),
             CARD_FILE: model_card.encode("utf-8"), **(verbatim or {})}
    with staged_export(folder) as staged:
        model = build_model(config, weights, staged.path(DATA_FILE) if external_data else None)
        staged.write(MODEL_FILE, model.SerializeToString())
        for name, data in files.items():
            staged.write(name, data)
    return Path(folder)
