"""Evaluation metrics on hand-made inputs, where the right answer is known exactly."""
from __future__ import annotations

import numpy as np
import pytest

from core.training.evaluate import (copy_losses, evaluate_bundle, expert_load, expert_scripts, format_report,
                                    induction_score, previous_token_score, repeated_sequence, sink_score,
                                    thresholds, token_losses, token_script, unigram_cross_entropy)


def one_hot_attention(targets: list[int], heads: int = 2) -> np.ndarray:  # -> [H, T, T]
    t = len(targets)
    attn = np.zeros((heads, t, t))
    attn[:, np.arange(t), targets] = 1.0
    return attn


def uniform_causal(t: int) -> np.ndarray:  # [1, T, T]
    return (np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None])[None]


def test_previous_token_head_scores_one():
    t = 10
    attn = one_hot_attention([0] + list(range(t - 1)))  # position i looks at i-1
    assert previous_token_score(attn) == pytest.approx([1.0, 1.0])
    assert sink_score(attn) == pytest.approx([1 / (t - 1)] * 2)  # only position 1, whose i-1 is 0


def test_sink_head_scores_one_and_no_previous_token():
    t = 8
    attn = one_hot_attention([0] * t)
    assert sink_score(attn) == pytest.approx([1.0, 1.0])
    assert previous_token_score(attn) == pytest.approx([1 / (t - 1)] * 2)  # again only position 1


def test_uniform_attention_scores():
    t = 6
    attn = uniform_causal(t)
    expected = np.mean([1 / (i + 1) for i in range(1, t)])
    assert previous_token_score(attn)[0] == pytest.approx(expected)
    assert sink_score(attn)[0] == pytest.approx(expected)


def test_induction_head_scores_one_and_previous_token_head_zero():
    p = 5
    t = 2 * p
    # Second-copy position i attends to i - p + 1: the token after the earlier occurrence of ids[i].
    targets = [0] * p + [i - p + 1 for i in range(p, t)]
    assert induction_score(one_hot_attention(targets), p) == pytest.approx([1.0, 1.0])
    prev = one_hot_attention([0] + list(range(t - 1)))
    assert induction_score(prev, p) == pytest.approx([0.0, 0.0])
    assert induction_score(uniform_causal(t), p)[0] == pytest.approx(np.mean([1 / (i + 1) for i in range(p, t)]))


def test_token_and_copy_losses():
    v, p = 7, 3
    ids = np.array([1, 2, 3, 1, 2, 3])
    logits = np.zeros((len(ids), v))                 # uniform: every loss is log V
    assert token_losses(logits, ids) == pytest.approx([np.log(v)] * (len(ids) - 1))
    # A confident correct guess from position 3 on (predicting tokens 4 and 5, the second copy).
    logits[3, 2] = logits[4, 3] = 50.0
    first, second = copy_losses(logits, ids, p)
    assert first == pytest.approx(np.log(v))
    assert second == pytest.approx(0.0, abs=1e-12)


def test_repeated_sequence_has_distinct_tokens_in_a_period():
    ids = repeated_sequence(range(100), 20, np.random.default_rng(0))
    assert len(ids) == 40 and (ids[:20] == ids[20:]).all() and len(set(ids[:20])) == 20


def test_expert_load_and_scripts():
    ids = np.array([[0, 1], [0, 2], [0, 1], [3, 0]])
    assert expert_load(ids, 5) == pytest.approx([0.5, 0.25, 0.125, 0.125, 0.0])
    scripts = ["zh", "latin", "zh", "other"]
    per = expert_scripts(ids, scripts, 5)
    assert per[0] == pytest.approx({"zh": 0.5, "latin": 0.25, "other": 0.25})
    assert per[1] == pytest.approx({"zh": 1.0, "latin": 0.0, "other": 0.0})
    assert per[4] == {"zh": 0.0, "latin": 0.0, "other": 0.0}


def test_token_script():
    assert token_script("中文".encode()) == "zh"
    assert token_script("中".encode()[:2]) == "zh"      # a fragment of a Chinese character
    assert token_script(b" the") == "latin"
    assert token_script(b", ") == "other"


def test_unigram_cross_entropy_of_uniform_counts():
    train = np.repeat(np.arange(4), 10)
    assert unigram_cross_entropy(train, np.array([0, 1, 2, 3]), 4) == pytest.approx(np.log(4))


def test_thresholds():
    result = dict(induction=[[0.1, 0.45]], previous_token=[[0.7, 0.1]], copy_loss_first=6.0,
                  copy_loss_second=1.0, expert_load=[[0.25, 0.25, 0.3, 0.2]])
    assert all(thresholds(result).values())
    result["expert_load"] = [[0.04, 0.36, 0.3, 0.3]]
    assert not thresholds(result)["every expert >= 5% of assignments"]


def test_evaluate_bundle_on_random_bundle(tmp_path):
    from core.bundle import load_bundle
    from core.random_bundle import make_random_bundle
    from core.sample_text import sample_sentences

    bundle = load_bundle(make_random_bundle(tmp_path / "b"))
    result = evaluate_bundle(bundle, sample_sentences(40, seed=2), sample_sentences(40, seed=3),
                             n_chunks=2, chunk_len=64, period=16, n_repeats=2, prompts=("The", "订单"), sample_tokens=3)
    cfg = bundle.config
    assert np.array(result["previous_token"]).shape == (cfg.num_hidden_layers, cfg.num_attention_heads)
    assert np.array(result["expert_load"]).sum(axis=1) == pytest.approx([1.0] * cfg.num_hidden_layers)
    assert result["val_ce"] > 0 and result["unigram_ce"] > 0
    assert set(result["samples"]) == {"The", "订单"}
    assert "previous-token" in format_report(result)
