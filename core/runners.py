"""Two ways to run a bundle, one result: OnnxRunner (onnxruntime) and NumpyRunner (core.model).

Interventions are arguments of a run, never edits of an old Trace:
  head_mask        [L, H] float  1 keeps a head, 0 removes its contribution to attn_out
  expert_override  [L, T, K] int -1 lets the router choose that slot, e >= 0 forces expert e
"""
from __future__ import annotations

import os
import time
from typing import Protocol

import numpy as np

from core import model as reference
from core.bundle import DATA_FILE, Bundle
from core.onnx_export import prune_outputs
from core.config import ModelConfig
from core.trace import LAYER_FIELDS, Trace, output_names, select_outputs


class Runner(Protocol):
    name: str
    bundle: Bundle

    def run(self, ids, *, head_mask=None, expert_override=None, fields=None) -> Trace: ...


def plan_outputs(config: ModelConfig, n_tokens: int, fields) -> tuple[list[str] | None, int]:
    """Which outputs a run keeps (None: all) and the first position whose logits it computes."""
    if fields is None:
        return None, 0
    wanted, last_only = select_outputs(config.num_hidden_layers, fields)
    if "logits" not in wanted:
        return wanted, n_tokens  # no row at all: T x V is the largest output of a real vocabulary
    return wanted, n_tokens - 1 if last_only else 0


