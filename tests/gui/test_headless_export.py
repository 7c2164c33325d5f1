"""`main.py export`: all-or-nothing sets of files, bounded sizes, the selection and figure options, --texts."""
from __future__ import annotations

import csv
import errno
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

import main
from core.atomic import TEMP_PREFIX, StagedFolder, atomic_write_bytes
from core.raw_export import ExportError, write_file_set
from gui import export

ROOT = Path(__file__).resolve().parents[2]
TEXT = "订单成交，订单取消。The cat sat."
TEN_FILES = {f"figure_{i:02d}.png": bytes([i]) * (1000 + i) for i in range(10)}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*"))


# ---------------------------------------------------------------- all or nothing

def fail_on_file(monkeypatch, number: int, error: int = errno.EIO) -> None:
    """Make the `number`-th file written (1-based) fail half-way, as a dying disk would."""
    real_write, opened = os.write, {"count": 0, "fd": None}
    real_open = os.open

    def counting_open(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            opened["count"] += 1
            if opened["count"] == number:
                opened["fd"] = fd
        return fd

    def failing_write(fd, data):
        if fd == opened["fd"]:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(error, os.strerror(error))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "write", failing_write)


def test_a_write_failure_at_file_6_of_10_leaves_nothing_in_a_new_folder(tmp_path, monkeypatch):
    fail_on_file(monkeypatch, 6)
    target = tmp_path / "made" / "for" / "export"
    with pytest.raises(ExportError) as error:
        write_file_set(target, TEN_FILES)
    assert "figure_05.png" in str(error.value) and "nothing was written" in str(error.value)
    assert leftovers(tmp_path) == []   # not the 5 finished files, not the folders made for them


def test_a_full_disk_leaves_nothing_and_says_so(tmp_path, monkeypatch):
    budget = {"left": 4500}   # bytes the "disk" still takes: three files and a half
    real_write = os.write

    def full_disk_write(fd, data):
        if budget["left"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = real_write(fd, bytes(data)[: budget["left"]])
        budget["left"] -= written
        return written

    monkeypatch.setattr(os, "write", full_disk_write)
    with pytest.raises(ExportError) as error:
        write_file_set(tmp_path / "out", TEN_FILES)
    assert "No space left on device" in str(error.value)
    assert leftovers(tmp_path) == []


def test_a_failure_while_moving_into_an_existing_folder_puts_the_old_files_back(tmp_path, monkeypatch):
    folder = tmp_path / "figures"
    folder.mkdir()
    (folder / "figure_01.png").write_bytes(b"old one")
    (folder / "notes.txt").write_text("the user's own file")
    real_replace, moves = os.replace, {"count": 0}

    def replace_failing_third(src, dst):
        moves["count"] += 1
        if moves["count"] == 3:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_failing_third)
    with pytest.raises(ExportError):
        write_file_set(folder, TEN_FILES)
    assert leftovers(folder) == ["figure_01.png", "notes.txt"]
    assert (folder / "figure_01.png").read_bytes() == b"old one"


