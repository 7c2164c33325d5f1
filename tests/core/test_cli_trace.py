"""`main.py trace` writes trace.npz and tokens.csv that say what the model computed."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.runners import NumpyRunner
from core.session import analyse

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", ["onnx", "numpy"])
def test_trace_command_writes_npz_and_csv(bundle, tmp_path, backend):
    text = "The order 订单 was cancelled."
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "main.py", "trace", "--text", text, "--out", str(out),
                             "--model", str(bundle.path), "--backend", backend],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    expected = analyse(NumpyRunner(bundle), text)
    with np.load(out / "trace.npz") as npz:
        assert np.array_equal(npz["input_ids"], expected.input_ids)
        for name, value in expected.to_arrays().items():
            assert name in npz, name
            if value.dtype.kind == "f":
                finite = np.isfinite(value)
                np.testing.assert_allclose(npz[name][finite], value[finite], atol=1e-4)
    with open(out / "tokens.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["position", "id", "piece", "utf8_hex"]
    assert [int(r[1]) for r in rows[1:]] == expected.input_ids.tolist()
    joined = b"".join(bytes.fromhex(r[3]) for r in rows[1:])
    assert joined == text.encode("utf-8")


def test_text_past_the_context_is_cut_with_a_notice(bundle, tmp_path):
    text = "订单成交 " * 400
    result = subprocess.run([sys.executable, "main.py", "trace", "--text", text, "--out", str(tmp_path),
                             "--model", str(bundle.path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "text cut at" in result.stderr and "characters were not analysed" in result.stderr
    with np.load(tmp_path / "trace.npz") as npz:
        assert npz["input_ids"].shape[0] <= bundle.config.max_position_embeddings


def test_empty_text_is_a_clear_error(bundle, tmp_path):
    result = subprocess.run([sys.executable, "main.py", "trace", "--text", "", "--out", str(tmp_path),
                             "--model", str(bundle.path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "empty" in result.stderr and "Traceback" not in result.stderr


def test_analyse_truncates_to_the_context_on_a_token_boundary(bundle):
    text = "查询订单 and more words " * 200
    trace = analyse(NumpyRunner(bundle), text)
    assert trace.n_tokens <= bundle.config.max_position_embeddings
    assert text.startswith(trace.text)
    assert trace.truncated_chars == len(text) - len(trace.text) > 0
    assert bundle.tokenizer.encode(trace.text) == trace.input_ids.tolist()
