"""Activation patching between two sentences: which site of the clean run A carries what B lacks?

After TransformerLens's patching.py: one function per sweep kind, results as plain arrays.
The corrupt sentence B is run again with one site at a time overwritten by its value in the
clean run A (core.interventions), and the metric is read:

  metric = logit(answer) - logit(wrong) at the last position      (answer: A's top token, wrong: B's)
  cell   = (metric_patched - metric_B) / (metric_A - metric_B)      so 0 = B's value, 1 = A's

  resid      [S, T]     the residual stream at one (stage, position); S = 1 + 2L stages:
                        embedding, then per layer after attention and after the layer
  heads      [L, H]     one head's output (before W_O) at every position
  heads_pos  [L, H, T]  one head's output at one position
  experts    [L, E]     one expert's term (its output times its routing weight) at every position

A and B must have the same number of tokens: the sweeps pair position t of A with position t
of B, and the metric is read at the last position of both. Sentences of different lengths
are refused, not aligned on a common prefix: the metric's position would then hold a
different token in each run, and a "patched" site could sit on unrelated words.

A sweep runs its cells SWEEP_CHUNK at a time (Runner.run_last_logits: the last position's logits
of each); the ONNX runner runs a chunk as one batch through its sweep graph, the NumPy runner one
by one. A cell whose sites hold the same values in A and B needs no run (it is exactly 0).
bench_patch_sweep times the residual + head + head x position sweeps of a 16-token pair (216 cells).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from core.interventions import PATCHES, Interventions, residual_stages, same_ablations, stage_names
from core.logit_lens import stage_label
from core.model import expert_terms
from core.raw_export import csv_text, matrix_csv_text
from core.runners import Runner
from core.trace import Trace

Progress = Callable[[int, int], None]  # (runs done, runs in the sweep); raise inside it to cancel


@dataclass(frozen=True)
class PatchPair:
    """A clean run A, a corrupt run B, the two tokens the metric compares, and the metric of each run."""
    clean: Trace
    corrupt: Trace
    answer_id: int
    wrong_id: int
    metric_clean: float
    metric_corrupt: float

    def normalised(self, metric: float) -> float:
        # + 0.0 turns the -0.0 of an unchanged run into 0.0
        return (metric - self.metric_corrupt) / (self.metric_clean - self.metric_corrupt) + 0.0


@dataclass(frozen=True)
class PairWording:
    """How the messages name the two texts, the typed tokens and how to choose other tokens: the CLI's
    flags by default; a panel passes its own field names."""
    clean: str = "the clean text"
    corrupt: str = "the corrupt text"
    other_tokens: str = "give a different --answer or --wrong"
    corrupt_input: str = "--corrupt"
    answer_input: str = "--answer"
    wrong_input: str = "--wrong"


def logit_difference(logits: np.ndarray, answer_id: int, wrong_id: int) -> float:  # [T, V] -> scalar
    last = logits[-1].astype(np.float64)
    return float(last[answer_id] - last[wrong_id])


def prepare_pair(runner: Runner, clean_ids, corrupt_ids, answer_id: int | None = None,
                 wrong_id: int | None = None, wording: PairWording = PairWording()) -> PatchPair:
    """Run A and B; ValueError when they cannot be compared (lengths, equal metrics)."""
    clean_ids, corrupt_ids = np.asarray(clean_ids, np.int64), np.asarray(corrupt_ids, np.int64)
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"{wording.clean} has {clean_ids.size} tokens and {wording.corrupt} {corrupt_ids.size}: "
                         "patching pairs the tokens position by position, so both must have the same count")
    clean, corrupt = runner.run(clean_ids), runner.run(corrupt_ids)
    vocab = runner.bundle.config.vocab_size
    answer = int(np.argmax(clean.logits[-1])) if answer_id is None else int(answer_id)
    wrong = int(np.argmax(corrupt.logits[-1])) if wrong_id is None else int(wrong_id)
    for name, token in (("answer", answer), ("wrong", wrong)):
        if not 0 <= token < vocab:
            raise ValueError(f"the {name} token id {token} is outside the vocabulary [0, {vocab})")
    if answer == wrong:
        given = "the answer and the wrong token are" if answer_id is not None and wrong_id is not None else \
            "A's top prediction and B's (the default answer and wrong tokens) are"
        raise ValueError(f"{given} the same token (#{answer}); {wording.other_tokens}")
    pair = PatchPair(clean, corrupt, answer, wrong, logit_difference(clean.logits, answer, wrong),
                     logit_difference(corrupt.logits, answer, wrong))
    if pair.metric_clean == pair.metric_corrupt:
        raise ValueError(f"both texts give the same logit difference ({pair.metric_clean:.4g}): "
                         "there is nothing for a patch to restore; choose other answer tokens")
    return pair


def patched_metric(runner: Runner, pair: PatchPair, interventions: Interventions) -> float:
    """The normalised metric of B run with these interventions (0 = B's value, 1 = A's)."""
    logits = runner.run_logits(pair.corrupt.input_ids, interventions)
    return pair.normalised(logit_difference(logits, pair.answer_id, pair.wrong_id))


def patched_metrics(runner: Runner, pair: PatchPair, interventions: Interventions, patch: str,
                    masks: np.ndarray) -> np.ndarray:  # [N, *mask] -> [N]
    """patched_metric of `interventions` with its `patch` mask replaced by each of masks, in one runner call."""
    last = runner.run_patch_batch(pair.corrupt.input_ids, interventions, patch, masks)  # [N, V]
    return np.array([pair.normalised(logit_difference(row[None], pair.answer_id, pair.wrong_id)) for row in last])


# ---------------------------------------------------------------- the clean run's values at every site

def head_values(trace: Trace) -> np.ndarray:  # -> [L, H, T, Dh]
    return np.stack([layer.head_out for layer in trace.layers])


def expert_values(trace: Trace) -> np.ndarray:  # -> [L, E, T, D]
    """Each expert's weighted output per layer, recomputed from the trace's routing and the weights."""
    return np.stack([expert_terms(layer.moe_in, trace.weights, f"model.layers.{l}.block_sparse_moe", trace.config,
                                  layer.expert_ids, layer.expert_weights)
                     for l, layer in enumerate(trace.layers)])


# ---------------------------------------------------------------- the sweeps

def _mask_shape(pair: PatchPair, patch: str) -> tuple[int, ...]:
    cfg, T = pair.clean.config, pair.clean.n_tokens
    L = cfg.num_hidden_layers
    return {"resid_patch": (1 + 2 * L, T), "head_patch": (L, cfg.num_attention_heads, T),
            "expert_patch": (L, cfg.num_local_experts, T)}[patch]


# sweep kind: (the Interventions patch it writes, the clean run's values there, how many axes index a cell)
SWEEPS: dict[str, tuple[str, Callable[[Trace], np.ndarray], int]] = {
    "resid": ("resid_patch", lambda trace: np.stack(residual_stages(trace)), 2),   # [stage, position]
    "heads": ("head_patch", head_values, 2),         # [layer, head], every position at once
    "heads_pos": ("head_patch", head_values, 3),     # [layer, head, position]
    "experts": ("expert_patch", expert_values, 2),   # [layer, expert], every position at once
}


def sweep_shape(pair: PatchPair, kind: str) -> tuple[int, ...]:
    patch, _, n_axes = SWEEPS[kind]
    return _mask_shape(pair, patch)[:n_axes]


def cell_interventions(pair: PatchPair, kind: str, cell: tuple[int, ...],
                       values: np.ndarray | None = None) -> Interventions:
    """The interventions of one sweep cell: B with that site overwritten by A's value (run it for a full Trace)."""
    patch, values_of, _ = SWEEPS[kind]
    mask = np.zeros(_mask_shape(pair, patch), bool)
    mask[tuple(cell)] = True  # a [layer, head] cell covers every position of that head
    return Interventions(**{patch: values_of(pair.clean) if values is None else values, f"{patch}_mask": mask})