def test_a_set_into_an_existing_folder_replaces_its_files_and_keeps_the_others(tmp_path):
    folder = tmp_path / "figures"
    folder.mkdir()
    (folder / "figure_01.png").write_bytes(b"old one")
    (folder / "notes.txt").write_text("mine")
    paths = write_file_set(folder, {**TEN_FILES, "sub/index.csv": b"a,b\n"})
    assert (folder / "figure_01.png").read_bytes() == TEN_FILES["figure_01.png"]
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "sub" / "index.csv").is_file()
    assert len(paths) == 11 and not [p for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_a_new_folder_appears_in_one_step_with_the_mode_mkdir_gives(tmp_path):
    paths = write_file_set(tmp_path / "out", TEN_FILES)
    assert sorted(p.name for p in paths) == sorted(TEN_FILES) and leftovers(tmp_path)[0] == "figure_00.png"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~umask
    assert (tmp_path / "out" / "figure_00.png").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("length", [245, 250, 255])
def test_names_up_to_the_filesystem_limit_work(tmp_path, length):
    name = "f" * (length - 4) + ".png"
    atomic_write_bytes(tmp_path / name, b"one")
    assert (tmp_path / name).read_bytes() == b"one"
    folder = tmp_path / ("d" * length)
    write_file_set(folder, {name: b"two"})
    assert (folder / name).read_bytes() == b"two"
    assert leftovers(tmp_path) == sorted([name, folder.name, name])


def test_names_that_would_leave_the_folder_are_refused(tmp_path):
    with pytest.raises(ValueError):
        with StagedFolder(tmp_path / "out") as staged:
            staged.write("../escape.png", b"x")
    assert leftovers(tmp_path) == []


def test_a_real_file_size_limit_during_the_cli_export_leaves_nothing(tmp_path, bundle):
    """The operating system refuses the write (RLIMIT_FSIZE, as a quota would): exit 2, one line, no folder."""
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # get EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "export", "--text", TEXT, "--out", str(out),
                           "--model", str(bundle.path), "--backend", "numpy", "--formats", "png,npz",
                           "--figures", "attention_head,next_token_bars"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT, preexec_fn=limit_file_size)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "File too large" in lines[0], done.stderr
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- sizes

def test_an_image_that_cannot_be_allocated_is_an_error_not_an_empty_file(qtbot, monkeypatch):
    label = QLabel("tall")
    qtbot.addWidget(label)
    label.resize(10, 100_000)
    monkeypatch.setattr(export, "MAX_PNG_PIXELS", 10 ** 15)   # past our own limit: the allocation (16 TB) decides
    with pytest.raises(ValueError, match="cannot allocate a 20000 × 200000000 image"):
        export.png_bytes(label, width=20000)


