"""How many columns a step's table shows follows the room the table has (issue 10: use the width)."""
from __future__ import annotations

from core.steps import COLUMNS_SHOWN, MAX_TOKENS_SHOWN, concat_window, head_calculation, head_dim_window, index_ranges


def test_more_room_shows_more_dims_and_says_how_many_of_how_many(analysed):
    trace = analysed("The cat sat on the mat because it was tired.")
    cfg, query = trace.config, trace.n_tokens - 1
    x = head_calculation(trace, 0, 0, query, 0).step("x")
    assert len(x.cols) == COLUMNS_SHOWN
    wide = x.with_columns(cfg.hidden_size - 3)
    assert wide.cols.tolist() == list(range(cfg.hidden_size - 3))
    d = cfg.hidden_size
    assert wide.elided.endswith(f"model dims 0–{d - 4} of {d} ({d - 3}–{d - 1} left out)")
    assert "model dims" not in x.with_columns(cfg.hidden_size).elided
    assert wide.values is x.values and wide.csv() == x.csv()   # the CSV keeps every column either way


def test_head_dims_keep_rope_partners_together_at_any_width():
    assert head_dim_window(32, 12).tolist() == [*range(6), *range(16, 22)]
    assert head_dim_window(32, 40).tolist() == list(range(32))


def test_the_concatenation_gives_each_head_its_share_of_the_room():
    window = concat_window(4, 32, 1, columns=24)   # 4 × 5 dims and 4 gap columns ≈ 22 number columns
    assert window.tolist() == [g * 32 + d for g in range(4) for d in range(5)]
    assert len(concat_window(4, 32, 1, columns=2)) == 4 * 2   # never fewer than two dims per head


def test_key_columns_grow_with_the_room_but_never_below_the_token_window(analysed):
    trace = analysed(" ".join(["The cat sat on the mat."] * 5))
    assert trace.n_tokens > 30
    qk = head_calculation(trace, 0, 0, trace.n_tokens - 1, 0).step("qk")
    assert len(qk.with_columns(4).cols) == MAX_TOKENS_SHOWN
    assert len(qk.with_columns(30).cols) == 30 and {0, trace.n_tokens - 1} <= set(qk.with_columns(30).cols.tolist())


def test_a_figure_with_room_for_more_rows_shows_every_token_up_to_that_many(analysed):
    trace = analysed("The cat sat on the mat because it was tired, and then the dog came in and sat on it.")
    n, query = trace.n_tokens, trace.n_tokens - 1
    assert n > MAX_TOKENS_SHOWN
    calc = head_calculation(trace, 0, 0, query, 2)
    softmax, weighted = calc.step("softmax"), calc.step("weighted_v")
    assert len(softmax.rows) == MAX_TOKENS_SHOWN and "left out" in softmax.elided   # the dock's window
    tall = softmax.with_rows(n)
    assert tall.rows.tolist() == list(range(n)) and "tokens" not in tall.elided
    assert weighted.with_rows(n).rows.tolist() == list(range(query + 1))   # × V: the keys up to the query
    fewer = softmax.with_rows(n - 3)
    assert len(fewer.rows) == n - 3 and query in fewer.rows
    left_out = sorted(set(range(n)) - set(fewer.rows.tolist()))
    assert fewer.elided.startswith("shown: queries") and f"of {n} (" in fewer.elided
    assert f"of {n} ({index_ranges(left_out)} left out)" in fewer.elided
