"""Activation patching: exact at the ends (nothing patched = B, a whole stage patched = A), the same on both runners."""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.bundle import load_bundle
from core.interventions import Interventions, residual_stages
from core.patching import (SWEEPS, bench_patch_sweep, cell_interventions, is_patched_b, is_run_of_pair, logit_difference,
                           patch_arrays, patched_metric, prepare_pair, run_all_sweeps, sweep)
from core.runners import NumpyRunner, OnnxRunner

CLEAN = np.array([12, 80, 5, 33, 140, 9, 61, 200, 18])
CORRUPT = np.array([12, 80, 5, 71, 140, 9, 61, 200, 18])  # one token changed at position 3


@pytest.fixture(scope="module")
def pairs(bundle):
    """The same pair on both runners, with answer / wrong fixed from the NumPy run so both compare the same tokens."""
    numpy_runner, onnx_runner = NumpyRunner(bundle), OnnxRunner(bundle)
    first = prepare_pair(numpy_runner, CLEAN, CORRUPT, wrong_id=_second_choice(numpy_runner))
    return {runner.name: (runner, prepare_pair(runner, CLEAN, CORRUPT, first.answer_id, first.wrong_id))
            for runner in (numpy_runner, onnx_runner)}


def _second_choice(runner) -> int:
    # B's top token may equal A's; the wrong token is then B's best other choice
    clean, corrupt = runner.run(CLEAN).logits[-1], runner.run(CORRUPT).logits[-1]
    ranked = np.argsort(-corrupt)
    return int(ranked[1] if ranked[0] == np.argmax(clean) else ranked[0])


@pytest.fixture(scope="module")
def results(pairs):
    return {name: run_all_sweeps(runner, pair) for name, (runner, pair) in pairs.items()}


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_patching_nothing_gives_the_corrupt_metric(pairs, name):
    runner, pair = pairs[name]
    mask = np.zeros((5, len(CLEAN)), bool)
    assert patched_metric(runner, pair, Interventions(resid_patch=np.stack(residual_stages(pair.clean)), resid_patch_mask=mask)) == 0.0
    assert patched_metric(runner, pair, Interventions()) == 0.0


@pytest.mark.parametrize("name", ["numpy", "onnx"])
def test_patching_every_position_of_any_stage_restores_the_clean_metric_exactly(pairs, name):
    runner, pair = pairs[name]
    for stage in range(5):
        mask = np.zeros((5, len(CLEAN)), bool)
        mask[stage] = True
        iv = Interventions(resid_patch=np.stack(residual_stages(pair.clean)), resid_patch_mask=mask)
        assert patched_metric(runner, pair, iv) == 1.0, stage


def test_before_the_changed_token_the_residual_stream_is_the_same_in_both_runs(results):
    resid = results["numpy"].resid
    assert np.all(resid[:, :3] == 0.0)  # positions 0-2 hold the same tokens and cannot see position 3
    assert resid[0, 3] == 1.0           # the embedding of the changed token carries everything


@pytest.mark.parametrize("kind", list(SWEEPS))
def test_both_runners_agree_on_every_sweep_cell(results, kind):
    a, b = getattr(results["numpy"], kind), getattr(results["onnx"], kind)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=1e-3)


def test_sweep_shapes_follow_the_issue(results, bundle):
    cfg, T = bundle.config, len(CLEAN)
    arrays = patch_arrays(results["onnx"])
    assert sorted(arrays) == sorted(["metric_clean", "metric_corrupt", "resid", "heads", "heads_pos", "experts",
                                     "answer_id", "wrong_id", "input_ids_clean", "input_ids_corrupt"])
    L, H, E = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts
    assert arrays["resid"].shape == (1 + 2 * L, T) and arrays["heads"].shape == (L, H)
    assert arrays["heads_pos"].shape == (L, H, T) and arrays["experts"].shape == (L, E)
    assert all(arrays[k].dtype == np.float32 for k in ("metric_clean", "resid", "heads", "heads_pos", "experts"))


def test_a_cell_run_as_a_full_trace_gives_the_swept_value(pairs, results):
    runner, pair = pairs["onnx"]
    trace = runner.run(pair.corrupt.input_ids, interventions=cell_interventions(pair, "heads", (1, 2)))
    metric = logit_difference(trace.logits, pair.answer_id, pair.wrong_id)
    np.testing.assert_allclose(pair.normalised(metric), results["onnx"].heads[1, 2], atol=1e-6)


