"""Two ways to run a bundle, one result: OnnxRunner (onnxruntime) and NumpyRunner (core.model).

Interventions are arguments of a run, never edits of an old Trace:
  head_mask        [L, H] float  1 keeps a head, 0 removes its contribution to attn_out
  expert_override  [L, T, K] int -1 lets the router choose that slot, e >= 0 forces expert e
  interventions    core.interventions.Interventions: those two and every other one (mean
                   ablation, experts switched off, activation patches) in one value
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
from dataclasses import replace
from typing import Protocol

import numpy as np

import core.bundle as bundles   # MAX_TRACE_BYTES read at each call: the tests lower it
from core import model as reference
from core.bundle import DATA_FILE, Bundle, trace_bytes
from core.attention_summary import SUMMARY_FIELDS
from core.onnx_export import (GATES_INPUT, SWEEP_OUTPUT, build_sweep_model, gated_outputs, output_gates,
                               patches_as_plain_inputs, with_attention_summaries)
from core.config import ModelConfig
from core.interventions import PATCHES, Interventions
from core.parity import field_difference, first_disagreement
from core.trace import LAYER_FIELDS, Trace, output_names, select_outputs
from core.trace_fields import first_logits_row

DRY_RUN_TOKENS = 8  # enough for RoPE and the causal mask to matter; ~0.2 s with the session
M_MMAP_THRESHOLD = -3        # glibc's mallopt parameter (malloc.h)
MAPPED_BLOCK_BYTES = 1 << 20  # blocks this large and larger are mapped on their own and unmapped when freed


class Runner(Protocol):
    name: str
    bundle: Bundle

    def run(self, ids, *, head_mask=None, expert_override=None, interventions=None, fields=None) -> Trace: ...

    def run_logits(self, ids, interventions: Interventions | None = None) -> np.ndarray: ...  # [T] -> [T, V]

    def run_patch_batch(self, ids, interventions: Interventions, patch: str,
                        masks: np.ndarray) -> np.ndarray: ...  # [T], [N, *mask] -> [N, V]


def plan_outputs(config: ModelConfig, fields) -> tuple[list[str] | None, bool]:
    """Which outputs a run keeps (None: all) and whether only the last position's logits are wanted."""
    if fields is None:
        return None, False
    return select_outputs(config.num_hidden_layers, fields)


def run_context(bundle: Bundle, wanted: list[str] | None, last_only: bool) -> int:
    """How many tokens a run may take: Bundle.context for a full trace, more for a partial one that fits."""
    if wanted is None:
        return bundle.context
    return _partial_context(bundle.config, tuple(wanted), last_only, bundles.MAX_TRACE_BYTES)


def fields_context(bundle: Bundle, fields) -> int:
    """How many tokens a run keeping `fields` (Runner.run's request; None: every field) may take."""
    return run_context(bundle, *plan_outputs(bundle.config, fields))


def working_bytes(config: ModelConfig, n_tokens: int) -> int:
    """What a run holds beside the outputs it keeps, at its largest: one layer's scores and probabilities
    [H, T, T], which every layer computes whether they are kept or not."""
    return 2 * 4 * config.num_attention_heads * n_tokens * n_tokens


@functools.lru_cache(maxsize=64)  # every run asks; the search costs a few ms on a 30-layer model
def _partial_context(config: ModelConfig, wanted: tuple[str, ...], last_only: bool, budget: int) -> int:
    """The most tokens (up to the model's own context) whose kept outputs and working arrays together stay
    within the trace budget: past that a partial run would not fit in memory either."""
    lo, hi = 1, config.max_position_embeddings
    while lo < hi:
        mid = (lo + hi + 1) // 2
        fits = trace_bytes(config, mid, list(wanted), last_only) + working_bytes(config, mid) <= budget
        lo, hi = (mid, hi) if fits else (lo, mid - 1)
    return lo