def is_patched_b(pair: PatchPair, ids, interventions: Interventions | None) -> bool:
    """Whether a run of `ids` with `interventions` is B with a site patched in: what a clicked sweep cell shows.
    The patch's values need no check: the app drops a patch as soon as the sentence changes."""
    patched = interventions is not None and any(interventions.patches(values) for values, _ in PATCHES)
    return patched and np.array_equal(np.asarray(ids), pair.corrupt.input_ids)


def pair_mismatch(pair: PatchPair, ids, interventions: Interventions | None) -> str:
    """"" when a run of `ids` with `interventions` is one the pair's sweeps describe: A itself, or B with a
    site patched in, with the heads and experts that were switched off for the sweeps. Else what makes the
    sweeps another run's result: "A" (another sentence) or "switches" (other heads or experts off)."""
    if not (np.array_equal(np.asarray(ids), pair.clean.input_ids) or is_patched_b(pair, ids, interventions)):
        return "A"
    return "" if same_ablations(interventions, pair.clean.interventions) else "switches"


def is_run_of_pair(pair: PatchPair, ids, interventions: Interventions | None) -> bool:
    return not pair_mismatch(pair, ids, interventions)


SWEEP_CHUNK = 32  # cells per runner call: the ONNX runner runs them as one batch through its sweep graph


