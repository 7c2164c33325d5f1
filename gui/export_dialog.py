"""File → Export figure…: pick a figure, a format, a PNG width and a file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLineEdit, QPushButton, QSpinBox, QWidget)

from gui.export import DEFAULT_PNG_SCALE
from gui.panels.base import Figure

FORMAT_LABELS = {"png": "PNG image", "svg": "SVG vector drawing", "csv": "CSV numbers"}


@dataclass(frozen=True)
class ExportChoice:
    figure: Figure
    fmt: str          # "png" | "svg" | "csv"
    width: int        # PNG width in pixels
    path: Path


class ExportFigureDialog(QDialog):
    def __init__(self, figures: list[tuple[str, Figure]], current: int, folder: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export figure")
        self._figures = figures
        self._folder = folder
        self.figure_box = QComboBox()
        self.figure_box.addItems([label for label, _ in figures])
        self.format_box = QComboBox()
        for fmt, label in FORMAT_LABELS.items():
            self.format_box.addItem(label, fmt)
        self.width_box = QSpinBox()
        self.width_box.setRange(16, 20000)
        self.width_box.setSuffix(" px")
        self.path_edit = QLineEdit()
        self.path_edit.setMinimumWidth(420)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        path_row = QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(browse)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Figure", self.figure_box)
        form.addRow("Format", self.format_box)
        form.addRow("PNG width", self.width_box)
        form.addRow("File", path_row)
        form.addRow(buttons)

        self.figure_box.currentIndexChanged.connect(self._update_defaults)
        self.format_box.currentIndexChanged.connect(self._update_defaults)
        self.figure_box.setCurrentIndex(max(0, current))
        self._update_defaults()

    def _figure(self) -> Figure:
        return self._figures[self.figure_box.currentIndex()][1]

    def _fmt(self) -> str:
        return self.format_box.currentData()

    def _update_defaults(self) -> None:
        figure = self._figure()
        self.width_box.setValue(max(16, round(figure.widget.width() * DEFAULT_PNG_SCALE)))
        self.width_box.setEnabled(self._fmt() == "png")
        self.path_edit.setText(str(Path(self._folder) / f"{figure.name}.{self._fmt()}"))

    def _browse(self) -> None:
        fmt = self._fmt()
        path, _ = QFileDialog.getSaveFileName(self, "Export figure", self.path_edit.text(),
                                              f"{FORMAT_LABELS[fmt]} (*.{fmt})")
        if path:
            self.path_edit.setText(path if path.lower().endswith(f".{fmt}") else f"{path}.{fmt}")

    def choice(self) -> ExportChoice:
        return ExportChoice(self._figure(), self._fmt(), self.width_box.value(), Path(self.path_edit.text()))
