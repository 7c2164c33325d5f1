"""core.steps: the hand calculation of one head, recomputed, must reproduce the Trace."""
from __future__ import annotations

import csv
import io
from dataclasses import replace

import numpy as np
import pytest

from core.runners import NumpyRunner, OnnxRunner
from core.session import analyse
from core.steps import (MAX_TOKENS_SHOWN, head_calculation, head_dim_window, index_ranges, step_file_stem,
                        token_window)

SENTENCE = "Every token looks back at the tokens that came before it."
SEED_ORDER = ["x", "q", "k", "v", "q_rot", "k_rot", "qk", "scaled", "masked", "softmax",
              "weighted_v", "head_out", "concat", "attn_out", "resid_mid"]


@pytest.fixture(scope="module")
def trace(bundle):
    return analyse(NumpyRunner(bundle), SENTENCE)


def all_heads(trace):
    return [(l, h) for l in range(trace.num_layers) for h in range(trace.num_heads)]


def test_steps_follow_the_seed_order(trace):
    calc = head_calculation(trace, 0, 0, trace.n_tokens - 1, 1)
    assert [s.key for s in calc.steps] == SEED_ORDER
    assert [step_file_stem(i, s) for i, s in enumerate(calc.steps)][:2] == ["step_01_x", "step_02_q"]


def test_x_is_the_traced_normed_input(trace):
    calc = head_calculation(trace, 1, 2, 3, 1)
    np.testing.assert_array_equal(calc.step("x").values, trace.layers[1].attn_in)


def test_recomputed_q_k_v_from_weight_slices_equal_the_trace(trace):
    for l, h in all_heads(trace):
        calc = head_calculation(trace, l, h, trace.n_tokens - 1, 0)
        assert calc.from_weights
        for name in ("q", "k", "v"):
            np.testing.assert_allclose(calc.step(name).values, getattr(trace.layers[l], name)[h], atol=1e-5,
                                       err_msg=f"layer {l} head {h} {name}")


def test_rope_steps_equal_traced_q_rot_and_k_rot(trace):
    for l, h in all_heads(trace):
        calc = head_calculation(trace, l, h, trace.n_tokens - 1, 0)
        np.testing.assert_allclose(calc.step("q_rot").values, trace.layers[l].q_rot[h], atol=1e-5)
        np.testing.assert_allclose(calc.step("k_rot").values, trace.layers[l].k_rot[h], atol=1e-5)


def test_scores_scaled_and_masked_equal_the_traced_scores(trace):
    l, h = 1, 3
    calc = head_calculation(trace, l, h, trace.n_tokens - 1, 0)
    traced = trace.layers[l].scores[h]
    visible = np.isfinite(traced)
    np.testing.assert_allclose(calc.step("masked").values[visible], traced[visible], atol=1e-5)
    np.testing.assert_allclose(calc.step("scaled").values * np.sqrt(trace.config.head_dim),
                               calc.step("qk").values, rtol=1e-5, atol=1e-5)


def test_mask_is_minus_infinity_exactly_above_the_diagonal(trace):
    masked = head_calculation(trace, 0, 1, 2, 0).step("masked").values
    t = trace.n_tokens
    above = np.triu(np.ones((t, t), bool), k=1)
    assert np.all(np.isneginf(masked[above]))
    assert np.all(np.isfinite(masked[~above]))
    # Q·Kᵀ itself is not masked: the future scores are real numbers until the mask step
    assert np.all(np.isfinite(head_calculation(trace, 0, 1, 2, 0).step("qk").values))


def test_softmax_row_equals_the_traced_attention_row(trace):
    for l, h in all_heads(trace):
        query = trace.n_tokens // 2
        calc = head_calculation(trace, l, h, query, 0)
        np.testing.assert_allclose(calc.step("softmax").values[query], trace.layers[l].attn[h, query], atol=1e-6)
        np.testing.assert_allclose(calc.step("softmax").values, trace.layers[l].attn[h], atol=1e-6)


