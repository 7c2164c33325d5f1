"""Text in, Trace out: tokenize, cut to the context, run, attach the labels panels show."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from core.runners import Runner
from core.tokenizer import BPETokenizer, Tokenization
from core.trace import Trace


@dataclass(frozen=True)
class Prepared:
    tokenization: Tokenization   # of the text that will be analysed
    truncated_chars: int         # characters cut off the end because of the context length


def prepare_text(tokenizer: BPETokenizer, text: str, max_tokens: int) -> Prepared:
    """Tokenize; past the context, keep the longest prefix that ends on a token boundary and fits."""
    full = tokenizer.encode_traced(text)
    if len(full.tokens) <= max_tokens:
        return Prepared(full, 0)
    cut = full.tokens[max_tokens].char_start
    kept = tokenizer.encode_traced(full.text[:cut])
    while len(kept.tokens) > max_tokens and cut > 0:  # re-encoding a prefix can merge differently at its end
        cut = kept.tokens[max_tokens].char_start
        kept = tokenizer.encode_traced(full.text[:cut])
    return Prepared(kept, len(full.text) - len(kept.text))


_VOCAB_LABELS: "weakref.WeakKeyDictionary[BPETokenizer, tuple[str, ...]]" = weakref.WeakKeyDictionary()


def vocab_labels(tokenizer: BPETokenizer) -> tuple[str, ...]:  # -> [V]
    """The readable label of every vocab id ("‹e8 ae›" for byte fragments), computed once per tokenizer."""
    labels = _VOCAB_LABELS.get(tokenizer)
    if labels is None:
        labels = tuple(tokenizer.display_piece(tokenizer.id_to_piece(i)) for i in range(tokenizer.vocab_size))
        _VOCAB_LABELS[tokenizer] = labels
    return labels


def _with_vocab_labels(trace: Trace, tokenizer: BPETokenizer) -> Trace:
    return replace(trace, vocab_labels=vocab_labels(tokenizer))


def analyse(runner: Runner, text: str, *, head_mask=None, expert_override=None, interventions=None) -> Trace:
    """The whole pipeline for one sentence. Raises ValueError for text with no tokens.
    `interventions` (core.interventions.Interventions) goes to the runner as it is."""
    bundle = runner.bundle
    prepared = prepare_text(bundle.tokenizer, text, bundle.config.max_position_embeddings)
    tokenization = prepared.tokenization
    if not tokenization.tokens:
        raise ValueError("the text is empty")
    override = None
    if expert_override is not None:  # an override made for a longer text is cut to the tokens analysed
        override = np.asarray(expert_override)[:, : len(tokenization.tokens)]
    trace = runner.run(tokenization.ids, head_mask=head_mask, expert_override=override, interventions=interventions)
    labels = tuple(token.display for token in tokenization.tokens)
    trace = trace.with_text(labels, tokenization.text, prepared.truncated_chars, tokenization)
    return _with_vocab_labels(trace, bundle.tokenizer)


def run_ids(runner: Runner, ids, *, head_mask=None, expert_override=None) -> Trace:
    """Run token ids (e.g. after appending a generated token) and label them from the vocabulary."""
    tokenizer = runner.bundle.tokenizer
    text = tokenizer.decode(list(ids))
    return analyse(runner, text, head_mask=head_mask, expert_override=expert_override) \
        if tokenizer.encode(text) == list(ids) else _label_by_id(runner, ids, head_mask, expert_override)


def _label_by_id(runner: Runner, ids, head_mask, expert_override) -> Trace:
    tokenizer = runner.bundle.tokenizer
    trace = runner.run(ids, head_mask=head_mask, expert_override=expert_override)
    labels = tuple(tokenizer.display_piece(tokenizer.id_to_piece(int(i))) for i in ids)
    return _with_vocab_labels(trace.with_text(labels, tokenizer.decode(list(ids))), tokenizer)
