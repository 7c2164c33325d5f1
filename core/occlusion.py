"""Which tokens mattered for one prediction: occlusion (measured) beside attention rollout (an approximation).

Occlusion: for the prediction made at position P (the distribution over the token after P),
take out each token j <= P in turn — remove it, or put a baseline token in its place — run
the model again and record the change in log p(target). Tokens after P cannot change that
prediction (the attention is causal) and are not run: NaN.

Attention rollout (Abnar & Zuidema 2020): per layer A' = 0.5 * mean over heads of A + 0.5 * I
(the residual connection as attention to oneself), rows renormalised, multiplied from the first
layer up: R = A'_{L-1} ... A'_1 A'_0. Row P of R says how much of position P's final state
"comes from" each input token if attention were all that mixed positions; it ignores the values,
W_O, the MLP/experts and the norms, which is why it can disagree with occlusion.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.raw_export import csv_text
from core.runners import Runner
from core.trace import Trace
from core.trace_fields import logits_from

REMOVE = -1  # baseline_id meaning "take the token out" rather than "put another token in its place"
TABLE_HEADER = ("position", "token", "delta_logprob", "rollout")


@dataclass(frozen=True)
class Occlusion:
    input_ids: np.ndarray      # [T]
    position: int              # P: the prediction after this token
    target_id: int
    baseline_id: int           # REMOVE, or the token put in each position's place
    logprob: float             # log p(target) at P on the whole text
    delta_logprob: np.ndarray  # [T] log p(target) occluded - logprob; NaN after P (or where nothing is left to run)
    rollout: np.ndarray        # [T] row P of the attention rollout
    labels: tuple[str, ...] = ()   # each token's text, for the table ("#id" where not given)

    def token_labels(self) -> list[str]:
        return [self.labels[t] if t < len(self.labels) else f"#{int(i)}" for t, i in enumerate(self.input_ids)]

    def rows(self) -> list[list]:
        """The table: a header, then position, token, delta_logprob (NaN: not run), rollout — a row per token."""
        return [list(TABLE_HEADER)] + [[t, label, float(self.delta_logprob[t]), float(self.rollout[t])]
                                       for t, label in enumerate(self.token_labels())]

    def csv(self) -> str:
        """occlusion.csv: rows() at full precision, a token not run left blank."""
        header, *body = self.rows()
        return csv_text([header] + [[t, label, "" if np.isnan(delta) else repr(delta), repr(rollout)]
                                    for t, label, delta, rollout in body])


def log_softmax(z: np.ndarray) -> np.ndarray:  # [V] -> [V]
    z = z.astype(np.float64)
    shifted = z - z.max()
    return shifted - np.log(np.exp(shifted).sum())


def attention_rollout(attentions: list[np.ndarray]) -> np.ndarray:  # L x [H, T, T] -> [T, T]
    """Abnar & Zuidema's rollout: the product over layers of 0.5 * mean_heads(A) + 0.5 * I, rows renormalised."""
    n = attentions[0].shape[-1]
    rollout = np.eye(n)
    for attn in attentions:
        mixed = 0.5 * attn.astype(np.float64).mean(axis=0) + 0.5 * np.eye(n)
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout  # later layers act on what earlier layers already mixed
    return rollout


def check_position(n_tokens: int, position: int | None) -> int:
    """Default and validate the position: the last token."""
    position = n_tokens - 1 if position is None else int(position)
    if not 0 <= position < n_tokens:
        raise ValueError(f"position {position} is outside the text: positions 0-{n_tokens - 1}")
    return position


def occlusion_fields(position: int) -> tuple[str, ...]:
    """What occlude reads of the sentence's own run: every layer's attention (the rollout), the logits at P."""
    return ("attn", logits_from(position))


def check_prediction(trace: Trace, position: int | None, target: int | None) -> tuple[int, int]:
    """Default and validate (position, target): the last token and the model's top prediction there."""
    vocab = trace.config.vocab_size
    position = check_position(trace.n_tokens, position)
    target = int(np.argmax(trace.logits_at(position))) if target is None else int(target)
    if not 0 <= target < vocab:
        raise ValueError(f"target id {target} is outside the vocabulary: ids 0-{vocab - 1}")
    return position, target


def occluded_ids(ids: np.ndarray, j: int, baseline_id: int) -> np.ndarray:  # [P+1] -> [P] or [P+1]
    if baseline_id == REMOVE:
        return np.delete(ids, j)
    changed = ids.copy()
    changed[j] = baseline_id
    return changed


def occlude(runner: Runner, ids, position: int | None = None, target: int | None = None,
            baseline_id: int = REMOVE, labels: Sequence[str] = ()) -> Occlusion:
    """Occlusion and rollout for the prediction at `position` of `target` (defaults: last token, top prediction);
    labels: the tokens' texts, for the table."""
    ids = np.asarray(ids, np.int64)
    position = check_position(ids.shape[0], position)
    trace = runner.run(ids, fields=occlusion_fields(position))
    position, target = check_prediction(trace, position, target)
    vocab = trace.config.vocab_size
    if baseline_id != REMOVE and not 0 <= baseline_id < vocab:
        raise ValueError(f"baseline id {baseline_id} is outside the vocabulary: ids 0-{vocab - 1}")
    prefix = ids[: position + 1]  # later tokens cannot change the prediction at P
    logprob = float(log_softmax(runner.run_logits(prefix)[-1])[target])
    delta = np.full(ids.shape[0], np.nan)
    for j in range(position + 1):
        changed = occluded_ids(prefix, j, baseline_id)
        if changed.size:  # removing the only token leaves nothing to run
            delta[j] = log_softmax(runner.run_logits(changed)[-1])[target] - logprob
    rollout = attention_rollout([layer.attn for layer in trace.layers])[position]
    return Occlusion(ids, position, target, int(baseline_id), logprob, delta, rollout, tuple(labels))


def occlusion_arrays(result: Occlusion) -> dict[str, np.ndarray]:
    """occlusion.npz: delta_logprob [T], rollout [T], the baseline used (-1: removed) and what they are of."""
    return dict(delta_logprob=result.delta_logprob.astype(np.float32), rollout=result.rollout.astype(np.float32),
                baseline=np.int64(result.baseline_id), position=np.int64(result.position),
                target_id=np.int64(result.target_id), logprob=np.float32(result.logprob), input_ids=result.input_ids)
