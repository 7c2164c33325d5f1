"""Properties of the reference model that must hold for any weights."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import apply_rope, rope_inv_freq
from core.runners import NumpyRunner


def test_attention_rows_sum_to_one_and_future_is_exactly_zero(bundle):
    trace = NumpyRunner(bundle).run(np.arange(20) % bundle.config.vocab_size)
    above = np.triu(np.ones((20, 20), bool), k=1)
    for layer in trace.layers:
        np.testing.assert_allclose(layer.attn.sum(-1), 1.0, atol=1e-6)
        assert (layer.attn[:, above] == 0.0).all()
        assert np.isneginf(layer.scores[:, above]).all()
        assert np.isfinite(layer.scores[:, ~above]).all()


def test_expert_weights_sum_to_one_and_follow_router_order(bundle):
    trace = NumpyRunner(bundle).run(np.arange(30) % bundle.config.vocab_size)
    for layer in trace.layers:
        np.testing.assert_allclose(layer.expert_weights.sum(-1), 1.0, atol=1e-6)
        chosen = np.take_along_axis(layer.router_probs, layer.expert_ids, -1)
        np.testing.assert_allclose(layer.expert_weights, chosen / chosen.sum(-1, keepdims=True), rtol=1e-6)
        best = np.argmax(layer.router_logits, -1)
        assert np.array_equal(layer.expert_ids[:, 0], best)


vectors = st.integers(0, 2**32 - 1).map(lambda s: np.random.default_rng(s).standard_normal((1, 1, 16)).astype(np.float32))


@settings(max_examples=60, deadline=None)
@given(vectors, st.integers(0, 500))
def test_rope_preserves_norms(x, position):
    rotated = apply_rope(x, np.array([position]), 10000.0)
    np.testing.assert_allclose(np.linalg.norm(rotated), np.linalg.norm(x), rtol=1e-5)


@settings(max_examples=60, deadline=None)
@given(vectors, vectors, st.integers(0, 200), st.integers(0, 200), st.integers(0, 200))
def test_rope_dot_product_depends_only_on_relative_position(q, k, m, n, shift):
    def score(m_, n_):
        qr = apply_rope(q, np.array([m_]), 10000.0)[0, 0].astype(np.float64)
        kr = apply_rope(k, np.array([n_]), 10000.0)[0, 0].astype(np.float64)
        return qr @ kr
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    assert abs(score(m, n) - score(m + shift, n + shift)) <= 1e-4 * scale


def test_rope_low_pairs_spin_faster_than_high_pairs():
    freqs = rope_inv_freq(16, 10000.0)
    assert freqs[0] == 1.0 and np.all(np.diff(freqs) < 0)


def test_head_mask_removes_exactly_that_heads_contribution(bundle):
    cfg = bundle.config
    runner = NumpyRunner(bundle)
    ids = np.arange(10) % cfg.vocab_size
    full = runner.run(ids)
    h, dh = 2, cfg.head_dim
    mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    mask[0, h] = 0.0
    ablated = runner.run(ids, head_mask=mask)
    w_o = bundle.weights["model.layers.0.self_attn.o_proj.weight"]
    contribution = full.layers[0].head_out[h] @ w_o[:, h * dh:(h + 1) * dh].T
    np.testing.assert_allclose(full.layers[0].attn_out - ablated.layers[0].attn_out, contribution, atol=1e-5)
    np.testing.assert_array_equal(full.layers[0].attn, ablated.layers[0].attn)  # the pattern is not touched


def test_expert_override_changes_only_that_token_in_that_layer(bundle):
    cfg = bundle.config
    runner = NumpyRunner(bundle)
    ids = np.arange(9) % cfg.vocab_size
    before = runner.run(ids)
    override = np.full((cfg.num_hidden_layers, 9, cfg.num_experts_per_tok), -1)
    unused = [e for e in range(cfg.num_local_experts) if e not in before.layers[0].expert_ids[4]][0]
    override[0, 4, 0] = unused
    after = runner.run(ids, expert_override=override)
    assert after.layers[0].expert_ids[4, 0] == unused
    np.testing.assert_array_equal(after.layers[0].expert_ids[:4], before.layers[0].expert_ids[:4])
    np.testing.assert_array_equal(after.layers[0].moe_out[:4], before.layers[0].moe_out[:4])
    assert not np.allclose(after.layers[0].moe_out[4], before.layers[0].moe_out[4])
    np.testing.assert_array_equal(after.layers[0].router_probs, before.layers[0].router_probs)
    # causality: earlier positions cannot see position 4's change (up to BLAS batching noise)
    np.testing.assert_allclose(after.logits[:4], before.logits[:4], atol=1e-5)
    assert np.abs(after.logits[4:] - before.logits[4:]).max() > 1e-3


def test_trace_arrays_are_read_only(bundle):
    trace = NumpyRunner(bundle).run([1, 2, 3])
    assert not trace.logits.flags.writeable
    assert not trace.layers[0].attn.flags.writeable