def check_interventions(config: ModelConfig, ids, interventions: Interventions,
                        context: int | None = None) -> tuple[np.ndarray, Interventions]:
    """Validated ids [T] and the filled interventions for them; ValueError with a message a user can act on."""
    ids = _check_ids(config, ids, config.max_position_embeddings if context is None else context)
    return ids, interventions.filled(config, ids.shape[0])


def resolve_interventions(head_mask, expert_override, interventions: Interventions | None) -> Interventions:
    """One Interventions from a run's arguments; head_mask/expert_override may not also be set in `interventions`."""
    if interventions is None:
        return Interventions(head_mask=head_mask, expert_override=expert_override)
    if head_mask is not None or expert_override is not None:
        raise ValueError("give head_mask and expert_override inside interventions, not beside it")
    return interventions


def _check_ids(config: ModelConfig, ids, context: int) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    t = ids.shape[0]
    if t == 0:
        raise ValueError("nothing to run: the text has no tokens")
    if t > context:  # the model's context, or less where the run would not fit in memory (run_context)
        raise ValueError(f"{t} tokens is past the {context} tokens this model analyses at once"
                         + ("" if context == config.max_position_embeddings else " (more would not fit in memory)"))
    if ids.min() < 0 or ids.max() >= config.vocab_size:
        raise ValueError(f"token ids must lie in [0, {config.vocab_size})")
    return ids


def assemble_trace(runner: "Runner", ids: np.ndarray, outputs: dict[str, np.ndarray], iv: Interventions,
                   elapsed: float, wanted: list[str] | None, logits_from: int) -> Trace:
    """A run's outputs as a validated Trace: the graph is data from a file, so its outputs are checked
    like any input before a panel sees them (and the reference is held to the same contract)."""
    return Trace.from_outputs(runner.bundle.config, ids, outputs, head_mask=iv.head_mask,
                              expert_override=iv.expert_override, interventions=iv, backend=runner.name,
                              elapsed_s=elapsed, weights=runner.bundle.weights,
                              fields=None if wanted is None else frozenset(wanted), logits_from=logits_from).validate()


class NumpyRunner:
    name = "numpy"

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def run(self, ids, *, head_mask=None, expert_override=None, interventions=None, fields=None) -> Trace:
        """fields: None for the whole trace, or the names to keep (see core.trace.select_outputs)."""
        cfg = self.bundle.config
        iv = resolve_interventions(head_mask, expert_override, interventions)
        wanted, last_only = plan_outputs(cfg, fields)
        ids, iv = check_interventions(cfg, ids, iv, run_context(self.bundle, wanted, last_only))
        logits_from = first_logits_row(fields, ids.shape[0])
        start = time.perf_counter()
        with np.errstate(all="ignore"):  # overflow and NaN are data a Trace carries, shown by the panels
            result = reference.forward(ids, self.bundle.weights, cfg, interventions=iv,
                                       keep=None if wanted is None else set(wanted), logits_from=logits_from)
        elapsed = time.perf_counter() - start
        outputs = {"embed": result["embed"], "final_norm": result["final_norm"], "logits": result["logits"]}
        for l, layer in enumerate(result["layers"]):
            outputs.update({f"layers.{l}.{name}": layer[name] for name, _, _ in LAYER_FIELDS + SUMMARY_FIELDS
                            if name in layer})
        if wanted is not None:
            outputs = {name: outputs[name] for name in wanted}
        return assemble_trace(self, ids, outputs, iv, elapsed, wanted, logits_from)

    def run_logits(self, ids, interventions: Interventions | None = None) -> np.ndarray:  # [T] -> [T, V]
        """Only the logits of a run: what a sweep reads, without assembling a Trace."""
        ids, iv = check_interventions(self.bundle.config, ids, interventions or Interventions(),
                                      fields_context(self.bundle, ["logits"]))
        return reference.forward(ids, self.bundle.weights, self.bundle.config, interventions=iv)["logits"]

    def run_patch_batch(self, ids, interventions: Interventions, patch: str,
                        masks: np.ndarray) -> np.ndarray:  # [T], [N, *mask] -> [N, V]
        """The last position's logits of N runs of one sentence: `interventions` with the mask of `patch`
        (e.g. "resid_patch") replaced by masks[i] in run i. One run each here."""
        return np.stack([self.run_logits(ids, replace(interventions, **{f"{patch}_mask": m}))[-1] for m in masks])


