"""Loading a bundle validates everything and fails with one clear message per problem."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from core.bundle import BundleError, load_bundle
from core.config import ModelConfig
from core.runners import NumpyRunner
from core.trace import TraceError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bundle_dir(bundle, tmp_path):
    target = tmp_path / "b"
    shutil.copytree(bundle.path, target)
    return target


def _expect(folder, *fragments):
    with pytest.raises(BundleError) as info:
        load_bundle(folder)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_good_bundle_loads_with_its_config_tokenizer_and_weights(bundle):
    assert bundle.tokenizer.vocab_size == bundle.config.vocab_size
    assert bundle.weights["model.embed_tokens.weight"].shape == (bundle.config.vocab_size, bundle.config.hidden_size)


def test_shipped_bundle_loads():
    shipped = load_bundle()
    assert shipped.config.vocab_size == shipped.tokenizer.vocab_size


@pytest.mark.parametrize("name", ["model.onnx", "tokenizer.json", "config.json"])
def test_missing_file(bundle_dir, name):
    (bundle_dir / name).unlink()
    _expect(bundle_dir, name, "missing")


def test_not_a_folder(tmp_path):
    _expect(tmp_path / "nope", "not a folder")


def test_file_that_is_not_onnx(bundle_dir):
    (bundle_dir / "model.onnx").write_bytes(b"\x89PNG\r\n\x1a\n not a model at all")
    _expect(bundle_dir, "model.onnx", "not an ONNX model")


def test_truncated_onnx(bundle_dir):
    data = (bundle_dir / "model.onnx").read_bytes()
    (bundle_dir / "model.onnx").write_bytes(data[: len(data) // 2])
    _expect(bundle_dir, "model.onnx")


def test_foreign_onnx_without_trace_outputs(bundle_dir):
    x = onnx.helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, [1, "T"])
    y = onnx.helper.make_tensor_value_info("logits", onnx.TensorProto.INT64, [1, "T"])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["input_ids"], ["logits"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, bundle_dir / "model.onnx")
    _expect(bundle_dir, "model.onnx", "output")


def test_config_that_disagrees_with_the_weights(bundle_dir):
    config = json.loads((bundle_dir / "config.json").read_text())
    config["intermediate_size"] += 8
    (bundle_dir / "config.json").write_text(json.dumps(config))
    _expect(bundle_dir, "model.onnx")


def test_config_that_is_not_json(bundle_dir):
    (bundle_dir / "config.json").write_text("{ not json")
    _expect(bundle_dir, "config.json", "JSON")


def test_config_with_missing_key(bundle_dir):
    config = json.loads((bundle_dir / "config.json").read_text())
    del config["rope_theta"]
    (bundle_dir / "config.json").write_text(json.dumps(config))
    _expect(bundle_dir, "config.json", "rope_theta")


def _drop_last_piece(bundle_dir):
    data = json.loads((bundle_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    last_piece = max(vocab, key=vocab.get)
    removed = [pair for pair in data["model"]["merges"]
               if (pair if isinstance(pair, str) else " ".join(pair)).replace(" ", "") == last_piece]
    if removed:  # drop the last learned piece and the merge that made it
        data["model"]["merges"] = [m for m in data["model"]["merges"] if m not in removed]
        del vocab[last_piece]
    else:
        data["added_tokens"] = []
        del vocab[last_piece]
    (bundle_dir / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")


def test_tokenizer_larger_than_the_embedding_is_refused(bundle_dir):
    data = json.loads((bundle_dir / "tokenizer.json").read_text(encoding="utf-8"))
    size = len(data["model"]["vocab"]) + len([t for t in data["added_tokens"] if t["content"] not in data["model"]["vocab"]])
    data["added_tokens"].append({"id": size, "content": "<|extra|>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True})
    (bundle_dir / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    _expect(bundle_dir, "tokenizer.json", "vocab")


def test_embedding_padded_past_the_tokenizer_loads(bundle_dir):
    # Real checkpoints (Qwen2.5: 151,665 tokens, 151,936 rows) pad the embedding; the extra ids never occur.
    _drop_last_piece(bundle_dir)
    bundle = load_bundle(bundle_dir)
    assert bundle.tokenizer.vocab_size == bundle.config.vocab_size - 1


def test_tokenizer_that_is_not_json(bundle_dir):
    (bundle_dir / "tokenizer.json").write_text("[]")
    _expect(bundle_dir, "tokenizer.json")


def test_external_data_outside_the_bundle_is_refused(bundle_dir, tmp_path):
    model = onnx.load(bundle_dir / "model.onnx")
    onnx.save_model(model, bundle_dir / "model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)
    assert load_bundle(bundle_dir).config  # external data inside the bundle is fine
    model = onnx.load(bundle_dir / "model.onnx", load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../outside.bin"
    shutil.copy(bundle_dir / "weights.bin", tmp_path / "outside.bin")
    onnx.save_model(model, bundle_dir / "model.onnx")
    _expect(bundle_dir, "outside the bundle")


def test_trace_validate_names_the_bad_field(bundle):
    trace = NumpyRunner(bundle).run([1, 2, 3, 4])
    assert trace.validate() is trace
    bad = replace(trace, logits=np.zeros((4, 3), np.float32))
    with pytest.raises(TraceError, match="logits"):
        bad.validate()
    bad = replace(trace, input_ids=np.zeros(4, np.int32))
    with pytest.raises(TraceError, match="input_ids"):
        bad.validate()


def test_config_round_trips_through_json(tmp_path):
    config = ModelConfig(num_key_value_heads=2)
    config.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == config
    data = json.loads((tmp_path / "config.json").read_text())
    assert data["model_type"] == "mixtral" and data["num_local_experts"] == config.num_local_experts


def test_cli_reports_a_bad_bundle_in_one_line_without_traceback(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"junk")
    result = subprocess.run([sys.executable, "main.py", "trace", "--text", "hi", "--out", str(tmp_path / "o"),
                             "--model", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
