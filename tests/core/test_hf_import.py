"""Import Hugging Face folders (made here with transformers, a test-only dependency) and match its numbers."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torch  # noqa: E402  the test extra: transformers is the reference these imports are held to
import transformers  # noqa: E402

from core import hf_import  # noqa: E402
from core.bundle import load_bundle  # noqa: E402
from core.hf_import import HFImportError, cached_import, import_model  # noqa: E402
from core.runners import NumpyRunner, OnnxRunner  # noqa: E402
from core.safetensors_io import SafetensorsError, read_header  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
ARCHITECTURES = {
    "llama-llama3-bias-tied": ("LlamaConfig", "LlamaForCausalLM",
                               dict(rope_scaling=LLAMA3, attention_bias=True, tie_word_embeddings=True)),
    "llama-linear-mqa": ("LlamaConfig", "LlamaForCausalLM",
                         dict(rope_scaling={"rope_type": "linear", "factor": 2.0}, num_key_value_heads=1)),
    "mistral-window": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=5, head_dim=8)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "qwen2-tied": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True)),
    "qwen3-head-dim": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=12)),
}


def _randomise(model, seed: int) -> None:
    # transformers' init (std 0.02) gives near-uniform attention; larger weights make the comparison bite.
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.2 * noise if name.endswith("norm.weight") else 0.3 * noise)


def make_hf_folder(folder: Path, tokenizer, kind: str, seed: int = 0, dtype=None, shard: bool = False):
    config_cls, model_cls, extra = ARCHITECTURES[kind]
    config = getattr(transformers, config_cls)(vocab_size=tokenizer.vocab_size, **{**TINY, **extra})
    model = getattr(transformers, model_cls)(config).eval()
    _randomise(model, seed)
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(folder, safe_serialization=True, **({"max_shard_size": "20KB"} if shard else {}))
    tokenizer.save(folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": None}), encoding="utf-8")


def hf_outputs(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return out.logits[0].numpy(), [a[0].numpy() for a in out.attentions]


def reload_eager(folder: Path, kind: str):
    model_cls = getattr(transformers, ARCHITECTURES[kind][1])
    return model_cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


@pytest.mark.parametrize("kind", ARCHITECTURES, ids=str)
def test_imported_model_matches_transformers(tmp_path, small_tokenizer, kind):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, kind, seed=len(kind))
    bundle = load_bundle(import_model(source, tmp_path / "bundle"))
    logits, attentions = hf_outputs(reload_eager(source, kind), list(range(3, 15)))
    for runner in (OnnxRunner(bundle), NumpyRunner(bundle)):
        trace = runner.run(np.arange(3, 15)).validate()
        assert np.abs(trace.logits - logits).max() <= 1e-4, runner.name
        for layer, attn in zip(trace.layers, attentions):
            assert np.abs(layer.attn - attn).max() <= 1e-5, runner.name
    assert np.abs(logits).max() > 1.0  # the randomised model is far from uniform: the check bites


def test_bundle_keeps_source_config_keys_and_says_where_it_came_from(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "qwen3-head-dim")
    out = import_model(source, tmp_path / "bundle")
    written = json.loads((out / "config.json").read_text())
    original = json.loads((source / "config.json").read_text())
    assert written["architectures"] == ["Qwen3ForCausalLM"] and written["head_dim"] == 12
    assert {k: written[k] for k in original} == original  # every source key kept as it was
    card = (out / "MODEL_CARD.md").read_text()
    assert "Qwen3ForCausalLM" in card and "original model's licence" in card
    assert (out / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()
    assert (out / "tokenizer_config.json").is_file()


def test_bfloat16_sharded_checkpoint_is_read_without_torch(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "llama-llama3-bias-tied", dtype=torch.bfloat16, shard=True)
    shards = sorted(source.glob("model-*.safetensors"))
    assert len(shards) > 1 and (source / "model.safetensors.index.json").is_file()
    assert {entry["dtype"] for s in shards for entry in read_header(s)[0].values()} == {"BF16"}
    bundle = load_bundle(import_model(source, tmp_path / "bundle"))
    logits, _ = hf_outputs(reload_eager(source, "llama-llama3-bias-tied"), list(range(5, 15)))  # upcast by torch
    assert np.abs(OnnxRunner(bundle).run(np.arange(5, 15)).logits - logits).max() <= 1e-4


def test_large_weights_go_to_external_data_and_are_mapped(tmp_path, small_tokenizer, monkeypatch):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "qwen2-tied")
    monkeypatch.setattr(hf_import, "EXTERNAL_DATA_ABOVE", 0)
    monkeypatch.setattr("core.bundle.MAX_READ_EXTERNAL_BYTES", 0)  # a real model's size: mapped, not read
    out = import_model(source, tmp_path / "bundle")
    assert (out / "model.onnx.data").stat().st_size > (out / "model.onnx").stat().st_size
    bundle = load_bundle(out)
    assert isinstance(bundle.weights["model.embed_tokens.weight"], np.memmap)
    a, b = NumpyRunner(bundle).run([1, 2, 3]), OnnxRunner(bundle).run([1, 2, 3])
    assert np.abs(a.logits - b.logits).max() <= 1e-4


def _write_safetensors(path: Path, header: dict, data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("entry, message", [
    ({"dtype": "F32", "shape": [4], "data_offsets": [0, 64]}, "past the end"),
    ({"dtype": "I8", "shape": [16], "data_offsets": [0, 16]}, "dtype I8"),
    ({"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}, "need 12"),
])
def test_a_lying_safetensors_header_is_refused_in_one_line(tmp_path, entry, message):
    path = tmp_path / "model.safetensors"
    _write_safetensors(path, {"w": entry}, bytes(16))
    with pytest.raises(SafetensorsError, match=message) as info:
        read_header(path)
    assert "\n" not in str(info.value)


def test_shapes_that_do_not_match_the_config_are_refused(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "llama-linear-mqa")
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "intermediate_size": 40}))
    with pytest.raises(HFImportError, match=r"mlp.gate_proj.weight has shape \(48, 32\), config.json says \(40, 32\)"):
        import_model(source, tmp_path / "bundle")


def _folder_with(tmp_path: Path, config: dict, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 32, "intermediate_size": 48,
                "num_hidden_layers": 1, "num_attention_heads": 4, "rms_norm_eps": 1e-6, "max_position_embeddings": 64}


@pytest.mark.parametrize("config, files, message", [
    ({**LLAMA_CONFIG, "architectures": ["GPT2LMHeadModel"]}, {}, "GPT2LMHeadModel is not supported.*Qwen3ForCausalLM"),
    (LLAMA_CONFIG, {"pytorch_model.bin": b"\x80\x04not really a pickle"}, "pytorch_model.bin.*never unpickles"),
    ({**LLAMA_CONFIG, "quantization_config": {"quant_method": "awq"}}, {}, "quantised checkpoint \\(awq\\)"),
    (LLAMA_CONFIG, {"model-q4.gguf": b"GGUF"}, "GGUF"),
])
def test_unsupported_folders_get_one_clear_message(tmp_path, config, files, message):
    folder = _folder_with(tmp_path, config, files)
    with pytest.raises(HFImportError, match=message) as info:
        import_model(folder, tmp_path / "bundle")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "bundle").exists()


def test_cli_import_and_its_error_line(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "mixtral")
    ok = subprocess.run([sys.executable, str(ROOT / "main.py"), "import", str(source), "--out", str(tmp_path / "b")],
                        capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert "checking that it opens" in ok.stderr and ok.stdout.strip() == str(tmp_path / "b")
    assert load_bundle(tmp_path / "b").config.num_local_experts == 4
    bad = _folder_with(tmp_path, {**LLAMA_CONFIG, "architectures": ["BertModel"]}, {})
    err = subprocess.run([sys.executable, str(ROOT / "main.py"), "import", str(bad), "--out", str(tmp_path / "c")],
                         capture_output=True, text=True, cwd=ROOT)
    assert err.returncode == 2
    assert err.stderr.startswith("glassbox: error: ") and "BertModel" in err.stderr
    assert len(err.stderr.strip().splitlines()) == 1


def test_cached_import_is_reused_and_keyed_by_content(tmp_path, small_tokenizer, monkeypatch):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "qwen2-tied")
    first = cached_import(source, cache_root=tmp_path / "cache")
    monkeypatch.setattr(hf_import, "import_model", lambda *a, **k: pytest.fail("imported again"))
    assert cached_import(source, cache_root=tmp_path / "cache") == first
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    monkeypatch.undo()
    second = cached_import(source, cache_root=tmp_path / "cache")
    assert second != first and load_bundle(second).config.rms_norm_eps == 1e-5


def test_cli_model_flag_imports_into_the_cache(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "llama-linear-mqa")
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    base = [sys.executable, str(ROOT / "main.py"), "trace", "--text", "hello world", "--model", str(source)]
    refused = subprocess.run(base + ["--out", str(tmp_path / "t0")], capture_output=True, text=True, cwd=ROOT, env=env)
    assert refused.returncode == 2 and "--import-to-cache" in refused.stderr
    done = subprocess.run(base + ["--out", str(tmp_path / "t1"), "--import-to-cache"],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t1" / "trace.npz").is_file()
    assert len(list((tmp_path / "xdg" / "glassbox" / "imports").iterdir())) == 1


@pytest.mark.parametrize("argv", [
    ["readouts", "--text", "x", "--out", "o", "--model", "m", "--import-to-cache"],
    ["patch", "--clean", "a", "--corrupt", "b", "--out", "o", "--model", "m", "--import-to-cache"],
    ["occlude", "--text", "x", "--out", "o", "--model", "m", "--import-to-cache"],
    ["--import-to-cache", "trace", "--text", "x", "--out", "o", "--model", "m"],  # before the subcommand
])
def test_every_command_that_takes_a_model_takes_import_to_cache(argv):
    import main

    assert main.build_parser().parse_args(argv).import_to_cache is True


def test_an_import_stopped_from_its_share_callback_leaves_nothing(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "mixtral")
    shares = []

    def stop_halfway(fraction: float) -> None:
        shares.append(fraction)
        if fraction >= 0.5:
            raise KeyboardInterrupt   # what a GUI cancel raises is the caller's; anything stops it

    with pytest.raises(KeyboardInterrupt):
        hf_import.import_staged(source, tmp_path / "out" / "bundle", share=stop_halfway)
    assert list((tmp_path / "out").iterdir()) == []   # no staging folder, no half-written bundle
    assert shares == sorted(shares) and shares[0] == 0.0 and len(shares) > 10   # one per tensor converted
    done = []
    cached_import(source, tmp_path / "cache", share=done.append)
    assert done == sorted(done) and done[-1] <= 1.0 and max(done) > hf_import.HASH_SHARE


def test_import_staged_refuses_a_folder_that_is_not_empty(tmp_path, small_tokenizer):
    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "qwen2-tied")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(HFImportError, match="already exists and is not empty"):
        hf_import.import_staged(source, tmp_path / "taken")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]


def test_a_full_disk_while_the_source_tokenizer_files_are_written_leaves_no_half_bundle(tmp_path, small_tokenizer,
                                                                                          monkeypatch):
    """The source's tokenizer files are part of the bundle: written with the rest, all or nothing."""
    import errno

    from core import atomic
    from core.raw_export import ExportError

    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "mixtral")
    assert (source / "tokenizer_config.json").is_file()
    write_new_file = atomic.write_new_file

    def disk_full_at_the_extras(path, data):
        if path.name == "tokenizer_config.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        write_new_file(path, data)

    monkeypatch.setattr(atomic, "write_new_file", disk_full_at_the_extras)
    with pytest.raises(ExportError, match="tokenizer_config.json: No space left on device; nothing was written"):
        import_model(source, tmp_path / "out" / "bundle")
    assert not (tmp_path / "out").exists()   # nor the parent it made for the bundle


def test_an_oversized_tokenizer_side_file_is_refused_before_anything_is_written(tmp_path, small_tokenizer):
    from core.bundle import MAX_CARD_BYTES

    source = tmp_path / "hf"
    make_hf_folder(source, small_tokenizer, "mixtral")
    side = source / "tokenizer_config.json"
    text = side.read_text()
    side.write_text(text + " " * (MAX_CARD_BYTES + 1 - len(text.encode())))   # still valid JSON, one byte too long
    with pytest.raises(HFImportError, match=r"tokenizer_config.json: 1,048,577 bytes, over the 1,048,576"):
        import_model(source, tmp_path / "out" / "bundle")
    assert not (tmp_path / "out").exists()
