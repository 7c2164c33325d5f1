"""core/tokenizer.py on the tokenizer.json flavours of Llama 2/3, Mistral, Mixtral, TinyLlama, Qwen2/3
and SmolLM: same ids as the `tokenizers` library, a merge replay that ends in those ids, readable
byte-fallback tokens, and one clear error for files it cannot read."""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import tokenizers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import tokenizer as tokenizer_module
from core.tokenizer import BPETokenizer, Tokenization, load_tokenizer
from tests.tokenizer_flavours import FLAVOURS, llama2, llama3, mixed_texts, qwen2

HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60)
# `tokenizers`' regex engine and the `regex` package may be on different Unicode versions:
# characters unassigned in Python's tables (category Cn) are left out of comparisons with it.
ASSIGNED_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs", "Cn")).filter(
    lambda c: unicodedata.category(c) != "Cn"), max_size=60)
BYTE_LEVEL = ("llama3", "qwen2", "smollm", "qwen2_flags")


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[tokenizers.Tokenizer, BPETokenizer]]:
    """Every flavour as (the `tokenizers` library's tokenizer, ours read from its tokenizer.json)."""
    out = {}
    for name, make in FLAVOURS.items():
        hf = make()
        out[name] = hf, BPETokenizer.from_json(json.loads(hf.to_str()))
    return out


def texts_for(ours: BPETokenizer, n: int = 300, seed: int = 11) -> list[str]:
    return mixed_texts(n, seed, specials=tuple(t.content for t in ours.added_tokens))


@pytest.mark.parametrize("name", list(FLAVOURS))
def test_ids_and_decoding_match_tokenizers(built, name: str) -> None:
    hf, ours = built[name]
    for s in texts_for(ours):
        expected = hf.encode(s).ids
        assert ours.encode(s) == expected, s
        assert ours.encode(s, add_special=False) == hf.encode(s, add_special_tokens=False).ids, s
        for skip in (False, True):
            assert ours.decode(expected, skip_special=skip) == hf.decode(expected, skip_special_tokens=skip), s


@pytest.mark.parametrize("name", ["llama3", "qwen2", "llama2", "mistral_v3", "sp_unk_fused"])
@HYPO
@given(text=ASSIGNED_TEXT)
def test_ids_match_tokenizers_on_any_text(built, name: str, text: str) -> None:
    hf, ours = built[name]
    assert ours.encode(text) == hf.encode(text).ids


@pytest.mark.parametrize("name", ["llama3", "llama2", "mistral_v3"])
@HYPO
@given(parts=st.lists(st.sampled_from(["<s>", "</s>", "<|begin_of_text|>", "[INST]", " ", "  ", "a", "订单", "\n",
                                       "é", "x y", "😀", "order"]), max_size=12))
def test_ids_match_around_special_tokens(built, name: str, parts: list[str]) -> None:
    hf, ours = built[name]
    text = "".join(parts)
    assert ours.encode(text) == hf.encode(text).ids


def test_each_family_feature_is_exercised(built) -> None:
    """The comparison above means something only if the flavours' special paths are taken."""
    texts = texts_for(built["llama3"][1])
    llama3_hf, llama3 = built["llama3"]
    merged_only = BPETokenizer.from_json({**json.loads(llama3_hf.to_str())} | {
        "model": {**json.loads(llama3_hf.to_str())["model"], "ignore_merges": False}})
    assert any(llama3.encode(s) != merged_only.encode(s) for s in texts)  # whole words win over merges
    llama2 = built["llama2"][1]
    assert any(llama2.id_to_piece(i).startswith("<0x") for s in texts for i in llama2.encode(s))  # byte fallback
    unk = built["sp_unk_fused"][1]
    assert any(unk.id_to_piece(i) == "<unk>" for s in texts for i in unk.encode(s))
    assert llama2.encode("hi")[0] == llama2.bos_id == llama2.vocab["<s>"]
    assert llama3.encode("hi")[0] == llama3.bos_id == llama3.vocab["<|begin_of_text|>"]
    qwen = built["qwen2"][1]
    assert qwen.bos_id is None and qwen.encode("hi") == qwen.encode("hi", add_special=False)
    assert qwen.eos_id == qwen.vocab["<|endoftext|>"] and llama2.eos_id == llama2.vocab["</s>"]
    assert llama3.eos_id == llama3.vocab["<|end_of_text|>"]