class OnnxRunner:
    name = "onnx"

    def __init__(self, bundle: Bundle, threads: int | None = None, prepack: bool = True) -> None:
        """prepack: let onnxruntime repack the weights for its matrix kernels at load (2-3x faster runs,
        slower to load); the bundle's dry run of 8 tokens is faster without."""
        self.bundle = bundle
        self._options = session_options(bundle, threads, prepack)
        # The default order (a walk back from the outputs) runs the gates and summaries of the trace graph
        # (core.onnx_export.gated_outputs) late, keeping every layer's [H, T, T] alive until then (135M shape,
        # 512 tokens: +950 MB); this one runs nodes in the graph's order, each gate right after its output.
        self._trace_options = session_options(bundle, threads, prepack)
        self._trace_options.execution_order = _priority_order()
        # A bundle with mapped weights is a real model: every session holds its own packed copy of the
        # weights, so only one session (the trace graph or the sweep graph) is alive at a time.
        self._one_session = (bundle.path / DATA_FILE).is_file()
        if self._one_session:
            return_freed_blocks()
        self._outputs = output_names(bundle.config.num_hidden_layers)
        self._inputs = _graph_inputs(bundle.model_bytes)
        # One graph for every request: the bundle's, plus the attention summaries, every per-layer output gated
        layers = bundle.config.num_hidden_layers
        self._graph, self._patch_defaults = patches_as_plain_inputs(
            gated_outputs(with_attention_summaries(bundle.model_bytes, layers), layers), str(bundle.path))
        # One runner serves the app's model worker and its experiment worker: onnxruntime's run() is
        # thread-safe, so they share the sessions (a real model's packed weights are 1.5 GB a session);
        # the lock only keeps two threads from building or dropping a session at once.
        self._lock = threading.Lock()
        self._session = None if self._one_session else self._new_session(self._graph, self._trace_options)
        self._sweep = None  # the batched graph of core.onnx_export.build_sweep_model, built on first use

    def run(self, ids, *, head_mask=None, expert_override=None, interventions=None, fields=None) -> Trace:
        """fields: None for the whole trace, or the names to keep (see core.trace.select_outputs)."""
        cfg = self.bundle.config
        iv = resolve_interventions(head_mask, expert_override, interventions)
        wanted, last_only = plan_outputs(cfg, fields)
        ids, iv = check_interventions(cfg, ids, iv, run_context(self.bundle, wanted, last_only))
        logits_from = first_logits_row(fields, ids.shape[0])
        feeds = self._feeds(ids, iv)
        if "logits_from" in self._inputs:  # bundles exported before it compute every row; the runner then cuts
            feeds["logits_from"] = np.array(logits_from, np.int64)
        names = self._outputs if wanted is None else wanted
        feeds[GATES_INPUT] = output_gates(cfg.num_hidden_layers, names)
        session = self._full_session()
        feeds = {**self._patch_defaults, **feeds}
        start = time.perf_counter()
        values = session.run(names, feeds)
        elapsed = time.perf_counter() - start
        outputs = {name: value[0] for name, value in zip(names, values)}  # drop the batch axis
        if "logits" in outputs and "logits_from" not in self._inputs:
            outputs["logits"] = outputs["logits"][logits_from:]
        return assemble_trace(self, ids, outputs, iv, elapsed, wanted, logits_from)

    def run_logits(self, ids, interventions: Interventions | None = None) -> np.ndarray:  # [T] -> [T, V]
        """Only the logits of a run: what a sweep reads, without copying out every other output."""
        ids, iv = check_interventions(self.bundle.config, ids, interventions or Interventions(),
                                      fields_context(self.bundle, ["logits"]))
        feeds = {**self._patch_defaults, **self._feeds(ids, iv),
                 GATES_INPUT: output_gates(self.bundle.config.num_hidden_layers, [])}
        return self._full_session().run(["logits"], feeds)[0][0]

    def run_patch_batch(self, ids, interventions: Interventions, patch: str,
                        masks: np.ndarray) -> np.ndarray:  # [T], [N, *mask] -> [N, V]
        """The last position's logits of N runs of one sentence: `interventions` with the mask of `patch`
        (e.g. "resid_patch") replaced by masks[i] in run i. One call of the sweep graph for all N."""
        masks = np.asarray(masks, bool)
        if masks.ndim < 2 or masks.shape[0] == 0:
            raise ValueError("run_patch_batch needs a stack of one mask per run")
        mask_name = f"{patch}_mask"
        ids, iv = check_interventions(self.bundle.config, ids, replace(interventions, **{mask_name: masks[0]}),
                                      self.bundle.context)  # one run's mask stands for all: they share a shape
        feeds = self._feeds(ids, iv)
        for values, mask in PATCHES:  # the sweep graph's masks have a batch axis: one run's mask is [1, ...]
            if mask in feeds:
                feeds[mask] = feeds[mask][None]
        feeds[patch], feeds[mask_name] = getattr(iv, patch), masks  # the values are shared by the N runs
        return self._sweep_session().run([SWEEP_OUTPUT], feeds)[0]


    def _feeds(self, ids: np.ndarray, iv: Interventions) -> dict[str, np.ndarray]:
        cfg = self.bundle.config
        padded = np.full((cfg.num_hidden_layers, cfg.max_position_embeddings, cfg.num_experts_per_tok), -1, np.int64)
        padded[:, : ids.shape[0]] = iv.expert_override
        feeds = {"input_ids": ids[None, :], "head_mask": iv.head_mask, "expert_override": padded}
        # the other interventions are fed only when on, so a graph exported before them still runs plain
        if iv.mean_ablation:
            feeds["ablate_mean"] = np.array(1, np.float32)
        if iv.switches_experts_off():
            feeds["experts_off"] = iv.experts_off
        for values, mask in PATCHES:
            if iv.patches(values):
                feeds[values], feeds[mask] = getattr(iv, values), getattr(iv, mask)
        missing = sorted(set(feeds) - self._inputs)
        if missing:
            raise ValueError(f"this model.onnx predates the {missing[0]} intervention; "
                             "export the bundle again with this version of Glassbox")
        return feeds

    def _new_session(self, model_bytes: bytes, options=None):
        import onnxruntime as ort  # heavy: only when an ONNX runner runs

        # GatherSliceToSplitFusion sizes its outputs from an intervention input's default (a position axis
        # of 1), and a patch fed with T positions then fails ORT's buffer check; the graph runs as fast without it.
        return ort.InferenceSession(model_bytes, options or self._options, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=["GatherSliceToSplitFusion"])

    def _full_session(self):
        with self._lock:
            if self._session is None:
                self._sweep = None
                self._session = self._new_session(self._graph, self._trace_options)
            return self._session

    def _sweep_session(self):
        with self._lock:
            if self._sweep is None:
                if self._one_session:
                    self._session = None
                self._sweep = self._new_session(build_sweep_model(self.bundle.config, self.bundle.model_bytes))
            return self._sweep


