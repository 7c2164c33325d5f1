"""The fixed probe (eval's induction numbers, the head-role readout) uses tokens the tokenizer really has."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.bundle import load_bundle, write_bundle
from core.model import random_weights
from core.random_bundle import SMALL
from core.training.evaluate import induction_probes, probe_period

PADDING_ROWS = 300   # more rows than tokens, like Qwen2's embedding (151,936 rows, 151,665 tokens)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, small_tokenizer):
    config = replace(SMALL, vocab_size=small_tokenizer.vocab_size + PADDING_ROWS)
    folder = tmp_path_factory.mktemp("padded")
    write_bundle(folder, config, random_weights(config), small_tokenizer, "# padded embedding\n")
    return load_bundle(folder)


def test_probe_tokens_are_real_ids_never_padding_rows_or_specials(bundle):
    tokenizer, cfg = bundle.tokenizer, bundle.config
    assert cfg.vocab_size == tokenizer.vocab_size + PADDING_ROWS
    probes = np.concatenate(induction_probes(tokenizer, cfg.vocab_size, probe_period(cfg.max_position_embeddings)))
    assert probes.max() < tokenizer.vocab_size
    assert not np.isin(probes, list(tokenizer.special_tokens.values())).any()

