"""Ids back to text for Append / Generate: the template's BOS stands for no text, on every flavour."""
from __future__ import annotations

import json

import pytest

from core.bundle import load_bundle
from core.random_bundle import make_random_bundle
from core.runners import NumpyRunner
from core.session import prepare_ids, run_labelled_by_id, text_of_ids
from core.tokenizer import BPETokenizer
from tests.tokenizer_flavours import llama2, llama3

FLAVOURS = {"llama2": (llama2, "<s>"), "llama3": (llama3, "<|begin_of_text|>")}


@pytest.fixture(scope="module", params=list(FLAVOURS))
def flavour(request):
    make, bos_text = FLAVOURS[request.param]
    return BPETokenizer.from_json(json.loads(make().to_str())), bos_text


def test_the_bos_of_the_template_is_not_decoded_into_the_text(flavour):
    tokenizer, bos_text = flavour
    ids = tokenizer.encode("Hello world")
    assert ids[0] == tokenizer.pipeline.prefix_ids[0]   # the flavour does add a BOS
    appended = ids + tokenizer.encode(" again", add_special=False)
    assert text_of_ids(tokenizer, ids) == "Hello world"
    assert bos_text not in text_of_ids(tokenizer, appended)
    assert text_of_ids(tokenizer, appended[1:]) == tokenizer.decode(appended[1:])   # no BOS: plain decode


def test_appended_ids_that_round_trip_keep_their_merge_replay(flavour):
    tokenizer, bos_text = flavour
    ids = tokenizer.encode("Hello world")
    prepared = prepare_ids(tokenizer, ids)
    assert prepared is not None and prepared.tokenization.ids == ids
    assert prepared.tokenization.text == "Hello world"


def test_ids_labelled_from_the_vocabulary_have_text_without_bos(flavour, tmp_path):
    tokenizer, bos_text = flavour
    make_random_bundle(tmp_path, tokenizer=tokenizer)
    ids = tokenizer.encode("Hello world") + [tokenizer.encode("world", add_special=False)[0]]
    trace = run_labelled_by_id(NumpyRunner(load_bundle(tmp_path)), ids)
    assert bos_text not in trace.text and trace.text.startswith("Hello world")
