"""The CJK font, registered so Chinese (simplified and traditional) shows as glyphs on screen and in every export.

The font is Noto Sans CJK, installed as a dependency (PyPI `noto-cjk-sans-otc`, SIL OFL 1.1), not
kept in this repository. Its collection holds one face per region; we use the Simplified-Chinese
one ("Noto Sans CJK SC"), which also draws every traditional character.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QApplication

FONT_PACKAGE = "noto_cjk_sans_otc"
FONT_NAME = "NotoSansCJK-Regular.ttc"
CJK_FAMILY = "Noto Sans CJK SC"
MISSING_FONT = ("the CJK font package is missing (Chinese would not show); install it with: "
                "pip install 'noto-cjk-sans-otc>=0.0.1,<0.1'   (or: pip install -e .)")
_registered: str | None = None


class FontMissingError(OSError):
    """The font package is not installed, or its file is gone: an installation problem, said in one line."""


def cjk_font_file() -> Path:
    """The installed font collection's path (a real file: Qt and fontconfig read it by name)."""
    try:
        path = Path(str(resources.files(FONT_PACKAGE).joinpath(FONT_NAME)))
    except ModuleNotFoundError:
        raise FontMissingError(MISSING_FONT) from None
    if not path.is_file():
        raise FontMissingError(MISSING_FONT)
    return path


def register_fonts(app: QApplication | None = None) -> str:
    """Register the font once (needs a QApplication) and make it the fallback after the UI font.

    Latin text keeps the platform's font; any character it lacks (Chinese) comes from ours.
    Returns the CJK family name.
    """
    global _registered
    app = app or QApplication.instance()
    if app is None:
        raise RuntimeError("register_fonts needs a QApplication")
    if _registered is None:
        font_file = cjk_font_file()
        font_id = QFontDatabase.addApplicationFont(str(font_file))   # every face of the collection
        if CJK_FAMILY not in (QFontDatabase.applicationFontFamilies(font_id) if font_id >= 0 else []):
            raise FontMissingError(f"{font_file}: not a font collection holding {CJK_FAMILY}; "
                                   "reinstall it with: pip install --force-reinstall noto-cjk-sans-otc")
        _registered = CJK_FAMILY
        QFont.insertSubstitution(QApplication.font().family(), _registered)
        font = QApplication.font()
        font.setFamilies([font.family(), _registered])
        app.setFont(font)
    return _registered


def ui_font(point_size: float | None = None, bold: bool = False) -> QFont:
    """The application font (with the CJK fallback), optionally resized."""
    font = QFont(QApplication.font())
    if point_size is not None:
        font.setPointSizeF(point_size)
    font.setBold(bold)
    return font
