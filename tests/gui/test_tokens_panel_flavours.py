"""The Tokens panel on imported tokenizer flavours: SentencePiece pieces ("▁", "<0xNN>") and
byte-level pieces both show readably, and the merge replay steps through them."""
from __future__ import annotations

import json

import pytest

from core.bundle import load_bundle
from core.random_bundle import make_random_bundle
from core.runners import NumpyRunner
from core.session import analyse
from core.tokenizer import BPETokenizer
from core.tokens_view import MergeReplay
from gui.panels.tokens_panel import TokensPanel
from tests.tokenizer_flavours import llama2, qwen2


@pytest.fixture(scope="module", params=["llama2", "qwen2"])
def flavour_runner(request, tmp_path_factory):
    hf = {"llama2": llama2, "qwen2": qwen2}[request.param]()
    tokenizer = BPETokenizer.from_json(json.loads(hf.to_str()))
    folder = tmp_path_factory.mktemp(f"{request.param}_bundle")
    make_random_bundle(folder, tokenizer=tokenizer)
    return NumpyRunner(load_bundle(folder))


RARE = "龘"  # in no training text: not in either small vocab: byte fallback (Llama 2) or byte pieces (Qwen2)


def test_chips_and_replay_on_an_imported_flavour(show, flavour_runner):
    panel = show(TokensPanel(), 900, 600)
    text = f"hello world 订单 {RARE}!"
    trace = analyse(flavour_runner, text)
    panel.set_trace(trace)
    tok = trace.tokenization
    assert panel.chips.chip_count() == len(tok.tokens)
    shown = [panel.chips.chip_lines(i)[0] for i in range(panel.chips.chip_count())]
    assert shown == [t.display for t in tok.tokens]
    assert not any("▁" in s or "<0x" in s or "\ufffd" in s for s in shown)
    assert any("‹" in s and s.endswith(RARE) for s in shown)  # a byte fragment names its character
    replay = MergeReplay(tok)
    for step in range(len(tok.steps) + 1):
        assert len(replay.fresh(step)) == len(replay.pieces_at(step))
        assert "<0x" not in replay.caption(step)
    final = replay.pieces_at(len(tok.steps))   # the tokens: shown and placed as the slow path shows them
    assert [p.text for p in replay.step(len(tok.steps)).pieces] == list(tok.display_pieces(final))
    assert replay.starts(final) == [t.byte_start for t in tok.tokens]
    rows = replay.csv().splitlines()
    assert len(rows) == len(tok.steps) + 2 and "▁" not in "".join(rows)
    panel.slider.setValue(len(tok.steps))
    assert panel.pieces.chip_count() == len(tok.tokens)


def test_replay_starts_from_bytes_or_characters(flavour_runner):
    tok = analyse(flavour_runner, "hello").tokenization
    unit = "bytes" if flavour_runner.bundle.tokenizer.pipeline.byte_level else "characters"
    assert MergeReplay(tok).caption(0).startswith(f"Step 0 of {len(tok.steps)}: the sentence as {len(tok.initial_pieces)} {unit}")
