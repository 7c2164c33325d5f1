"""The bundle gate: every hostile bundle of issue 9 (items 1, 2, 3, 5, 6) is refused with one BundleError.

Each test damages a copy of a random bundle in one way (tests/hostile_bundles.py) and checks the
message names the problem. Several would pass silently, hang, allocate gigabytes or read a file
outside the bundle before the gate existed.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

import core.bundle as bundle_module
from core.bundle import BundleError, load_bundle, model_bytes_limit
from core.config import ModelConfig
from core.runners import NumpyRunner, OnnxRunner
from core.trace import TraceError
from tests import hostile_bundles as hostile

SECRET = b"outside the bundle: must never be read\n"


@pytest.fixture
def folder(bundle, tmp_path) -> Path:
    return hostile.copy_bundle(bundle.path, tmp_path / "b")


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file beside the bundle folder (as /etc/passwd would be), big enough to pass for any tensor."""
    path = tmp_path / "secret.bin"
    path.write_bytes(SECRET * 4096)
    return path


def refused(folder, *fragments) -> str:
    with pytest.raises(BundleError) as info:
        load_bundle(folder)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------- 1. paths outside the bundle

def test_constant_node_with_external_data_outside_the_bundle_is_refused(folder, outside):
    model = hostile.add_constant_node(hostile.load_model(folder), hostile.external_tensor("c", "../secret.bin", (16,)))
    refused(hostile.save_model(folder, model), "outside the bundle")


def test_constant_node_with_external_data_through_a_symlink_is_refused(folder, outside):
    (folder / "innocent.bin").symlink_to(outside)
    model = hostile.add_constant_node(hostile.load_model(folder), hostile.external_tensor("c", "innocent.bin", (16,)))
    refused(hostile.save_model(folder, model), "outside the bundle")


def test_external_data_in_a_nested_subgraph_is_refused(folder, outside):
    model = hostile.add_nested_constant(hostile.load_model(folder), hostile.external_tensor("c", "../secret.bin", (16,)))
    refused(hostile.save_model(folder, model), "outside the bundle")


def test_absolute_external_location_is_refused(folder, outside):
    model = hostile.add_constant_node(hostile.load_model(folder), hostile.external_tensor("c", str(outside), (16,)))
    refused(hostile.save_model(folder, model), "outside the bundle")


def test_weights_file_symlinked_outside_is_refused(folder, outside):
    hostile.externalize_weights(folder)
    os.replace(folder / "weights.bin", outside.with_name("weights.bin"))
    (folder / "weights.bin").symlink_to(outside.with_name("weights.bin"))
    refused(folder, "outside the bundle")


def test_model_card_symlinked_outside_is_refused(folder, outside):
    (folder / "MODEL_CARD.md").unlink()
    (folder / "MODEL_CARD.md").symlink_to(outside)
    refused(folder, "MODEL_CARD.md", "outside the bundle")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.onnx"])
def test_required_file_symlinked_outside_is_refused(folder, tmp_path, name):
    os.replace(folder / name, tmp_path / name)
    (folder / name).symlink_to(tmp_path / name)
    refused(folder, name, "outside the bundle")


def test_symlinks_that_stay_inside_the_bundle_are_fine(folder):
    hostile.externalize_weights(folder)
    (folder / "store").mkdir()
    os.replace(folder / "weights.bin", folder / "store" / "weights.bin")
    (folder / "weights.bin").symlink_to(folder / "store" / "weights.bin")
    assert load_bundle(folder).config.vocab_size > 0


def test_external_data_is_read_by_the_gate_not_by_onnx(folder, monkeypatch):
    """onnx 1.16's own loader followed the Constant escape; the gate never calls it."""
    hostile.externalize_weights(folder)
    monkeypatch.setattr(onnx, "load_external_data_for_model", _never_called)
    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_model", _never_called)
    monkeypatch.setattr(bundle_module, "load_external_data_for_model", _never_called, raising=False)
    loaded = load_bundle(folder)
    assert NumpyRunner(loaded).run([1, 2, 3]).logits.shape == (3, loaded.config.vocab_size)


def _never_called(*args, **kwargs):
    raise AssertionError("onnx's external-data loader must not be used")


# ---------------------------------------------------------------- 2. bundles that load but cannot run

@pytest.mark.parametrize("name", ["head_mask", "expert_override"])
def test_graph_without_an_intervention_input_is_refused(folder, name):
    refused(hostile.save_model(folder, hostile.drop_graph_input(hostile.load_model(folder), name)), name)