def _round_trip_texts(ours: BPETokenizer) -> list[str]:
    specials = [t.content for t in ours.added_tokens]
    # "▁" decodes as a space and a typed "<0x41>" as "A" (in `tokenizers` too): not round trips.
    return [s for s in texts_for(ours) if "▁" not in s and "<0x" not in s and not any(c in s for c in specials)]


@pytest.mark.parametrize("name", ["llama3", "smollm", "qwen2", "llama2"])
def test_decode_inverts_encode_where_the_flavour_promises_it(built, name: str) -> None:
    _, ours = built[name]
    for s in _round_trip_texts(ours):
        expected = unicodedata.normalize("NFC", s) if name == "qwen2" else s
        assert ours.decode(ours.encode(s), skip_special=True) == expected


@pytest.mark.parametrize("name", ["llama3", "smollm", "qwen2"])
@HYPO
@given(text=ANY_TEXT)
def test_byte_level_flavours_round_trip_any_text(built, name: str, text: str) -> None:
    _, ours = built[name]
    specials = [t.content for t in ours.added_tokens]
    expected = unicodedata.normalize("NFC", text) if name == "qwen2" else text
    if not any(s in text for s in specials):
        assert ours.decode(ours.encode(text, add_special=False)) == expected


def check_tokenization(tok: BPETokenizer, s: str) -> Tokenization:
    """What the panels rely on: the replay ends in encode's ids, every step's pieces spell the same
    bytes, and each token's characters lie inside the text, in order."""
    t = tok.encode_traced(s)
    assert t.ids == tok.encode(s)
    model_bytes = t.model_bytes
    for pieces in [t.initial_pieces] + [step.pieces for step in t.steps]:
        assert b"".join(t.piece_bytes(p) for p in pieces) == model_bytes
    if t.steps:
        assert t.steps[-1].pieces == t.pieces
        assert all(step.merged == step.left + step.right for step in t.steps)
    assert len(t._owners) == len(model_bytes)
    previous = 0
    for token in t.tokens:
        assert 0 <= token.char_start <= token.char_end <= len(t.text)
        assert token.char_start >= previous
        previous = token.char_start
        assert model_bytes[token.byte_start:token.byte_end] == token.raw
    return t


@pytest.mark.parametrize("name", list(FLAVOURS))
def test_merge_replay_works_on_every_flavour(built, name: str) -> None:
    _, ours = built[name]
    for s in texts_for(ours, n=120):
        check_tokenization(ours, s)


def test_sentencepiece_tokens_cover_the_typed_characters(built) -> None:
    _, llama2 = built["llama2"]
    t = check_tokenization(llama2, "hello 订单")
    assert t.tokens[0].piece == "<s>" and (t.tokens[0].char_start, t.tokens[0].char_end) == (0, 0)
    assert t.tokens[1].display.startswith("␣h")  # the "▁" SentencePiece puts in front of the text
    assert "".join(t.text[tok.char_start:tok.char_end] for tok in t.tokens[1:] if tok.char_end > tok.char_start) \
        .replace(" ", "") == "hello订单"


def test_byte_fallback_tokens_show_as_byte_fragments(built) -> None:
    _, llama2 = built["llama2"]
    rare = next(c for c in "鿏𠀋ǅ½Ⅻ١" if llama2.vocab.get(c) is None)
    t = check_tokenization(llama2, rare)
    fallback = [tok for tok in t.tokens if tok.piece.startswith("<0x")]
    raw = rare.encode("utf-8")
    assert [tok.raw for tok in fallback] == [bytes([b]) for b in raw]
    assert fallback[0].display == f"‹{raw[0]:02x}›{rare}"
    assert t.display_piece(fallback[0].piece) == f"‹{raw[0]:02x}›"
    assert llama2.display_piece(fallback[0].piece) == f"‹{raw[0]:02x}›"
    assert t.display_pieces(t.initial_pieces)[-1] == f"‹{raw[-1]:02x}›{rare}"


