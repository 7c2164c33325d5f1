"""File → Export figure…: pick a figure, a format, a PNG width and a file, with a preview of what is written."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QImage, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QSpinBox, QWidget)

from gui import export
from gui.figure_pages import laid_out_size, on_page
from gui.panels.base import Figure
from gui.qt_signals import qt_signals_blocked
from gui.svg_export import widget_svg_bytes
from gui.theme import page_background

FORMAT_LABELS = {"png": "PNG image", "svg": "SVG vector drawing", "pdf": "PDF vector page", "csv": "CSV numbers"}
PREVIEW_SIZE = QSize(520, 340)
PREVIEW_MAX_PIXELS = 16_000_000   # a larger PNG is described, not rendered, while the user types a width
CSV_PREVIEW_LINES = 14


@dataclass(frozen=True)
class ExportChoice:
    figure: Figure
    fmt: str          # "png" | "svg" | "pdf" | "csv"
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
        self.width_box.setRange(*export.PNG_WIDTH_RANGE)
        self.width_box.setSuffix(" px")
        self.path_edit = QLineEdit()
        self.path_edit.setMinimumWidth(420)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        path_row = QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(browse)
        self.preview = QLabel()
        self.preview.setObjectName("export_preview")
        self.preview.setFixedSize(PREVIEW_SIZE)
        self.preview.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.preview.setStyleSheet("QLabel#export_preview { background: #f4f4f4; border: 1px solid #c8c8c8; }")
        self.preview_note = QLabel()
        self._preview_timer = QTimer(self, singleShot=True, interval=150)   # one render per pause in typing
        self._preview_timer.timeout.connect(self.update_preview)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Figure", self.figure_box)
        form.addRow("Format", self.format_box)
        form.addRow("PNG width", self.width_box)
        form.addRow("File", path_row)
        form.addRow("Preview", self.preview)
        form.addRow("", self.preview_note)
        form.addRow(buttons)

        self.figure_box.currentIndexChanged.connect(self._update_defaults)
        self.format_box.currentIndexChanged.connect(self._update_defaults)
        self.width_box.valueChanged.connect(lambda _: self._preview_timer.start())
        self.figure_box.setCurrentIndex(max(0, current))
        self._update_defaults()

    def _figure(self) -> Figure:
        return self._figures[self.figure_box.currentIndex()][1]

    def _fmt(self) -> str:
        return self.format_box.currentData()

    def _update_defaults(self) -> None:
        figure = self._figure()
        page = laid_out_size(figure)
        default_width = round(page.width() * export.default_png_scale(page.width(), page.height()))
        with qt_signals_blocked(self.width_box):
            self.width_box.setValue(max(export.PNG_WIDTH_RANGE[0], default_width))
        self.width_box.setEnabled(self._fmt() == "png")
        self.path_edit.setText(str(Path(self._folder) / f"{figure.name}.{self._fmt()}"))
        self.update_preview()

    # ------------------------------------------------------------ preview
    def update_preview(self) -> None:
        """Show the file as it will be written: the PNG's own pixels, the vector file as a viewer draws it."""
        figure, fmt = self._figure(), self._fmt()
        try:
            if fmt == "png":
                self._preview_png(figure)
            elif fmt in ("svg", "pdf"):
                self._preview_vector(figure, fmt)
            else:
                self._preview_csv(figure)
        except ValueError as exc:   # e.g. a width whose PNG would be too large: in this dialog's words
            told = f"{exc.reason}: choose a smaller PNG width" if isinstance(exc, export.PngTooLarge) else str(exc)
            self.preview.setPixmap(QPixmap())
            self.preview.setText(told)
            self.preview_note.setText("")

    def _preview_png(self, figure: Figure) -> None:
        with on_page(figure) as page:
            width, height, _ = export.png_size(page, self.width_box.value())
            self.preview_note.setText(f"{width} × {height} pixels")
            if width * height > PREVIEW_MAX_PIXELS:
                self.preview.setPixmap(QPixmap())
                self.preview.setText(f"{width} × {height} px: too large to preview")
                return
            image = export.render_image(page, width)
        self._show(image)

    def _preview_vector(self, figure: Figure, fmt: str) -> None:
        with on_page(figure) as page:
            svg = widget_svg_bytes(page, title=figure.name)   # the PDF is drawn from this same SVG
        renderer = QSvgRenderer(QByteArray(svg))
        page = renderer.viewBoxF()
        scale = min(PREVIEW_SIZE.width() / page.width(), PREVIEW_SIZE.height() / page.height())
        image = QImage(max(1, round(page.width() * scale)), max(1, round(page.height() * scale)),
                       QImage.Format.Format_RGB32)
        image.fill(page_background())   # the figures' paper, white or --theme dark's
        painter = QPainter(image)
        try:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            renderer.render(painter, QRectF(0, 0, image.width(), image.height()))
        finally:
            painter.end()
        inches = f"{page.width() / export.SCREEN_DPI:.1f} × {page.height() / export.SCREEN_DPI:.1f} in"
        self.preview_note.setText(f"vector {fmt.upper()}, {inches} (text as outlines)")
        self._show(image)

    def _preview_csv(self, figure: Figure) -> None:
        if figure.table is None:
            self.preview.setPixmap(QPixmap())
            self.preview.setText("this figure has no table of numbers")
            self.preview_note.setText("")
            return
        lines = figure.table().splitlines()
        shown = [line if len(line) <= 90 else line[:89] + "…" for line in lines[:CSV_PREVIEW_LINES]]
        self.preview.setPixmap(QPixmap())
        self.preview.setText("\n".join(shown))
        self.preview_note.setText(f"{len(lines)} lines")

    def _show(self, image: QImage) -> None:
        fitted = image.scaled(PREVIEW_SIZE, Qt.AspectRatioMode.KeepAspectRatio,
                              Qt.TransformationMode.SmoothTransformation)
        self.preview.setText("")
        self.preview.setPixmap(QPixmap.fromImage(fitted))

    def preview_image(self) -> QImage:
        """What the preview shows now (for tests)."""
        return self.preview.pixmap().toImage()

    def _browse(self) -> None:
        fmt = self._fmt()
        path, _ = QFileDialog.getSaveFileName(self, "Export figure", self.path_edit.text(),
                                              f"{FORMAT_LABELS[fmt]} (*.{fmt})")
        if path:
            self.path_edit.setText(path if path.lower().endswith(f".{fmt}") else f"{path}.{fmt}")

    def choice(self) -> ExportChoice:
        return ExportChoice(self._figure(), self._fmt(), self.width_box.value(), Path(self.path_edit.text()))
