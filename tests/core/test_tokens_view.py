"""core.tokens_view: the Tokens panel's numbers without Qt — chips and the merge replay."""
from __future__ import annotations

import csv
import io

import pytest

from core.tokens_view import MergeReplay, token_chips, tokens_csv


@pytest.fixture(scope="module")
def trace(analysed):
    return analysed("订单成交 and the cats")


def test_replay_goes_from_bytes_to_the_tokens(trace):
    tok = trace.tokenization
    replay = MergeReplay(tok)
    first, last = replay.step(0), replay.step(replay.n_steps)
    assert len(first.pieces) == len(tok.text.encode("utf-8"))
    assert [p.text for p in last.pieces] == [t.display for t in tok.tokens]
    assert first.caption.startswith("Step 0 of") and last.caption.startswith(f"Step {replay.n_steps} of")


def test_each_step_marks_the_pieces_its_merge_made(trace):
    replay = MergeReplay(trace.tokenization)
    for k, merge in enumerate(trace.tokenization.steps, start=1):
        fresh = replay.fresh(k)
        assert sum(fresh) == merge.count
        assert all(piece == merge.merged for piece, new in zip(replay.pieces_at(k), fresh) if new)


def test_word_starts_are_where_merges_never_cross(trace):
    replay = MergeReplay(trace.tokenization)
    starts = replay.word_start_bytes
    assert 0 in starts
    for k in range(replay.n_steps + 1):   # every piece lies inside one pre-token
        offsets = replay.starts(replay.pieces_at(k)) + [len(trace.tokenization.text.encode("utf-8"))]
        for begin, end in zip(offsets, offsets[1:]):
            assert not any(begin < s < end for s in starts)


def test_entries_and_csv_have_one_line_per_step(trace):
    replay = MergeReplay(trace.tokenization)
    assert len(replay.entries()) == replay.n_steps + 1
    rows = list(csv.reader(io.StringIO(replay.csv())))
    assert len(rows) == replay.n_steps + 2 and rows[0][0] == "step"


def test_chips_carry_piece_id_half_open_span_and_fragments(trace):
    chips = token_chips(trace)
    tokens = trace.tokenization.tokens
    assert [c.lines[0] for c in chips] == [t.display for t in tokens]
    assert all(c.byte_span == (t.byte_start, t.byte_end) for c, t in zip(chips, tokens))
    assert chips[0].lines[2] == f"bytes {tokens[0].byte_start}–{tokens[0].byte_end}"
    assert all(c.fragment == ("‹" in c.piece) for c in chips)
    rows = list(csv.DictReader(io.StringIO(tokens_csv(trace))))
    assert [int(r["id"]) for r in rows] == [t.id for t in tokens]