def test_the_sweeps_describe_a_and_b_patched_and_no_other_run(pairs, bundle):
    _, pair = pairs["numpy"]
    heads_off = np.zeros((bundle.config.num_hidden_layers, bundle.config.num_attention_heads), np.float32)
    assert is_run_of_pair(pair, CLEAN, Interventions())
    assert is_run_of_pair(pair, CORRUPT, cell_interventions(pair, "heads", (1, 2)))   # a clicked cell
    assert not is_run_of_pair(pair, CORRUPT, Interventions())   # B typed as sentence A: another pair's A
    assert not is_run_of_pair(pair, CORRUPT, Interventions(head_mask=heads_off))   # ablated, unpatched
    assert not is_run_of_pair(pair, CLEAN[:-1], None)
    assert is_patched_b(pair, CORRUPT, cell_interventions(pair, "heads", (1, 2)))
    assert not is_patched_b(pair, CLEAN, cell_interventions(pair, "heads", (1, 2)))   # A is not B patched
    assert not is_patched_b(pair, CORRUPT, Interventions())
    assert not is_run_of_pair(pair, CLEAN, Interventions(head_mask=heads_off))   # A, but a head switched off since


def test_a_head_patched_with_the_corrupt_runs_own_value_changes_nothing(pairs):
    runner, pair = pairs["numpy"]
    iv = cell_interventions(pair, "heads_pos", (0, 1, 4), values=np.stack([l.head_out for l in pair.corrupt.layers]))
    assert patched_metric(runner, pair, iv) == 0.0


def test_progress_counts_every_run_and_can_cancel(pairs):
    runner, pair = pairs["numpy"]
    seen = []
    sweep(runner, pair, "heads", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 8) for i in range(1, 9)]

    class Stop(Exception):
        pass

    def cancel(done, total):
        if done == 3:
            raise Stop

    with pytest.raises(Stop):
        sweep(runner, pair, "resid", progress=cancel)


def labelled(result):
    return replace(result, clean_labels=tuple(f"a{t}" for t in range(len(CLEAN))),
                   corrupt_labels=tuple(f"b{t}" for t in range(len(CORRUPT))))


def test_the_csv_has_one_row_per_cell_with_its_site_tokens_and_value(results):
    result = labelled(results["numpy"])
    header, *rows = list(csv.reader(io.StringIO(result.csv())))
    assert header == ["sweep", "stage", "layer", "head", "expert", "position", "token_clean", "token_corrupt",
                      "normalised_metric"]
    assert len(rows) == result.resid.size + result.heads.size + result.heads_pos.size + result.experts.size
    for sweep_kind, stage, layer, head, expert, position, clean, corrupt, value in rows:
        if sweep_kind == "resid":
            expected = result.resid[result.stages.index(stage), int(position)]
        elif sweep_kind == "heads":
            expected = result.heads[int(layer), int(head)]
        elif sweep_kind == "heads_pos":
            expected = result.heads_pos[int(layer), int(head), int(position)]
        else:
            expected = result.experts[int(layer), int(expert)]
        assert float(value) == float(expected), (sweep_kind, stage, layer, head, expert, position)
        assert (clean, corrupt) == ((f"a{position}", f"b{position}") if position else ("", ""))


@pytest.mark.parametrize("kind", list(SWEEPS))
def test_a_sweeps_csv_is_its_matrix_with_its_labels(results, kind):
    result = labelled(results["numpy"])
    header, *rows = list(csv.reader(io.StringIO(result.sweep_csv(kind))))
    matrix, row_labels, col_labels = result.sweep_table(kind)
    assert matrix.ndim == 2 and header == ["normalised_metric", *col_labels]
    assert [row[0] for row in rows] == row_labels and len(rows) == matrix.shape[0]
    np.testing.assert_array_equal(np.array([[float(v) for v in row[1:]] for row in rows]), matrix)
    L, H = result.heads.shape
    if kind in ("resid", "heads_pos"):   # columns are B's positions, each named with B's token
        assert col_labels == [f"{t}:b{t}" for t in range(len(CORRUPT))]
    if kind == "heads_pos":   # a row per layer.head, in order
        assert row_labels == [f"{l}.{h}" for l in range(L) for h in range(H)]
        np.testing.assert_array_equal(matrix[H + 1], result.heads_pos[1, 1])
    if kind == "resid":
        assert row_labels[0] == "emb" and len(row_labels) == len(result.stages)


