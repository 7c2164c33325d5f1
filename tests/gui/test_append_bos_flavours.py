"""Append and Generate on BOS tokenizers (Llama 2's "<s>", Llama 3's "<|begin_of_text|>"): the sentence
shown and reused never gains the BOS text."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.bundle import load_bundle
from core.random_bundle import make_random_bundle
from core.sampling import SamplingSettings
from core.tokenizer import BPETokenizer
from gui.controller import Controller
from tests.tokenizer_flavours import llama2, llama3

WAIT_MS = 30000
FLAVOURS = {"llama2": (llama2, "<s>"), "llama3": (llama3, "<|begin_of_text|>")}


@pytest.fixture(scope="module", params=list(FLAVOURS))
def flavour_bundle(request, tmp_path_factory):
    make, bos_text = FLAVOURS[request.param]
    folder = tmp_path_factory.mktemp(f"{request.param}_bundle")
    make_random_bundle(folder, tokenizer=BPETokenizer.from_json(json.loads(make().to_str())))
    return load_bundle(folder), bos_text


@pytest.fixture()
def controller(qtbot, flavour_bundle):
    c = Controller(flavour_bundle[0], "numpy")
    replaced = []
    c.sigTextReplaced.connect(replaced.append)
    c.replaced = replaced
    yield c
    c.shutdown()


def test_append_and_generate_never_put_the_bos_into_the_sentence(qtbot, controller, flavour_bundle):
    bos_text, c = flavour_bundle[1], controller
    c.set_text("Hello world")
    qtbot.waitUntil(lambda: c.trace is not None and not c.busy(), timeout=WAIT_MS)
    start = list(c.trace.input_ids)
    c.append_tokens([int(np.argmax(c.trace.logits[-1]))])
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(start) + 1 and not c.busy(), timeout=WAIT_MS)
    c.generate((3, SamplingSettings(greedy=True)))
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(start) + 4 and not c.busy(), timeout=WAIT_MS)
    assert c.trace.input_ids[0] == c.bundle.tokenizer.pipeline.prefix_ids[0]   # the model still sees its BOS
    assert c.replaced and all(bos_text not in text and text.startswith("Hello world") for text in c.replaced)
    assert bos_text not in c.text and bos_text not in c.trace.text
