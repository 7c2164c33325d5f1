"""The bundled CJK font, registered so Chinese shows as glyphs on screen and in every export."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QApplication

FONT_FILE = Path(__file__).resolve().parent.parent / "resources" / "fonts" / "NotoSansSC-Regular-GB2312.otf"
CJK_FAMILY = "Noto Sans CJK SC"
_registered: str | None = None


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
        font_id = QFontDatabase.addApplicationFont(str(FONT_FILE))
        families = QFontDatabase.applicationFontFamilies(font_id) if font_id >= 0 else []
        if not families:
            raise RuntimeError(f"could not load the bundled font {FONT_FILE}")
        _registered = families[0]
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
