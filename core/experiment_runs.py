"""What the experiments share beside core.patching and core.occlusion: runs from what a user typed, the
ablations kept in force, and their effect.

The panels' fields and the CLI's flags give tokens as text or #ID and sentences as text:
`occlude_typed` and `patch_typed` turn them into ids and run core's experiment, the one path for
the Occlusion and Patching panels and for `main.py occlude` / `main.py patch` (only the names of
the inputs in the messages differ).

The ablations a user switches on (heads, experts) hold for every run the app makes, the sweeps
and occlusion included: `AblatedRunner` adds them to each run's own interventions. Patches,
by contrast, belong to one sentence pair and one length of text: `ablations_only` keeps what
outlives a new sentence.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from core.interventions import Interventions
from core.occlusion import REMOVE, Occlusion, log_softmax, occlude
from core.patching import PairWording, PatchResult, Progress, prepare_pair, run_all_sweeps
from core.raw_export import csv_text


# ---------------------------------------------------------------- runs from typed input

def parse_token(tokenizer, text: str, flag: str) -> int:
    """One token id from "#ID" or a text that is exactly one token; ValueError otherwise."""
    if text.startswith("#") and text[1:].removeprefix("-").isdigit():
        token = int(text[1:])
        if not 0 <= token < tokenizer.vocab_size:
            raise ValueError(f"{flag} {text}: ids run from 0 to {tokenizer.vocab_size - 1}")
        return token
    ids = tokenizer.encode(text, add_special=False)  # the word itself, not the template's BOS before it
    if len(ids) != 1:
        pieces = " ".join(tokenizer.display_piece(tokenizer.id_to_piece(i)) for i in ids) or "nothing"
        raise ValueError(f"{flag} {text!r} is {len(ids)} tokens ({pieces}), not one; "
                         f"give a single token, or its id as #ID (0-{tokenizer.vocab_size - 1})")
    return ids[0]


def text_tokens(tokenizer, text: str, flag: str) -> tuple[np.ndarray, list[str]]:
    """A text's ids and each token's text; ValueError when it has no tokens."""
    tokenization = tokenizer.encode_traced(text)
    if not tokenization.tokens:
        raise ValueError(f"{flag}: the text is empty")
    return np.array(tokenization.ids, np.int64), [token.display for token in tokenization.tokens]


def occlude_typed(runner, ids, labels: Sequence[str], position: int | None, target: str = "", baseline: str = "",
                  inputs: tuple[str, str] = ("target", "baseline")) -> Occlusion:
    """core.occlusion.occlude with the target and the baseline typed (one token, as text or #ID; "": the top
    prediction, and each token removed); `inputs` names the two in the messages."""
    tokenizer = runner.bundle.tokenizer
    target_id = parse_token(tokenizer, target, inputs[0]) if target else None
    baseline_id = parse_token(tokenizer, baseline, inputs[1]) if baseline else REMOVE
    return occlude(runner, ids, position, target_id, baseline_id, labels)


def patch_typed(runner, clean_ids, clean_labels: Sequence[str], corrupt_text: str, answer: str = "",
                wrong: str = "", wording: PairWording = PairWording(), progress: Progress | None = None) -> PatchResult:
    """Every sweep of core.patching for A (ids) against B typed, with the answer and wrong tokens typed
    (one token as text or #ID; "": A's and B's top predictions)."""
    tokenizer = runner.bundle.tokenizer
    corrupt_ids, corrupt_labels = text_tokens(tokenizer, corrupt_text, wording.corrupt_input)
    answer_id = parse_token(tokenizer, answer, wording.answer_input) if answer else None
    wrong_id = parse_token(tokenizer, wrong, wording.wrong_input) if wrong else None
    pair = prepare_pair(runner, clean_ids, corrupt_ids, answer_id, wrong_id, wording)
    result = run_all_sweeps(runner, pair, progress)
    return replace(result, clean_labels=tuple(clean_labels), corrupt_labels=tuple(corrupt_labels))


# ---------------------------------------------------------------- the ablations in force

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
