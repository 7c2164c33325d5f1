"""core.experiment_runs: the ablations kept in force, and the before/after of one prediction."""
from __future__ import annotations

import numpy as np
import pytest

from core.experiment_runs import (AblatedRunner, ablations_only, next_token_change, occlude_typed, parse_token,
                                  patch_typed, with_ablations)
from core.interventions import Interventions, head_mask_off
from core.occlusion import occlude
from core.patching import PairWording, prepare_pair, run_all_sweeps
from core.runners import NumpyRunner


def test_next_token_change_is_the_softmax_of_each_run_and_their_log_ratio():
    full, after = np.array([3.0, 1.0, 0.0, -2.0]), np.array([0.0, 2.5, 0.0, 1.0])
    change = next_token_change(full, after, k=2)
    p_full, p_after = np.exp(full) / np.exp(full).sum(), np.exp(after) / np.exp(after).sum()
    assert list(change.ids) == [0, 1, 3]   # the full model's top 2, then the intervened run's new one
    np.testing.assert_allclose(change.p_full, p_full[[0, 1, 3]], rtol=1e-12)
    np.testing.assert_allclose(change.p_intervened, p_after[[0, 1, 3]], rtol=1e-12)
    np.testing.assert_allclose(change.delta_logprob, np.log(p_after / p_full)[[0, 1, 3]], rtol=1e-12)
    assert change.csv(["a", "b", "c", "d"]).splitlines()[0] == "id,piece,p_full,p_intervened,delta_logprob"


def test_ablations_only_keeps_heads_mode_and_experts_and_drops_patches(bundle):
    cfg = bundle.config
    mask = head_mask_off(cfg, [(0, 1)])
    off = np.zeros((cfg.num_hidden_layers, cfg.num_local_experts), bool)
    off[1, 0] = True
    patch = np.zeros((1 + 2 * cfg.num_hidden_layers, 3), bool)
    full = Interventions(head_mask=mask, ablate_mode="mean", experts_off=off,
                         resid_patch=np.ones((patch.shape[0], 3, cfg.hidden_size)), resid_patch_mask=patch)
    kept = ablations_only(full)
    assert kept.ablate_mode == "mean" and kept.resid_patch is None
    np.testing.assert_array_equal(kept.head_mask, mask)
    np.testing.assert_array_equal(kept.experts_off, off)
    assert ablations_only(None).describe() == ""


def test_ablated_runner_runs_with_the_ablations_and_the_runs_own_patch(bundle):
    runner = NumpyRunner(bundle)
    ids = bundle.tokenizer.encode("The cat sat.")
    ablations = Interventions(head_mask=head_mask_off(bundle.config, [(1, 0), (0, 1)]))
    ablated = AblatedRunner(runner, ablations)
    np.testing.assert_array_equal(ablated.run_logits(ids), runner.run_logits(ids, ablations))
    assert not np.array_equal(ablated.run_logits(ids), runner.run_logits(ids))
    S, T = 1 + 2 * bundle.config.num_hidden_layers, len(ids)
    mask = np.zeros((S, T), bool)
    mask[0, 0] = True
    patch = Interventions(resid_patch=np.zeros((S, T, bundle.config.hidden_size)), resid_patch_mask=mask)
    both = with_ablations(ablations, patch)
    np.testing.assert_array_equal(ablated.run(ids, interventions=patch).logits, runner.run(ids, interventions=both).logits)
    assert both.patches("resid_patch")


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_with_ablations_takes_the_ablate_mode_in_force(mode):
    assert with_ablations(Interventions(ablate_mode=mode), Interventions()).ablate_mode == mode


# ---------------------------------------------------------------- runs from typed input (the panels' and the CLI's)

def one_token(tokenizer, text: str) -> int:
    [token] = tokenizer.encode(text, add_special=False)
    return token


def test_a_token_is_typed_as_its_text_or_its_id(bundle):
    tokenizer = bundle.tokenizer
    assert parse_token(tokenizer, " the", "--x") == one_token(tokenizer, " the")
    assert parse_token(tokenizer, "#7", "--x") == 7
    for typed in ("#-3", f"#{tokenizer.vocab_size}"):
        with pytest.raises(ValueError, match=f"--x {typed}: ids run from 0 to {tokenizer.vocab_size - 1}"):
            parse_token(tokenizer, typed, "--x")
    with pytest.raises(ValueError, match="the field 'The cat' is \\d+ tokens"):
        parse_token(tokenizer, "The cat", "the field")


def test_occlusion_typed_is_occlusion_of_the_tokens_typed(bundle):
    runner, tokenizer = NumpyRunner(bundle), bundle.tokenizer
    ids = np.array(tokenizer.encode("The cat sat on the mat."), np.int64)
    labels = [f"w{t}" for t in range(len(ids))]
    typed = occlude_typed(runner, ids, labels, 3, f"#{int(ids[4])}", " the")
    expected = occlude(runner, ids, 3, int(ids[4]), one_token(tokenizer, " the"))
    np.testing.assert_array_equal(typed.delta_logprob, expected.delta_logprob)
    assert typed.target_id == expected.target_id and typed.baseline_id == expected.baseline_id
    assert typed.token_labels() == labels
    assert occlude_typed(runner, ids, labels, None).baseline_id == -1   # nothing typed: each token removed
    with pytest.raises(ValueError, match="^--baseline 'The cat' is \\d+ tokens"):
        occlude_typed(runner, ids, labels, None, "", "The cat", ("--target", "--baseline"))


def test_patching_typed_is_every_sweep_of_the_pair_typed_with_both_texts_labels(bundle):
    runner, tokenizer = NumpyRunner(bundle), bundle.tokenizer
    clean = np.array(tokenizer.encode("The cat sat on the mat."), np.int64)
    corrupt = tokenizer.encode_traced("The cat sat on the mat!")   # as many tokens as A: the last one differs
    clean_labels = [f"a{t}" for t in range(len(clean))]
    result = patch_typed(runner, clean, clean_labels, "The cat sat on the mat!", "", f"#{int(clean[2])}")
    expected = run_all_sweeps(runner, prepare_pair(runner, clean, corrupt.ids, None, int(clean[2])))
    np.testing.assert_array_equal(result.heads_pos, expected.heads_pos)
    np.testing.assert_array_equal(result.resid, expected.resid)
    assert result.pair.wrong_id == int(clean[2])
    assert result.token_labels() == (clean_labels, [token.display for token in corrupt.tokens])


def test_patching_typed_names_the_inputs_as_the_wording_says(bundle):
    runner, clean = NumpyRunner(bundle), np.array(bundle.tokenizer.encode("The cat sat."), np.int64)
    wording = PairWording(corrupt_input="sentence B", answer_input="the answer field's")
    with pytest.raises(ValueError, match="^sentence B: the text is empty"):
        patch_typed(runner, clean, [], "", wording=wording)
    with pytest.raises(ValueError, match="^the answer field's 'The cat' is \\d+ tokens"):
        patch_typed(runner, clean, [], "The dog sat.", "The cat", wording=wording)
