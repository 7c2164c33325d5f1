"""Every file or folder of this repository that the README names exists (tests/test_panels.py had moved)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a path starting at one of the repository's top folders, not inside a longer path or a home folder
REPO_PATH = re.compile(r"(?<![\w/.~-])((?:tests|core|gui|benchmarks|resources|docs|\.ci)/[\w./-]*\w/?)")


def test_every_path_the_readme_names_exists():
    named = set(REPO_PATH.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    assert "tests/gui/test_panels.py" in named
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