def check_run_inputs(config: ModelConfig, ids, head_mask=None, expert_override=None):
    """Validate and normalise run arguments; raise ValueError with a message a user can act on."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    t = ids.shape[0]
    if t == 0:
        raise ValueError("nothing to run: the text has no tokens")
    if t > config.max_position_embeddings:
        raise ValueError(f"{t} tokens is past the model's context of {config.max_position_embeddings}")
    if ids.min() < 0 or ids.max() >= config.vocab_size:
        raise ValueError(f"token ids must lie in [0, {config.vocab_size})")
    L, H, K, E = (config.num_hidden_layers, config.num_attention_heads,
                  config.num_experts_per_tok, config.num_local_experts)
    mask = np.ones((L, H), np.float32) if head_mask is None else np.asarray(head_mask, np.float32)
    if mask.shape != (L, H):
        raise ValueError(f"head_mask must have shape ({L}, {H}), got {mask.shape}")
    override = np.full((L, t, K), -1, np.int64) if expert_override is None else np.asarray(expert_override, np.int64)
    if override.shape != (L, t, K):
        raise ValueError(f"expert_override must have shape ({L}, {t}, {K}), got {override.shape}")
    if override.size and (override.min() < -1 or override.max() >= E):
        raise ValueError(f"expert_override entries must be -1 or an expert in [0, {E})")
    return ids, mask, override


class NumpyRunner:
    name = "numpy"

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def run(self, ids, *, head_mask=None, expert_override=None, fields=None) -> Trace:
        """fields: None for the whole trace, or the names to keep (see core.trace.select_outputs)."""
        cfg = self.bundle.config
        ids, mask, override = check_run_inputs(cfg, ids, head_mask, expert_override)
        wanted, logits_from = plan_outputs(cfg, ids.shape[0], fields)
        start = time.perf_counter()
        result = reference.forward(ids, self.bundle.weights, cfg, mask, override,
                                   keep=None if wanted is None else set(wanted), logits_from=logits_from)
        elapsed = time.perf_counter() - start
        outputs = {"embed": result["embed"], "final_norm": result["final_norm"], "logits": result["logits"]}
        for l, layer in enumerate(result["layers"]):
            outputs.update({f"layers.{l}.{name}": layer[name] for name, _, _ in LAYER_FIELDS if name in layer})
        if wanted is not None:
            outputs = {name: outputs[name] for name in wanted}
        return Trace.from_outputs(cfg, ids, outputs, head_mask=mask, expert_override=override,
                                  backend=self.name, elapsed_s=elapsed, weights=self.bundle.weights,
                                  fields=None if wanted is None else frozenset(wanted), logits_from=logits_from)


class OnnxRunner:
    name = "onnx"

    def __init__(self, bundle: Bundle, threads: int | None = None) -> None:
        import onnxruntime as ort  # heavy: only when an ONNX runner is made

        self.bundle = bundle
        self._threads = threads
        self._partial: dict[tuple[str, ...], object] = {}  # sessions of pruned graphs, newest last
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # head_mask/expert_override are overridable initializers by design
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(bundle.path))
        if (bundle.path / DATA_FILE).is_file():
            # Mapped weights stay shared with the file (and with a second, partial session) instead of
            # being copied into packed buffers: a 0.5B model would otherwise cost its weights twice.
            options.add_session_config_entry("session.disable_prepacking", "1")
        self._options = options
        self._session = ort.InferenceSession(bundle.model_bytes, options, providers=["CPUExecutionProvider"])
        self._outputs = output_names(bundle.config.num_hidden_layers)
        # bundles exported before logits_from existed compute every row; the runner then cuts
        self._has_logits_from = "logits_from" in {i.name for i in self._session.get_inputs()}

    def run(self, ids, *, head_mask=None, expert_override=None, fields=None) -> Trace:
        """fields: None for the whole trace, or the names to keep (see core.trace.select_outputs)."""
        cfg = self.bundle.config
        ids, mask, override = check_run_inputs(cfg, ids, head_mask, expert_override)
        wanted, logits_from = plan_outputs(cfg, ids.shape[0], fields)
        padded = np.full((cfg.num_hidden_layers, cfg.max_position_embeddings, cfg.num_experts_per_tok), -1, np.int64)
        padded[:, : ids.shape[0]] = override
        feeds = {"input_ids": ids[None, :], "head_mask": mask, "expert_override": padded}
        if self._has_logits_from:
            feeds["logits_from"] = np.array(logits_from, np.int64)
        names = self._outputs if wanted is None else wanted
        session = self._session if wanted is None else self._partial_session(names)
        start = time.perf_counter()
        values = session.run(names, feeds)
        elapsed = time.perf_counter() - start
        outputs = {name: value[0] for name, value in zip(names, values)}  # drop the batch axis
        if "logits" in outputs and not self._has_logits_from:
            outputs["logits"] = outputs["logits"][logits_from:]
        return Trace.from_outputs(cfg, ids, outputs, head_mask=mask, expert_override=override,
                                  backend=self.name, elapsed_s=elapsed, weights=self.bundle.weights,
                                  fields=None if wanted is None else frozenset(wanted), logits_from=logits_from)


    def _partial_session(self, names: list[str]):
        # onnxruntime keeps every graph output alive through a run, fetched or not: a partial run
        # needs a graph that only has the outputs asked for. Two such sessions are kept.
        import onnxruntime as ort

        key = tuple(names)
        if key not in self._partial:
            while len(self._partial) >= 2:
                self._partial.pop(next(iter(self._partial)))
            graph = prune_outputs(self.bundle.model_bytes, names)
            self._partial[key] = ort.InferenceSession(graph, self._options, providers=["CPUExecutionProvider"])
        return self._partial[key]


def max_difference(a: Trace, b: Trace) -> float:
    """The largest absolute difference between two traces' float fields (equal infinities count as 0)."""
    worst = 0.0
    arrays_b = b.to_arrays()
    for name, x in a.to_arrays().items():
        y = arrays_b[name]
        if x.dtype.kind != "f":
            continue
        same_inf = np.isinf(x) & (x == y)
        with np.errstate(invalid="ignore"):  # inf - inf where both are masked; replaced by 0 below
            diff = np.abs(np.where(same_inf, 0.0, x.astype(np.float64) - y.astype(np.float64)))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        if np.isnan(diff).any():
            return float("inf")
    return worst


def make_runner(bundle: Bundle, backend: str) -> Runner:
    if backend == "onnx":
        return OnnxRunner(bundle)
    if backend == "numpy":
        return NumpyRunner(bundle)
    raise ValueError(f"unknown backend {backend!r} (choose onnx or numpy)")
