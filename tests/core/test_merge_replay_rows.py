"""The tokens_merges figure's row labels: the bytes, then each merge by its two pieces."""
from __future__ import annotations

from core.tokens_view import MergeReplay


def test_row_labels_name_the_merge(bundle):
    tokenization = bundle.tokenizer.encode_traced("The cat sat.")
    replay = MergeReplay(tokenization)
    first = tokenization.steps[0]
    assert replay.row_label(0) == "bytes"
    assert replay.row_label(1).startswith("1. ") and tokenization.display_piece(first.left) in replay.row_label(1)


def test_changed_words_are_the_words_holding_the_merge(bundle):
    tokenization = bundle.tokenizer.encode_traced("The cat sat on the mat.")
    replay = MergeReplay(tokenization)
    for step in range(1, replay.n_steps + 1):
        words = replay.changed_words(step)
        merged = tokenization.display_piece(tokenization.steps[step - 1].merged)
        assert any(piece.fresh and piece.text == merged for piece in words)
        pieces = replay.step(step).pieces
        assert words[0].gap_before or pieces[0] == words[0]   # starting where a word does
        assert sum(p.fresh for p in words) == sum(p.fresh for p in pieces)   # every piece the merge made
    assert any(len(replay.changed_words(k)) < len(replay.step(k).pieces) for k in range(1, replay.n_steps + 1))