def test_byte_level_tokens_display_like_the_shipped_tokenizer(built) -> None:
    _, qwen = built["qwen2"]
    t = check_tokenization(qwen, " 订单 x")
    assert "".join(tok.display for tok in t.tokens).replace("␣", " ").startswith(" ")
    assert all("\ufffd" not in tok.display for tok in t.tokens)


def test_added_token_flags(built) -> None:
    hf, ours = built["llama2_flags"]
    for s in ["a <mask> b", "a  <mask>  b", "x[X]y", "x  [X]  y", "border order orders", "say hello world now",
              "order", "(order)", "_order", "订单order"]:
        assert ours.encode(s) == hf.encode(s).ids, s
    mask = ours.vocab["<mask>"]
    assert ours.encode("a  <mask>  b").count(mask) == 1
    stripped = ours.encode_traced("a  <mask>  b").tokens
    token = next(t for t in stripped if t.id == mask)
    assert (token.char_start, token.char_end) == (1, 11)  # it took the spaces on both sides


def test_config_decides_bos_for_llama_tokenizer_classes(built, tmp_path: Path) -> None:
    hf, _ = built["llama2"]
    folder = tmp_path / "model"
    folder.mkdir()
    hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "add_eos_token": True,
        "bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": False}}))
    tok = load_tokenizer(folder)
    ids = tok.encode("hi")
    assert ids[0] != tok.vocab["<s>"] and ids[-1] == tok.eos_id == tok.vocab["</s>"]
    assert ids == hf.encode("hi", add_special_tokens=False).ids + [tok.vocab["</s>"]]
    tok.save(tmp_path / "tokenizer.json")  # the bundle keeps what the config asked for
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert again.encode("hi 订单") == tok.encode("hi 订单")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode("hi 订单").ids == tok.encode("hi 订单")


def test_config_of_other_classes_leaves_the_template(built) -> None:
    hf, _ = built["llama3"]
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False,
              "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    tok = BPETokenizer.from_json(json.loads(hf.to_str()), config)
    assert tok.encode("hi") == hf.encode("hi").ids
    assert tok.eos_id == tok.vocab["<|eot_id|>"]


@pytest.mark.parametrize("name", ["llama3", "qwen2", "llama2", "mistral_v3"])
def test_saved_flavour_loads_to_the_same_ids(built, name: str, tmp_path: Path) -> None:
    _, ours = built[name]
    ours.save(tmp_path / "tokenizer.json")
    again = BPETokenizer.load(tmp_path / "tokenizer.json")
    for s in texts_for(ours, n=60):
        assert again.encode(s) == ours.encode(s)


def test_shipped_tokenizer_reads_as_before() -> None:
    path = Path(__file__).resolve().parents[2] / "resources" / "model" / "tokenizer.json"
    ours = BPETokenizer.load(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for s in texts_for(ours, n=200):
        assert ours.encode(s) == hf.encode(s).ids
        assert ours.decode(ours.encode(s)) == s


# ----------------------------------------------------------------------------- refusals


def _llama2_json(built) -> dict:
    return json.loads(built["llama2"][0].to_str())


def _edit(data: dict, path: str, value) -> dict:
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[keys[-1]] = value
    return data


@pytest.mark.parametrize("path, value, message", [
    ("model.type", "Unigram", r"model type is 'Unigram'; Glassbox reads BPE models only"),
    ("model.type", "WordPiece", r"model type is 'WordPiece'"),
    ("normalizer", {"type": "Lowercase"}, r"normalizer 'Lowercase' is not supported \(Glassbox reads: NFC, Prepend"),
    ("pre_tokenizer", {"type": "Whitespace"}, r"pre_tokenizer 'Whitespace' is not supported \(Glassbox reads: "),
    ("decoder", {"type": "WordPiece"}, r"decoder 'WordPiece' is not supported"),
    ("post_processor", {"type": "RobertaProcessing"}, r"post_processor 'RobertaProcessing' is not supported"),
    ("added_tokens.1.content", "", r"added token #1 \(id 1\) has empty content"),
    ("model.unk_token", "<nope>", r"model.unk_token '<nope>' is not in the vocab"),
    ("model.dropout", 0.1, r"model.dropout is not supported"),
    ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
     r"pre_tokenizer regex does not compile"),
    ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}, r"pre_tokenizer.behavior .Sideways. is not supported"),
    ("post_processor.special_tokens.<s>.ids", [10 ** 9], r"post_processor adds token id 1000000000, outside"),
    ("normalizer", "garbage", r"normalizer must be an object with a \"type\""),
])
def test_unsupported_or_broken_parts_are_refused_in_one_line(built, tmp_path: Path, path, value, message) -> None:
    data = _edit(_llama2_json(built), path, value)
    file = tmp_path / "tokenizer.json"
    file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="^tokenizer.json: " + message) as err:
        BPETokenizer.load(file)
    assert "\n" not in str(err.value)