def test_context_differing_from_the_graph_without_metadata_is_refused(folder):
    model = hostile.strip_metadata(hostile.load_model(folder))
    hostile.save_model(folder, model)
    hostile.write_config(folder, max_position_embeddings=hostile.config_dict(folder)["max_position_embeddings"] // 2)
    refused(folder, "expert_override", "max_position_embeddings")


def test_logits_declared_too_narrow_are_refused(folder):
    refused(hostile.save_model(folder, hostile.narrow_logits(hostile.load_model(folder), 128, declared=True)),
            "logits", "128")


def test_logits_that_come_out_too_narrow_are_refused_by_the_dry_run(folder):
    refused(hostile.save_model(folder, hostile.narrow_logits(hostile.load_model(folder), 128, declared=False)),
            "test run", "logits")


def test_onnx_runner_validates_its_output(bundle, monkeypatch):
    runner = OnnxRunner(bundle)
    real_run = runner._session.run

    class Narrowing:
        def run(self, names, feeds):
            return [v[..., :3] if n == "logits" else v for n, v in zip(names, real_run(names, feeds))]

    monkeypatch.setattr(runner, "_session", Narrowing())
    with pytest.raises(TraceError, match="logits"):
        runner.run([1, 2, 3])


def test_empty_special_token_is_refused(folder):
    refused(hostile.edit_tokenizer(folder, hostile.empty_special_token), "tokenizer.json", "empty")


def test_custom_op_graph_is_refused_whatever_the_backend(folder):
    refused(hostile.save_model(folder, hostile.use_custom_op(hostile.load_model(folder))), "custom op")


# ---------------------------------------------------------------- 3 and 5. config values

@pytest.mark.parametrize("key, literal", [
    ("rope_theta", "1" + "0" * 400),
    ("rope_theta", "NaN"),
    ("rms_norm_eps", "Infinity"),
    ("hidden_size", "-Infinity"),
    ("num_hidden_layers", "1000000000"),
    ("num_local_experts", "1000000000"),
    ("max_position_embeddings", "1000000000000"),
    ("num_hidden_layers", "2.5"),
    ("vocab_size", "1e400"),
])
def test_config_values_outside_their_bounds_are_refused(folder, key, literal):
    refused(hostile.write_config_raw(hostile.save_model(folder, hostile.strip_metadata(hostile.load_model(folder))),
                                     key, literal), "config.json")


def test_huge_layer_count_is_refused_before_any_shape_is_computed(folder, monkeypatch):
    monkeypatch.setattr(bundle_module, "weight_shapes", _never_called)
    refused(hostile.write_config_raw(folder, "num_hidden_layers", "1000000000"), "num_hidden_layers")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json"])
def test_json_nested_100k_deep_is_refused(folder, name):
    (folder / name).write_text(hostile.deeply_nested_json())
    refused(folder, name, "nested too deeply")


def test_a_context_too_large_for_memory_is_analysed_in_part():
    # Within every single bound, but one full-context run would hold 8192 x 8192 scores per head.
    from core.bundle import MAX_TRACE_BYTES, analysed_context, trace_bytes
    from core.config import ModelConfig
    config = ModelConfig(max_position_embeddings=8192, num_attention_heads=128, num_key_value_heads=128,
                         hidden_size=256, num_hidden_layers=8)
    context = analysed_context(config)
    assert 16 <= context < 8192
    assert trace_bytes(config, context) <= MAX_TRACE_BYTES < trace_bytes(config, context + 1)
    assert analysed_context(ModelConfig()) == ModelConfig().max_position_embeddings  # the shipped size: all of it


def test_a_model_too_large_to_analyse_sixteen_tokens_is_refused(folder, monkeypatch):
    monkeypatch.setattr("core.bundle.MAX_TRACE_BYTES", 1 << 16)
    refused(folder, "config.json", "16 tokens", "MiB")


@pytest.mark.parametrize("key, value", [("rope_theta", 20000.0), ("rms_norm_eps", 1e-2)])
def test_config_disagreeing_with_the_graph_constants_is_refused(folder, key, value):
    hostile.save_model(folder, hostile.strip_metadata(hostile.load_model(folder)))
    hostile.write_config(folder, **{key: value})
    refused(folder, "disagree", "config.json")


def test_config_parsing_refuses_nan_written_by_python(tmp_path):
    (tmp_path / "config.json").write_text('{"rope_theta": NaN}')
    with pytest.raises(ValueError, match="NaN"):
        ModelConfig.load(tmp_path / "config.json")


def test_nan_weights_are_refused(folder):
    model = hostile.load_model(folder)
    weight = "model.norm.weight"
    broken = hostile.initializer(model, weight).copy()
    broken[3] = np.nan
    refused(hostile.save_model(folder, hostile.set_initializer(model, weight, broken)), weight, "NaN")


# ---------------------------------------------------------------- 6. sizes checked before reading

def test_oversized_model_file_is_refused_without_being_parsed(folder, monkeypatch):
    with open(folder / "model.onnx", "r+b") as f:   # sparse: 400 MB on paper, no disk used
        f.truncate(400 << 20)
    monkeypatch.setattr(onnx, "load", _never_called)
    message = refused(folder, "model.onnx", "bytes")
    assert f"{model_bytes_limit(load_bundle_config(folder)):,}" in message


def test_oversized_external_data_is_refused_before_it_is_read(folder, monkeypatch):
    hostile.externalize_weights(folder)
    model = hostile.load_model(folder)
    huge = (100_000, 1024)   # 400 MB of float32, declared by a Constant node
    model = hostile.add_constant_node(model, hostile.external_tensor("huge", "big.bin", huge))
    hostile.save_model(folder, model)
    with open(folder / "big.bin", "wb") as f:
        f.truncate(4 * huge[0] * huge[1])
    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: reads.append(str(p)) or real_open(p, *a, **k))
    refused(folder, "external data is larger")
    assert not any(r.endswith("big.bin") for r in reads)


def test_external_length_that_disagrees_with_the_shape_is_refused(folder):
    hostile.externalize_weights(folder)
    model = hostile.load_model(folder)
    tensor = next(t for t in model.graph.initializer if t.external_data)
    next(e for e in tensor.external_data if e.key == "length").value = "4"
    refused(hostile.save_model(folder, model), "external bytes")


def load_bundle_config(folder: Path) -> ModelConfig:
    return ModelConfig.load(folder / "config.json")


# ---------------------------------------------------------------- what must still load

def test_random_and_shipped_bundles_pass_the_gate(bundle):
    assert load_bundle(bundle.path).config == bundle.config
    assert load_bundle().config.vocab_size == 2048