def test_tokens_without_labels_are_named_by_their_ids(results):
    result = results["numpy"]
    assert result.token_labels() == ([f"#{i}" for i in CLEAN], [f"#{i}" for i in CORRUPT])


def test_texts_of_different_lengths_are_refused_with_both_counts(bundle):
    with pytest.raises(ValueError, match="clean text has 9 tokens and the corrupt text 8"):
        prepare_pair(NumpyRunner(bundle), CLEAN, CORRUPT[:-1])


def test_the_same_answer_and_wrong_token_is_refused(bundle):
    with pytest.raises(ValueError, match="answer and the wrong token are the same token"):
        prepare_pair(NumpyRunner(bundle), CLEAN, CORRUPT, answer_id=5, wrong_id=5)
    with pytest.raises(ValueError, match="same logit difference"):
        prepare_pair(NumpyRunner(bundle), CLEAN, CLEAN, answer_id=5, wrong_id=6)


ROOT = Path(__file__).resolve().parents[2]
IOI_CLEAN = "When David and Jesus went out, Jesus gave a drink to"
IOI_CORRUPT = "When David and Jesus went out, David gave a drink to"


def _main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_patch_command_on_the_shipped_model_writes_the_issues_keys_and_a_csv(tmp_path):
    result = _main("patch", "--clean", IOI_CLEAN, "--corrupt", IOI_CORRUPT, "--answer", " David", "--wrong", " Jesus",
                   "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(None)
    runner = OnnxRunner(bundle)
    tokenizer = bundle.tokenizer
    pair = prepare_pair(runner, tokenizer.encode(IOI_CLEAN), tokenizer.encode(IOI_CORRUPT),
                        tokenizer.encode(" David")[0], tokenizer.encode(" Jesus")[0])
    with np.load(tmp_path / "patch.npz") as npz:
        assert sorted(npz) == sorted(["metric_clean", "metric_corrupt", "resid", "heads", "heads_pos", "experts",
                                      "answer_id", "wrong_id", "input_ids_clean", "input_ids_corrupt"])
        assert int(npz["answer_id"]) == pair.answer_id and int(npz["wrong_id"]) == pair.wrong_id
        np.testing.assert_allclose(float(npz["metric_clean"]), pair.metric_clean, atol=1e-5)
        np.testing.assert_allclose(npz["heads"], sweep(runner, pair, "heads"), atol=1e-6)
        changed = int(np.flatnonzero(npz["input_ids_clean"] != npz["input_ids_corrupt"])[0])
        assert npz["resid"][0, changed] == 1.0 and np.all(np.delete(npz["resid"][0], changed) == 0.0)
        assert np.all(npz["resid"][-2:, -1] == 1.0)  # after the last attention, the last position holds all of A
    with open(tmp_path / "patch.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][0] == "sweep" and rows[4][6] == rows[4][7] == "␣Jesus"


@pytest.mark.parametrize("args, message", [
    (("--clean", "订单成交了", "--corrupt", "订单取消了"), "clean text has 7 tokens and the corrupt text 6"),
    (("--clean", IOI_CLEAN, "--corrupt", IOI_CORRUPT, "--answer", " Mary"), "' Mary' is 2 tokens"),
    (("--clean", IOI_CLEAN, "--corrupt", IOI_CORRUPT), "A's top prediction and B's"),
    (("--clean", IOI_CLEAN, "--corrupt", IOI_CORRUPT, "--wrong", "#99999"), r"ids run from 0 to 2047"),
])
def test_patch_command_bad_arguments_get_one_line(tmp_path, args, message):
    result = _main("patch", *args, "--out", str(tmp_path))
    assert result.returncode == 2
    assert message in result.stderr or re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_bench_reports_the_sweep_time_under_the_issues_key(bundle):
    report = bench_patch_sweep(NumpyRunner(bundle), n_tokens=6, repeats=1)
    cfg = bundle.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    assert report["cells"] == (1 + 2 * L) * 6 + L * H + L * H * 6
    assert report["patch_sweep_ms.6"] > 0


@pytest.mark.parametrize("kind, cell", [("resid", (2, 1)), ("heads_pos", (1, 0, 2)), ("resid", (0, 5))])
def test_a_cell_left_out_because_a_and_b_agree_there_is_what_a_run_gives(pairs, results, kind, cell):
    runner, pair = pairs["numpy"]
    assert getattr(results["numpy"], kind)[cell] == patched_metric(runner, pair, cell_interventions(pair, kind, cell))
