"""Role badges: the short names a head-grid thumbnail carries for the roles its head plays.

A head earns a role's badge when its score (core.head_roles) reaches BADGE_THRESHOLD on the sentence
or on the bundle's fixed probe: then at least that share of its attention sits on the role's cells.
The probe's scores arrive later than the sentence's (the model runs it on the worker); until then the
badges come from the sentence alone. A big model's partial trace holds few layers' attention, but up
to THUMB_CELLS tokens every layer's thumbnail is its attention itself (core.attention_summary): the
sentence's scores come from those; past that, a layer without its attention scores NaN (the probe's
badges still show).
"""
from __future__ import annotations

import numpy as np

from core.attention_summary import thumb_stride
from core.head_roles import ROLE_NAMES, HeadRoles, role_evidence, score_roles
from core.trace import LayerTrace, Trace

BADGE_THRESHOLD = 0.5   # more than half of the head's attention on the role's cells
BADGES: dict[str, str] = {"previous_token": "prev", "self": "self", "first_token": "sink",
                          "duplicate_token": "dup", "induction": "ind"}
ROLE_LABELS: dict[str, str] = {"previous_token": "previous token", "self": "self", "first_token": "first token (sink)",
                               "duplicate_token": "duplicate token", "induction": "induction"}


def held_attention(layer: LayerTrace, n_tokens: int) -> np.ndarray | None:  # -> [H, T, T]
    """A layer's attention as the trace holds it: attn, or the thumbnail where that is attn cell for cell."""
    if layer.attn is not None:
        return layer.attn
    if layer.attn_thumb is not None and thumb_stride(n_tokens) == 1:
        return layer.attn_thumb
    return None


def sentence_roles_held(trace: Trace) -> HeadRoles:
    """Every head's role scores on the trace's sentence, from the attention each layer holds (NaN: none)."""
    evidence = role_evidence(trace.input_ids)
    scores = np.full((trace.num_layers, trace.num_heads, len(ROLE_NAMES)), np.nan)
    for l, layer in enumerate(trace.layers):
        attn = held_attention(layer, trace.n_tokens)
        if attn is not None:
            scores[l] = score_roles(attn, trace.input_ids, evidence)   # [H, T, T] -> [H, R]
    return HeadRoles(scores, evidence)


def _scores(roles: HeadRoles | None, shape: tuple[int, ...]) -> np.ndarray:  # -> [L, H, R], NaN: unknown
    return np.full(shape, np.nan) if roles is None else roles.scores


def badge_mask(sentence: HeadRoles, probe: HeadRoles | None,
               threshold: float = BADGE_THRESHOLD) -> np.ndarray:  # -> [L, H, R] bool
    """Which (head, role) earn a badge: the sentence's or the probe's score at least `threshold` (NaN: no)."""
    scores = sentence.scores
    both = np.stack([scores, _scores(probe, scores.shape)])
    return (np.nan_to_num(both, nan=-np.inf) >= threshold).any(axis=0)


def head_badges(sentence: HeadRoles, probe: HeadRoles | None,
                threshold: float = BADGE_THRESHOLD) -> list[list[tuple[str, ...]]]:
    """[L][H] the badge names of each head, in ROLE_NAMES order (e.g. ("prev",))."""
    earned = badge_mask(sentence, probe, threshold)
    return [[tuple(BADGES[role] for r, role in enumerate(ROLE_NAMES) if earned[l, h, r])
             for h in range(earned.shape[1])] for l in range(earned.shape[0])]


def _score_text(score: float) -> str:
    return "—" if np.isnan(score) else f"{score:.2f}"


def score_lines(sentence: HeadRoles, probe: HeadRoles | None, layer: int, head: int) -> str:
    """The head's score for every role on the sentence and the probe, one role a line, for a tooltip."""
    probe_scores = _scores(probe, sentence.scores.shape)
    lines = [f"roles (badge at ≥ {BADGE_THRESHOLD:g}): sentence · probe"
             + ("" if probe is not None else " (the probe is still running)")]
    for r, role in enumerate(ROLE_NAMES):
        lines.append(f"{BADGES[role]} = {ROLE_LABELS[role]}: {_score_text(sentence.scores[layer, head, r])} · "
                     f"{_score_text(probe_scores[layer, head, r])}")
    return "\n".join(lines)


__all__ = ["BADGE_THRESHOLD", "BADGES", "badge_mask", "head_badges", "score_lines", "sentence_roles_held"]
