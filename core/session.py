"""Text in, Trace out: tokenize, cut to the context, run, attach the labels panels show.

Each run tokenizes with merge tracing (`encode_traced`, the slow, readable path) once, and only the
text that is analysed: where the cut falls is found with the fast `encode`, which gives the same
ids. `checkpoint` (called between stages) lets a caller stop a superseded run: it raises to abort.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from core.bundle import Bundle
from core.interventions import Interventions
from core.runners import Runner, check_interventions
from core.tokenizer import BPETokenizer, Tokenization, clean_text
from core.trace import Trace

Checkpoint = Callable[[], None]


def no_checkpoint() -> None:
    """The checkpoint of a run nobody will stop."""


TRACE_AT_ONCE = 4   # UTF-8 bytes per token of context below which a text is traced without a first cut


@dataclass(frozen=True)
class Prepared:
    tokenization: Tokenization   # of the text that will be analysed
    truncated_chars: int         # characters cut off the end because of the context length


def _char_at_byte(text: str, byte_offset: int) -> int:
    """Index of the character owning UTF-8 byte `byte_offset` of text (the start of a cut character)."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _cut_before_token(tokenizer: BPETokenizer, text: str, ids: Sequence[int], index: int) -> int:
    """Character index where token `index` of text's ids starts (rounded down to a whole character)."""
    skip = len(tokenizer.pipeline.prefix_ids)  # a template's BOS stands for no byte of the text
    start = sum(len(tokenizer.piece_bytes(tokenizer.id_to_piece(int(i)))) for i in ids[skip:index])
    return _char_at_byte(text, start)


def kept_length(tokenizer: BPETokenizer, text: str, max_tokens: int) -> int:
    """The longest prefix of (surrogate-cleaned) text that ends on a token boundary and has <= max_tokens tokens."""
    cut = len(text)
    ids = tokenizer.encode(text)
    while len(ids) > max_tokens and cut > 0:  # re-encoding a prefix can merge differently at its end
        # Always shorter than the last try: a piece's bytes can include text the pipeline added
        # (SentencePiece's leading "▁"), which would otherwise put the same cut back forever.
        cut = min(_cut_before_token(tokenizer, text, ids, max_tokens), cut - 1)
        ids = tokenizer.encode(text[:cut])
    return cut


def prepare_text(tokenizer: BPETokenizer, text: str, max_tokens: int) -> Prepared:
    """Tokenize; past the context, keep the longest prefix that ends on a token boundary and fits.

    A text of at most TRACE_AT_ONCE bytes a token of context nearly always fits: it is traced once, as
    it is; a longer one is cut first (untraced encodes), so a pasted book is never traced whole."""
    text = clean_text(text)
    if len(text.encode("utf-8")) <= TRACE_AT_ONCE * max_tokens:
        traced = tokenizer.encode_traced(text)
        if len(traced.ids) <= max_tokens:
            return Prepared(traced, 0)
    cut = kept_length(tokenizer, text, max_tokens)
    return Prepared(tokenizer.encode_traced(text[:cut]), len(text) - cut)


def cut_notice(trace: Trace, context: int) -> str:
    """One line saying how much of the text the context left out ("" when nothing was cut)."""
    if not trace.truncated_chars:
        return ""
    return (f"text cut at {context} tokens (the model's context): the last {trace.truncated_chars} "
            f"characters were not analysed")


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


def run_prepared(runner: Runner, prepared: Prepared, *, head_mask=None, expert_override=None,
                 interventions=None, fields=None, checkpoint: Checkpoint = no_checkpoint) -> Trace:
    """Run a tokenized text and label the trace with its tokens. Raises ValueError for text with no tokens.
    `interventions` (core.interventions.Interventions) goes to the runner as it is."""
    tokenization = prepared.tokenization
    if not tokenization.tokens:
        raise ValueError("none of the text fits in the model's context" if prepared.truncated_chars
                         else "the text is empty")
    override = None
    if expert_override is not None:  # an override made for a longer text is cut to the tokens analysed
        override = np.asarray(expert_override)[:, : len(tokenization.tokens)]
    checkpoint()
    trace = runner.run(tokenization.ids, head_mask=head_mask, expert_override=override, interventions=interventions,
                       fields=fields)
    checkpoint()
    return _labelled(trace, prepared, runner.bundle.tokenizer)


