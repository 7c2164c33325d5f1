"""--model with a folder that is not a bundle: one line (exit 2) saying what the folder is and what to do."""
from __future__ import annotations

from pathlib import Path

import main

ROOT = Path(__file__).resolve().parents[2]


def one_error_line(capsys, argv: list[str]) -> str:
    code = main.main(argv)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("glassbox: error: "), lines
    return lines[0]


def test_a_folder_that_is_neither_a_bundle_nor_a_hugging_face_folder(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a model")
    line = one_error_line(capsys, ["trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(tmp_path)])
    assert "neither a Glassbox bundle (no model.onnx) nor a Hugging Face model folder (no config.json)" in line
    assert "missing" not in line


def test_a_bundle_missing_one_file_still_names_that_file(tmp_path, capsys):
    (tmp_path / "model.onnx").write_bytes(b"")
    line = one_error_line(capsys, ["trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(tmp_path)])
    assert "tokenizer.json: missing" in line


def test_a_hugging_face_folder_is_offered_the_import_command_the_readme_shows(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    line = one_error_line(capsys, ["trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(tmp_path)])
    command = f"python main.py import {tmp_path} --out BUNDLE"
    assert command in line and "--import-to-cache" in line
    assert "python main.py import " in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_config_json_alone_is_not_called_a_hugging_face_folder(tmp_path, capsys):
    """A bundle that lost its model.onnx keeps a config.json: it must not be sent off to be imported."""
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((ROOT / "resources" / "model" / name).read_bytes())
    line = one_error_line(capsys, ["trace", "--text", "hi", "--out", str(tmp_path / "out"), "--model", str(tmp_path)])
    assert "nor a Hugging Face model folder (no weights beside its config.json)" in line
    assert "import" not in line


def test_model_given_before_the_command_is_the_model_used(tmp_path, capsys):
    """argparse lets a subcommand's default reset the top level's flag: `--model M trace` must still mean M."""
    (tmp_path / "notes.txt").write_text("not a model")
    line = one_error_line(capsys, ["--model", str(tmp_path), "trace", "--text", "hi", "--out", str(tmp_path / "out")])
    assert f"{tmp_path}: neither a Glassbox bundle" in line
    assert not (tmp_path / "out").exists()
