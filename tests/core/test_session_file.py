"""The .glassbox session file: round trips exactly, ignores the future, refuses damage without side effects."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.bundle import load_bundle
from core.runners import NumpyRunner, OnnxRunner
from core.sampling import SamplingSettings
from core.session import analyse
from core.interventions import Interventions
from core.session_file import (FORMAT, SCHEMA_VERSION, Session, SessionError, interventions_from_json,
                               interventions_to_json, load_session, save_session, session_bytes)

finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
plain_lists = st.recursive(st.lists(st.one_of(finite, st.integers(-5, 5), st.none(), st.booleans()), max_size=4),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=12)
sessions = st.builds(
    Session,
    sentences=st.lists(st.text(max_size=40), min_size=1, max_size=3).map(tuple),
    token_ids=st.none() | st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5).map(tuple),
    bundle=st.none(),
    backend=st.sampled_from(["onnx", "numpy", "both"]),
    selection=st.fixed_dictionaries({"layer": st.integers(0, 9), "head": st.integers(0, 9),
                                     "query": st.none() | st.integers(0, 300), "key": st.none() | st.integers(0, 300),
                                     "step": st.none() | st.integers(0, 300)}),
    sampling=st.builds(SamplingSettings, temperature=st.floats(0, 5), top_k=st.integers(0, 2048),
                       top_p=st.floats(0.01, 1), greedy=st.booleans(), seed=st.integers(0, 2**31 - 1)),
    interventions=st.dictionaries(st.text(min_size=1, max_size=12), plain_lists, max_size=3),
    dock_layout=st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
)


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def minimal(**extra) -> dict:
    return {"format": FORMAT, "version": SCHEMA_VERSION, "sentences": ["hello"], **extra}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session=sessions)
def test_save_then_open_gives_the_same_session(tmp_path, session):
    path = save_session(session, tmp_path / "s.glassbox")
    opened = load_session(path)
    assert opened.missing_bundle is None
    assert opened.session == session


def test_an_existing_bundle_round_trips_and_a_relative_one_is_relative_to_the_file(tmp_path, bundle):
    session = Session(sentences=("订单成交了吗？",), bundle=str(bundle.path))
    path = save_session(session, tmp_path / "s.glassbox")
    assert "订单成交了吗？" in path.read_text(encoding="utf-8")   # Chinese stays readable in the file
    assert load_session(path).session == session
    (tmp_path / "models" / "mine").mkdir(parents=True)
    rel = write_json(tmp_path / "rel.glassbox", minimal(bundle="models/mine"))
    assert load_session(rel).session.bundle == str((tmp_path / "models" / "mine").resolve())


def test_a_missing_bundle_opens_on_the_default_model_and_says_so(tmp_path):
    gone = str(tmp_path / "no-such-bundle")
    path = save_session(Session(sentences=("a", "b"), bundle=gone, backend="numpy"), tmp_path / "s.glassbox")
    opened = load_session(path)
    assert opened.missing_bundle == gone and opened.session.bundle is None
    assert opened.session.sentences == ("a", "b") and opened.session.backend == "numpy"
    assert gone in opened.message and "default model" in opened.message


def test_unknown_future_keys_are_ignored(tmp_path):
    data = minimal(version=SCHEMA_VERSION + 3, backend="numpy", colour_theme="dark", panels={"x": 1},
                   selection={"layer": 1, "head": 2, "expert": 3}, sampling={"seed": 9, "min_p": 0.1})
    opened = load_session(write_json(tmp_path / "future.glassbox", data)).session
    assert opened.backend == "numpy" and opened.selection["head"] == 2 and opened.sampling.seed == 9
    assert load_session(write_json(tmp_path / "min.glassbox", minimal())).session == Session(sentences=("hello",))


BAD_FILES = {
    "not json": b"{this is not json",
    "truncated": json.dumps(minimal(backend="onnx")).encode()[:-9],
    "binary": bytes(range(256)),
    "not an object": b"[1, 2, 3]",
    "another program's json": json.dumps({"name": "x", "version": 1}).encode(),
    "no sentences": json.dumps({"format": FORMAT, "version": 1}).encode(),
    "sentences not strings": json.dumps(minimal(sentences=[1, 2])).encode(),
    "empty sentences": json.dumps(minimal(sentences=[])).encode(),
    "version text": json.dumps(minimal(version="1")).encode(),
    "unknown backend": json.dumps(minimal(backend="gpu")).encode(),
    "negative head": json.dumps(minimal(selection={"layer": 0, "head": -1})).encode(),
    "bool layer": json.dumps(minimal(selection={"layer": True})).encode(),
    "top_p zero": json.dumps(minimal(sampling={"top_p": 0})).encode(),
    "nan temperature": b'{"format": "glassbox-session", "version": 1, "sentences": ["a"], '
                       b'"sampling": {"temperature": NaN}}',
    "intervention not a list": json.dumps(minimal(interventions={"head_mask": 3})).encode(),
    "intervention with an object": json.dumps(minimal(interventions={"head_mask": [{"a": 1}]})).encode(),
    "negative token id": json.dumps(minimal(token_ids=[3, -1])).encode(),
    "step not a number": json.dumps(minimal(selection={"step": "last"})).encode(),
    "layout not base64": json.dumps(minimal(dock_layout="%%%")).encode(),
    "deeply nested": b'{"format": "glassbox-session", "version": 1, "sentences": ["a"], "interventions": {"x": '
                     + b"[" * 100000 + b"]" * 100000 + b"}}",
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_damaged_file_gives_one_clear_line_and_changes_nothing(tmp_path, name):
    path = tmp_path / "bad.glassbox"
    path.write_bytes(BAD_FILES[name])
    with pytest.raises(SessionError) as info:
        load_session(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("bad.glassbox") and len(message) < 200
    assert path.read_bytes() == BAD_FILES[name]


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SessionError, match="cannot read"):
        load_session(tmp_path / "nothing.glassbox")


def test_a_failed_save_leaves_the_earlier_file_as_it_was(tmp_path):
    path = save_session(Session(sentences=("first",)), tmp_path / "s.glassbox")
    before = path.read_bytes()
    with pytest.raises(SessionError, match="backend"):
        save_session(Session(sentences=("second",), backend="gpu"), path)
    with pytest.raises(SessionError, match="cannot write"):
        save_session(Session(sentences=("third",)), tmp_path / "no" / "folder" / "s.glassbox")
    assert path.read_bytes() == before and list(tmp_path.iterdir()) == [path]


def test_lone_surrogates_survive_as_escapes():
    session = Session(sentences=("a\ud800b",))
    data = session_bytes(session)
    data.decode("utf-8")  # the file is valid UTF-8
    assert json.loads(data)["sentences"] == ["a\ud800b"]


@pytest.mark.parametrize("runner_class", [NumpyRunner, OnnxRunner], ids=lambda r: r.name)
def test_reopening_reproduces_a_bit_identical_trace(tmp_path, make_bundle, runner_class):
    bundle = make_bundle(seed=8)
    cfg = bundle.config
    head_mask = np.ones((cfg.num_hidden_layers, cfg.num_attention_heads), np.float32)
    head_mask[0, 1] = 0.0
    n_tokens = len(bundle.tokenizer.encode("The cat sat"))
    override = np.full((cfg.num_hidden_layers, n_tokens, cfg.num_experts_per_tok), -1)
    override[1, n_tokens - 1, 0] = 3
    session = Session(sentences=("The cat sat",), bundle=str(bundle.path), backend=runner_class.name,
                      interventions={"head_mask": head_mask.tolist(), "expert_override": override.tolist()})
    before = analyse(runner_class(bundle), session.sentences[0], head_mask=head_mask, expert_override=override)
    opened = load_session(save_session(session, tmp_path / "s.glassbox")).session
    after = analyse(runner_class(load_bundle(opened.bundle)), opened.sentences[0],
                    **{k: np.asarray(v) for k, v in opened.interventions.items()})
    for name, array in before.to_arrays().items():
        assert np.array_equal(array, after.to_arrays()[name]), name


def test_interventions_round_trip_bit_identically_through_the_file(tmp_path):
    rng = np.random.default_rng(3)
    given = Interventions(head_mask=np.array([[1.0, 0.25], [0.0, 1.0]], np.float32), ablate_mode="mean",
                          experts_off=np.array([[False, True], [False, False]]),
                          resid_patch=rng.standard_normal((3, 2, 4)).astype(np.float32),
                          resid_patch_mask=np.array([[True, False]] * 3))
    session = Session(sentences=("a",), interventions=interventions_to_json(given))
    back = interventions_from_json(load_session(save_session(session, tmp_path / "s.glassbox")).session.interventions)
    assert back.ablate_mode == "mean" and back.expert_override is None
    for name in ("head_mask", "experts_off", "resid_patch", "resid_patch_mask"):
        assert getattr(back, name).dtype == getattr(given, name).dtype
        assert np.array_equal(getattr(back, name), getattr(given, name)), name


@pytest.mark.parametrize("raw, why", [
    ({"head_mask": [[1.0, None]]}, "finite"),
    ({"head_mask": [[1.0], [1.0, 0.0]]}, "rectangular"),
    ({"expert_override": [[[0.5]]]}, "whole numbers"),
    ({"ablate_mode": "half"}, "ablate_mode"),
    ({"resid_patch": [[[0.0]]]}, "come together"),
])
def test_unusable_interventions_are_refused_with_the_reason(raw, why):
    with pytest.raises(ValueError, match=why):
        interventions_from_json(raw)


def test_interventions_of_a_newer_version_are_ignored():
    assert interventions_from_json({"head_mask": [[0.0]], "neuron_mask": [[1]]}).head_mask.tolist() == [[0.0]]
