"""A run with nothing in force builds no patch arrays, and gives exactly the run with every "none" spelled out."""
from __future__ import annotations

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest

from core.interventions import Interventions
from core.random_bundle import SMALL
from core.runners import NumpyRunner, OnnxRunner

IDS = np.arange(3, 40)
# 0.5B-like sizes: without care, filled() builds [S, T, D] and [L, E, T, D] zeros (hundreds of MB) per run
WIDE = replace(SMALL, hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
               num_local_experts=8, max_position_embeddings=1024)


def spelled_out(config, t: int) -> Interventions:
    """Every intervention at its "none" value, as real arrays."""
    L, H, E, K, D, Dh = (config.num_hidden_layers, config.num_attention_heads, config.num_local_experts,
                         config.num_experts_per_tok, config.hidden_size, config.head_dim)
    S = 1 + 2 * L
    return Interventions(head_mask=np.ones((L, H)), expert_override=np.full((L, t, K), -1),
                         experts_off=np.zeros((L, E), bool),
                         resid_patch=np.zeros((S, t, D)), resid_patch_mask=np.zeros((S, t), bool),
                         head_patch=np.zeros((L, H, t, Dh)), head_patch_mask=np.zeros((L, H, t), bool),
                         expert_patch=np.zeros((L, E, t, D)), expert_patch_mask=np.zeros((L, E, t), bool))


def test_filling_nothing_allocates_no_patch_arrays():
    Interventions().filled(WIDE, 512)   # warm up imports and caches
    tracemalloc.start()
    try:
        filled = Interventions().filled(WIDE, 512)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full_size = sum(getattr(filled, name).size * getattr(filled, name).itemsize for name in ("resid_patch", "expert_patch"))
    assert full_size > 400 * 2**20          # what building them would cost
    assert peak < 64 * 2**10                # what it costs now: a [L, H] head mask and bookkeeping
    assert filled.resid_patch.shape == (49, 512, 896) and not filled.resid_patch.any()
    assert not filled.resid_patch.flags.writeable
    assert (filled.expert_override == -1).all() and (filled.head_mask == 1).all()


def test_filling_does_not_copy_given_arrays_again():
    iv = Interventions(resid_patch=np.ones((5, 4, 64)), resid_patch_mask=np.ones((5, 4), bool))
    filled = iv.filled(SMALL, 4)
    assert filled.resid_patch is iv.resid_patch and filled.resid_patch_mask is iv.resid_patch_mask


@pytest.mark.parametrize("runner_class", [NumpyRunner, OnnxRunner], ids=["numpy", "onnx"])
def test_a_run_with_nothing_in_force_is_bit_identical_to_every_none_spelled_out(bundle, runner_class):
    runner = runner_class(bundle)
    plain = runner.run(IDS).to_arrays()
    explicit = runner.run(IDS, interventions=spelled_out(bundle.config, len(IDS))).to_arrays()
    assert plain.keys() == explicit.keys()
    for name in plain:
        assert np.array_equal(plain[name], explicit[name]), name
