"""`main.py random-bundle --out DIR` when DIR cannot be written: the one line export and trace give
("cannot write <path>: <why>; nothing was written"), exit 2, and nothing left behind.

Tests run as root, whom permission bits never stop: a read-only place is a filesystem that refuses
mkdir (as /proc, /sys and a read-only mount do), simulated by patching os.mkdir; a full disk is a
write that raises ENOSPC.
"""
from __future__ import annotations

import errno
import os

import pytest

import core.atomic
import main
from core.random_bundle import make_random_bundle
from core.raw_export import ExportError


def run(capsys, out) -> tuple[int, str]:
    status = main.main(["random-bundle", "--out", str(out)])
    return status, capsys.readouterr().err.strip()


def everything_under(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in folder.rglob("*")}


@pytest.fixture()
def read_only(monkeypatch, tmp_path):
    """tmp_path/"ro": a folder whose filesystem refuses new folders and files (EROFS), though root's
    os.access says it is writable."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real_mkdir, real_open = os.mkdir, os.open

    def refuse_inside(real):
        def call(path, *args, **kwargs):
            if os.path.dirname(os.fspath(path)) == str(folder):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "mkdir", refuse_inside(real_mkdir))
    monkeypatch.setattr(os, "open", refuse_inside(real_open))
    assert os.access(folder, os.W_OK | os.X_OK)   # what the old probe asked, and believed
    return folder


def test_a_path_under_a_file_is_refused_by_the_writer_itself(tmp_path):
    """Not only main.py's early check: write_bundle (random-bundle, import, train) says it the same way."""
    in_the_way = tmp_path / "a_file"
    in_the_way.write_text("kept")
    with pytest.raises(ExportError) as error:
        make_random_bundle(in_the_way / "rb")
    assert str(error.value) == f"cannot create the folder {in_the_way / 'rb'}: {in_the_way} is a file, not a folder"
    assert sorted(os.listdir(tmp_path)) == ["a_file"] and in_the_way.read_text() == "kept"


def test_a_read_only_place_is_said_as_trace_says_it_before_any_work(capsys, monkeypatch, read_only, bundle):
    monkeypatch.setattr("core.random_bundle.make_random_bundle",
                        lambda *args, **kwargs: pytest.fail("made a bundle before finding the folder unwritable"))
    status, err = run(capsys, read_only / "rb")
    assert status == 2
    assert err == f"glassbox: error: cannot write {read_only / 'rb'}: Read-only file system; nothing was written"
    assert main.main(["trace", "--text", "hi", "--model", str(bundle.path), "--out", str(read_only / "rb")]) == 2
    assert capsys.readouterr().err.strip() == err
    assert os.listdir(read_only) == []


def fill_the_disk_after(monkeypatch, files: int) -> None:
    """Every write after the first `files` files raises ENOSPC, as a full disk does."""
    real_write_all, written = core.atomic._write_all, []

    def write_all(fd, data):
        if len(written) >= files:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write_all(fd, data)
        written.append(fd)

    monkeypatch.setattr(core.atomic, "_write_all", write_all)


def test_a_full_disk_leaves_no_folder_and_names_the_file(capsys, monkeypatch, tmp_path):
    fill_the_disk_after(monkeypatch, files=1)   # model.onnx is written, tokenizer.json is not
    status, err = run(capsys, tmp_path / "new" / "rb")
    assert status == 2
    assert err == (f"glassbox: error: cannot write {tmp_path / 'new' / 'rb' / 'tokenizer.json'}: "
                   f"No space left on device; nothing was written")
    assert os.listdir(tmp_path) == []   # neither rb/ nor the parent it made, nor a hidden staging folder


def test_a_full_disk_leaves_an_existing_folder_as_it_was(capsys, monkeypatch, tmp_path):
    folder = tmp_path / "rb"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    (folder / "config.json").write_text("an older config")
    (folder / "sub" / "data.bin").write_bytes(b"\0\1")
    before = everything_under(folder)
    fill_the_disk_after(monkeypatch, files=2)
    status, err = run(capsys, folder)
    assert status == 2
    assert err == (f"glassbox: error: cannot write {folder / 'config.json'}: No space left on device; "
                   f"nothing was written")
    assert everything_under(folder) == before
