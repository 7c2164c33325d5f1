"""What the GUI's experiments need beside core.patching and core.occlusion: ablations kept in force, and their effect.

The ablations a user switches on (heads, experts) hold for every run the app makes, the sweeps
and occlusion included: `AblatedRunner` adds them to each run's own interventions. Patches,
by contrast, belong to one sentence pair and one length of text: `ablations_only` keeps what
outlives a new sentence.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.interventions import Interventions
from core.occlusion import log_softmax
from core.raw_export import csv_text


def ablations_only(interventions: Interventions | None) -> Interventions:
    """The head mask, ablate mode and experts switched off; no patch, no per-token routing (they need one T)."""
    if interventions is None:
        return Interventions()
    return Interventions(head_mask=interventions.head_mask, ablate_mode=interventions.ablate_mode,
                         experts_off=interventions.experts_off)


def with_ablations(ablations: Interventions, interventions: Interventions | None) -> Interventions:
    """`interventions` (e.g. one sweep cell's patch) with the ablations in force added."""
    if interventions is None:
        return ablations
    return replace(interventions, head_mask=ablations.head_mask, ablate_mode=ablations.ablate_mode,
                   experts_off=ablations.experts_off)


class AblatedRunner:
    """A runner whose every run also has `ablations` on (the sweeps and occlusion run through it)."""

    def __init__(self, runner, ablations: Interventions) -> None:
        self.runner, self.ablations, self.bundle = runner, ablations, runner.bundle

    def run(self, ids, *, interventions: Interventions | None = None, fields=None):
        return self.runner.run(ids, interventions=with_ablations(self.ablations, interventions), fields=fields)

    def run_logits(self, ids, interventions: Interventions | None = None) -> np.ndarray:  # [T] -> [T, V]
        return self.runner.run_logits(ids, with_ablations(self.ablations, interventions))

    def run_patch_batch(self, ids, interventions: Interventions, patch: str, masks: np.ndarray) -> np.ndarray:
        return self.runner.run_patch_batch(ids, with_ablations(self.ablations, interventions), patch, masks)


@dataclass(frozen=True)
class NextTokenChange:
    """The top tokens after one position, in the full model and with the interventions (the union of both tops)."""
    ids: np.ndarray             # [N] the tokens shown: the full model's top k, then the intervened run's new ones
    p_full: np.ndarray          # [N]
    p_intervened: np.ndarray    # [N]
    delta_logprob: np.ndarray   # [N] log p intervened - log p full

    def csv(self, labels) -> str:
        rows = [["id", "piece", "p_full", "p_intervened", "delta_logprob"]]
        rows += [[int(i), labels[int(i)] if labels else "", repr(float(a)), repr(float(b)), repr(float(d))]
                 for i, a, b, d in zip(self.ids, self.p_full, self.p_intervened, self.delta_logprob)]
        return csv_text(rows)


def next_token_change(full_logits: np.ndarray, intervened_logits: np.ndarray, k: int = 5) -> NextTokenChange:  # [V], [V]
    """Before/after for one prediction: each run's top k tokens, their probabilities in both runs and the change."""
    full, after = log_softmax(full_logits), log_softmax(intervened_logits)
    ids = list(np.argsort(-full, kind="stable")[:k])
    ids += [i for i in np.argsort(-after, kind="stable")[:k] if i not in ids]
    ids = np.array(ids, np.int64)
    return NextTokenChange(ids, np.exp(full[ids]), np.exp(after[ids]), after[ids] - full[ids])
