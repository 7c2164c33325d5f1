"""Attention biases and q/k norms: config.json states exactly the q/k/v and o_proj biases a bundle has, or the bundle is refused.

Hugging Face has one key for them (attention_bias: all four projections, on Llama and Qwen3; Qwen2 always
biases q/k/v only; Mistral and Mixtral never bias): a random bundle with any other pair once wrote a
config.json that read back as another model and failed its own dry run.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import product

import pytest
import torch  # noqa: F401  the test extra: transformers is the reference for which projections get a bias
import transformers

from core.bundle import load_bundle
from core.config import BIASES, ModelConfig
from core.random_bundle import SMALL, make_random_bundle

DENSE = dict(num_local_experts=0, num_experts_per_tok=0)
SHAPE = {"MixtralForCausalLM": {}, "LlamaForCausalLM": DENSE, "MistralForCausalLM": DENSE,
         "Qwen2ForCausalLM": DENSE, "Qwen3ForCausalLM": DENSE}
PAIRS = list(product((False, True), repeat=2))   # (q/k/v bias, o_proj bias)
SAID = {(False, False): "no attention biases", (True, True): "q/k/v and o_proj biases",
        (True, False): "q/k/v biases only", (False, True): "an o_proj bias only"}
HF_CONFIG = {"LlamaForCausalLM": "LlamaConfig", "MistralForCausalLM": "MistralConfig",
             "MixtralForCausalLM": "MixtralConfig", "Qwen2ForCausalLM": "Qwen2Config", "Qwen3ForCausalLM": "Qwen3Config"}
TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=2, max_position_embeddings=32)


def _config(architecture: str, qkv: bool, o: bool) -> ModelConfig:
    return replace(SMALL, architecture=architecture, qkv_bias=qkv, o_bias=o, **SHAPE[architecture],
                   qk_norm=architecture == "Qwen3ForCausalLM")


@pytest.mark.parametrize("architecture, qkv, o", [(a, *p) for a in SHAPE for p in BIASES[a]])
def test_every_stateable_pair_reads_back_exactly_and_loads(tmp_path, small_tokenizer, architecture, qkv, o):
    config = _config(architecture, qkv, o)
    read = ModelConfig.from_dict(config.to_dict())
    assert (read.qkv_bias, read.o_bias) == (qkv, o)
    loaded = load_bundle(make_random_bundle(tmp_path / "b", config, tokenizer=small_tokenizer)).config   # dry run
    assert (loaded.qkv_bias, loaded.o_bias) == (qkv, o)


@pytest.mark.parametrize("architecture, qkv, o", [(a, *p) for a in SHAPE for p in PAIRS if p not in BIASES[a]])
def test_a_pair_config_json_cannot_state_is_refused_before_anything_is_written(tmp_path, small_tokenizer,
                                                                               architecture, qkv, o):
    folder = tmp_path / "b"
    with pytest.raises(ValueError) as refused:
        make_random_bundle(folder, _config(architecture, qkv, o), tokenizer=small_tokenizer)
    message = str(refused.value)
    assert message.startswith("config.json: ") and "\n" not in message
    assert f"a {architecture} with {SAID[qkv, o]} cannot be written" in message
    assert not folder.exists()


@pytest.mark.parametrize("architecture", SHAPE)
@pytest.mark.parametrize("attention_bias", [False, True])
def test_hugging_face_configs_give_the_biases_transformers_builds(architecture, attention_bias):
    hf_config = getattr(transformers, HF_CONFIG[architecture])(attention_bias=attention_bias, **TINY,
                                                               **({"num_local_experts": 2, "num_experts_per_tok": 1}
                                                                  if architecture == "MixtralForCausalLM" else {}))
    attention = getattr(transformers, architecture)(hf_config).model.layers[0].self_attn
    built = (attention.q_proj.bias is not None, attention.o_proj.bias is not None)
    data = {**hf_config.to_dict(), "architectures": [architecture]}
    config = ModelConfig.from_dict(data)
    assert (config.qkv_bias, config.o_bias) == built
    assert (attention.k_proj.bias is not None) == built[0] == (attention.v_proj.bias is not None)


@pytest.mark.parametrize("architecture", SHAPE)
def test_a_q_k_norm_the_architecture_does_not_fix_is_refused(tmp_path, small_tokenizer, architecture):
    config = replace(_config(architecture, *BIASES[architecture][0]), qk_norm=architecture != "Qwen3ForCausalLM")
    with pytest.raises(ValueError, match=f"^config.json: a {architecture} with(out)? per-head q/k RMSNorm"):
        make_random_bundle(tmp_path / "b", config, tokenizer=small_tokenizer)
    assert not (tmp_path / "b").exists()
