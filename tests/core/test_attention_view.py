"""core.attention_view: the Attention panel's numbers without Qt — scales, hover text, CSV tables."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from core import attention_view as av

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def trace(analysed):
    return analysed(SENTENCE)


def test_head_maxima_leave_out_the_first_query_row(trace):
    maxima = av.head_maxima(trace)
    assert maxima.shape == (trace.num_layers, trace.num_heads)
    expected = [[trace.layers[l].attn[h, 1:].max() for h in range(trace.num_heads)] for l in range(trace.num_layers)]
    np.testing.assert_allclose(maxima, expected)
    assert np.all(maxima < 1.0 + 1e-6)


def test_a_one_token_sentence_scales_every_head_to_one(analysed):
    np.testing.assert_array_equal(av.head_maxima(analysed("a")), 1.0)


@pytest.mark.parametrize("mode", ["shared", "head", "fixed"])
def test_scales_run_from_zero_to_the_modes_top(trace, mode):
    maxima = av.head_maxima(trace)
    scale = av.attention_scale(maxima, mode)
    expected = {"shared": np.full_like(maxima, maxima.max()), "head": maxima, "fixed": np.ones_like(maxima)}[mode]
    np.testing.assert_allclose(scale.tops, expected)
    assert scale.levels(1, 2) == (0.0, pytest.approx(expected[1, 2]))
    assert not scale.tops.flags.writeable
    assert scale.mode.key == mode and scale.caption


def test_cell_text_gives_weight_and_score_or_says_masked(trace):
    text = av.cell_text(trace, 1, 2, 4, 1)
    assert f"{trace.layers[1].attn[2, 4, 1]:.4f}" in text and f"{trace.layers[1].scores[2, 4, 1]:.3f}" in text
    assert "masked" in av.cell_text(trace, 1, 2, 1, 4)


def test_long_csv_has_one_row_per_visible_pair(trace):
    rows = list(csv.DictReader(io.StringIO(av.long_csv(trace, [0], [1, 3]))))
    n = trace.n_tokens
    assert len(rows) == 2 * n * (n + 1) // 2
    assert all(int(r["key"]) <= int(r["query"]) for r in rows)
    row = next(r for r in rows if (r["head"], r["query"], r["key"]) == ("3", "5", "2"))
    assert float(row["weight"]) == pytest.approx(float(trace.layers[0].attn[3, 5, 2]))


def test_head_csv_is_the_matrix_with_numbered_token_headers(trace):
    rows = list(csv.reader(io.StringIO(av.head_csv(trace, 1, 0, "scores"))))
    assert rows[0][1:] == av.numbered_labels(trace)
    assert rows[1][2] == "-inf"   # query 0 cannot see key 1
    np.testing.assert_allclose(np.array(rows[3][1:4], float), trace.layers[1].scores[0, 2, :3])


def test_causal_mask_hides_exactly_the_later_keys():
    mask = av.causal_mask(4)
    assert mask.sum() == 6 and not mask[np.tril_indices(4)].any()
