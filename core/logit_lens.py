"""Logit lens: read the residual stream at every stage as if the model stopped there.

At each stage (the embedding, then after each layer's attention, then after each whole layer)
the final RMSNorm and the LM head are applied to the residual stream, giving a next-token
distribution per stage and position. The last stage is the model's own prediction; the first
stage where the eventual top token already leads is where the prediction forms.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.model import lm_head_weight, rms_norm, softmax
from core.trace import Trace

TOP_K = 5


def stage_names(num_layers: int) -> tuple[str, ...]:
    """`embed`, then per layer `L{l}.resid_mid` (after attention) and `L{l}.resid_post` (after the layer)."""
    names = ["embed"]
    for l in range(num_layers):
        names += [f"L{l}.resid_mid", f"L{l}.resid_post"]
    return tuple(names)


def stage_label(name: str) -> str:
    """The readable form of a stage name: 'embedding', 'L0 after attention', 'L0 after layer'."""
    if name == "embed":
        return "embedding"
    layer, field = name.split(".")
    return f"{layer} after {'attention' if field == 'resid_mid' else 'layer'}"


def residual_stages(trace: Trace) -> np.ndarray:  # -> [S, T, D]
    stages = [trace.embed]
    for layer in trace.layers:
        stages += [layer.resid_mid, layer.resid_post]
    return np.stack(stages)


def lens_logits(trace: Trace) -> np.ndarray:  # -> [S, T, V] float32
    """Final RMSNorm + LM head on every stage, in float32 exactly as the model's own head computes them."""
    cfg, w = trace.config, trace.weights
    normed = rms_norm(residual_stages(trace), w["model.norm.weight"], cfg.rms_norm_eps)   # [S, T, D]
    # One [S*T, D] product: NumPy's stacked matmul skips BLAS for a transposed operand (6x slower at T=256).
    flat = normed.reshape(-1, normed.shape[-1]) @ lm_head_weight(w, cfg).T
    return flat.reshape(*normed.shape[:-1], -1)


@dataclass(frozen=True)
class LogitLens:
    stage_names: tuple[str, ...]
    probs: np.ndarray                  # [S, T, V] float32, softmax over the vocabulary per stage and position

    def top_k(self, position: int, k: int = TOP_K) -> tuple[np.ndarray, np.ndarray]:  # -> ids [S, k], probs [S, k]
        """The k most likely tokens of every stage at a position, most likely first (ties: lower id first)."""
        p = self.probs[:, position]
        ids = np.argsort(-p, axis=-1, kind="stable")[:, :k]
        return ids, np.take_along_axis(p, ids, axis=-1)

    def target_ranks(self, position: int, target: int) -> tuple[np.ndarray, np.ndarray]:  # -> rank [S], prob [S]
        """Rank (1 = most likely) and probability of one token at every stage, at a position."""
        p = self.probs[:, position]
        prob = p[:, target]
        return (p > prob[:, None]).sum(axis=-1) + 1, prob

    def formation_stage(self, position: int, target: int) -> int | None:
        """The first stage from which `target` stays the top token to the end; None if it is not top at the end."""
        ranks, _ = self.target_ranks(position, target)
        if ranks[-1] != 1:
            return None
        stage = len(ranks) - 1
        while stage > 0 and ranks[stage - 1] == 1:
            stage -= 1
        return stage


def logit_lens(trace: Trace) -> LogitLens:
    probs = softmax(lens_logits(trace).astype(np.float64)).astype(np.float32)
    return LogitLens(stage_names(trace.num_layers), probs)