@pytest.mark.parametrize("args, message", [
    (["--width", "60000"], "--width must be between 16 and 20000 pixels, got 60000"),
    (["--width", "3000000000"], "--width must be between 16 and 20000 pixels, got 3000000000"),
    (["--width", "8"], "--width must be between 16 and 20000"),
    (["--dpi", "5000"], "--dpi must be between 24 and 1200"),
    (["--width", "800", "--dpi", "300"], "choose --width or --dpi"),
    (["--formats", "png,gif"], "unknown format gif: choose from png,svg,pdf,csv,npz"),
    (["--theme", "dark", "--figures", "no_such_figure"], "unknown figure no_such_figure: choose from attention_grid"),
    (["--head", "99"], "--head 99 is out of range: this run has 4 heads (0-3)"),
    (["--layer", "2"], "--layer 2 is out of range: this run has 2 layers (0-1)"),
    (["--expert-layer", "5"], "--expert-layer 5 is out of range"),
    (["--query", "500"], "--query 500 is out of range"),
    (["--query", "2", "--key", "3"], "--key 3 is out of range: a query at position 2 sees keys 0-2"),
    (["--head", "-1"], "--head must be 0 or more"),
])
def test_bad_export_arguments_get_one_line_naming_the_choices(tmp_path, bundle, capsys, args, message):
    code = main.main(["export", "--text", TEXT, "--out", str(tmp_path / "out"), "--model", str(bundle.path),
                      "--backend", "numpy", *args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("glassbox: error: "), err
    assert message in lines[0]
    assert leftovers(tmp_path) == []


def test_figure_names_are_their_panels_names_and_a_misspelt_one_is_refused_before_the_model_loads(tmp_path, capsys):
    from gui import headless
    from gui.panels.registry import PANELS

    table = headless.figure_table()   # read from the panel classes: none is built
    assert list(table) == [entry.object_name for entry in PANELS]
    for panel, names in table.items():
        assert names and all(name.startswith(panel + "_") for name in names)
        assert all(headless.figure_owner(name) == panel for name in names if name.islower())
    assert headless.figure_owner("step_07_qk") == "step" and headless.figure_owner("step_7_qk") is None
    assert headless.figure_owner("attention_heads") is None
    code = main.main(["export", "--text", TEXT, "--out", str(tmp_path / "out"), "--model", str(tmp_path / "no_bundle"),
                      "--figures", "attention_head,attention_heads"])
    err = capsys.readouterr().err   # about the figure, not the missing bundle: nothing was loaded
    assert code == 2 and "unknown figure attention_heads: choose from attention_grid, attention_head," in err, err


def test_a_png_too_large_for_memory_is_refused_before_it_is_drawn(qtbot):
    label = QLabel("tall")
    qtbot.addWidget(label)
    label.resize(100, 1000)
    with pytest.raises(ValueError, match="more than 100 million pixels"):
        export.png_bytes(label, width=20000)


# ---------------------------------------------------------------- what is exported

def test_layer_head_and_query_choose_what_the_figures_show(tmp_path, bundle, capsys):
    code = main.main(["export", "--text", TEXT, "--out", str(tmp_path), "--model", str(bundle.path),
                      "--backend", "numpy", "--figures", "attention_head,next_token_bars",
                      "--formats", "csv,npz,pdf", "--layer", "1", "--head", "2", "--query", "4"])
    assert code == 0, capsys.readouterr().err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["attention_head.csv", "attention_head.pdf", "attention_head_scores.csv", "next_token_bars.csv",
                     "next_token_bars.pdf", "tokens.csv", "trace.npz"]
    with np.load(tmp_path / "trace.npz") as arrays:
        attention = arrays["layers.1.attn"][2]
    table = list(csv.reader((tmp_path / "attention_head.csv").open(encoding="utf-8")))
    shown = np.array([[float(v) for v in row[1:]] for row in table[1:]])
    np.testing.assert_allclose(shown, attention, rtol=1e-6, atol=1e-7)
    assert (tmp_path / "attention_head.pdf").read_bytes().startswith(b"%PDF")


def test_dpi_sets_the_png_size_and_its_resolution(tmp_path, bundle):
    main.main(["export", "--text", TEXT, "--out", str(tmp_path / "a"), "--model", str(bundle.path),
               "--backend", "numpy", "--figures", "attention_head", "--formats", "png", "--dpi", "48"])
    main.main(["export", "--text", TEXT, "--out", str(tmp_path / "b"), "--model", str(bundle.path),
               "--backend", "numpy", "--figures", "attention_head", "--formats", "png", "--dpi", "192"])
    small, large = QImage(str(tmp_path / "a" / "attention_head.png")), QImage(str(tmp_path / "b" / "attention_head.png"))
    assert abs(large.width() - 4 * small.width()) <= 4
    assert round(large.dotsPerMeterX() * 0.0254) == 192


def test_dark_theme_draws_on_a_dark_background(tmp_path, bundle):
    code = main.main(["export", "--text", TEXT, "--out", str(tmp_path), "--model", str(bundle.path),
                      "--backend", "numpy", "--figures", "attention_head", "--formats", "png", "--theme", "dark"])
    assert code == 0
    image = QImage(str(tmp_path / "attention_head.png"))
    corner = image.pixelColor(2, 2)
    assert corner.lightness() < 60


def test_texts_batch_writes_one_folder_per_sentence_and_an_index(tmp_path, bundle, capsys):
    texts = tmp_path / "texts.txt"
    long_line = "订单成交，订单取消。" * 200   # past the context: cut, and said so
    texts.write_text(f"The cat sat.\n\n订单成交，订单取消。\nA third line, with / a slash\n{long_line}\n",
                     encoding="utf-8")
    out = tmp_path / "out"
    code = main.main(["export", "--texts", str(texts), "--out", str(out), "--model", str(bundle.path),
                      "--backend", "numpy", "--figures", "attention_head", "--formats", "png,csv"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = list(csv.DictReader((out / "index.csv").open(encoding="utf-8")))
    cut = int(rows[3]["cut_chars"])
    # no progress bar when stderr is not a terminal: only the note on the cut line
    assert captured.err.splitlines() == [f"note: line 5: text cut at {bundle.context} tokens (the model's context): "
                                         f"the last {cut} characters were not analysed"]
    assert "wrote 4 sentence folder(s)" in captured.out and "1 blank line(s) skipped" in captured.out
    assert [row["line"] for row in rows] == ["1", "3", "4", "5"]
    assert [row["text"] for row in rows] == ["The cat sat.", "订单成交，订单取消。", "A third line, with / a slash", long_line]
    assert [row["cut_chars"] for row in rows[:3]] == ["0", "0", "0"] and 0 < cut < len(long_line)
    assert int(rows[3]["tokens"]) == bundle.context
    assert rows[1]["folder"].startswith("002_") and "订单成交" in rows[1]["folder"]
    for row in rows:
        folder = out / row["folder"]
        assert sorted(p.name for p in folder.iterdir()) == ["attention_head.csv", "attention_head.png",
                                                             "attention_head_scores.csv", "tokens.csv"]
        assert row["files"] == "4"


def test_a_bad_line_in_a_batch_names_the_line_and_leaves_nothing(tmp_path, bundle, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a long enough sentence here\nhi\n", encoding="utf-8")
    code = main.main(["export", "--texts", str(texts), "--out", str(tmp_path / "out"), "--model", str(bundle.path),
                      "--backend", "numpy", "--figures", "attention_head", "--formats", "png", "--query", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "line 2 of" in err and "--query 5 is out of range" in err
    assert not (tmp_path / "out").exists()


def test_progress_bar_only_on_a_terminal():
    from gui.headless import terminal_progress

    class Stream:
        def __init__(self, tty):
            self.tty, self.text = tty, ""

        def isatty(self):
            return self.tty

        def write(self, text):
            self.text += text

        def flush(self):
            pass

    assert terminal_progress(Stream(False)) is None
    terminal = Stream(True)
    show = terminal_progress(terminal)
    show(1, 4)
    show(4, 4)
    assert "1/4 sentences" in terminal.text and terminal.text.endswith("4/4 sentences\n")


def test_text_or_texts_is_required(tmp_path, capsys):
    assert main.main(["export", "--out", str(tmp_path / "o")]) == 2
    assert "give --text SENTENCE or --texts FILE" in capsys.readouterr().err


def test_ensure_writable_folder_creates_it_or_says_why_not(tmp_path):
    from core.raw_export import ensure_writable_folder

    assert ensure_writable_folder(tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="cannot create the folder"):
        ensure_writable_folder(tmp_path / "file" / "out")


def test_a_sentence_past_the_context_is_exported_cut_with_a_note(tmp_path, bundle, capsys):
    code = main.main(["export", "--text", "订单成交，订单取消。" * 200, "--out", str(tmp_path / "out"),
                      "--model", str(bundle.path), "--backend", "numpy", "--formats", "npz"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.startswith(f"note: text cut at {bundle.context} tokens") and "not analysed" in captured.err
    with np.load(tmp_path / "out" / "trace.npz") as npz:
        assert npz["input_ids"].shape[0] == bundle.context


def test_bytes_that_are_not_utf8_on_the_command_line_export_as_replacement_characters(tmp_path, bundle):
    """Python turns them into lone surrogates, which crashed QApplication (a segfault, no message)."""
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    done = subprocess.run([sys.executable.encode(), (ROOT / "main.py").__bytes__(), b"export", b"--text", b"bad \xff byte",
                           b"--out", bytes(out), b"--model", bytes(bundle.path), b"--formats", b"png,csv",
                           b"--figures", b"tokens_chips"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    hex_column = [line.rsplit(",", 1)[1] for line in (out / "tokens.csv").read_text().splitlines()[1:]]
    assert "ef bf bd" in " ".join(hex_column)   # U+FFFD where the byte was
    assert QImage(str(out / "tokens_chips.png")).width() > 0
