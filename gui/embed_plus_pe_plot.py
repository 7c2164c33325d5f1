"""What the original Transformer's first block would read: this run's token embedding, and embedding + PE,
side by side on one colour scale (core.positions.embed_plus_pe_view)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QWidget

from core import positions as pos
from core.trace import Trace
from gui.figure_tab import FigureTab
from gui.fitted_ticks import POWERS_OF_TWO, FittedTicks, numbers
from gui.plotting import DIVERGING, colormap, colour_bar, matrix_plot
from gui.selection import Selection
from gui.text_fit import LABEL_COLUMNS


class EmbedPlusPePlot(FigureTab):
    figure_name = "positions_embed_plus_pe"
    tab_title = "Embedding + PE"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale_box = QCheckBox("scale the embedding by √D first (as the paper does)")
        self.scale_box.toggled.connect(lambda _: self.redraw())
        self.controls.addWidget(self.scale_box)
        self.controls.addStretch(1)
        self.trace: Trace | None = None
        self.view: pos.EmbedPlusPe | None = None
        cmap = colormap(DIVERGING)
        self.plots, self.images, self.dim_ticks = [], [], []
        for col, title in enumerate(["token embedding (this run)", "embedding + PE"]):
            plot = self.frame.add_plot(row=0, col=col, token_rows=col == 0)
            matrix_plot(plot, "dimension", "token" if col == 0 else "")
            plot.setTitle(title)
            image = pg.ImageItem()
            image.setColorMap(cmap)
            plot.addItem(image)
            self.plots.append(plot)
            self.images.append(image)
            self.dim_ticks.append(FittedTicks(plot, "bottom", 30, POWERS_OF_TWO))
        self.plots[1].setYLink(self.plots[0])
        self.bar = colour_bar(self.plots[1], self.images[1], (-1.0, 1.0), cmap, "value")

    def draw(self, trace: Trace, selection: Selection) -> None:
        self.trace = trace
        self.redraw()

    def redraw(self) -> None:
        if self.trace is None:
            return
        view = self.view = pos.embed_plus_pe_view(self.trace, self.scale_box.isChecked())
        n, d = view.embedding.shape
        limit = view.limit
        for plot, image, values in zip(self.plots, self.images, (view.embedding, view.summed)):
            image.setImage(values, levels=(-limit, limit), autoLevels=False)
            plot.setRange(xRange=(0, d), yRange=(0, n), padding=0)
        for ticks in self.dim_ticks:
            ticks.set_labels(numbers(d))
        self.plots[0].getAxis("left").set_labels(view.labels, columns=LABEL_COLUMNS + 4)
        self.plots[1].getAxis("left").setTicks([[], []])
        self.bar.setLevels((-limit, limit))
        scaled = f" × √D = {view.factor:.3g}" if view.factor != 1.0 else ""
        self.frame.caption.setText(
            f"<b>What the original Transformer's first block reads: embedding{scaled} + PE.</b> "
            f"Each row is one token: its embedding row (looked up by token id) plus the sinusoid row of its "
            f"position, so the same token at two positions gives two different rows. Typical size (RMS): "
            f"embedding {view.rms_embedding:.3g}, PE {view.rms_pe:.3g}. Same colour scale on both. "
            f"(This model adds nothing here: its first block reads the token embedding alone.)")

    def table(self) -> str:
        return self.view.csv()

    def extra_tables(self) -> dict:
        return {"positions_embed_plus_pe_embedding": self.view.embedding_csv}
