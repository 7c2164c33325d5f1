"""Interventions as arguments of a run: ablation, experts off, patches — each honoured by both runners."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.bundle import load_bundle
from core.interventions import Interventions, experts_off_mask, head_mask_off, parse_sites, stage_names
from core.model import expert_terms
from core.runners import NumpyRunner, OnnxRunner, max_difference

RUNNERS = [NumpyRunner, OnnxRunner]
IDS = np.array([5, 17, 3, 99, 42, 7, 250, 12, 64, 8, 31])


@pytest.fixture(scope="module")
def runners(bundle):
    return {kind.name: kind(bundle) for kind in RUNNERS}


def _o_proj_slice(bundle, layer: int, head: int) -> np.ndarray:  # -> [D, Dh]
    dh = bundle.config.head_dim
    return bundle.weights[f"model.layers.{layer}.self_attn.o_proj.weight"][:, head * dh:(head + 1) * dh]


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_a_zeroed_head_changes_attn_out_by_exactly_its_contribution(runners, bundle, name):
    runner = runners[name]
    full = runner.run(IDS)
    ablated = runner.run(IDS, interventions=Interventions(head_mask=head_mask_off(bundle.config, [(0, 2)])))
    contribution = full.layers[0].head_out[2] @ _o_proj_slice(bundle, 0, 2).T  # [T, D]
    np.testing.assert_allclose(full.layers[0].attn_out - ablated.layers[0].attn_out, contribution, atol=1e-5)
    assert np.all(ablated.layers[0].head_out[2] == 0)
    np.testing.assert_array_equal(ablated.layers[0].head_out[[0, 1, 3]], full.layers[0].head_out[[0, 1, 3]])


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_mean_ablation_writes_the_heads_mean_output_over_positions_before_w_o(runners, bundle, name):
    runner = runners[name]
    full = runner.run(IDS)
    iv = Interventions(head_mask=head_mask_off(bundle.config, [(0, 1)]), ablate_mode="mean")
    ablated = runner.run(IDS, interventions=iv)
    mean = full.layers[0].head_out[1].astype(np.float64).mean(axis=0)  # [Dh]: attn @ v averaged over the T positions
    np.testing.assert_allclose(ablated.layers[0].head_out[1], np.broadcast_to(mean, (len(IDS), mean.size)), atol=1e-6)
    change = (full.layers[0].head_out[1] - mean) @ _o_proj_slice(bundle, 0, 1).T.astype(np.float64)
    np.testing.assert_allclose(full.layers[0].attn_out - ablated.layers[0].attn_out, change, atol=1e-5)


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_a_head_kept_at_a_fraction_mixes_its_output_with_its_mean(runners, bundle, name):
    runner = runners[name]
    mask = np.ones((2, 4), np.float32)
    mask[1, 3] = 0.25
    own = runner.run(IDS).layers[1].head_out[3]
    mixed = runner.run(IDS, interventions=Interventions(head_mask=mask, ablate_mode="mean")).layers[1].head_out[3]
    np.testing.assert_allclose(mixed, 0.25 * own + 0.75 * own.mean(axis=0), atol=1e-5)


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_an_expert_switched_off_is_never_selected_and_the_rest_renormalise(runners, bundle, name):
    cfg = bundle.config
    off = experts_off_mask(cfg, [(0, 1), (1, 0), (1, 3)])
    trace = runners[name].run(IDS, interventions=Interventions(experts_off=off))
    for l, layer in enumerate(trace.layers):
        assert not np.isin(layer.expert_ids, np.flatnonzero(off[l])).any()
        np.testing.assert_allclose(layer.expert_weights.sum(axis=-1), 1.0, atol=1e-6)
        allowed = np.where(off[l], -np.inf, layer.router_probs)  # router_probs: the softmax over all experts
        top = np.argsort(-allowed, axis=-1, kind="stable")[:, : cfg.num_experts_per_tok]
        np.testing.assert_array_equal(np.sort(layer.expert_ids, axis=-1), np.sort(top, axis=-1))
        chosen = np.take_along_axis(layer.router_probs, layer.expert_ids, axis=-1)
        np.testing.assert_allclose(layer.expert_weights, chosen / chosen.sum(axis=-1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_patching_nowhere_is_the_plain_run_bit_for_bit(runners, bundle, name):
    cfg, T = bundle.config, len(IDS)
    rng = np.random.default_rng(0)
    iv = Interventions(resid_patch=rng.standard_normal((1 + 2 * cfg.num_hidden_layers, T, cfg.hidden_size)),
                       resid_patch_mask=np.zeros((1 + 2 * cfg.num_hidden_layers, T), bool))
    plain = runners[name].run(IDS)
    assert np.array_equal(runners[name].run_logits(IDS, iv), plain.logits)
    assert np.array_equal(runners[name].run_logits(IDS), plain.logits)


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_a_residual_patch_writes_its_vector_at_that_stage_and_position(runners, bundle, name):
    cfg, T = bundle.config, len(IDS)
    S = 1 + 2 * cfg.num_hidden_layers
    values = np.random.default_rng(1).standard_normal((S, T, cfg.hidden_size)).astype(np.float32)
    plain = runners[name].run(IDS)
    for stage, field in enumerate(stage_names(cfg.num_hidden_layers)):
        mask = np.zeros((S, T), bool)
        mask[stage, 4] = True
        trace = runners[name].run(IDS, interventions=Interventions(resid_patch=values, resid_patch_mask=mask))
        arrays, before = trace.to_arrays(), plain.to_arrays()
        assert np.array_equal(arrays[field][4], values[stage, 4]), field
        np.testing.assert_array_equal(arrays[field][:4], before[field][:4])  # earlier positions cannot see it


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_a_head_patch_replaces_that_heads_output_at_one_position(runners, bundle, name):
    cfg, T = bundle.config, len(IDS)
    values = np.full((cfg.num_hidden_layers, cfg.num_attention_heads, T, cfg.head_dim), 0.5, np.float32)
    mask = np.zeros((cfg.num_hidden_layers, cfg.num_attention_heads, T), bool)
    mask[1, 2, 6] = True
    plain = runners[name].run(IDS)
    trace = runners[name].run(IDS, interventions=Interventions(head_patch=values, head_patch_mask=mask))
    assert np.all(trace.layers[1].head_out[2, 6] == 0.5)
    change = (0.5 - plain.layers[1].head_out[2, 6]) @ _o_proj_slice(bundle, 1, 2).T
    np.testing.assert_allclose(trace.layers[1].attn_out[6] - plain.layers[1].attn_out[6], change, atol=1e-5)


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_an_expert_patch_replaces_that_experts_term_in_moe_out(runners, bundle, name):
    cfg, T = bundle.config, len(IDS)
    plain = runners[name].run(IDS)
    layer = plain.layers[0]
    terms = expert_terms(layer.moe_in, bundle.weights, "model.layers.0.block_sparse_moe", cfg,
                         layer.expert_ids, layer.expert_weights)  # [E, T, D]
    np.testing.assert_allclose(terms.sum(axis=0), layer.moe_out, atol=1e-5)
    values = np.ones((cfg.num_hidden_layers, cfg.num_local_experts, T, cfg.hidden_size), np.float32)
    mask = np.zeros((cfg.num_hidden_layers, cfg.num_local_experts, T), bool)
    mask[0, 2] = True
    trace = runners[name].run(IDS, interventions=Interventions(expert_patch=values, expert_patch_mask=mask))
    np.testing.assert_allclose(trace.layers[0].moe_out - layer.moe_out, 1.0 - terms[2], atol=1e-5)


def test_both_runners_agree_with_every_intervention_on(runners, bundle):
    cfg, T = bundle.config, len(IDS)
    rng = np.random.default_rng(2)
    L, H, E, S = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts, 1 + 2 * cfg.num_hidden_layers
    override = np.full((L, T, cfg.num_experts_per_tok), -1)
    override[1, 3, 0] = 1
    iv = Interventions(
        head_mask=head_mask_off(cfg, [(0, 0), (1, 2)]), ablate_mode="mean", expert_override=override,
        experts_off=experts_off_mask(cfg, [(0, 3)]),
        resid_patch=rng.standard_normal((S, T, cfg.hidden_size)), resid_patch_mask=rng.random((S, T)) < 0.1,
        head_patch=rng.standard_normal((L, H, T, cfg.head_dim)), head_patch_mask=rng.random((L, H, T)) < 0.1,
        expert_patch=rng.standard_normal((L, E, T, cfg.hidden_size)) * 0.1,
        expert_patch_mask=rng.random((L, E, T)) < 0.2)
    a, b = runners["numpy"].run(IDS, interventions=iv), runners["onnx"].run(IDS, interventions=iv)
    for la, lb in zip(a.layers, b.layers):
        np.testing.assert_array_equal(la.expert_ids, lb.expert_ids)
    assert max_difference(a, b) <= 1e-4
    assert a.layers[1].expert_ids[3, 0] == 1 and not np.isin(a.layers[0].expert_ids, [3]).any()


def test_head_mask_and_expert_override_arguments_still_work(runners, bundle):
    mask = head_mask_off(bundle.config, [(1, 1)])
    for runner in runners.values():
        old = runner.run(IDS, head_mask=mask)
        new = runner.run(IDS, interventions=Interventions(head_mask=mask))
        assert np.array_equal(old.logits, new.logits)
        assert np.array_equal(old.head_mask, mask)
        with pytest.raises(ValueError, match="inside interventions"):
            runner.run(IDS, head_mask=mask, interventions=Interventions())


def test_the_trace_records_every_intervention_and_reads_back(runners, bundle):
    cfg = bundle.config
    iv = Interventions(head_mask=head_mask_off(cfg, [(0, 3)]), ablate_mode="mean",
                       experts_off=experts_off_mask(cfg, [(1, 2)]))
    arrays = runners["onnx"].run(IDS, interventions=iv).to_arrays()
    assert str(arrays["ablate_mode"]) == "mean"
    back = Interventions.from_arrays(arrays)
    assert back.ablate_mode == "mean"
    assert np.array_equal(back.head_mask, iv.head_mask) and np.array_equal(back.experts_off, iv.experts_off)
    for name in ("resid_patch_mask", "head_patch_mask", "expert_patch_mask"):
        assert arrays[name].shape[-1] == len(IDS) and not arrays[name].any()
    assert np.array_equal(runners["numpy"].run(IDS, interventions=back).logits,
                          runners["numpy"].run(IDS, interventions=iv).logits)


def test_describe_names_what_is_off_and_patched(bundle):
    cfg = bundle.config
    mask = np.zeros((1 + 2 * cfg.num_hidden_layers, 3), bool)
    mask[2, 1] = True
    iv = Interventions(head_mask=head_mask_off(cfg, [(0, 1), (1, 3)]), experts_off=experts_off_mask(cfg, [(1, 0)]),
                       resid_patch=np.zeros((*mask.shape, cfg.hidden_size)), resid_patch_mask=mask)
    assert iv.describe() == "heads 0.1, 1.3 ablated (zero); experts 1.0 off; resid patched at 1 site(s)"
    assert Interventions().describe() == ""


@pytest.mark.parametrize("make, message", [
    (lambda cfg: Interventions(ablate_mode="half"), "zero or mean"),
    (lambda cfg: Interventions(resid_patch=np.zeros((5, 11, cfg.hidden_size))), "give both or neither"),
    (lambda cfg: Interventions(head_mask=np.ones((3, 4))).filled(cfg, 11), r"head_mask must have shape \(2, 4\)"),
    (lambda cfg: Interventions(experts_off=experts_off_mask(cfg, [(0, 0), (0, 1), (0, 2)])).filled(cfg, 11),
     "layer 0 keeps 1 expert"),
    (lambda cfg: Interventions(experts_off=experts_off_mask(cfg, [(1, 2)]),
                               expert_override=np.full((2, 11, 2), 2)).filled(cfg, 11), "expert 1.2 is both"),
])
def test_bad_interventions_get_one_clear_message(bundle, make, message):
    with pytest.raises(ValueError, match=message):
        make(bundle.config)


def test_sites_parse_and_name_the_valid_range():
    assert parse_sites("0.1, 1.3", "head", 2, 4) == [(0, 1), (1, 3)]
    with pytest.raises(ValueError, match=r"head 2\.1 does not exist: layers 0-1, heads 0-3"):
        parse_sites("2.1", "head", 2, 4)
    with pytest.raises(ValueError, match="not LAYER.INDEX"):
        parse_sites("1-2", "expert", 2, 4)


ROOT = Path(__file__).resolve().parents[2]


def _main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("backend", ["onnx", "numpy"])
def test_trace_command_writes_the_intervened_run_and_its_interventions(tmp_path, backend):
    text = "订单成交了"
    result = _main("trace", "--text", text, "--out", str(tmp_path), "--backend", backend,
                   "--ablate-heads", "0.1,1.3", "--ablate-mode", "mean", "--ablate-experts", "0.2")
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(None)
    cfg = bundle.config
    iv = Interventions(head_mask=head_mask_off(cfg, [(0, 1), (1, 3)]), ablate_mode="mean",
                       experts_off=experts_off_mask(cfg, [(0, 2)]))
    expected = NumpyRunner(bundle).run(bundle.tokenizer.encode(text), interventions=iv)
    with np.load(tmp_path / "trace.npz") as npz:
        assert str(npz["ablate_mode"]) == "mean"
        assert np.array_equal(npz["head_mask"], iv.head_mask) and np.array_equal(npz["experts_off"], iv.experts_off)
        assert not np.isin(npz["layers.0.expert_ids"], [2]).any()
        np.testing.assert_allclose(npz["logits"], expected.logits, atol=1e-4)


@pytest.mark.parametrize("flags, message", [
    (("--ablate-heads", "2.1"), "head 2.1 does not exist: layers 0-1, heads 0-3 in each"),
    (("--ablate-experts", "0.4"), "expert 0.4 does not exist: layers 0-1, experts 0-3 in each"),
    (("--ablate-experts", "1.0,1.1,1.2"), "layer 1 keeps 1 expert(s) switched on; the router needs at least 2"),
    (("--ablate-heads", "x"), "head 'x' is not LAYER.INDEX"),
])
def test_trace_command_bad_sites_get_one_line_with_the_valid_range(tmp_path, flags, message):
    result = _main("trace", "--text", "订单", "--out", str(tmp_path), *flags)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_graph_without_an_intervention_input_says_to_export_again(bundle, tmp_path):
    import shutil

    import onnx

    folder = tmp_path / "old"
    shutil.copytree(bundle.path, folder)
    model = onnx.load(str(folder / "model.onnx"))
    kept = [i for i in model.graph.input if i.name != "experts_off"]  # its default stays, as a constant
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, str(folder / "model.onnx"))
    runner = OnnxRunner(load_bundle(folder))
    assert np.array_equal(runner.run(IDS).logits, OnnxRunner(bundle).run(IDS).logits)  # plain runs still work
    with pytest.raises(ValueError, match="predates the experts_off intervention; export the bundle again"):
        runner.run(IDS, interventions=Interventions(experts_off=experts_off_mask(bundle.config, [(0, 1)])))


def test_same_ablations_compares_what_is_switched_off_not_how_it_is_written():
    from core.interventions import same_ablations

    on = np.ones((2, 4), np.float32)
    h1_off = on.copy()
    h1_off[0, 1] = 0
    no_expert_off = np.zeros((2, 4), bool)
    e2_off = no_expert_off.copy()
    e2_off[1, 2] = True
    assert same_ablations(None, Interventions())
    assert same_ablations(None, Interventions(head_mask=on, experts_off=no_expert_off, ablate_mode="mean"))
    assert same_ablations(Interventions(head_mask=h1_off), Interventions(head_mask=h1_off.copy()))
    assert not same_ablations(None, Interventions(head_mask=h1_off))
    assert not same_ablations(Interventions(head_mask=h1_off), Interventions(head_mask=h1_off, ablate_mode="mean"))
    assert not same_ablations(Interventions(experts_off=e2_off), None)
    half = on.copy()
    half[0, 1] = 0.5
    assert not same_ablations(Interventions(head_mask=half), Interventions(head_mask=h1_off))