def _priority_order():
    import onnxruntime as ort

    return ort.ExecutionOrder.PRIORITY_BASED


def return_freed_blocks() -> None:
    """Make glibc hand freed activations back to the system (a no-op elsewhere; process-wide, idempotent).

    glibc raises its mmap threshold to the largest block freed (up to 32 MB), then serves blocks below it
    from its heap, which fragments and seldom shrinks: a 1024-token run of the 0.5B shape frees hundreds
    of 4-20 MB activations, and its peak RSS was 3.4 GB where the session, the mapped embedding and the
    run's live arrays add up to 2.3 GB. A fixed threshold keeps every block of a MB or more mapped."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc (macOS, Windows, musl)
    libc.mallopt(M_MMAP_THRESHOLD, MAPPED_BLOCK_BYTES)


def session_options(bundle: Bundle, threads: int | None, prepack: bool = True):
    """onnxruntime's options for a bundle: what the defaults would get wrong on a shared laptop."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    # Pool threads that spin between ops hold a core the UI thread and other programs need; on a busy
    # 2-core machine spinning made a 64-token run of a 135M model 1.5-3x slower.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # head_mask/expert_override are overridable initializers by design
    options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(bundle.path))
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    if (bundle.path / DATA_FILE).is_file():
        # A real model's run holds hundreds of MB of activations at a time; the arena keeps its high-water
        # mark for good (0.5B shape, 1024 tokens: 3.0 GB peak with it, 2.7 GB without).
        options.enable_cpu_mem_arena = False
    return options