def test_term_by_term_dot_product_over_sqrt_dh_is_the_traced_score(trace):
    for l, h in all_heads(trace):
        query, key = trace.n_tokens - 1, 2
        dot = head_calculation(trace, l, h, query, key).dot
        assert (dot.query, dot.key) == (query, key)
        assert dot.terms.shape == (trace.config.head_dim,)
        np.testing.assert_allclose(dot.terms, trace.layers[l].q_rot[h, query] * trace.layers[l].k_rot[h, key],
                                   atol=1e-5)
        assert dot.total / np.sqrt(trace.config.head_dim) == pytest.approx(dot.score)
        assert dot.score == pytest.approx(float(trace.layers[l].scores[h, query, key]), abs=1e-5)
        assert dot.trace_score == float(trace.layers[l].scores[h, query, key])


def test_weighted_values_sum_to_the_query_row_of_the_head_output(trace):
    query = trace.n_tokens - 2
    calc = head_calculation(trace, 1, 0, query, 1)
    np.testing.assert_allclose(calc.step("weighted_v").values.sum(axis=0), trace.layers[1].head_out[0, query],
                               atol=1e-5)
    np.testing.assert_allclose(calc.step("head_out").values, trace.layers[1].head_out[0], atol=1e-5)


def test_concatenation_times_wo_is_attn_out_and_plus_residual_is_resid_mid(trace):
    for layer in range(trace.num_layers):
        calc = head_calculation(trace, layer, 1, trace.n_tokens - 1, 0)
        heads = trace.layers[layer].head_out  # [H, T, Dh]
        np.testing.assert_allclose(calc.step("concat").values,
                                   heads.transpose(1, 0, 2).reshape(trace.n_tokens, -1), atol=1e-5)
        np.testing.assert_allclose(calc.step("attn_out").values, trace.layers[layer].attn_out, atol=1e-5)
        np.testing.assert_allclose(calc.step("resid_mid").values, trace.layers[layer].resid_mid, atol=1e-5)


def test_an_ablated_head_shows_a_zero_output_and_still_adds_up(bundle):
    mask = np.ones((bundle.config.num_hidden_layers, bundle.config.num_attention_heads), np.float32)
    mask[0, 2] = 0.0
    trace = analyse(NumpyRunner(bundle), SENTENCE, head_mask=mask)
    calc = head_calculation(trace, 0, 2, trace.n_tokens - 1, 0)
    assert not calc.step("head_out").values.any()
    assert "head mask" in calc.step("head_out").formula
    np.testing.assert_allclose(calc.step("attn_out").values, trace.layers[0].attn_out, atol=1e-5)


def test_grouped_query_heads_use_their_key_value_slice(make_bundle):
    gqa = make_bundle(num_key_value_heads=2)
    trace = analyse(NumpyRunner(gqa), SENTENCE)
    for h in range(trace.num_heads):
        calc = head_calculation(trace, 0, h, trace.n_tokens - 1, 0)
        np.testing.assert_allclose(calc.step("k").values, trace.layers[0].k[h], atol=1e-5)
        np.testing.assert_allclose(calc.step("v").values, trace.layers[0].v[h], atol=1e-5)
    assert "key/value head 0" in head_calculation(trace, 0, 1, 2, 0).step("k").note


def test_an_onnx_trace_agrees_too(bundle):
    trace = analyse(OnnxRunner(bundle, threads=1), SENTENCE)
    calc = head_calculation(trace, 1, 1, trace.n_tokens - 1, 3)
    np.testing.assert_allclose(calc.step("softmax").values, trace.layers[1].attn[1], atol=1e-5)
    assert calc.dot.score == pytest.approx(float(trace.layers[1].scores[1, -1, 3]), abs=1e-5)
    np.testing.assert_allclose(calc.step("resid_mid").values, trace.layers[1].resid_mid, atol=1e-5)


