"""Turning next-token logits into a choice: temperature, top-k, top-p, greedy, and generation.

The Next-token panel shows exactly the distribution these functions sample from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 1.0   # divides the logits; -> 0 approaches greedy
    top_k: int = 0             # keep the k most likely tokens; 0 keeps all
    top_p: float = 1.0         # keep the smallest set whose probability reaches p (nucleus)
    greedy: bool = False       # always take the most likely token
    seed: int = 0


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:  # [V] -> [V]
    z = np.asarray(logits, np.float64) / max(float(temperature), 1e-6)
    z = np.exp(z - z.max())
    return z / z.sum()


def candidate_distribution(logits: np.ndarray, s: SamplingSettings) -> np.ndarray:  # [V] -> [V]
    """The probabilities sampling draws from: zero for every token the settings rule out, renormalised."""
    probs = softmax(logits, s.temperature)
    if s.greedy:
        keep = np.zeros_like(probs, bool)
        keep[int(np.argmax(probs))] = True
    else:
        order = np.argsort(-probs, kind="stable")
        keep = np.zeros_like(probs, bool)
        n = len(order) if s.top_k <= 0 else min(s.top_k, len(order))
        kept = order[:n]
        if s.top_p < 1.0:  # the nucleus: tokens until the running total first reaches p
            running = np.cumsum(probs[kept])
            kept = kept[: int(np.searchsorted(running, s.top_p) + 1)]
        keep[kept] = True
    out = np.where(keep, probs, 0.0)
    return out / out.sum()


def choose(logits: np.ndarray, s: SamplingSettings, rng: np.random.Generator) -> int:
    dist = candidate_distribution(logits, s)
    return int(np.argmax(dist)) if s.greedy else int(rng.choice(len(dist), p=dist))


def generate(next_logits: Callable[[list[int]], np.ndarray], ids: Sequence[int], n: int,
             s: SamplingSettings, max_len: int | None = None) -> list[int]:
    """Append n tokens, each chosen from next_logits(ids so far) (the last position's logits [V])."""
    rng = np.random.default_rng(s.seed)
    out = list(ids)
    for _ in range(n):
        if max_len is not None and len(out) >= max_len:
            break
        out.append(choose(next_logits(out), s, rng))
    return out