def _graph_inputs(model_bytes: bytes) -> set[str]:
    """The graph's input names, overridable initializers included, read without building a session."""
    import onnx

    graph = onnx.load_from_string(model_bytes).graph
    return {i.name for i in graph.input}


def max_difference(a: Trace, b: Trace) -> float:
    """The largest absolute difference between two traces' float fields, by core.parity's rule: cells
    non-finite in both alike (the causal mask, a NaN run) count as 0; inf where they are placed differently."""
    arrays_b = b.to_arrays()
    return max((field_difference(x, arrays_b[name]) for name, x in a.to_arrays().items()
                if x.dtype.kind == "f" and name in arrays_b), default=0.0)


def dry_run(bundle: Bundle) -> None:
    """Run a few tokens through both runners with an intervention each must honour; raise if they disagree.

    The ONNX run forces distinct experts at position 0 and removes head 0 of layer 0; the NumPy run
    is given ONNX's routing, so a near-tie in the router cannot make two correct runners differ.
    """
    cfg = bundle.config
    L, H, K, E = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_experts_per_tok, cfg.num_local_experts
    t = min(cfg.max_position_embeddings, DRY_RUN_TOKENS)
    ids = (np.arange(t) * 131 + 1) % cfg.vocab_size   # spread over the vocabulary
    mask = np.ones((L, H), np.float32)
    mask[0, 0] = 0.0
    forced = np.full((L, t, K), -1, np.int64)
    forced[:, 0] = np.arange(E - 1, E - 1 - K, -1)
    onnx_trace = OnnxRunner(bundle, threads=1, prepack=False).run(ids, head_mask=mask, expert_override=forced)
    if not all(np.array_equal(layer.expert_ids[0], forced[l, 0]) for l, layer in enumerate(onnx_trace.layers)):
        raise ValueError("the graph ignores expert_override")
    routing = np.stack([layer.expert_ids for layer in onnx_trace.layers])
    numpy_trace = NumpyRunner(bundle).run(ids, head_mask=mask, expert_override=routing)
    disagreement = first_disagreement(numpy_trace, onnx_trace)
    if disagreement:
        raise ValueError(f"the NumPy reference and the graph disagree on {disagreement}: config.json does not "
                         "describe this graph (rope_theta? rms_norm_eps?)")


def make_runner(bundle: Bundle, backend: str) -> Runner:
    if backend == "onnx":
        return OnnxRunner(bundle)
    if backend == "numpy":
        return NumpyRunner(bundle)
    raise ValueError(f"unknown backend {backend!r} (choose onnx or numpy)")
