"""Partial runs (Runner.run(ids, fields=...)): the fields a big model's panels need, equal to the full trace's."""
from __future__ import annotations

import numpy as np
import pytest

from core.bundle import trace_bytes
from core.parity import field_difference, field_tolerance
from core.runners import NumpyRunner, OnnxRunner
from core.trace import Trace, output_names

DENSE = dict(architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0, num_key_value_heads=2)
SHAPES = {"moe": {}, "dense": DENSE}
FIELD_SETS = [
    ["layers.1.attn", "resid_post", "logits.last"],    # what bench_import calls the panels' fields
    ["logits"],
    ["embed", "final_norm", "layers.0.router_probs", "expert_ids"],
    ["q_rot", "k_rot", "head_out", "logits.last"],
]
IDS = np.array([3, 17, 250, 9, 44, 101, 7, 300, 61, 12, 5])


@pytest.fixture(scope="module", params=list(SHAPES))
def shaped(request, make_bundle):
    bundle = make_bundle(seed=7, **SHAPES[request.param])
    runners = (NumpyRunner(bundle), OnnxRunner(bundle))
    return bundle, {runner.name: (runner, runner.run(IDS)) for runner in runners}


def _agree(runner_name: str, part: np.ndarray, full: np.ndarray, name: str = "") -> bool:
    # NumPy: the same operations on the same inputs, bit for bit; but one row of logits is a matrix-vector
    # product, which BLAS sums in another order than the matrix product of all rows. ONNX: a pruned graph
    # may fuse its ops differently. Both are held to core.parity's rule there.
    if runner_name == "numpy" and name != "logits":
        return np.array_equal(part, full, equal_nan=True)
    return field_difference(part, full) <= field_tolerance(full)


@pytest.mark.parametrize("fields", FIELD_SETS, ids=lambda f: "+".join(f))
@pytest.mark.parametrize("runner_name", ["numpy", "onnx"])
def test_a_partial_trace_equals_the_full_trace_on_every_field_it_holds(shaped, runner_name, fields):
    bundle, runs = shaped
    runner, full = runs[runner_name]
    part = runner.run(IDS, fields=fields)
    held = part.to_arrays()
    full_arrays = full.to_arrays()
    assert part.fields and set(part.fields) <= set(output_names(bundle.config.num_hidden_layers))
    for name in part.fields:
        expected = full_arrays[name][part.logits_from:] if name == "logits" else full_arrays[name]
        assert held[name].shape == expected.shape, name
        assert _agree(runner_name, held[name], expected, name), name
    for name in set(output_names(bundle.config.num_hidden_layers)) - set(part.fields):
        assert name not in held, name  # what was not asked for is not computed into the trace


@pytest.mark.parametrize("runner_name", ["numpy", "onnx"])
def test_the_logits_a_partial_run_computes_are_the_full_runs_rows(shaped, runner_name):
    bundle, runs = shaped
    runner, full = runs[runner_name]
    last = runner.run(IDS, fields=["resid_post", "logits.last"])
    assert last.logits_from == len(IDS) - 1 and last.logits.shape == (1, bundle.config.vocab_size)
    assert _agree(runner_name, last.logits[0], full.logits[-1], "logits")
    assert _agree(runner_name, last.next_token_probs(), full.next_token_probs(), "logits")
    none = runner.run(IDS, fields=["resid_post"])
    assert none.logits is None and none.logits_from == len(IDS)


@pytest.mark.parametrize("runner_name", ["numpy", "onnx"])
def test_both_runners_give_the_same_partial_trace(shaped, runner_name):
    _, runs = shaped
    fields = ["layers.0.attn", "resid_mid", "logits.last"]
    numpy_part = runs["numpy"][0].run(IDS, fields=fields)
    onnx_part = runs["onnx"][0].run(IDS, fields=fields)
    assert numpy_part.fields == onnx_part.fields
    for name, a in numpy_part.to_arrays().items():
        if a.dtype.kind == "f" and name in numpy_part.fields:
            assert field_difference(onnx_part.to_arrays()[name], a) <= field_tolerance(a), name


def test_a_partial_run_may_go_past_the_full_traces_context(make_bundle, monkeypatch):
    bundle = make_bundle(seed=7)
    monkeypatch.setattr("core.bundle.MAX_TRACE_BYTES", trace_bytes(bundle.config, 20))
    assert bundle.context == 20
    ids = np.arange(40) % bundle.config.vocab_size
    for runner in (NumpyRunner(bundle), OnnxRunner(bundle)):
        with pytest.raises(ValueError, match="past the 20 tokens"):
            runner.run(ids)
        part = runner.run(ids, fields=["resid_post", "layers.0.attn", "logits.last"])
        assert part.n_tokens == 40 and part.layers[0].attn.shape[-1] == 40


def test_a_trace_keeps_the_runs_arrays_without_copying_them(bundle):
    t, d = 3, bundle.config.hidden_size
    embed = np.ones((t, d), np.float32)
    trace = Trace.from_outputs(bundle.config, np.arange(t), {"embed": embed}, head_mask=np.ones((2, 4), np.float32),
                               expert_override=np.full((2, t, 2), -1, np.int64), fields=frozenset({"embed"}),
                               logits_from=t).validate()
    assert np.shares_memory(trace.embed, embed)
    assert not trace.embed.flags.writeable
    with pytest.raises(ValueError):
        embed[0, 0] = 2.0  # handed over: the run's own array is frozen too
