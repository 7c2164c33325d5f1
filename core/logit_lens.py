"""Logit lens: read the residual stream at every stage as if the model stopped there.

At each stage (the embedding, then after each layer's attention, then after each whole layer)
the final RMSNorm and the LM head are applied to the residual stream, giving a next-token
distribution per stage and position. The last stage is the model's own prediction; the first
stage where the eventual top token already leads is where the prediction forms.

The whole [S, T, V] distribution of a real model is too large to keep (Qwen2.5-0.5B: 49 stages x
1,024 positions x 151,936 tokens is 30 GB in float32), so the lens keeps what the views read: each
cell's top tokens and the log of its softmax denominator, computed in float32 a block of rows at a
time. A position's [S, V] column (a target's rank) is computed when asked; `probs`, the whole
[S, T, V] in float32, only for `main.py readouts`, one block of rows at a time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.interventions import residual_stages, stage_names
from core.model import lm_head_weight, rms_norm
from core.raw_export import csv_text
from core.trace import Trace

TOP_K = 5
BLOCK_BYTES = 32 * 2**20   # logits held at once while the lens is built: rows x V float32

__all__ = ["STAGES_NOTE", "TOP_K", "LensLogits", "LogitLens", "formation_of", "logit_lens", "stage_label", "stage_names"]


STAGES_NOTE = "Stages: emb = the embedding; Ln.attn = after layer n's attention; Ln = after layer n."


def stage_label(name: str) -> str:
    """A stage's label in every view (lens, patching, attribution), short so a stage axis stays legible:
    "embed" -> "emb", "layers.1.resid_mid" -> "L1.attn" (after its attention), "layers.1.resid_post" -> "L1"."""
    if name == "embed":
        return "emb"
    _, layer, field_name = name.split(".")
    return f"L{layer}.attn" if field_name == "resid_mid" else f"L{layer}"


class LensLogits:
    """The lens's logits of one trace, computed when asked: rows of one stage, or every stage at one position."""

    def __init__(self, trace: Trace) -> None:
        cfg, w = trace.config, trace.weights
        self._stages = residual_stages(trace)                        # S x [T, D]
        self._norm, self._eps = w["model.norm.weight"], cfg.rms_norm_eps
        self._head = lm_head_weight(w, cfg)                           # [V, D]
        self.shape = (len(self._stages), trace.n_tokens, self._head.shape[0])

    def rows(self, stage: int, start: int, stop: int) -> np.ndarray:  # -> [stop - start, V] float32
        """Final RMSNorm + LM head, in float32 exactly as the model's own head computes them."""
        return rms_norm(self._stages[stage][start:stop], self._norm, self._eps) @ self._head.T

    def column(self, position: int) -> np.ndarray:  # -> [S, V] float32
        return rms_norm(np.stack([s[position] for s in self._stages]), self._norm, self._eps) @ self._head.T

    def blocks(self):
        """(stage, start, stop) covering every row, each block's logits about BLOCK_BYTES; the last stage
        first: its top tokens (the model's own prediction) are the target every other stage is ranked by."""
        S, T, V = self.shape
        n = max(1, BLOCK_BYTES // (4 * V))
        for s in [S - 1, *range(S - 1)]:
            for start in range(0, T, n):
                yield s, start, min(start + n, T)


def log_softmax_norm(logits: np.ndarray) -> np.ndarray:  # [N, V] -> [N] float32
    """log(sum(exp(logits))) per row, shifted by the row's max so that exp stays finite."""
    top = logits.max(axis=-1, keepdims=True)
    return (top[:, 0] + np.log(np.exp(logits - top).sum(axis=-1))).astype(np.float32)


def top_ids(logits: np.ndarray, k: int) -> np.ndarray:  # [N, V] -> [N, k] int64
    """The k largest per row, largest first; equal values in id order (argmax takes the first).

    k passes of argmax, each hiding the winner for the next, cost a fraction of a sort or an
    argpartition over 150k columns. `logits` is changed meanwhile and restored before returning.
    """
    rows = np.arange(logits.shape[0])
    ids = np.empty((logits.shape[0], min(k, logits.shape[-1])), np.int64)
    hidden = []
    for j in range(ids.shape[1]):
        ids[:, j] = logits.argmax(axis=-1)
        hidden.append(logits[rows, ids[:, j]])
        logits[rows, ids[:, j]] = -np.inf
    for j, values in enumerate(hidden):
        logits[rows, ids[:, j]] = values
    return ids


@dataclass(frozen=True, eq=False)
class LogitLens:
    stage_names: tuple[str, ...]
    top_ids: np.ndarray         # [S, T, K] int64, the K most likely tokens, most likely first (ties: lower id)
    top_probs: np.ndarray       # [S, T, K] float32, their probabilities
    log_norm: np.ndarray        # [S, T] float32, log of the softmax denominator: p = exp(logit - log_norm)
    # the rank and probability at every cell of the model's own top token at that position (the last
    # stage's top_ids[-1, t, 0], the panel's default target), so the default needs no [S, V] column
    prediction_ranks: np.ndarray   # [S, T] int64
    prediction_probs: np.ndarray   # [S, T] float32
    logits: LensLogits = field(repr=False)
    _column: dict = field(default_factory=dict, repr=False)   # the last position's [S, V] logits

    def top_k(self, position: int, k: int = TOP_K) -> tuple[np.ndarray, np.ndarray]:  # -> ids [S, k], probs [S, k]
        """The k most likely tokens of every stage at a position, most likely first (ties: lower id first)."""
        if k <= self.top_ids.shape[-1]:
            return self.top_ids[:, position, :k], self.top_probs[:, position, :k]
        logits = self.column(position)
        ids = top_ids(logits.copy(), k)   # a copy: top_ids hides values while it works, and the column is shared
        return ids, np.exp(np.take_along_axis(logits, ids, axis=-1) - self.log_norm[:, position, None])

    def column(self, position: int) -> np.ndarray:  # -> [S, V] float32
        if position not in self._column:
            self._column.clear()
            self._column[position] = self.logits.column(position)
        return self._column[position]

    def needs_column(self, position: int, target: int) -> bool:
        """Whether target_ranks must compute the position's [S, V] column (slow on a large vocabulary:
        a caller on a UI thread asks for it elsewhere); the model's own top token is kept."""
        return target != self.top_ids[-1, position, 0]

    def target_ranks(self, position: int, target: int) -> tuple[np.ndarray, np.ndarray]:  # -> rank [S], prob [S]
        """Rank (1 = most likely) and probability of one token at every stage, at a position."""
        if not self.needs_column(position, target):
            return self.prediction_ranks[:, position], self.prediction_probs[:, position]
        logits = self.column(position)
        chosen = logits[:, target]
        return (logits > chosen[:, None]).sum(axis=-1) + 1, np.exp(chosen - self.log_norm[:, position])

    def formation_stage(self, position: int, target: int) -> int | None:
        """The first stage from which `target` stays the top token to the end; None if it is not top at the end."""
        return formation_of(self.target_ranks(position, target)[0])

    def tops_csv(self, trace: Trace) -> str:
        """stage, position, the piece read there, that stage's top token and its probability."""
        rows: list[tuple] = [("stage", "position", "piece", "top_id", "top_piece", "probability")]
        for s, name in enumerate(self.stage_names):
            for t in range(trace.n_tokens):
                i = int(self.top_ids[s, t, 0])
                rows.append((name, t, trace.label(t), i, trace.vocab_label(i), repr(float(self.top_probs[s, t, 0]))))
        return csv_text(rows)

    def position_csv(self, trace: Trace, position: int) -> str:
        """The top TOP_K of every stage at one position."""
        rows: list[tuple] = [("position", "stage", "rank", "token_id", "piece", "probability")]
        ids, probs = self.top_k(position)
        for s, name in enumerate(self.stage_names):
            for k in range(ids.shape[1]):
                rows.append((position, name, k + 1, int(ids[s, k]), trace.vocab_label(int(ids[s, k])),
                             repr(float(probs[s, k]))))
        return csv_text(rows)

    def target_csv(self, trace: Trace, position: int, target: int, ranks: np.ndarray, probs: np.ndarray) -> str:
        """One token's rank and probability at every stage (target_ranks' answer, computed where the caller
        chose: it can be slow on a large vocabulary)."""
        rows: list[tuple] = [("position", "stage", "token_id", "piece", "rank", "probability")]
        for s, name in enumerate(self.stage_names):
            rows.append((position, name, target, trace.vocab_label(target), int(ranks[s]), repr(float(probs[s]))))
        return csv_text(rows)

    @property
    def probs(self) -> np.ndarray:  # -> [S, T, V] float32
        """The whole distribution of every stage and position (readouts.npz's lens_probs); views use top_*."""
        out = np.empty(self.logits.shape, np.float32)
        for s, start, stop in self.logits.blocks():
            out[s, start:stop] = np.exp(self.logits.rows(s, start, stop) - self.log_norm[s, start:stop, None])
        return out


def formation_of(ranks: np.ndarray) -> int | None:  # ranks [S] of one token at one position
    """The first stage from which the token stays ranked 1 to the end; None if it is not top at the end."""
    if ranks[-1] != 1:
        return None
    stage = len(ranks) - 1
    while stage > 0 and ranks[stage - 1] == 1:
        stage -= 1
    return stage


def logit_lens(trace: Trace, k: int = TOP_K) -> LogitLens:
    logits = LensLogits(trace)
    S, T, V = logits.shape
    ids, probs = np.empty((S, T, min(k, V)), np.int64), np.empty((S, T, min(k, V)), np.float32)
    norm, ranks, chosen_probs = np.empty((S, T), np.float32), np.empty((S, T), np.int64), np.empty((S, T), np.float32)
    for s, start, stop in logits.blocks():   # the last stage first: it names the prediction
        block, rows = logits.rows(s, start, stop), slice(start, stop)
        norm[s, rows] = log_softmax_norm(block)
        ids[s, rows] = top_ids(block, k)
        probs[s, rows] = np.exp(np.take_along_axis(block, ids[s, rows], axis=-1) - norm[s, rows, None])
        chosen = np.take_along_axis(block, ids[S - 1, rows, :1], axis=-1)    # [n, 1]: the prediction's logit
        ranks[s, rows] = (block > chosen).sum(axis=-1) + 1
        chosen_probs[s, rows] = np.exp(chosen[:, 0] - norm[s, rows])
    return LogitLens(stage_names(trace.num_layers), ids, probs, norm, ranks, chosen_probs, logits)
