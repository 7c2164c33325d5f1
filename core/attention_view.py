"""The numbers behind the Attention panel, Qt-free: colour scales, hover text and CSV tables.

`trace.layers[l].attn` [H, T, T] holds probabilities (row = query, column = key). The first query
row is always exactly [1, 0, 0, ...] (the first token can only attend to itself), so it is left
out of every colour scale's maximum: otherwise one cell would set the scale of the whole head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.attention_summary import attention_thumbnail, attention_top
from core import role_badges
from core.head_roles import HeadRoles
from core.raw_export import csv_text, matrix_csv_text
from core.trace import Trace


@dataclass(frozen=True)
class ScaleMode:
    key: str        # stable id: "shared", "head", "fixed"
    choice: str     # what the user picks from
    bar_label: str  # the colour bar's label


SCALE_MODES: tuple[ScaleMode, ...] = (
    ScaleMode("shared", "Shared scale (all heads)", "attention weight · same scale for all heads"),
    ScaleMode("head", "Per-head scale", "attention weight · scaled per head"),
    ScaleMode("fixed", "Fixed 0 – 1", "attention weight (probability)"),
)
SCALE_HELP = ("Shared: 0 to the largest weight of any head, the same colours for every head.\n"
              "Per head: 0 to the largest weight of each head, to see patterns in flat heads.\n"
              "The first query row is left out of the maximum: the first token can only attend to\n"
              "itself, so its weight is always 1 (drawn in the top colour).")


def scale_mode(key: str) -> ScaleMode:
    return next(mode for mode in SCALE_MODES if mode.key == key)


def causal_mask(n_tokens: int) -> np.ndarray:  # -> [T, T] bool, True where key > query
    return np.triu(np.ones((n_tokens, n_tokens), dtype=bool), k=1)


def head_maxima(trace: Trace) -> np.ndarray:  # -> [L, H]
    """The largest weight of each head, leaving out query 0 (always exactly 1)."""
    if trace.n_tokens < 2:
        return np.ones((trace.num_layers, trace.num_heads))
    return np.stack([np.maximum(_summary(layer, "attn_top"), 1e-6) for layer in trace.layers])


def thumbnails(trace: Trace) -> np.ndarray:  # -> [L, H, P, P]
    """Every head as the grid draws it (core.attention_summary: max-pooled to at most THUMB_CELLS a side)."""
    return np.stack([_summary(layer, "attn_thumb") for layer in trace.layers])


_SUMMARIES = {"attn_thumb": attention_thumbnail, "attn_top": attention_top}   # core.attention_summary's fields


def _summary(layer, name: str) -> np.ndarray:
    """A layer's attention summary: what a partial run computed, or the same from a full trace's attn (that
    one alone: the scale asks for the tops, the grid for the thumbnails)."""
    held = getattr(layer, name)
    return held if held is not None else _SUMMARIES[name](layer.attn)


def sentence_roles_held(trace: Trace) -> HeadRoles:
    """Every head's role scores on the sentence, from what a partial trace holds (core.role_badges)."""
    return role_badges.sentence_roles_held(trace)


def attention_fields(layer: int) -> tuple[str, ...]:
    """What the Attention panel draws: the selected layer's attn and scores (matrix, lines, hover), and
    every layer's summaries (the grid), so a big model's run keeps one [H, T, T] pair, not L of them."""
    return (f"layers.{layer}.attn", f"layers.{layer}.scores", "attn_thumb", "attn_top")


@dataclass(frozen=True)
class AttentionScale:
    """The colour scale of every head: each runs from 0 to tops[l, h]."""
    mode: ScaleMode
    tops: np.ndarray   # [L, H]

    def levels(self, layer: int, head: int) -> tuple[float, float]:
        return 0.0, float(self.tops[layer, head])

    @property
    def caption(self) -> str:
        """What the thumbnails' colours mean, for the grid's title (on screen it has no colour bar)."""
        if self.mode.key == "fixed":
            return "colours 0 – 1"
        if self.mode.key == "shared":
            return f"one scale 0 – {self.tops.max():.2f}"
        return "each head 0 – its own largest weight"


def attention_scale(maxima: np.ndarray, mode_key: str) -> AttentionScale:  # [L, H] -> scale
    """The scale for a mode from the heads' maxima (head_maxima, computed once per trace)."""
    mode = scale_mode(mode_key)
    if mode.key == "fixed":
        tops = np.ones_like(maxima)
    elif mode.key == "shared":
        tops = np.full_like(maxima, maxima.max())
    else:
        tops = np.asarray(maxima).copy()
    tops.setflags(write=False)
    return AttentionScale(mode, tops)


def cell_text(trace: Trace, layer: int, head: int, query: int, key: int) -> str:
    """'L1 H2 · query → key: weight' and the pre-softmax score, for one cell of one head (the head named:
    the line stays on screen while the user picks another head)."""
    pair = f"L{layer} H{head} · #{query} {trace.label(query)} → #{key} {trace.label(key)}"
    if key > query:
        return f"{pair}: masked (a query never sees later keys)"
    weight = float(trace.layers[layer].attn[head, query, key])
    score = float(trace.layers[layer].scores[head, query, key])
    return f"{pair}: weight {weight:.4f} · pre-softmax {score:.3f}"   # short: it must fit a 1280 x 800 dock's line


def numbered_labels(trace: Trace) -> list[str]:
    """'3:cat': positions keep repeated tokens apart in CSV headers."""
    return [f"{i}:{label}" for i, label in enumerate(trace.labels())]


def long_csv(trace: Trace, layers: Sequence[int], heads: Sequence[int]) -> str:
    """One row per (layer, head, query, key ≤ query): the weight and the pre-softmax score."""
    labels = trace.labels()
    queries, keys = np.tril_indices(trace.n_tokens)
    rows: list[tuple] = [("layer", "head", "query", "query_token", "key", "key_token", "weight", "score")]
    for l in layers:
        attn, scores = trace.layers[l].attn, trace.layers[l].scores
        for h in heads:
            weights, raw = attn[h][queries, keys], scores[h][queries, keys]
            rows += [(l, h, int(q), labels[q], int(k), labels[k], repr(float(w)), repr(float(s)))
                     for q, k, w, s in zip(queries, keys, weights, raw)]
    return csv_text(rows)


def head_csv(trace: Trace, layer: int, head: int, field: str = "attn") -> str:
    """One head's [T, T] matrix of `field` ("attn" or "scores"), queries down, keys across."""
    labels = numbered_labels(trace)
    return matrix_csv_text(getattr(trace.layers[layer], field)[head], labels, labels, "query \\ key")
