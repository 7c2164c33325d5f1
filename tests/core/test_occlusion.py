"""Occlusion and attention rollout: hand-made cases, a model whose attention writes nothing, both runners."""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.bundle import load_bundle, write_bundle
from core.model import random_weights
from core.occlusion import REMOVE, attention_rollout, occlude, occlusion_arrays
from core.random_bundle import SMALL
from core.runners import NumpyRunner, OnnxRunner

IDS = np.array([11, 40, 7, 93, 150, 21, 64])


def test_identity_attention_rolls_out_to_one_hot_rows():
    eye = np.broadcast_to(np.eye(5), (3, 5, 5))
    rollout = attention_rollout([eye, eye])
    np.testing.assert_array_equal(rollout, np.eye(5))
    assert rollout[3].tolist() == [0, 0, 0, 1, 0]


def test_rollout_of_a_hand_made_two_token_case():
    # every head attends half/half from token 1: A' = 0.5 A + 0.5 I = [[1, 0], [0.25, 0.75]]; two layers multiply
    attn = np.broadcast_to(np.array([[1.0, 0.0], [0.5, 0.5]]), (2, 2, 2))
    np.testing.assert_allclose(attention_rollout([attn, attn]), [[1, 0], [0.4375, 0.5625]])


def test_rollout_averages_heads_before_adding_the_residual():
    one_head_looks_back = np.array([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])  # mean row 1: [0.5, 0.5]
    np.testing.assert_allclose(attention_rollout([one_head_looks_back])[1], [0.25, 0.75])


@pytest.fixture(scope="module")
def attention_writes_nothing(tmp_path_factory, small_tokenizer):
    """A bundle whose o_proj and expert outputs are zero: each position's prediction depends on its own token only."""
    config = replace(SMALL, vocab_size=small_tokenizer.vocab_size)
    weights = random_weights(config, seed=4)
    for name in weights:
        if name.endswith(("o_proj.weight", "w2.weight")):
            weights[name] = np.zeros_like(weights[name])
    folder = tmp_path_factory.mktemp("silent")
    return load_bundle(write_bundle(folder, config, weights, small_tokenizer, "attention writes nothing"))


@pytest.mark.parametrize("kind", [NumpyRunner, OnnxRunner])
def test_occlusion_finds_only_the_token_itself_where_attention_writes_nothing(attention_writes_nothing, kind):
    runner = kind(attention_writes_nothing)
    substituted = occlude(runner, IDS, position=4, baseline_id=0)
    np.testing.assert_allclose(substituted.delta_logprob[:4], 0.0, atol=1e-5)
    assert abs(substituted.delta_logprob[4]) > 1e-2
    assert np.isnan(substituted.delta_logprob[5:]).all()
    removed = occlude(runner, IDS, position=4)  # removing j < P keeps token P last: nothing changes
    np.testing.assert_allclose(removed.delta_logprob[:4], 0.0, atol=1e-5)
    # rollout still spreads over earlier tokens: attention weights alone do not say what mattered
    assert substituted.rollout[:4].sum() > 0.1


@pytest.mark.parametrize("kind", [NumpyRunner, OnnxRunner])
def test_occlusion_defaults_to_the_last_token_and_its_top_prediction(bundle, kind):
    runner = kind(bundle)
    result = occlude(runner, IDS)
    trace = runner.run(IDS)
    assert result.position == len(IDS) - 1 and result.target_id == int(np.argmax(trace.logits[-1]))
    assert result.baseline_id == REMOVE and np.isfinite(result.delta_logprob).all()
    np.testing.assert_allclose(result.rollout.sum(), 1.0, atol=1e-6)
    expected = attention_rollout([layer.attn for layer in trace.layers])[-1]
    np.testing.assert_allclose(result.rollout, expected, atol=1e-6)


