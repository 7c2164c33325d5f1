"""The CJK font: an installed dependency (not a file of this repository) that draws traditional Chinese too."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter

from gui import export, fonts
from gui.chip_flow import Chip, ChipFlow

ROOT = Path(__file__).resolve().parents[2]
TRADITIONAL = "訂單體"   # none of them is in GB2312: a subset of it drew them as nothing at all
SIMPLIFIED = "我喜欢学习"


def ink(image: QImage) -> int:
    """How many pixels are darker than mid-grey."""
    gray = image.convertToFormat(QImage.Format.Format_Grayscale8)
    row_bytes = gray.bytesPerLine()
    data = bytes(gray.constBits())
    return sum(1 for y in range(gray.height()) for value in data[y * row_bytes:y * row_bytes + gray.width()]
               if value < 128)


def drawn(character: str) -> QImage:
    """`character` drawn black on white with ui_font at 24 pt."""
    font = fonts.ui_font(24)
    image = QImage(64, 64, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setFont(font)
    painter.setPen(QColor("black"))
    painter.drawText(QPointF(4, 4 + QFontMetricsF(font).ascent()), character)
    painter.end()
    return image


@pytest.mark.parametrize("character", list(TRADITIONAL + SIMPLIFIED))
def test_ui_font_draws_traditional_and_simplified_chinese(qtbot, character):
    fonts.register_fonts()
    assert ink(drawn(character)) > 40, f"{character} drew no glyph"


def test_the_font_is_the_simplified_chinese_face_of_the_installed_collection(qtbot):
    assert fonts.register_fonts() == fonts.CJK_FAMILY == "Noto Sans CJK SC"
    assert fonts.CJK_FAMILY in fonts.ui_font().families()
    installed = fonts.cjk_font_file()
    installed_packages = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    # a dependency, not a file of this repository (a newcomer's .venv may sit inside the checkout)
    assert installed.is_file() and installed_packages & set(installed.resolve().parents)
    assert not (ROOT / "resources" / "fonts").exists()


def test_an_exported_chip_shows_traditional_characters(qtbot):
    fonts.register_fonts()
    flow = ChipFlow()
    qtbot.addWidget(flow)
    flow.set_chips([Chip((TRADITIONAL,), QColor("white"))])
    flow.resize(300, 60)
    image = QImage.fromData(export.png_bytes(flow, 600), "PNG")
    chip = flow.chip_rect(0)
    inside = chip.adjusted(3, 3, -3, -3)   # the chip's text, without its outline
    scale = image.width() / flow.width()
    crop = image.copy(round(inside.x() * scale), round(inside.y() * scale),
                      round(inside.width() * scale), round(inside.height() * scale))
    assert ink(crop) > 3 * 40, "the exported chip's characters are blank"


def test_the_font_package_is_a_bounded_runtime_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(requirement.replace(" ", "").startswith("noto-cjk-sans-otc>=") and "<" in requirement
               for requirement in project["dependencies"])


def test_a_missing_font_package_is_one_line(monkeypatch):
    monkeypatch.setattr(fonts, "FONT_PACKAGE", "no_such_font_package")
    with pytest.raises(fonts.FontMissingError) as error:
        fonts.cjk_font_file()
    assert "\n" not in str(error.value) and "pip install" in str(error.value)


def test_the_cli_says_in_one_line_that_the_font_package_is_missing(tmp_path):
    """A package of that name without its font file (a broken install) shadows the real one."""
    (tmp_path / fonts.FONT_PACKAGE).mkdir()
    (tmp_path / fonts.FONT_PACKAGE / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "export", "--text", "訂", "--figures",
                             "tokens_chips", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.startswith("glassbox: error: the CJK font package is missing")
    assert result.stderr.count("\n") == 1
