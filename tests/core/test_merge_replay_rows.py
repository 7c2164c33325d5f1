"""The tokens_merges figure's rows: every step of a short replay, an even spread of a long one."""
from __future__ import annotations

from core.tokens_view import MergeReplay


def test_a_short_replay_shows_every_step(bundle):
    replay = MergeReplay(bundle.tokenizer.encode_traced("The cat sat."))
    assert replay.figure_steps(cap=1000) == tuple(range(replay.n_steps + 1))


def test_a_long_replay_shows_cap_steps_from_bytes_to_tokens(bundle):
    replay = MergeReplay(bundle.tokenizer.encode_traced("The cat sat on the mat because the cat was tired."))
    steps = replay.figure_steps(cap=6)
    assert replay.n_steps + 1 > 6
    assert len(steps) == 6 and steps[0] == 0 and steps[-1] == replay.n_steps
    assert list(steps) == sorted(set(steps))


def test_row_labels_name_the_merge(bundle):
    tokenization = bundle.tokenizer.encode_traced("The cat sat.")
    replay = MergeReplay(tokenization)
    first = tokenization.steps[0]
    assert replay.row_label(0) == "bytes"
    assert replay.row_label(1).startswith("1. ") and tokenization.display_piece(first.left) in replay.row_label(1)