def test_putting_a_token_back_in_its_own_place_changes_nothing(bundle):
    runner = NumpyRunner(bundle)
    result = occlude(runner, IDS[:1], position=0, baseline_id=int(IDS[0]))
    assert result.delta_logprob[0] == 0.0
    assert np.isnan(occlude(runner, IDS[:1], position=0).delta_logprob[0])  # nothing left once it is removed


def test_both_runners_give_the_same_occlusion(bundle):
    a = occlude(NumpyRunner(bundle), IDS, position=5, target=9, baseline_id=3)
    b = occlude(OnnxRunner(bundle), IDS, position=5, target=9, baseline_id=3)
    np.testing.assert_allclose(a.delta_logprob, b.delta_logprob, atol=1e-4)
    np.testing.assert_allclose(a.rollout, b.rollout, atol=1e-5)
    arrays = occlusion_arrays(a)
    assert arrays["delta_logprob"].dtype == np.float32 and arrays["delta_logprob"].shape == (len(IDS),)
    assert int(arrays["baseline"]) == 3 and int(arrays["target_id"]) == 9 and int(arrays["position"]) == 5


def test_the_csv_has_one_row_per_token_with_the_results_values_and_a_blank_where_not_run(bundle):
    labels = [f"w{t}" for t in range(len(IDS))]
    result = occlude(NumpyRunner(bundle), IDS, position=4, labels=labels)
    header, *rows = list(csv.reader(io.StringIO(result.csv())))
    assert header == ["position", "token", "delta_logprob", "rollout"] and len(rows) == len(IDS)
    assert [int(row[0]) for row in rows] == list(range(len(IDS))) and [row[1] for row in rows] == labels
    np.testing.assert_array_equal([float(row[2]) for row in rows[:5]], result.delta_logprob[:5])
    assert [row[2] for row in rows[5:]] == ["", ""]   # after P: not run (NaN in occlusion.npz)
    np.testing.assert_array_equal([float(row[3]) for row in rows], result.rollout)


def test_tokens_without_labels_are_named_by_their_ids(bundle):
    assert occlude(NumpyRunner(bundle), IDS).token_labels() == [f"#{i}" for i in IDS]


@pytest.mark.parametrize("kwargs, message", [
    (dict(position=7), "position 7 is outside the text: positions 0-6"),
    (dict(target=10 ** 6), "target id 1000000 is outside the vocabulary"),
    (dict(baseline_id=-5), "baseline id -5 is outside the vocabulary"),
])
def test_bad_occlusion_arguments_name_the_valid_range(bundle, kwargs, message):
    with pytest.raises(ValueError, match=message):
        occlude(NumpyRunner(bundle), IDS, **kwargs)


ROOT = Path(__file__).resolve().parents[2]


def _main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_occlude_command_on_the_shipped_model_writes_occlusion_npz(tmp_path):
    text = "When David and Jesus went out, Jesus gave a drink to"
    result = _main("occlude", "--text", text, "--position", "9", "--baseline", " the", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(None)
    expected = occlude(OnnxRunner(bundle), bundle.tokenizer.encode(text), position=9,
                       baseline_id=bundle.tokenizer.encode(" the")[0])
    with np.load(tmp_path / "occlusion.npz") as npz:
        np.testing.assert_allclose(npz["delta_logprob"], expected.delta_logprob, atol=1e-5)
        np.testing.assert_allclose(npz["rollout"], expected.rollout, atol=1e-6)
        assert int(npz["baseline"]) == bundle.tokenizer.encode(" the")[0] and int(npz["position"]) == 9
    lines = (tmp_path / "occlusion.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "position,token,delta_logprob,rollout" and len(lines) == 1 + expected.input_ids.size


@pytest.mark.parametrize("args, message", [
    (("--text", "订单成交了", "--position", "9"), "position 9 is outside the text: positions 0-6"),
    (("--text", "订单成交了", "--baseline", "订单"), "is 3 tokens"),
    (("--text", "", "--target", "3"), "--text: the text is empty"),
])
def test_occlude_command_bad_arguments_get_one_line(tmp_path, args, message):
    result = _main("occlude", *args, "--out", str(tmp_path))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
