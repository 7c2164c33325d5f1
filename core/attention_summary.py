"""What the attention grid needs of every layer, computed inside a run so [H, T, T] need not be kept.

A big model's layers each hold T x T attention per head (0.5B shape, 1024 tokens: 1.4 GB for all 24
layers); the grid draws every head as a thumbnail a few dozen pixels wide and colours it by the head's
largest weight. So a partial run (Runner.run(ids, fields=[...])) can ask, per layer, for
  attn_thumb  [H, P, P]  the attention max-pooled over blocks of s x s cells, s = ceil(T / THUMB_CELLS),
                         P = ceil(T / s) (the last block padded with 0); s = 1 (P = T) up to THUMB_CELLS
                         tokens, so a short sentence's thumbnail is its attention itself
  attn_top    [H]        the head's largest weight over queries 1..T-1 (query 0 always puts exactly 1 on
                         itself: core.attention_view leaves it out of every colour scale); 0 for T = 1
Max, not mean: a thin pattern (the previous-token diagonal) stays as bright as in the full matrix.
Both runners compute them with these functions' rules (the ONNX graph: core.onnx_export.with_attention_summaries).
"""
from __future__ import annotations

import numpy as np

THUMB_CELLS = 64   # the most cells a thumbnail has along each side
SUMMARY_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("attn_thumb", "H P P", np.float32),
    ("attn_top", "H", np.float32),
)


def thumb_stride(n_tokens: int) -> int:
    return -(-n_tokens // THUMB_CELLS)


def thumb_size(n_tokens: int) -> int:  # P
    return -(-n_tokens // thumb_stride(n_tokens))


def attention_thumbnail(attn: np.ndarray) -> np.ndarray:  # [H, T, T] -> [H, P, P]
    h, t = attn.shape[0], attn.shape[-1]
    s, p = thumb_stride(t), thumb_size(t)
    if s == 1:   # up to THUMB_CELLS tokens the thumbnail is the attention itself (no copy: both are read only)
        return attn
    padded = attn if p * s == t else np.pad(attn, ((0, 0), (0, p * s - t), (0, p * s - t)))
    return padded.reshape(h, p, s, p, s).max(axis=(2, 4))


def attention_top(attn: np.ndarray) -> np.ndarray:  # [H, T, T] -> [H]
    # query 0's row times 0, as the graph does it (a slice of T - 1 rows would be empty for one token)
    later = (np.arange(attn.shape[1]) > 0).astype(attn.dtype)[None, :, None]
    return (attn * later).max(axis=(1, 2))


def summaries(attn: np.ndarray) -> dict[str, np.ndarray]:  # [H, T, T] -> {attn_thumb, attn_top}
    return {"attn_thumb": attention_thumbnail(attn), "attn_top": attention_top(attn)}
