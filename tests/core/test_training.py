"""Corpus cleaning, the PyTorch twin of the reference model, and a few dozen steps of real training."""
from __future__ import annotations

import struct
import zlib
from dataclasses import replace

import numpy as np
import pytest
import torch  # torch==2.13.0 is in the test extra: CI trains the smoke test for real

from core.bundle import load_bundle, write_bundle
from core.config import ModelConfig
from core.model import forward, random_weights, weight_shapes
from core.runners import NumpyRunner, OnnxRunner, max_difference
from core.sample_text import sample_sentences
from core.tokenizer import BPETokenizer
from core.training import corpus as C
from core.training.torch_model import MixtralLM
from core.training.trainer import CONFIGS, TrainSettings, lr_at, make_batch, prepare_data, train

SMALL = ModelConfig(vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                    max_position_embeddings=64)


# ---------------------------------------------------------------- the model

def test_state_dict_names_are_core_weight_names():
    for cfg in (SMALL, CONFIGS["default"], replace(SMALL, tie_word_embeddings=True)):
        model = MixtralLM(cfg)
        assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == weight_shapes(cfg)


@pytest.mark.parametrize("tied", [False, True])
def test_torch_numpy_onnx_parity(tmp_path, tied):
    tok = BPETokenizer.train(sample_sentences(200), vocab_size=SMALL.vocab_size, min_frequency=1)
    cfg = replace(SMALL, vocab_size=tok.vocab_size, tie_word_embeddings=tied)
    weights = random_weights(cfg, seed=3)
    bundle = load_bundle(write_bundle(tmp_path / "b", cfg, weights, tok, "test"))
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, 50)
    model = MixtralLM(cfg)
    model.load_numpy_weights(weights)
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(ids)[None])[0][0].numpy()
        torch_attn = model(torch.from_numpy(ids)[None], need_weights=True)[3]
    ref = forward(ids, weights, cfg)
    onnx = OnnxRunner(bundle).run(ids)
    assert np.abs(torch_logits - ref["logits"]).max() <= 1e-4
    assert np.abs(torch_logits - onnx.logits).max() <= 1e-4
    assert np.abs(torch_attn[1][0].numpy() - ref["layers"][1]["attn"]).max() <= 1e-5
    assert set(model.numpy_weights()) == set(weights)
    assert np.allclose(model.numpy_weights()["model.embed_tokens.weight"], weights["model.embed_tokens.weight"])


def test_aux_loss_is_one_when_balanced():
    model = MixtralLM(SMALL)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.block_sparse_moe.gate.weight.zero_()  # uniform router probabilities
    _, aux, load, _ = model(torch.zeros(1, 8, dtype=torch.long))
    assert aux.item() == pytest.approx(1.0)


# ---------------------------------------------------------------- batches and schedule

def _tiny_data(tmp_path):
    text = tmp_path / "my.txt"
    text.write_text("\n\n".join(sample_sentences(400, seed=5)), encoding="utf-8")
    return text, prepare_data(str(text), 300, tmp_path / "cache", log=lambda *_: None)


def test_make_batch_copy_lessons(tmp_path):
    _, data = _tiny_data(tmp_path)
    x, y, first, second = make_batch(data, np.random.default_rng(1), 32, 40, copy_frac=1.0)
    assert x.shape == y.shape == (32, 40) and (x[:, 1:] == y[:, :-1]).all()
    for b in range(32):
        # every later copy repeats the first copy's targets, in order
        n = int(first[b].sum())
        later = y[b][second[b]]
        assert n > 0 and len(later) % n == 0
        assert (later.reshape(-1, n) == y[b][first[b]]).all()
    again = make_batch(data, np.random.default_rng(1), 32, 40, copy_frac=1.0)
    assert (again[0] == x).all()  # deterministic per seed
    # the opening curriculum: a random span repeated until the row is full
    x, y, first, second = make_batch(data, np.random.default_rng(2), 4, 40, copy_frac=0.0, pure_copy=True)
    for b in range(4):
        n = int(first[b].sum()) + 1
        j = np.nonzero(second[b].numpy())[0]
        assert j[0] == n and (y[b, j] == y[b, j - n]).all()


