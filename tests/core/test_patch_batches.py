"""Batched sweep runs (Runner.run_patch_batch): the ONNX sweep graph gives each run's own last logits."""
from __future__ import annotations

import numpy as np
import pytest

from core import patching
from core.experiment_runs import AblatedRunner
from core.interventions import Interventions, head_mask_off
from core.parity import field_difference, field_tolerance
from core.interventions import residual_stages
from core.patching import cell_interventions, head_values, patched_metric, prepare_pair, sweep
from core.runners import NumpyRunner, OnnxRunner

DENSE = dict(architecture="Qwen2ForCausalLM", num_local_experts=0, num_experts_per_tok=0, num_key_value_heads=2,
             qkv_bias=True)
IDS = np.array([12, 80, 5, 71, 140, 9, 61, 200, 18])
CLEAN = np.array([12, 80, 5, 33, 140, 9, 61, 200, 18])


def _masks(shape: tuple[int, ...], cells: list[tuple[int, ...]]) -> np.ndarray:
    masks = np.zeros((len(cells), *shape), bool)
    for i, cell in enumerate(cells):
        masks[i][cell] = True
    return masks


@pytest.mark.parametrize("shape, patch", [({}, "resid_patch"), ({}, "head_patch"), ({}, "expert_patch"),
                                          (DENSE, "resid_patch"), (DENSE, "head_patch")])  # dense: no experts
def test_each_run_of_a_batch_is_the_run_of_its_own_mask(make_bundle, shape, patch):
    bundle = make_bundle(seed=3, **shape)
    onnx_runner = OnnxRunner(bundle)
    clean = NumpyRunner(bundle).run(CLEAN)
    values = {"resid_patch": np.stack(residual_stages(clean)), "head_patch": head_values(clean)}.get(patch)
    if values is None:
        values = patching.expert_values(clean)
    base = Interventions(**{patch: values, f"{patch}_mask": np.zeros(values.shape[:-1], bool)},
                         head_mask=head_mask_off(bundle.config, [(0, 1)]), ablate_mode="mean")
    cells = [(0, 3), (1, 4), (2, 8), (0, 0)] if patch == "resid_patch" else [(0, 1, 3), (1, 2, 8), (1, 0, 0)]
    masks = _masks(values.shape[:-1], cells)
    masks[-1] = False  # a run patched nowhere, beside the others
    batched = onnx_runner.run_patch_batch(IDS, base, patch, masks)
    assert batched.shape == (len(cells), bundle.config.vocab_size)
    for row, mask in zip(batched, masks):
        one = onnx_runner.run_logits(IDS, Interventions(**{**_fields(base), f"{patch}_mask": mask}))[-1]
        reference = NumpyRunner(bundle).run_logits(IDS, Interventions(**{**_fields(base), f"{patch}_mask": mask}))[-1]
        assert field_difference(row, one) <= field_tolerance(one)
        assert field_difference(row, reference) <= field_tolerance(reference)
    assert not np.allclose(batched[0], batched[-1])  # the patch is honoured per run, not shared


def _fields(iv: Interventions) -> dict:
    return {name: getattr(iv, name) for name in ("head_mask", "ablate_mode", "resid_patch", "resid_patch_mask",
                                                 "head_patch", "head_patch_mask", "expert_patch", "expert_patch_mask")
            if getattr(iv, name) is not None}


@pytest.mark.parametrize("kind", ["resid", "heads", "heads_pos", "experts"])
def test_a_sweep_in_small_chunks_gives_each_cells_own_run_on_both_runners(bundle, monkeypatch, kind):
    monkeypatch.setattr(patching, "SWEEP_CHUNK", 3)  # chunk boundaries inside every sweep
    ablations = Interventions(head_mask=head_mask_off(bundle.config, [(1, 0)]))
    for runner in (AblatedRunner(NumpyRunner(bundle), ablations), AblatedRunner(OnnxRunner(bundle), ablations)):
        pair = prepare_pair(runner, CLEAN, IDS)
        seen: list[tuple[int, int]] = []
        swept = sweep(runner, pair, kind, progress=lambda done, total: seen.append((done, total)))
        assert seen == [(i, swept.size) for i in range(1, swept.size + 1)]
        for cell in [c for c in np.ndindex(*swept.shape)][:: max(1, swept.size // 7)]:
            one = patched_metric(runner, pair, cell_interventions(pair, kind, cell))
            if isinstance(runner.runner, NumpyRunner):
                assert swept[cell] == np.float32(one), cell  # the same runs, one by one
            else:
                assert abs(swept[cell] - one) <= 1e-5 * max(1.0, abs(one)), cell


def test_a_batch_needs_one_mask_per_run_of_the_patchs_shape(bundle):
    runner, cfg = OnnxRunner(bundle), bundle.config
    stages = 1 + 2 * cfg.num_hidden_layers
    base = Interventions(resid_patch=np.zeros((stages, 9, cfg.hidden_size)), resid_patch_mask=np.zeros((stages, 9)))
    with pytest.raises(ValueError, match="stack of one mask per run"):
        runner.run_patch_batch(IDS, base, "resid_patch", np.zeros((0, stages, 9), bool))
    with pytest.raises(ValueError, match="resid_patch_mask must have shape"):
        runner.run_patch_batch(IDS, base, "resid_patch", np.zeros((2, stages, 8), bool))