def sweep(runner: Runner, pair: PatchPair, kind: str, progress: Progress | None = None) -> np.ndarray:
    """The normalised metric with each cell of sweep `kind` patched in turn, SWEEP_CHUNK cells per runner call.

    A cell whose sites hold bit for bit the same values in A and B (typically every position
    before the first token that differs) would rerun B unchanged: it is 0 without a run.
    """
    patch, values_of, _ = SWEEPS[kind]
    values = values_of(pair.clean)
    unchanged = np.all(values == values_of(pair.corrupt), axis=-1)  # [sites]: a patch there changes nothing
    base = Interventions(**{patch: values, f"{patch}_mask": np.zeros(_mask_shape(pair, patch), bool)})
    cells = list(np.ndindex(*sweep_shape(pair, kind)))
    out = np.zeros(sweep_shape(pair, kind), np.float32)
    pending: list[tuple[int, ...]] = []
    reported = 0
    for done, cell in enumerate(cells, 1):
        if not unchanged[cell].all():
            pending.append(cell)
        if len(pending) == SWEEP_CHUNK or (pending and done == len(cells)):
            masks = np.zeros((len(pending), *_mask_shape(pair, patch)), bool)
            for i, c in enumerate(pending):
                masks[i][c] = True  # as cell_interventions: a [layer, head] cell covers every position
            metrics = patched_metrics(runner, pair, base, patch, masks)
            for c, metric in zip(pending, metrics):
                out[c] = metric
            pending = []
        if progress is not None and not pending:  # every cell up to here has its value
            for count in range(reported + 1, done + 1):
                progress(count, len(cells))
            reported = done
    return out


