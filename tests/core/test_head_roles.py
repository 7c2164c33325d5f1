"""Head roles: each score is the attention on its own cells, checked on hand-made patterns and models."""
from __future__ import annotations

import numpy as np
import pytest

from core.bundle import load_bundle
from core.head_roles import (ROLE_DEFINITIONS, ROLE_NAMES, probe_roles, role_evidence, role_score, score_roles,
                             sentence_roles)
from core.runners import NumpyRunner, OnnxRunner
from core.session import analyse
from core.training.evaluate import (induction_probes, induction_score, previous_token_score, probe_period,
                                    sink_score)


def one_hot(targets: list[int]) -> np.ndarray:  # query i attends only to targets[i] -> [1, 1, T, T]
    t = len(targets)
    attn = np.zeros((1, 1, t, t))
    attn[0, 0, np.arange(t), targets] = 1.0
    return attn


def scores(attn: np.ndarray, ids) -> dict[str, float]:
    return dict(zip(ROLE_NAMES, score_roles(attn, np.asarray(ids))[0, 0]))


def test_every_role_has_a_one_sentence_definition():
    assert set(ROLE_DEFINITIONS) == set(ROLE_NAMES)
    for text in ROLE_DEFINITIONS.values():
        assert text.endswith(".") and text.count(". ") == 0


def test_previous_token_head_scores_one_on_previous_token_and_zero_on_self():
    ids = [5, 6, 7, 8, 9]
    s = scores(one_hot([0, 0, 1, 2, 3]), ids)
    assert s["previous_token"] == pytest.approx(1.0)
    assert s["self"] == pytest.approx(0.0)
    assert s["first_token"] == pytest.approx(1 / 4)  # only query 1, whose previous token is the first


def test_self_and_sink_heads():
    ids = [5, 6, 7, 8]
    assert scores(one_hot([0, 1, 2, 3]), ids)["self"] == pytest.approx(1.0)
    assert scores(one_hot([0, 0, 0, 0]), ids)["first_token"] == pytest.approx(1.0)


def test_duplicate_and_induction_cells_on_a_repeated_stretch():
    ids = [1, 2, 3, 9, 1, 2, 3]
    ev = role_evidence(ids)
    assert sorted(zip(ev["duplicate_token"].queries, ev["duplicate_token"].keys)) == [(4, 0), (5, 1), (6, 2)]
    assert sorted(zip(ev["induction"].queries, ev["induction"].keys)) == [(4, 1), (5, 2), (6, 3)]
    induction_head = one_hot([0, 0, 0, 0, 1, 2, 3])
    s = scores(induction_head, ids)
    assert s["induction"] == pytest.approx(1.0) and s["duplicate_token"] == pytest.approx(0.0)
    assert scores(one_hot([0, 0, 0, 0, 0, 1, 2]), ids)["duplicate_token"] == pytest.approx(1.0)


def test_a_query_with_several_earlier_copies_counts_their_attention_together():
    ids = [4, 4, 7, 4]          # query 3 has copies at 0 and 1; query 1 has a copy at 0
    ev = role_evidence(ids)["duplicate_token"]
    assert ev.n_queries == 2
    attn = np.zeros((1, 1, 4, 4))
    attn[0, 0, 1, 0] = 1.0                      # query 1: all on its copy
    attn[0, 0, 3, [0, 1, 2]] = [0.25, 0.25, 0.5]  # query 3: half on its two copies
    assert role_score(attn, ev)[0, 0] == pytest.approx((1.0 + 0.5) / 2)


def test_a_doubled_token_is_not_induction_evidence():
    # "x x": the token after the earlier copy is the query itself, which is self-attention, not induction
    ev = role_evidence([3, 8, 8])["induction"]
    assert not ev.defined and ev.reason


def test_undefined_roles_are_nan_with_a_reason_not_zero():
    ids = [1, 2, 3, 4]
    s = scores(one_hot([0, 0, 1, 2]), ids)
    assert np.isnan(s["duplicate_token"]) and np.isnan(s["induction"])
    ev = role_evidence(ids)
    assert "repeats" in ev["duplicate_token"].reason and "repeats" in ev["induction"].reason
    single = role_evidence([7])
    assert all(not single[r].defined and single[r].reason for r in ROLE_NAMES)
    assert np.isnan(score_roles(np.ones((2, 3, 1, 1)), np.array([7]))).all()


def test_role_scores_match_evaluate_on_its_own_probe(bundle):
    # the readout and `main.py eval` must agree: same cells, same probe sequences
    cfg = bundle.config
    period = probe_period(cfg.max_position_embeddings)
    ids = induction_probes(bundle.tokenizer, cfg.vocab_size, period, n_repeats=1)[0]
    trace = NumpyRunner(bundle).run(ids)
    roles = sentence_roles(trace)
    for l, layer in enumerate(trace.layers):
        np.testing.assert_allclose(roles.scores[l, :, ROLE_NAMES.index("previous_token")],
                                   previous_token_score(layer.attn), rtol=1e-6)
        np.testing.assert_allclose(roles.scores[l, :, ROLE_NAMES.index("first_token")],
                                   sink_score(layer.attn), rtol=1e-6)
        np.testing.assert_allclose(roles.scores[l, :, ROLE_NAMES.index("induction")],
                                   induction_score(layer.attn, period), rtol=1e-6)


def test_probe_is_deterministic_and_the_same_on_both_backends(bundle):
    a = probe_roles(NumpyRunner(bundle), n_repeats=2)
    b = probe_roles(OnnxRunner(bundle), n_repeats=2)
    assert a.scores.shape == (bundle.config.num_hidden_layers, bundle.config.num_attention_heads, len(ROLE_NAMES))
    assert np.isfinite(a.scores).all()                      # a repeated sequence defines every role
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
    np.testing.assert_array_equal(a.scores, probe_roles(NumpyRunner(bundle), n_repeats=2).scores)


def test_shipped_model_has_a_previous_token_head_and_induction_heads():
    # the model card's finding, seen through the readout: a layer-0 head looks one back, layer-1 heads copy
    roles = probe_roles(OnnxRunner(load_bundle()))
    layer, _, score = roles.best_heads("previous_token", 1)[0]
    assert layer == 0 and score > 0.6
    induction = roles.scores[1, :, ROLE_NAMES.index("induction")]
    assert (induction > 0.6).all()
    sentence = sentence_roles(analyse(OnnxRunner(load_bundle()), "one two three four. one two three four."))
    assert sentence.best_heads("induction", 1)[0][0] == 1
