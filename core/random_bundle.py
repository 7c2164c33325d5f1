"""A randomly initialised bundle, made by the project's own code: for tests and as a placeholder."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.bundle import write_bundle
from core.config import ModelConfig
from core.model import random_weights
from core.sample_text import sample_sentences
from core.tokenizer import BPETokenizer

SMALL = ModelConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, num_local_experts=4,
                    num_experts_per_tok=2, max_position_embeddings=128)

CARD = """# Random placeholder model

Randomly initialised weights (seed {seed}); the tokenizer is trained on a few sentences written
for the project (core/sample_text.py). Its attention and routing are noise: it exists so that the
app and the tests have a bundle to load. Made with:

    python main.py random-bundle --out {out} --seed {seed}

Config: {config}
"""


def make_random_bundle(folder, config: ModelConfig = SMALL, seed: int = 0,
                       tokenizer: BPETokenizer | None = None) -> Path:
    """Write a bundle with random weights; vocab_size follows the tokenizer actually trained."""
    if tokenizer is None:
        tokenizer = BPETokenizer.train(sample_sentences(400, seed=seed) * 3, vocab_size=config.vocab_size,
                                       min_frequency=1)
    config = replace(config, vocab_size=tokenizer.vocab_size)
    card = CARD.format(seed=seed, out=folder, config=config.to_dict())
    return write_bundle(folder, config, random_weights(config, seed), tokenizer, card)