@dataclass(frozen=True)
class PatchResult:
    pair: PatchPair
    resid: np.ndarray      # [S, T]
    heads: np.ndarray      # [L, H]
    heads_pos: np.ndarray  # [L, H, T]
    experts: np.ndarray    # [L, E]
    clean_labels: tuple[str, ...] = ()     # each token's text in A and in B, for the tables ("#id" where not given)
    corrupt_labels: tuple[str, ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        return stage_names(self.pair.clean.num_layers)

    def token_labels(self) -> tuple[list[str], list[str]]:
        """A's and B's token texts."""
        return (_labels_or_ids(self.clean_labels, self.pair.clean.input_ids),
                _labels_or_ids(self.corrupt_labels, self.pair.corrupt.input_ids))

    def sweep_table(self, kind: str) -> tuple[np.ndarray, list[str], list[str]]:
        """Sweep `kind` as a 2-D matrix with its row and column labels (heads_pos: a row per layer.head)."""
        L, H = self.heads.shape
        positions = [f"{t}:{label}" for t, label in enumerate(self.token_labels()[1])]
        layers = [str(l) for l in range(L)]
        if kind == "resid":
            return self.resid, [stage_label(name) for name in self.stages], positions
        if kind == "heads":
            return self.heads, layers, [str(h) for h in range(H)]
        if kind == "heads_pos":
            return self.heads_pos.reshape(L * H, -1), [f"{l}.{h}" for l in range(L) for h in range(H)], positions
        return self.experts, layers, [str(e) for e in range(self.experts.shape[1])]

    def sweep_csv(self, kind: str) -> str:
        """One sweep's matrix as a labelled table (the panel's figure's numbers)."""
        return matrix_csv_text(*self.sweep_table(kind), corner="normalised_metric")

    def csv(self) -> str:
        """patch.csv: a row per sweep cell: which sweep, the site, the tokens at its position, the normalised metric."""
        clean, corrupt = self.token_labels()
        rows: list[list] = [["sweep", "stage", "layer", "head", "expert", "position", "token_clean", "token_corrupt",
                             "normalised_metric"]]

        def tokens(t):
            return [t, clean[t], corrupt[t]] if t != "" else ["", "", ""]

        for (s, t), v in np.ndenumerate(self.resid):
            rows.append(["resid", self.stages[s], "", "", "", *tokens(t), repr(float(v))])
        for (l, h), v in np.ndenumerate(self.heads):
            rows.append(["heads", "", l, h, "", *tokens(""), repr(float(v))])
        for (l, h, t), v in np.ndenumerate(self.heads_pos):
            rows.append(["heads_pos", "", l, h, "", *tokens(t), repr(float(v))])
        for (l, e), v in np.ndenumerate(self.experts):
            rows.append(["experts", "", l, "", e, *tokens(""), repr(float(v))])
        return csv_text(rows)


def _labels_or_ids(labels: Sequence[str], ids: np.ndarray) -> list[str]:
    return [labels[t] if t < len(labels) else f"#{int(i)}" for t, i in enumerate(ids)]


def run_all_sweeps(runner: Runner, pair: PatchPair, progress: Progress | None = None) -> PatchResult:
    """Every sweep; progress counts the runs of all of them together."""
    sizes = {kind: int(np.prod(sweep_shape(pair, kind))) for kind in SWEEPS}
    total, offset, results = sum(sizes.values()), 0, {}
    for kind, size in sizes.items():
        report = None if progress is None else (lambda done, _, start=offset: progress(start + done, total))
        results[kind] = sweep(runner, pair, kind, report)
        offset += size
    return PatchResult(pair, **results)


def patch_arrays(result: PatchResult) -> dict[str, np.ndarray]:
    """patch.npz's keys, exactly as the issue fixes them."""
    pair = result.pair
    return dict(metric_clean=np.float32(pair.metric_clean), metric_corrupt=np.float32(pair.metric_corrupt),
                resid=result.resid, heads=result.heads, heads_pos=result.heads_pos, experts=result.experts,
                answer_id=np.int64(pair.answer_id), wrong_id=np.int64(pair.wrong_id),
                input_ids_clean=pair.clean.input_ids, input_ids_corrupt=pair.corrupt.input_ids)


# ---------------------------------------------------------------- the bench

BENCH_SWEEPS = ("resid", "heads", "heads_pos")  # the target: residual and head sweeps of a 16-token pair

def bench_patch_sweep(runner: Runner | None = None, n_tokens: int = 16, repeats: int = 5) -> dict[str, float]:
    """Median milliseconds of the residual + head + head x position sweeps on an n_tokens pair (`patch_sweep_ms.16`)."""
    if runner is None:
        from core.bundle import load_bundle
        from core.runners import OnnxRunner
        runner = OnnxRunner(load_bundle(None))
    pair = _bench_pair(runner, n_tokens)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for kind in BENCH_SWEEPS:
            sweep(runner, pair, kind)
        times.append(time.perf_counter() - start)
    cells = sum(int(np.prod(sweep_shape(pair, kind))) for kind in BENCH_SWEEPS)
    return {f"patch_sweep_ms.{n_tokens}": statistics.median(times) * 1e3, "cells": cells}


def _bench_pair(runner: Runner, n_tokens: int) -> PatchPair:
    # a sample sentence cut to exactly n_tokens; B changes the token in the middle; wrong = B's best token other than A's
    from core.sample_text import sample_sentences

    text = " ".join(sample_sentences(8, seed=0))
    clean = np.array(runner.bundle.tokenizer.encode(text)[:n_tokens], np.int64)
    corrupt = clean.copy()
    corrupt[n_tokens // 2] = (clean[n_tokens // 2] + 1) % runner.bundle.config.vocab_size
    answer = int(np.argmax(runner.run_logits(clean)[-1]))
    ranked = np.argsort(-runner.run_logits(corrupt)[-1])
    return prepare_pair(runner, clean, corrupt, answer, int(ranked[1] if ranked[0] == answer else ranked[0]))