def _labelled(trace: Trace, prepared: Prepared, tokenizer: BPETokenizer) -> Trace:
    tokenization = prepared.tokenization
    labels = tuple(token.display for token in tokenization.tokens)
    trace = trace.with_text(labels, tokenization.text, prepared.truncated_chars, tokenization)
    return _with_vocab_labels(trace, tokenizer)


def tokens_trace(bundle: Bundle, backend: str, prepared: Prepared,
                 interventions: Interventions | None = None) -> Trace | None:
    """A run of `prepared` before the model has run: its tokens, labels and interventions, and no field
    (fields=frozenset()). What a panel reading only the tokenization draws while the model runs, which on a
    big model takes seconds. None where the run itself will fail (no tokens, interventions that do not fit):
    the run says why."""
    try:
        ids, filled = check_interventions(bundle.config, prepared.tokenization.ids, interventions or Interventions())
    except ValueError:
        return None
    trace = Trace.from_outputs(bundle.config, ids, {}, head_mask=filled.head_mask, expert_override=filled.expert_override,
                               interventions=filled, backend=backend, weights=bundle.weights, fields=frozenset())
    return _labelled(trace, prepared, bundle.tokenizer).validate()


def analyse(runner: Runner, text: str, *, head_mask=None, expert_override=None, interventions=None,
            checkpoint: Checkpoint = no_checkpoint) -> Trace:
    """The whole pipeline for one sentence. Raises ValueError for text with no tokens."""
    bundle = runner.bundle
    prepared = prepare_text(bundle.tokenizer, text, bundle.context)
    return run_prepared(runner, prepared, head_mask=head_mask, expert_override=expert_override,
                        interventions=interventions, checkpoint=checkpoint)


def text_of_ids(tokenizer: BPETokenizer, ids: Sequence[int]) -> str:
    """The text that ids stand for: decoded without the template's own tokens around them (a BOS such as
    "<s>" or "<|begin_of_text|>"), which stand for no text; encoding the text adds them back."""
    ids = [int(i) for i in ids]
    prefix, suffix = list(tokenizer.pipeline.prefix_ids), list(tokenizer.pipeline.suffix_ids)
    if prefix and ids[: len(prefix)] == prefix:
        ids = ids[len(prefix):]
    if suffix and len(ids) >= len(suffix) and ids[len(ids) - len(suffix):] == suffix:
        ids = ids[: len(ids) - len(suffix)]
    return tokenizer.decode(ids)


def prepare_ids(tokenizer: BPETokenizer, ids: Sequence[int], text: str | None = None) -> Prepared | None:
    """The traced tokenization of `text` (default: text_of_ids) if it gives exactly these ids, else None.

    Ids chosen one by one (Append, Generate) need not be how the text tokenizes; then there is no
    merge replay, and the trace is labelled from the vocabulary instead.
    """
    tokenization = tokenizer.encode_traced(text_of_ids(tokenizer, ids) if text is None else text)
    return Prepared(tokenization, 0) if tokenization.ids == [int(i) for i in ids] else None


def run_labelled_by_id(runner: Runner, ids, *, head_mask=None, expert_override=None, interventions=None,
                       fields=None, checkpoint: Checkpoint = no_checkpoint) -> Trace:
    """Run ids that are not how their text tokenizes; each token is labelled from the vocabulary."""
    tokenizer = runner.bundle.tokenizer
    checkpoint()
    trace = runner.run(ids, head_mask=head_mask, expert_override=expert_override, interventions=interventions,
                       fields=fields)
    checkpoint()
    labels = tuple(tokenizer.display_piece(tokenizer.id_to_piece(int(i))) for i in ids)
    return _with_vocab_labels(trace.with_text(labels, text_of_ids(tokenizer, ids)), tokenizer)
