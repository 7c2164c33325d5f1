"""The family options (dense MLP, biases, q/k norm, RoPE scaling, sliding window, head_dim): NumPy and ONNX agree."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.config import ModelConfig
from core.model import rope_inv_freq, weight_shapes
from core.runners import NumpyRunner, OnnxRunner

LLAMA3 = (("factor", 8.0), ("high_freq_factor", 4.0), ("low_freq_factor", 1.0),
          ("original_max_position_embeddings", 16), ("rope_type", "llama3"))
DENSE = dict(architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
FAMILIES = {
    "llama": dict(DENSE, num_key_value_heads=2),
    "llama-bias-llama3-tied": dict(DENSE, qkv_bias=True, o_bias=True, rope_scaling=LLAMA3, tie_word_embeddings=True),
    "llama-linear-rope": dict(DENSE, rope_scaling=(("factor", 4.0), ("rope_type", "linear"))),
    "mistral-window": dict(DENSE, architecture="MistralForCausalLM", sliding_window=5, num_key_value_heads=1),
    "qwen2": dict(DENSE, architecture="Qwen2ForCausalLM", qkv_bias=True, num_key_value_heads=2),
    "qwen3": dict(DENSE, architecture="Qwen3ForCausalLM", qk_norm=True, explicit_head_dim=24, num_key_value_heads=2),
    "mixtral-window": dict(architecture="MixtralForCausalLM", sliding_window=4),
}


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_numpy_and_onnx_agree_on_every_family_option(make_bundle, family):
    bundle = make_bundle(seed=5, **FAMILIES[family])
    a, b = NumpyRunner(bundle), OnnxRunner(bundle)
    ids = np.random.default_rng(0).integers(0, bundle.config.vocab_size, 12)
    ta, tb = a.run(ids).validate(), b.run(ids).validate()
    for name, x in ta.to_arrays().items():
        y = tb.to_arrays()[name]
        assert x.shape == y.shape, name
        if x.dtype.kind == "f":
            finite = np.isfinite(x)
            assert np.array_equal(finite, np.isfinite(y)), name
            assert np.abs(x[finite] - y[finite]).max(initial=0) <= 1e-4, name


def test_dense_model_has_empty_router_fields_and_llama_weight_names(make_bundle):
    bundle = make_bundle(seed=5, **FAMILIES["qwen2"])
    assert "model.layers.0.mlp.gate_proj.weight" in bundle.weights
    assert "model.layers.0.self_attn.q_proj.bias" in bundle.weights
    assert not any("block_sparse_moe" in name for name in bundle.weights)
    trace = OnnxRunner(bundle).run([1, 2, 3])
    layer = trace.layers[0]
    assert layer.router_logits.shape == (3, 0) and layer.expert_ids.shape == (3, 0)
    assert trace.expert_override.shape == (bundle.config.num_hidden_layers, 3, 0)
    assert np.abs(layer.moe_out).max() > 0  # the MLP did run


def test_sliding_window_hides_old_keys(make_bundle):
    bundle = make_bundle(seed=5, **FAMILIES["mistral-window"])
    attn = NumpyRunner(bundle).run(np.arange(10)).layers[0].attn  # [H, T, T]
    assert np.all(attn[:, 9, :5] == 0) and np.all(attn[:, 9, 5:] > 0)  # query 9 sees keys 5..9


def test_qk_norm_normalises_each_head(make_bundle):
    bundle = make_bundle(seed=5, **FAMILIES["qwen3"])
    q = NumpyRunner(bundle).run([4, 5, 6]).layers[0].q  # norm weights are 1 in a random model
    assert q.shape[-1] == 24
    np.testing.assert_allclose(np.sqrt(np.mean(q * q, axis=-1)), 1.0, atol=1e-3)


def test_llama3_scaling_stretches_only_slow_frequencies():
    plain = rope_inv_freq(64, 10000.0)
    scaled = rope_inv_freq(64, 10000.0, tuple(dict(LLAMA3, original_max_position_embeddings=8192).items()))
    assert scaled[0] == plain[0]                      # the fastest pair is kept
    np.testing.assert_allclose(scaled[-1], plain[-1] / 8.0, rtol=1e-6)  # the slowest divided by factor


def test_explicit_head_dim_sets_projection_shapes():
    config = ModelConfig(**{**FAMILIES["qwen3"], "hidden_size": 64, "num_attention_heads": 4})
    shapes = weight_shapes(config)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (4 * 24, 64)
    assert shapes["model.layers.0.self_attn.o_proj.weight"] == (64, 4 * 24)
    assert shapes["model.layers.0.self_attn.k_norm.weight"] == (24,)


def test_config_round_trips_through_json_with_source_keys():
    source = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 100, "hidden_size": 32,
              "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "rms_norm_eps": 1e-6, "max_position_embeddings": 64, "attention_bias": False,
              "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"}, "torch_dtype": "bfloat16",
              "tie_word_embeddings": True}
    config = ModelConfig.from_dict(source)
    assert (config.qk_norm, config.explicit_head_dim, config.rope_theta, config.is_moe) == (True, 16, 5000.0, False)
    written = config.to_dict()
    assert written["torch_dtype"] == "bfloat16" and written["rope_parameters"] == source["rope_parameters"]
    assert ModelConfig.from_dict(json.loads(json.dumps(written))) == config


@pytest.mark.parametrize("change, message", [
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "yarn"),
    ({"architectures": ["GPT2LMHeadModel"]}, "GPT2LMHeadModel"),
    ({"quantization_config": {"quant_method": "gptq"}}, "gptq"),
])
def test_unsupported_configs_are_refused_by_name(change, message):
    base = {"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 4, "rms_norm_eps": 1e-6, "max_position_embeddings": 64}
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_dict({**base, **change})


@pytest.mark.parametrize("family", ["qwen2", "mixtral-window"])
def test_partial_run_keeps_only_what_was_asked_and_agrees(make_bundle, family):
    bundle = make_bundle(seed=5, **FAMILIES[family])
    ids = np.arange(9)
    full = NumpyRunner(bundle).run(ids)
    for runner in (NumpyRunner(bundle), OnnxRunner(bundle)):
        part = runner.run(ids, fields=["layers.1.attn", "resid_post", "logits.last"]).validate()
        assert part.fields == {"layers.1.attn", "layers.0.resid_post", "layers.1.resid_post", "logits"}
        assert part.layers[0].attn is None and part.embed is None and part.layers[0].q is None
        assert part.logits.shape == (1, bundle.config.vocab_size) and part.logits_from == 8
        np.testing.assert_allclose(part.logits[0], full.logits[-1], atol=1e-4)
        np.testing.assert_allclose(part.layers[1].attn, full.layers[1].attn, atol=1e-5)
        np.testing.assert_allclose(part.next_token_probs(), full.next_token_probs(), atol=1e-5)
        assert set(part.to_arrays()) >= {"layers.1.attn", "logits", "input_ids"}
        assert "layers.0.attn" not in part.to_arrays()


def test_unknown_field_is_refused(make_bundle):
    with pytest.raises(ValueError, match="unknown trace field 'atention'"):
        NumpyRunner(make_bundle(seed=5)).run([1, 2], fields=["atention"])


@pytest.mark.parametrize("family", ["llama-bias-llama3-tied", "mistral-window", "qwen3"])
def test_step_by_step_reproduces_the_trace_on_every_family(make_bundle, family):
    from core.steps import head_calculation

    bundle = make_bundle(seed=5, **FAMILIES[family])
    trace = NumpyRunner(bundle).run(np.arange(10))
    calc = head_calculation(trace, layer=1, head=1, query=9, key=6)
    assert abs(calc.dot.score - float(trace.layers[1].scores[1, 9, 6])) < 1e-4
    np.testing.assert_allclose(calc.dot.q, trace.layers[1].q_rot[1, 9], atol=1e-5)
    np.testing.assert_allclose(calc.dot.k, trace.layers[1].k_rot[1, 6], atol=1e-5)
    np.testing.assert_allclose(calc.step("softmax").values, trace.layers[1].attn[1], atol=1e-5)  # window too
