"""The tokens_merges figure's row labels: the bytes, then each merge by its two pieces."""
from __future__ import annotations

from core.tokens_view import MergeReplay


def test_row_labels_name_the_merge(bundle):
    tokenization = bundle.tokenizer.encode_traced("The cat sat.")
    replay = MergeReplay(tokenization)
    first = tokenization.steps[0]
    assert replay.row_label(0) == "bytes"
    assert replay.row_label(1).startswith("1. ") and tokenization.display_piece(first.left) in replay.row_label(1)
