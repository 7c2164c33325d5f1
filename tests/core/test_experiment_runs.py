"""core.experiment_runs: the ablations kept in force, and the before/after of one prediction."""
from __future__ import annotations

import numpy as np
import pytest

from core.experiment_runs import AblatedRunner, ablations_only, next_token_change, with_ablations
from core.interventions import Interventions, head_mask_off
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
