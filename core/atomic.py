"""Atomic writes: readers (and a crash half-way) never see half a file, nor half a set of files.

`atomic_write_bytes` writes one file; `StagedFolder` writes a set: every file goes into a hidden
temporary folder beside (or inside) the target, and only when all of them are written do they
move into place. A failure at any point removes everything it wrote and restores what it replaced.

Temporary names are short and fixed-length (".glassbox-" + 8 random characters), never derived
from the target's name, so a target whose name is already at the filesystem's limit still works.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

_UMASK = os.umask(0)
os.umask(_UMASK)
TEMP_PREFIX = ".glassbox-"


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is out (a short write is not an error; a full disk raises OSError)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_new_file(path: Path, data: bytes) -> None:
    """Create `path` (which must not exist) with the mode open() would give it, and write data."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the mode open() would
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _relative(name: str) -> PurePosixPath:
    """A file name inside the set: relative, no '..', no empty parts (so nothing lands outside)."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or not rel.parts or any(part in ("", ".", "..") for part in rel.parts):
        raise ValueError(f"not a file name inside the export folder: {name!r}")
    return rel


class StagedFolder:
    """All-or-nothing writing of many files into `folder` (which may or may not exist yet).

        with StagedFolder(out) as staged:
            staged.write("a.png", data)
            staged.write("001/attention_head.png", data)
            write_big_file(staged.path("weights.bin"))
        staged.paths   # every file, in place

    A new folder is built as a hidden sibling and renamed into place in one step. Into an existing
    folder, the files are staged in a hidden sub-folder, then moved in one by one; a file they
    replace is kept aside until the last move succeeded, and put back if one fails.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.paths: list[Path] = []
        self.writing = ""   # the name being written (for error messages)
        self._names: list[PurePosixPath] = []
        self._created_parents: list[Path] = []
        self._staging: Path | None = None
        self._fresh = False

    def __enter__(self) -> "StagedFolder":
        self._fresh = not self.folder.is_dir()
        if self._fresh:
            self._created_parents = _make_missing_dirs(self.folder.parent)
            self._staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.folder.parent))
        else:
            self._staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.folder))
        return self

    def write(self, name: str, data: bytes) -> None:
        write_new_file(self.path(name), data)

    def path(self, name: str) -> Path:
        """Where to write `name` oneself (a file too large to hold as bytes); it moves in with the rest."""
        self.writing = name
        rel = _relative(name)
        target = self._staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        self._names.append(rel)
        return target

    def __exit__(self, kind, value, traceback) -> None:
        committed = False
        try:
            if kind is None:
                self._commit()
                committed = True
        finally:
            self._clean_up(remove_created_parents=not committed)

    # ------------------------------------------------------------ internals
    def _commit(self) -> None:
        if self._fresh:
            os.chmod(self._staging, 0o777 & ~_UMASK)   # mkdtemp makes 0700; give it mkdir's mode
            os.rename(self._staging, self.folder)
            self._staging = None
        else:
            self._move_into_existing()
        self.paths = [self.folder / rel for rel in self._names]

    def _move_into_existing(self) -> None:
        backup = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.folder))
        moved: list[tuple[Path, Path | None]] = []   # (target now holding a new file, the old file kept aside)
        made_dirs: list[Path] = []
        set_aside: tuple[Path, Path] | None = None   # an old file moved away whose new one is not in yet
        try:
            for index, rel in enumerate(self._names):
                target = self.folder / rel
                made_dirs += _make_missing_dirs(target.parent)
                kept = None
                if target.exists() or target.is_symlink():
                    kept = backup / str(index)
                    os.rename(target, kept)
                    set_aside = (kept, target)
                os.replace(self._staging / rel, target)
                moved.append((target, kept))
                set_aside = None
        except BaseException:
            _undo_moves(moved, set_aside, made_dirs)
            raise
        finally:
            shutil.rmtree(backup, ignore_errors=True)

    def _clean_up(self, remove_created_parents: bool) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if remove_created_parents:
            for parent in reversed(self._created_parents):
                try:
                    parent.rmdir()
                except OSError:
                    pass


def _make_missing_dirs(folder: Path) -> list[Path]:
    """mkdir folder and its missing parents; return the ones made, outermost first."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir()
    return list(reversed(missing))


def _undo_moves(moved: list[tuple[Path, Path | None]], set_aside: tuple[Path, Path] | None,
                made_dirs: list[Path]) -> None:
    """Take the new files out again and put every replaced file back, newest first."""
    if set_aside is not None:
        os.rename(*set_aside)
    for target, kept in reversed(moved):
        target.unlink(missing_ok=True)
        if kept is not None:
            os.rename(kept, target)
    for folder in reversed(made_dirs):
        try:
            folder.rmdir()
        except OSError:
            pass
