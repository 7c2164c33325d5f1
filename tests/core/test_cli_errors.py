"""Issue 9 item 3: every failure a user can cause is one line `glassbox: error: ...` and exit 2.

A bug (an exception no user input should cause) is still one line, but says "internal error",
asks to be reported and exits 70, so the two cannot be confused.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import main
from tests import hostile_bundles as hostile

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def assert_one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("glassbox: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("key, literal", [
    ("rope_theta", "1" + "0" * 400),              # OverflowError in float() before the gate
    ("num_hidden_layers", "1000000000"),          # 40 s, then MemoryError, before the gate
    ("max_position_embeddings", "1000000000000"), # tried to allocate 29 TiB
])
def test_hostile_config_is_one_line_and_exit_2(bundle, tmp_path, key, literal):
    folder = hostile.copy_bundle(bundle.path, tmp_path / "b")
    hostile.save_model(folder, hostile.strip_metadata(hostile.load_model(folder)))
    hostile.write_config_raw(folder, key, literal)
    result = run_cli("trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(folder))
    assert result.returncode == 2
    assert key in assert_one_error_line(result.stderr)


def test_deeply_nested_config_is_one_line_and_exit_2(bundle, tmp_path):
    folder = hostile.copy_bundle(bundle.path, tmp_path / "b")
    (folder / "config.json").write_text(hostile.deeply_nested_json())
    result = run_cli("trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(folder))
    assert result.returncode == 2
    assert "nested too deeply" in assert_one_error_line(result.stderr)


def _raising(exc: BaseException):
    def command(args):
        raise exc
    return command


def _onnxruntime_error() -> Exception:
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    return InvalidArgument("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input\nmore")


@pytest.mark.parametrize("make_error", [
    _onnxruntime_error,
    lambda: RecursionError("maximum recursion depth exceeded"),
    lambda: MemoryError(),
    lambda: OverflowError("int too large to convert to float"),
    lambda: OSError(28, "No space left on device"),
    lambda: ValueError("bad text"),
], ids=["onnxruntime", "recursion", "memory", "overflow", "disk-full", "value"])
def test_user_errors_of_any_library_are_one_line_and_exit_2(monkeypatch, capsys, make_error):
    monkeypatch.setattr(main, "cmd_trace", _raising(make_error()))
    assert main.main(["trace", "--text", "x", "--out", "o"]) == 2
    assert_one_error_line(capsys.readouterr().err)


def test_a_bug_is_one_line_that_says_so_and_exit_70(monkeypatch, capsys):
    monkeypatch.delenv("GLASSBOX_TRACEBACK", raising=False)
    monkeypatch.setattr(main, "cmd_trace", _raising(IndexError("list index out of range")))
    assert main.main(["trace", "--text", "x", "--out", "o"]) == 70
    line = assert_one_error_line(capsys.readouterr().err)
    assert "internal error" in line and "IndexError" in line and "please report" in line


def test_a_bug_shows_its_traceback_when_asked(monkeypatch):
    monkeypatch.setenv("GLASSBOX_TRACEBACK", "1")
    monkeypatch.setattr(main, "cmd_trace", _raising(IndexError("list index out of range")))
    with pytest.raises(IndexError):
        main.main(["trace", "--text", "x", "--out", "o"])


def test_random_bundle_into_a_file_says_so_as_the_other_commands_do(tmp_path):
    in_the_way = tmp_path / "a_file"
    in_the_way.write_text("")
    result = run_cli("random-bundle", "--out", str(in_the_way / "bundle"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"glassbox: error: cannot create the folder {in_the_way / 'bundle'}: " \
                                    f"{in_the_way} is a file, not a folder"
