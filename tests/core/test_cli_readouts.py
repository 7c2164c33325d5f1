"""`main.py readouts` writes readouts.npz with exactly the issue's keys, on the shipped model."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import main
from core.bundle import load_bundle
from core.head_roles import ROLE_NAMES, probe_roles, sentence_roles
from core.runners import OnnxRunner
from core.session import analyse

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"lens_probs", "dla_names", "dla_values", "dla_logit", "position", "target_id", "role_names",
        "roles_sentence", "roles_probe"}
TEXT = "The cat sat on the mat. The cat sat on the"


@pytest.fixture(scope="module")
def shipped():
    runner = OnnxRunner(load_bundle())
    return runner, analyse(runner, TEXT)


def test_readouts_command_on_the_shipped_model_with_defaults(tmp_path, shipped):
    runner, trace = shipped
    result = subprocess.run([sys.executable, "main.py", "readouts", "--text", TEXT, "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    cfg = trace.config
    L, H, T, V = cfg.num_hidden_layers, cfg.num_attention_heads, trace.n_tokens, cfg.vocab_size
    with np.load(tmp_path / "readouts.npz") as npz:  # no pickles: the names are plain string arrays
        assert set(npz.files) == KEYS
        position, target = int(npz["position"]), int(npz["target_id"])
        assert position == T - 1 and target == int(np.argmax(trace.logits[-1]))
        assert npz["lens_probs"].shape == (1 + 2 * L, T, V)
        np.testing.assert_allclose(npz["lens_probs"][-1, -1], trace.next_token_probs(-1), atol=1e-6)
        assert npz["dla_names"][0] == "embed" and "L1.H2" in npz["dla_names"] and "L0.E3" in npz["dla_names"]
        assert npz["dla_names"].shape == npz["dla_values"].shape
        assert abs(npz["dla_values"].sum() - float(npz["dla_logit"])) <= 1e-4
        assert float(npz["dla_logit"]) == pytest.approx(float(trace.logits[-1, target]), abs=1e-4)
        assert npz["role_names"].tolist() == list(ROLE_NAMES)
        assert npz["roles_sentence"].shape == npz["roles_probe"].shape == (L, H, len(ROLE_NAMES))
        np.testing.assert_allclose(npz["roles_sentence"], sentence_roles(trace).scores, atol=1e-6)
        np.testing.assert_allclose(npz["roles_probe"], probe_roles(runner).scores, atol=1e-6)


def test_position_and_target_are_honoured(tmp_path, shipped):
    _, trace = shipped
    assert main.main(["readouts", "--text", TEXT, "--position", "-3", "--target", "17", "--out", str(tmp_path),
                      "--backend", "numpy"]) == 0
    with np.load(tmp_path / "readouts.npz") as npz:
        assert int(npz["position"]) == trace.n_tokens - 3 and int(npz["target_id"]) == 17
        assert float(npz["dla_logit"]) == pytest.approx(float(trace.logits[-3, 17]), abs=1e-4)


@pytest.mark.parametrize("args, expected", [
    (["--position", "99"], r"position 99 is outside the text: choose 0\.\.\d+"),
    (["--target", "-1"], r"target token id -1 is outside the vocabulary: choose 0\.\.2047"),
    (["--text", ""], "empty"),
])
def test_bad_arguments_get_one_line_naming_the_valid_range(tmp_path, capsys, args, expected):
    argv = ["readouts", "--text", "hello there", "--out", str(tmp_path / "out"), *args]
    assert main.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("glassbox: error: ") and "\n" not in err
    assert re.search(expected, err), err
    assert not (tmp_path / "out" / "readouts.npz").exists()
