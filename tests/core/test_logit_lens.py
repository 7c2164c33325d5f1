"""Logit lens: the final norm and LM head read at every stage; the last stage is the model's own prediction."""
from __future__ import annotations

import numpy as np
import pytest

from core.logit_lens import TOP_K, lens_logits, logit_lens, residual_stages, stage_label, stage_names
from core.runners import NumpyRunner, OnnxRunner

SHAPES = [dict(), dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
          dict(num_hidden_layers=3, num_local_experts=8, num_experts_per_tok=3)]
RUNNERS = [NumpyRunner, OnnxRunner]


def test_stages_are_embedding_then_after_attention_and_after_each_layer():
    assert stage_names(2) == ("embed", "L0.resid_mid", "L0.resid_post", "L1.resid_mid", "L1.resid_post")
    assert [stage_label(s) for s in stage_names(1)] == ["embedding", "L0 after attention", "L0 after layer"]


@pytest.mark.parametrize("runner_class", RUNNERS, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_last_stage_is_the_models_own_next_token_distribution(make_bundle, runner_class, shape):
    bundle = make_bundle(seed=2, **shape)
    trace = runner_class(bundle).run(np.arange(11) * 7 % bundle.config.vocab_size)
    lens = logit_lens(trace)
    S = 1 + 2 * bundle.config.num_hidden_layers
    assert lens.probs.shape == (S, trace.n_tokens, bundle.config.vocab_size)
    np.testing.assert_allclose(lens.probs.sum(axis=-1), 1.0, atol=1e-5)
    for position in range(trace.n_tokens):
        np.testing.assert_allclose(lens.probs[-1, position], trace.next_token_probs(position), atol=1e-6)
    # the last stage's residual is the one the model normalised: same logits, not merely the same argmax
    np.testing.assert_allclose(lens_logits(trace)[-1], trace.logits, atol=1e-4)


def test_each_stage_reads_its_own_residual(bundle):
    trace = NumpyRunner(bundle).run([3, 1, 4, 1, 5])
    stages = residual_stages(trace)
    np.testing.assert_array_equal(stages[0], trace.embed)
    np.testing.assert_array_equal(stages[1], trace.layers[0].resid_mid)
    np.testing.assert_array_equal(stages[2], trace.layers[0].resid_post)
    probs = logit_lens(trace).probs
    assert not np.allclose(probs[0], probs[-1])  # stages really differ


def test_top_k_ranks_and_formation_stage_on_a_hand_made_lens():
    from core.logit_lens import LogitLens

    # 3 stages, 1 position, 6 tokens: token 4 becomes the top token at stage 1 and stays
    p = np.array([[[.5, .1, .1, .1, .1, .1]], [[.1, .1, .1, .1, .5, .1]], [[0, 0, .1, .2, .6, .1]]], np.float32)
    lens = LogitLens(("embed", "L0.resid_mid", "L0.resid_post"), p)
    ids, probs = lens.top_k(0, k=2)
    assert ids.tolist() == [[0, 1], [4, 0], [4, 3]]
    np.testing.assert_allclose(probs[:, 0], [.5, .5, .6])
    ranks, prob = lens.target_ranks(0, 4)
    assert ranks.tolist() == [2, 1, 1] and prob.tolist() == pytest.approx([.1, .5, .6])
    assert lens.formation_stage(0, 4) == 1
    assert lens.formation_stage(0, 3) is None     # never the top token at the end
    assert lens.target_ranks(0, 0)[0].tolist() == [1, 2, 5]


def test_top_five_of_the_last_stage_are_the_models_top_five(bundle):
    trace = OnnxRunner(bundle).run([9, 8, 7, 6])
    ids, _ = logit_lens(trace).top_k(2)
    assert ids.shape == (3 + 2, TOP_K)
    assert ids[-1].tolist() == np.argsort(-trace.logits[2], kind="stable")[:TOP_K].tolist()
