"""Direct logit attribution: the parts (embedding, each head, each expert) sum to the logit exactly."""
from __future__ import annotations

import numpy as np
import pytest

from core.attribution import HELD_FIXED, direct_logit_attribution, head_parts, part_names
from core.runners import NumpyRunner, OnnxRunner

SHAPES = [
    dict(),                                                              # untied LM head (SMALL)
    dict(tie_word_embeddings=True),
    dict(num_attention_heads=4, num_key_value_heads=2),                  # grouped-query attention
    dict(num_attention_heads=8, num_key_value_heads=1, hidden_size=64),  # multi-query attention
    dict(num_hidden_layers=3, num_local_experts=8, num_experts_per_tok=3),
    dict(num_local_experts=2, num_experts_per_tok=1),
    # dense SwiGLU MLPs (one part per layer), Qwen2's q/k/v biases, Llama's o_proj bias (a part of its own)
    dict(architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0, qkv_bias=True, o_bias=True),
    dict(architecture="Qwen2ForCausalLM", num_local_experts=0, num_experts_per_tok=0, qkv_bias=True),
]
RUNNERS = [NumpyRunner, OnnxRunner]


def _shape_id(shape):
    return ",".join(f"{k}={v}" for k, v in shape.items()) or "default"


@pytest.mark.parametrize("runner_class", RUNNERS, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_parts_sum_to_the_logit(make_bundle, runner_class, shape):
    bundle = make_bundle(seed=4, **shape)
    cfg = bundle.config
    rng = np.random.default_rng(7)
    trace = runner_class(bundle).run(rng.integers(0, cfg.vocab_size, 13))
    for position in (0, 6, 12):
        for target in rng.integers(0, cfg.vocab_size, 3):
            a = direct_logit_attribution(trace, position, int(target))
            assert a.logit == pytest.approx(float(trace.logits[position, target]))
            assert abs(a.values.sum() - a.logit) <= 1e-4
            per_layer = cfg.num_attention_heads + int(cfg.o_bias) + (cfg.num_local_experts or 1)  # or one MLP
            assert len(a.names) == len(a.values) == 1 + cfg.num_hidden_layers * per_layer


def test_a_logit_difference_is_the_difference_of_attributions(bundle):
    trace = NumpyRunner(bundle).run([5, 6, 7, 8, 9])
    a, b = direct_logit_attribution(trace, 3, 10), direct_logit_attribution(trace, 3, 20)
    d = direct_logit_attribution(trace, 3, 10, versus=20)
    np.testing.assert_allclose(d.values, a.values - b.values, atol=1e-9)
    assert d.logit == pytest.approx(float(trace.logits[3, 10] - trace.logits[3, 20]))
    assert abs(d.values.sum() - d.logit) <= 1e-4


def test_parts_are_named_and_unchosen_experts_contribute_nothing(bundle):
    cfg = bundle.config
    trace = NumpyRunner(bundle).run([1, 2, 3])
    a = direct_logit_attribution(trace, -1, 7)
    assert a.position == 2
    assert a.names[:2] == ("embed", "L0.H0") and "L1.H2" in a.names and "L0.E3" in a.names
    assert a.names == part_names(cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts, cfg.o_bias)
    for l, layer in enumerate(trace.layers):
        chosen = set(layer.expert_ids[2].tolist())
        for e in range(cfg.num_local_experts):
            value = a.values[a.names.index(f"L{l}.E{e}")]
            assert (value != 0) == (e in chosen)
    assert [name for name, _ in a.sorted()][0] == a.names[int(np.argmax(a.values))]


def test_head_parts_add_up_to_the_attention_output(make_bundle):
    bundle = make_bundle(seed=4, num_attention_heads=4, num_key_value_heads=2)
    trace = OnnxRunner(bundle).run([4, 3, 2, 1, 0])
    for l, layer in enumerate(trace.layers):
        np.testing.assert_allclose(head_parts(trace, l, 3).sum(axis=0), layer.attn_out[3], atol=1e-5)


def test_interventions_are_attributed_as_run(bundle):
    # a removed head contributes 0; an expert forced into both slots counts once with weight 1
    cfg = bundle.config
    mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    mask[1, 2] = 0.0
    override = np.full((cfg.num_hidden_layers, 4, cfg.num_experts_per_tok), -1)
    override[0, 3] = [1, 1]
    for runner in (NumpyRunner(bundle), OnnxRunner(bundle)):
        trace = runner.run([8, 9, 10, 11], head_mask=mask, expert_override=override)
        a = direct_logit_attribution(trace, 3, 42)
        assert a.values[a.names.index("L1.H2")] == 0.0
        assert abs(a.values.sum() - a.logit) <= 1e-4
        others = [a.values[a.names.index(f"L0.E{e}")] for e in range(cfg.num_local_experts) if e != 1]
        assert others == [0.0] * (cfg.num_local_experts - 1)


def test_bad_position_or_token_gets_a_message_naming_the_range(bundle):
    trace = NumpyRunner(bundle).run([1, 2, 3])
    with pytest.raises(ValueError, match=r"0\.\.2"):
        direct_logit_attribution(trace, 3, 0)
    with pytest.raises(ValueError, match=rf"0\.\.{bundle.config.vocab_size - 1}"):
        direct_logit_attribution(trace, 0, bundle.config.vocab_size)
    with pytest.raises(ValueError, match="versus"):
        direct_logit_attribution(trace, 0, 0, versus=-1)


def test_held_fixed_is_defined_in_one_sentence():
    assert HELD_FIXED.count(". ") == 0 and "root-mean-square" in HELD_FIXED