def test_merges_naming_unknown_tokens_are_refused(built, tmp_path: Path) -> None:
    data = _llama2_json(built)
    data["model"]["merges"].append(["▁nowhere", "▁to_be_found"])
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"^tokenizer.json: merge #\d+ .* uses unknown piece '▁nowhere'$"):
        BPETokenizer.load(tmp_path / "tokenizer.json")


@pytest.mark.parametrize("content, message", [
    ("[" * 100_000, "JSON nested too deeply|not valid JSON"),
    ("\x00\xff garbage", "not valid JSON"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}', "ids are not contiguous"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a", "a"]]}}', "merge #0 is"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"content": "x"}]}',
     "added token #0 must have"),
])
def test_garbage_files_are_refused_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^tokenizer.json: ({message})") as err:
        BPETokenizer.load(file)
    assert "\n" not in str(err.value)


def test_huge_files_are_refused_before_reading(tmp_path: Path, monkeypatch) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}) + " " * 5000)
    monkeypatch.setattr(tokenizer_module, "MAX_TOKENIZER_BYTES", 4096)
    with pytest.raises(ValueError, match="^tokenizer.json: larger than"):
        BPETokenizer.load(file)


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(st.binary(max_size=24), st.text(max_size=12).map(lambda s: s.encode("utf-8", "replace"))))
def test_vocab_labels_fast_path_shows_what_display_bytes_shows(raw: bytes) -> None:
    assert tokenizer_module._display_whole(raw) == tokenizer_module.display_bytes(raw)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=12), cut=st.integers(0, 40), length=st.integers(0, 40))
@example(text="00\x80\x80\U00010000\U0003d000", cut=10, length=4)   # unassigned for unicodedata, not for regex
def test_token_display_fast_path_shows_what_render_shows(text: str, cut: int, length: int) -> None:
    text = tokenizer_module.clean_text(text)
    data = text.encode("utf-8")
    owners = tokenizer_module._byte_owners(text)
    start = min(cut, len(data))
    raw = data[start:start + length]
    assert tokenizer_module._render_in_context(raw, text, owners, start) == \
        tokenizer_module._render(raw, text, owners, start)


@pytest.mark.parametrize("make", [llama3, llama2, qwen2], ids=["llama3", "llama2", "qwen2"])
def test_text_past_the_context_is_cut_to_fit_with_every_flavour(make):
    from core.session import prepare_text

    tokenizer = BPETokenizer.from_json(json.loads(make().to_str()))
    text = "The customer cancelled the order today. 客户取消了订单。" * 3
    for limit in (5, 10, 20):
        prepared = prepare_text(tokenizer, text, limit)
        kept = len(text) - prepared.truncated_chars
        assert 0 < len(prepared.tokenization.ids) <= limit
        assert len(tokenizer.encode(text[: kept + 1])) > limit  # the longest prefix that fits


def test_a_bundle_reads_the_tokenizer_config_beside_its_tokenizer(tmp_path):
    from core.bundle import BundleError, load_bundle
    from core.random_bundle import make_random_bundle

    tokenizer = BPETokenizer.from_json(json.loads(llama3().to_str()))
    folder = make_random_bundle(tmp_path / "b", tokenizer=tokenizer)
    with_bos = load_bundle(folder).tokenizer.encode("hello")
    assert with_bos[0] == tokenizer.bos_id
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": False}), encoding="utf-8")
    assert load_bundle(folder).tokenizer.encode("hello") == with_bos[1:]
    (folder / "tokenizer_config.json").unlink()
    (folder / "tokenizer_config.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BundleError, match="outside the bundle"):
        load_bundle(folder)
