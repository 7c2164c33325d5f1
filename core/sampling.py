"""Turning next-token logits into a choice: temperature, top-k, top-p, greedy, and generation.

The Next-token panel shows exactly the distribution these functions sample from.
The settings apply in the order Hugging Face ``transformers`` uses: divide the logits by the
temperature, keep the top-k, then keep the nucleus (top-p) of what top-k left, renormalised.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from core.raw_export import csv_text

MIN_TEMPERATURE = 1e-6  # temperature 0 means "as sharp as possible", not a division by zero


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 1.0   # divides the logits; -> 0 approaches greedy
    top_k: int = 0             # keep the k most likely tokens; 0 keeps all
    top_p: float = 1.0         # keep the smallest set whose probability reaches p (nucleus)
    greedy: bool = False       # always take the most likely token (temperature, top-k, top-p ignored)
    seed: int = 0              # the generator's seed: the same seed gives the same tokens


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:  # [V] -> [V]
    z = np.asarray(logits, np.float64) / max(float(temperature), MIN_TEMPERATURE)
    z = np.exp(z - z.max())
    return z / z.sum()


def ranked(logits: np.ndarray) -> np.ndarray:  # [V] -> [V] token ids, most likely first
    """Ids by falling logit (= falling probability at any temperature); ties keep the lower id first.

    Ranking the logits rather than probabilities keeps the order exact where a low temperature
    underflows many probabilities to the same 0.
    """
    return np.argsort(-np.asarray(logits, np.float64), kind="stable")


def _nucleus_size(sorted_probs: np.ndarray, top_p: float) -> int:
    """How many of the (falling) probabilities the smallest prefix reaching top_p needs; at least 1."""
    running = np.cumsum(sorted_probs / sorted_probs.sum())
    return min(len(running), int(np.searchsorted(running, top_p)) + 1)


def candidate_distribution(logits: np.ndarray, s: SamplingSettings,
                           order: np.ndarray | None = None) -> np.ndarray:  # [V] -> [V]
    """The probabilities sampling draws from: zero for every token the settings rule out, renormalised.
    order: ranked(logits), where the caller has it (sorting the vocabulary is the costly part)."""
    probs = softmax(logits, s.temperature)
    order = ranked(logits) if order is None else order
    if s.greedy:
        kept = order[:1]
    else:
        kept = order if s.top_k <= 0 else order[: s.top_k]
        if s.top_p < 1.0:
            kept = kept[: _nucleus_size(probs[kept], s.top_p)]
    out = np.zeros_like(probs)
    out[kept] = probs[kept]
    return out / out.sum()


@dataclass(frozen=True)
class Candidates:
    """The n most likely next tokens, as the Next-token panel draws and exports them."""
    ids: np.ndarray          # [n] int64, most likely first
    probability: np.ndarray  # [n] softmax of the logits at temperature 1
    after: np.ndarray        # [n] candidate_distribution under the settings (0: sampling cannot pick it)

    @property
    def in_sampling_set(self) -> np.ndarray:  # [n] bool
        return self.after > 0


CANDIDATES_HEADER = ("rank", "id", "piece", "probability", "probability_after_settings", "in_sampling_set")


def candidates_csv(candidates: Candidates | None, vocab_label: Callable[[int], str]) -> str:
    """rank, id, piece, probability (T = 1), probability after the settings, in_sampling_set (header only
    without candidates)."""
    rows: list[tuple] = [CANDIDATES_HEADER]
    if candidates is not None:
        for i, token_id in enumerate(candidates.ids):
            rows.append((i + 1, int(token_id), vocab_label(int(token_id)), repr(float(candidates.probability[i])),
                         repr(float(candidates.after[i])), "true" if candidates.in_sampling_set[i] else "false"))
    return csv_text(rows)


def top_candidates(logits: np.ndarray, s: SamplingSettings, n: int) -> Candidates:  # [V] -> n rows
    """The n most likely tokens (temperature never changes their order)."""
    probability = softmax(logits)
    order = ranked(logits)
    ids = order[: max(0, n)]
    after = candidate_distribution(logits, s, order)
    return Candidates(ids.astype(np.int64), probability[ids], after[ids])


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
