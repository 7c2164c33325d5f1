"""Tokenizer.json files of every flavour the imported families ship, built with the `tokenizers`
library itself (same pipeline as each family), trained on this project's own generated text.

Nothing here is downloaded or copied from a model: the regexes are the families' published
pre-tokenizer patterns; vocab and merges are learned from `mixed_texts`.
"""
from __future__ import annotations

import json
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from core.sample_text import sample_sentences

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < 10; ++i) {\n\tsum += a[i];\n}", "x => x * 2;",
        '<div class="a">hi</div>', "SELECT * FROM orders WHERE id = 42;", "if x != None: print(f'{x!r}')",
        "    indented\r\n", "a_b_c = [1, 2, 3]  # comment"]
WORDS = ["hello", "world", "order", "the", "don't", "I'M", "it's", "WE'LL", "they've", "Straße", "naïve", "café",
         "ﬁne", "e\u0301", "A\u030a", "ǅ", "İstanbul", "ſ", "emoji", "model"]
CHINESE = ["订单", "成交", "你好，世界。", "注意力", "（2024年）", "鿏", "𠀋", "一二三"]
EMOJI = ["😀", "🎉🎉", "👩‍💻", "🇨🇳", "👍🏽", "❤️", "🙂"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\x85", "\x1c", "\u200b"]
NUMBERS = ["12345", "3.14159", "2024-12-01", "007", "١٢٣", "½", "Ⅻ", "1,000,000"]
ODD = ["▁", "▁▁x", "<0x41>", "�", "\x00", "\x7f", "'s", "''", "...", "—", "“quoted”"]


def mixed_texts(n: int, seed: int, specials: tuple[str, ...] = ()) -> list[str]:
    """n strings mixing English, Chinese, emoji, code, numbers and odd whitespace (and specials)."""
    rng = random.Random(seed)
    pools = [WORDS, CHINESE, EMOJI, SPACES, NUMBERS, CODE, ODD, sample_sentences(50, seed)] + (
        [list(specials)] if specials else [])
    out = ["", " ", "a", "  leading", "trailing  ", "\n", "x" * 300, "订" * 50, "1234567890" * 3]
    while len(out) < n:
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 8))))
    return out


def training_texts() -> list[str]:
    """Without typed "<0xNN>": a SentencePiece vocab never learns to merge characters into a byte token's name."""
    mixed = [s for s in mixed_texts(300, seed=4) if "<0x" not in s]
    return sample_sentences(600, seed=3) + mixed + CODE * 20


def _byte_level_model(pre_tokenizer, vocab_size: int, normalizer=None) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_texts(), trainer)
    return tok


def _with_whole_words(tok: Tokenizer, texts: list[str], count: int) -> Tokenizer:
    """Llama 3's vocab holds whole words that its merges would not build; ignore_merges finds them."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    words: list[str] = []
    for text in texts:
        for piece, _ in tok.pre_tokenizer.pre_tokenize_str(text):
            if len(piece) >= 3 and piece not in vocab and piece not in words:
                words.append(piece)
    for word in words[:count]:
        vocab[word] = len(vocab)
    data["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(data))


def llama3() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = _with_whole_words(_byte_level_model(pre, 900), sample_sentences(200, seed=9), 150)
    tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def qwen2() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok = _byte_level_model(pre, 900, normalizers.NFC())
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    # Qwen3's thinking tags and Qwen2.5's tool tags are added tokens that are not special.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>", "<tool_call>")])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def smollm() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok = _byte_level_model(pre, 800)
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<file_sep>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


SP_SPECIALS = ["<unk>", "<s>", "</s>"]
SP_BYTES = [f"<0x{b:02X}>" for b in range(256)]


def _sentencepiece_vocab(vocab_size: int, limit_alphabet: int, byte_tokens: bool
                         ) -> tuple[dict[str, int], list[list[str]]]:
    """Train like SentencePiece BPE: words led by "▁"; then lay the vocab out as Llama 2's is:
    <unk> <s> </s>, the 256 byte tokens (with byte_fallback), then the learned pieces."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SP_SPECIALS, limit_alphabet=limit_alphabet)
    tok.train_from_iterator(training_texts(), trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = {t: i for i, t in enumerate(SP_SPECIALS + (SP_BYTES if byte_tokens else []))}
    for piece, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    return vocab, model["merges"]


def _sentencepiece(*, legacy: bool, byte_fallback: bool = True, fuse_unk: bool = True,
                   limit_alphabet: int = 120) -> Tokenizer:
    vocab, merges = _sentencepiece_vocab(900, limit_alphabet, byte_fallback)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], unk_token="<unk>",
                               byte_fallback=byte_fallback, fuse_unk=fuse_unk))
    tok.add_special_tokens(SP_SPECIALS)
    if legacy:  # Llama 2, TinyLlama, Mistral 7B v0.1, Mixtral 8x7B
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:  # newer conversions (Mistral v0.3 and later Llama 2 files): a Metaspace pre-tokenizer
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", 1)])
    return tok


def llama2() -> Tokenizer:
    return _sentencepiece(legacy=True)


def mistral_v3() -> Tokenizer:
    tok = _sentencepiece(legacy=False)
    tok.add_special_tokens(["[INST]", "[/INST]"])
    return tok


def sentencepiece_unk(fuse_unk: bool) -> Tokenizer:
    """SentencePiece BPE without byte_fallback: characters outside a small alphabet become <unk>."""
    return _sentencepiece(legacy=True, byte_fallback=False, fuse_unk=fuse_unk, limit_alphabet=60)


def with_flagged_tokens(tok: Tokenizer) -> Tokenizer:
    """Added tokens with every matching flag: lstrip/rstrip (like <mask>), single_word, normalized."""
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("order", single_word=True, normalized=True),
                    AddedToken("hello world", normalized=True),
                    AddedToken("[X]", lstrip=True, normalized=False)])
    return tok


FLAVOURS = {
    "llama3": llama3,
    "qwen2": qwen2,
    "smollm": smollm,
    "llama2": llama2,
    "mistral_v3": mistral_v3,
    "sp_unk_fused": lambda: sentencepiece_unk(True),
    "sp_unk_unfused": lambda: sentencepiece_unk(False),
    "llama2_flags": lambda: with_flagged_tokens(llama2()),
    "qwen2_flags": lambda: with_flagged_tokens(qwen2()),
}
