"""NumPy reference and ONNX graph must compute the same Trace (the minGPT-style parity test).

Tolerances are core.parity's: per field, ABS_TOL + REL_TOL x the blocks passed x the field's largest magnitude,
tested on random inputs of every length up to the full context (issue 9 item 10).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.bundle import load_bundle
from core.parity import ABS_TOL, REL_TOL, depth, field_difference, field_tolerance, first_disagreement
from core.runners import NumpyRunner, OnnxRunner
from core.trace import LAYER_FIELDS

SHAPES = [
    dict(),                                                       # the default small shape
    dict(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, hidden_size=32),
    dict(num_attention_heads=4, num_key_value_heads=2),           # grouped-query attention
    dict(num_attention_heads=8, num_key_value_heads=1, hidden_size=64),  # multi-query attention
    dict(num_local_experts=8, num_experts_per_tok=3, num_hidden_layers=3),
    dict(num_local_experts=2, num_experts_per_tok=1, tie_word_embeddings=True),
]


def _assert_same_experts_where_router_is_decisive(a, b):
    k = a.config.num_experts_per_tok
    for la, lb in zip(a.layers, b.layers):
        ranked = np.sort(la.router_logits, axis=-1)[:, ::-1]
        decisive = np.ones(ranked.shape[0], bool)
        if k < ranked.shape[1]:
            decisive = (ranked[:, k - 1] - ranked[:, k]) > 1e-4
        assert np.array_equal(la.expert_ids[decisive], lb.expert_ids[decisive])


def _assert_runners_agree(bundle, ids):
    """ONNX's trace, and NumPy's given ONNX's routing (so a near-tie cannot fork them), agree field by field."""
    onnx_trace = OnnxRunner(bundle).run(ids)
    routing = np.stack([layer.expert_ids for layer in onnx_trace.layers])
    numpy_trace = NumpyRunner(bundle).run(ids, expert_override=routing)
    assert first_disagreement(numpy_trace, onnx_trace) is None
    _assert_same_experts_where_router_is_decisive(NumpyRunner(bundle).run(ids), onnx_trace)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_numpy_and_onnx_traces_agree_on_random_inputs_up_to_full_length(make_bundle, shape):
    bundle = make_bundle(seed=3, **shape)
    rng = np.random.default_rng(len(shape))
    context = bundle.config.max_position_embeddings
    for length in (1, 7, context, context, context, context):
        _assert_runners_agree(bundle, rng.integers(0, bundle.config.vocab_size, length))


def test_shipped_model_agrees_on_random_full_length_inputs():
    """Its moe_out/resid_post reach ~175, where float32 summation order alone gives 1.1e-4 (past 1e-4)."""
    bundle = load_bundle()
    rng = np.random.default_rng(0)
    for _ in range(4):
        _assert_runners_agree(bundle, rng.integers(0, bundle.config.vocab_size, bundle.config.max_position_embeddings))


def test_the_parity_rule_catches_a_real_difference(bundle):
    """A rope_theta off by 1% changes q_rot past the tolerance: the rule is not vacuous."""
    ids = np.arange(bundle.config.max_position_embeddings) % bundle.config.vocab_size
    onnx_trace = OnnxRunner(bundle).run(ids)
    shifted = replace(bundle, config=replace(bundle.config, rope_theta=bundle.config.rope_theta * 1.01))
    routing = np.stack([layer.expert_ids for layer in onnx_trace.layers])
    disagreement = first_disagreement(NumpyRunner(shifted).run(ids, expert_override=routing), onnx_trace)
    assert disagreement is not None and disagreement.startswith("layers.0.q_rot")


def test_tolerance_grows_with_the_field_magnitude():
    small, large = np.array([0.5, -1.0], np.float32), np.array([175.0, -3.0, -np.inf], np.float32)
    assert field_tolerance(small) == pytest.approx(ABS_TOL + REL_TOL * 1.0)
    assert field_tolerance(large) == pytest.approx(ABS_TOL + REL_TOL * 175.0)
    assert field_difference(large, np.array([175.0, -3.0, np.nan], np.float32)) == np.inf


def test_tolerance_is_allowed_once_per_block_passed(bundle):
    """Rounding adds up over depth: a drift a deep layer may carry is refused at layer 0."""
    assert [depth(name, 30) for name in ("embed", "layers.0.attn", "layers.28.attn", "logits")] == [1, 1, 29, 31]
    onnx_trace = OnnxRunner(bundle).run(np.arange(8) % bundle.config.vocab_size)
    last = onnx_trace.num_layers - 1
    arrays = onnx_trace.to_arrays()
    drift = 1.5 * REL_TOL * np.abs(arrays[f"layers.{last}.resid_mid"]).max()  # past one block's share, within L blocks
    deep = replace(onnx_trace, layers=[*onnx_trace.layers[:last],
                                       replace(onnx_trace.layers[last], resid_mid=onnx_trace.layers[last].resid_mid + drift)])
    assert last >= 1 and first_disagreement(deep, onnx_trace) is None
    shallow = replace(onnx_trace, layers=[replace(onnx_trace.layers[0], resid_mid=onnx_trace.layers[0].resid_mid
                                                  + 1.5 * REL_TOL * np.abs(arrays["layers.0.resid_mid"]).max()),
                                          *onnx_trace.layers[1:]])
    assert first_disagreement(shallow, onnx_trace).startswith("layers.0.resid_mid")


def test_interventions_agree_across_runners(make_bundle):
    bundle = make_bundle(seed=5)
    cfg = bundle.config
    ids = np.arange(12) % cfg.vocab_size
    mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    mask[0, 1] = 0.0
    mask[1, 3] = 0.5
    override = np.full((cfg.num_hidden_layers, 12, cfg.num_experts_per_tok), -1)
    override[0, 4] = [3, 3]
    override[1, 7, 0] = 2
    a = NumpyRunner(bundle).run(ids, head_mask=mask, expert_override=override)
    b = OnnxRunner(bundle).run(ids, head_mask=mask, expert_override=override)
    assert a.layers[0].expert_ids[4].tolist() == [3, 3] == b.layers[0].expert_ids[4].tolist()
    assert b.layers[1].expert_ids[7, 0] == 2
    assert first_disagreement(a, b) is None


def test_trace_fields_cover_every_onnx_output(bundle):
    trace = OnnxRunner(bundle).run([1, 2, 3])
    names = set(trace.to_arrays())
    for l in range(bundle.config.num_hidden_layers):
        assert {f"layers.{l}.{name}" for name, _, _ in LAYER_FIELDS} <= names
    assert {"input_ids", "embed", "final_norm", "logits"} <= names