def test_lr_schedule():
    s = TrainSettings(corpus="", out="", lr=1e-3, warmup=10, min_lr_ratio=0.1)
    assert lr_at(0, 100, s) == pytest.approx(1e-4)
    assert lr_at(9, 100, s) == pytest.approx(1e-3)
    assert lr_at(10, 100, s) == pytest.approx(1e-3)
    assert lr_at(100, 100, s) == pytest.approx(1e-4)
    assert all(lr_at(i, 100, s) >= lr_at(i + 1, 100, s) for i in range(10, 100))


# ---------------------------------------------------------------- a real (tiny) run

def test_smoke_train_export_resume(tmp_path):
    text, _ = _tiny_data(tmp_path)
    common = dict(corpus=str(text), config="tiny", steps=30, seed=7, batch=8, seq_len=32, warmup=5,
                  eval_every=15, run_dir=str(tmp_path / "runs" / "a"))
    out = train(TrainSettings(out=str(tmp_path / "bundle"), **common), log=lambda *_: None)
    bundle = load_bundle(out)
    assert bundle.config.num_hidden_layers == CONFIGS["tiny"].num_hidden_layers
    ids = bundle.tokenizer.encode("The cat sat on the mat. 今天天气很好。")
    assert max_difference(NumpyRunner(bundle).run(ids), OnnxRunner(bundle).run(ids)) <= 1e-4
    card = bundle.model_card
    assert "## Reproduce" in card and "--steps 30" in card and "previous-token" in card
    assert (tmp_path / "runs" / "a" / "checkpoint.pt").is_file()

    # Pause at step 12, resume: the same weights as the uninterrupted run (batches are seeded per step).
    paused = dict(common, run_dir=str(tmp_path / "runs" / "b"))
    train(TrainSettings(out=str(tmp_path / "b1"), stop_at=12, **paused), log=lambda *_: None)
    resumed = load_bundle(train(TrainSettings(out=str(tmp_path / "b2"), resume=True, **paused), log=lambda *_: None))
    for name, w in bundle.weights.items():
        assert np.allclose(resumed.weights[name], w, atol=1e-6), name


# ---------------------------------------------------------------- corpus cleaning

def test_clean_document_strips_ansi_and_drops_art_and_mojibake():
    assert C.clean_document("\x1b[33m  -- Debian\x1b[m 《行为准则》") == "-- Debian 《行为准则》"
    art = "\n".join(["  /\\_/\\  ", " ( o.o ) ", "  > ^ <  ", "|||||||||"])
    assert C.clean_document(art) is None
    assert C.clean_document("Caf\u00c3\u00a9 au lait is good") is None
    assert C.clean_document("A line of text.\n+--------+\nAnother line of text here.") == \
        "A line of text.\nAnother line of text here."


def test_repair_cjk_wraps_joins_only_chinese_lines():
    assert C.repair_cjk_wraps("意见不和，或者难以合作\n的人。") == "意见不和，或者难以合作的人。"
    assert C.repair_cjk_wraps("first line\nsecond line") == "first line\nsecond line"


def test_osis_and_ztext(tmp_path):
    verses = ["<w>In</w> the <note>a footnote</note>beginning.", "God &amp; light."]
    block = "".join(verses).encode()
    comp = zlib.compress(block)
    (tmp_path / "nt.bzz").write_bytes(comp)
    (tmp_path / "nt.bzs").write_bytes(struct.pack("<III", 0, len(comp), len(block)))
    a = len(verses[0].encode())
    (tmp_path / "nt.bzv").write_bytes(struct.pack("<IIH", 0, 0, 0) + struct.pack("<IIH", 0, 0, a)
                                      + struct.pack("<IIH", 0, a, len(block) - a))
    got = [C.osis_to_text(v) for v in C.read_ztext(tmp_path, "nt")]
    assert got == ["In the beginning.", "God & light."]


def test_load_corpus_from_a_text_file_is_deterministic(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("\n\n".join(f"document number {i}" for i in range(300)), encoding="utf-8")
    train1, val1, _ = C.load_corpus(path)
    train2, val2, _ = C.load_corpus(path)
    assert train1 == train2 and val1 == val2 and val1 and len(train1) + len(val1) == 300
