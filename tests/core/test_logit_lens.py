"""Logit lens: the final norm and LM head read at every stage; the last stage is the model's own prediction."""
from __future__ import annotations

import numpy as np
import pytest

from core.interventions import residual_stages
from core.logit_lens import TOP_K, LensLogits, LogitLens, logit_lens, stage_label, stage_names
from core.runners import NumpyRunner, OnnxRunner

SHAPES = [dict(), dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
          dict(num_hidden_layers=3, num_local_experts=8, num_experts_per_tok=3)]
RUNNERS = [NumpyRunner, OnnxRunner]


def test_stages_are_embedding_then_after_attention_and_after_each_layer():
    # one spelling everywhere: the trace's output names (the patching sweep's stages are the same)
    assert stage_names(2) == ("embed", "layers.0.resid_mid", "layers.0.resid_post", "layers.1.resid_mid",
                              "layers.1.resid_post")
    assert [stage_label(s) for s in stage_names(1)] == ["emb", "L0.attn", "L0"]


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
    S = len(lens.stage_names)
    np.testing.assert_allclose(LensLogits(trace).rows(S - 1, 0, trace.n_tokens), trace.logits, atol=1e-4)
    assert lens.probs.dtype == np.float32 and lens.top_probs.dtype == np.float32


def test_each_stage_reads_its_own_residual(bundle):
    trace = NumpyRunner(bundle).run([3, 1, 4, 1, 5])
    stages = residual_stages(trace)
    assert stages[2] is trace.layers[0].resid_post   # the trace's own arrays, not copies
    np.testing.assert_array_equal(stages[0], trace.embed)
    np.testing.assert_array_equal(stages[1], trace.layers[0].resid_mid)
    np.testing.assert_array_equal(stages[2], trace.layers[0].resid_post)
    probs = logit_lens(trace).probs
    assert not np.allclose(probs[0], probs[-1])  # stages really differ


class HandMadeLogits:
    """LensLogits' interface over a given [S, T, V] array."""

    def __init__(self, logits: np.ndarray) -> None:
        self.array, self.shape = logits.astype(np.float32), logits.shape

    def rows(self, stage, start, stop):
        return self.array[stage, start:stop]

    def column(self, position):
        return self.array[:, position]

    def blocks(self):
        S, T, _ = self.shape
        return [(s, 0, T) for s in [S - 1, *range(S - 1)]]


def hand_made_lens(probs: np.ndarray) -> "LogitLens":
    from unittest import mock

    from core import logit_lens as module

    with mock.patch.object(module, "LensLogits", lambda trace: HandMadeLogits(np.log(probs))), \
            mock.patch.object(module, "stage_names", lambda n: ("embed", "layers.0.resid_mid", "layers.0.resid_post")):
        return module.logit_lens(mock.Mock(num_layers=1), k=2)


def test_top_k_ranks_and_formation_stage_on_a_hand_made_lens():
    # 3 stages, 1 position, 6 tokens: token 4 becomes the top token at stage 1 and stays
    p = np.array([[[.5, .1, .1, .1, .1, .1]], [[.1, .1, .1, .1, .5, .1]], [[1e-9, 1e-9, .1, .2, .6, .1]]])
    lens = hand_made_lens(p)
    ids, probs = lens.top_k(0, k=2)
    assert ids.tolist() == [[0, 1], [4, 0], [4, 3]]   # ties (the 0.1s) in id order
    np.testing.assert_allclose(probs[:, 0], [.5, .5, .6], rtol=1e-5)
    ids, probs = lens.top_k(0, k=4)                      # more than was kept: from the position's column
    assert ids.tolist() == [[0, 1, 2, 3], [4, 0, 1, 2], [4, 3, 2, 5]]
    ranks, prob = lens.target_ranks(0, 4)             # the prediction: kept while the lens was built
    assert ranks.tolist() == [2, 1, 1] and prob.tolist() == pytest.approx([.1, .5, .6], rel=1e-5)
    assert lens.target_ranks(0, 2)[0].tolist() == [2, 2, 3]   # any other token: from the column
    assert lens.formation_stage(0, 4) == 1
    assert lens.formation_stage(0, 3) is None     # never the top token at the end
    assert lens.target_ranks(0, 0)[0].tolist() == [1, 2, 5]
    np.testing.assert_allclose(lens.probs, p, rtol=1e-5)


def test_the_lens_keeps_no_distribution_of_the_vocabulary_per_cell(make_bundle):
    """What a 150k vocabulary needs: per cell only the top k and a normaliser, never [S, T, V]."""
    bundle = make_bundle(seed=2)
    trace = NumpyRunner(bundle).run(np.arange(20) * 3 % bundle.config.vocab_size)
    lens = logit_lens(trace)
    S, T, V = len(lens.stage_names), trace.n_tokens, bundle.config.vocab_size
    kept = [a for a in vars(lens).values() if isinstance(a, np.ndarray)]
    assert all(a.size <= S * T * TOP_K for a in kept) and lens.top_ids.shape == (S, T, TOP_K)
    full = lens.probs
    assert full.shape == (S, T, V) and full.dtype == np.float32
    np.testing.assert_array_equal(lens.top_ids, np.argsort(-full, axis=-1, kind="stable")[..., :TOP_K])
    np.testing.assert_allclose(lens.top_probs, np.take_along_axis(full, lens.top_ids, axis=-1), rtol=1e-6)
    for position in (0, T - 1):
        target = int(np.argsort(-full[-1, position])[3])   # not the prediction: ranked from the column
        ranks, probs = lens.target_ranks(position, target)
        assert ranks.tolist() == ((full[:, position] > full[:, position, target:target + 1]).sum(-1) + 1).tolist()
        np.testing.assert_allclose(probs, full[:, position, target], rtol=1e-6)


def test_the_lens_is_built_a_block_of_rows_at_a_time(make_bundle, monkeypatch):
    from core import logit_lens as module

    bundle = make_bundle(seed=2)
    trace = NumpyRunner(bundle).run(np.arange(20) * 3 % bundle.config.vocab_size)
    whole = logit_lens(trace)
    monkeypatch.setattr(module, "BLOCK_BYTES", 3 * 4 * bundle.config.vocab_size)   # three rows per block
    blocked = logit_lens(trace)
    assert len(list(blocked.logits.blocks())) == len(whole.stage_names) * 7
    np.testing.assert_array_equal(blocked.top_ids, whole.top_ids)
    np.testing.assert_allclose(blocked.top_probs, whole.top_probs, rtol=1e-5)   # another BLAS blocking
    np.testing.assert_allclose(blocked.prediction_probs, whole.prediction_probs, rtol=1e-5)


def test_top_five_of_the_last_stage_are_the_models_top_five(bundle):
    trace = OnnxRunner(bundle).run([9, 8, 7, 6])
    ids, _ = logit_lens(trace).top_k(2)
    assert ids.shape == (3 + 2, TOP_K)
    assert ids[-1].tolist() == np.argsort(-trace.logits[2], kind="stable")[:TOP_K].tolist()