def test_without_weights_the_traced_q_k_v_are_shown_and_said_so(trace):
    bare = replace(trace, weights={})
    calc = head_calculation(bare, 0, 1, bare.n_tokens - 1, 0)
    assert not calc.from_weights
    np.testing.assert_array_equal(calc.step("q").values, trace.layers[0].q[1])
    np.testing.assert_allclose(calc.step("attn_out").values, trace.layers[0].attn_out, atol=1e-5)


def test_query_and_key_are_clamped_into_the_sentence(trace):
    calc = head_calculation(trace, 0, 0, 10_000, 10_000)
    assert calc.query == trace.n_tokens - 1 and calc.key == calc.query
    calc = head_calculation(trace, 0, 0, 2, 5)  # a key after the query is masked: fall back to the query
    assert calc.key == 2


def test_long_sentences_show_a_window_with_the_query_and_key_and_say_so(bundle):
    long = analyse(NumpyRunner(bundle), " ".join([SENTENCE] * 6))
    assert long.n_tokens > 3 * MAX_TOKENS_SHOWN
    query, key = long.n_tokens - 1, 7
    calc = head_calculation(long, 0, 0, query, key)
    softmax = calc.step("softmax")
    assert len(softmax.rows) == MAX_TOKENS_SHOWN and {0, query, key} <= set(softmax.rows.tolist())
    assert {key, query} <= set(softmax.cols.tolist())
    assert softmax.shown.shape == (len(softmax.rows), len(softmax.cols))
    assert f"of {long.n_tokens}" in softmax.elided
    assert softmax.values.shape == (long.n_tokens, long.n_tokens)  # the CSV still gets everything


def test_short_sentences_show_every_token_and_nothing_is_elided_for_tokens(bundle):
    short = analyse(NumpyRunner(bundle), "查询订单")
    assert short.n_tokens <= MAX_TOKENS_SHOWN
    softmax = head_calculation(short, 0, 0, short.n_tokens - 1, 0).step("softmax")
    assert softmax.rows.tolist() == list(range(short.n_tokens)) and softmax.elided == ""


def test_token_window_is_capped_and_keeps_first_query_and_key():
    window = token_window(200, 150, 20)
    assert len(window) == MAX_TOKENS_SHOWN
    assert {0, 20, 150} <= set(window.tolist())
    assert list(window) == sorted(window)
    assert token_window(5, 4, 1).tolist() == [0, 1, 2, 3, 4]


def test_head_dims_shown_keep_rope_partners_together():
    dims = head_dim_window(16)
    assert dims.tolist() == [0, 1, 2, 3, 8, 9, 10, 11]  # dim i turns with dim i + 8
    assert head_dim_window(8).tolist() == list(range(8))


def test_index_ranges_reads_like_a_page_range():
    assert index_ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7–8"
    assert index_ranges([4]) == "4"


def test_step_csv_holds_the_full_matrix_at_full_precision(trace):
    step = head_calculation(trace, 0, 3, trace.n_tokens - 1, 0).step("softmax")
    rows = list(csv.reader(io.StringIO(step.csv())))
    assert len(rows) == trace.n_tokens + 1 and len(rows[0]) == trace.n_tokens + 1
    assert rows[1][0] == step.row_labels[0]
    values = np.array([[float(v) for v in row[1:]] for row in rows[1:]])
    np.testing.assert_array_equal(values.astype(np.float32), step.values)  # repr round-trips exactly
    np.testing.assert_allclose(values, trace.layers[0].attn[3], atol=1e-6)


def test_dot_product_csv_ends_with_the_traced_score(trace):
    dot = head_calculation(trace, 0, 0, trace.n_tokens - 1, 1).dot
    rows = list(csv.reader(io.StringIO(dot.csv())))
    assert rows[0] == ["dim", "q_rot", "k_rot", "q_rot*k_rot"]
    assert len(rows) == 1 + trace.config.head_dim + 4
    assert rows[-1][0] == "trace_score" and float(rows[-1][3]) == dot.trace_score
