"""The fast PNG writers decode to exactly the pixels they were given."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from gui.png_encode import enlarged_png_bytes, image_png_bytes


def decoded_rgba(png: bytes) -> np.ndarray:  # -> [H, W, 4]
    image = QImage.fromData(png, "PNG").convertToFormat(QImage.Format.Format_RGBA8888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 4].reshape(image.height(), image.width(), 4).copy()


def nearest_enlarged(pixels: np.ndarray, times_w: int, times_h: int | None = None) -> np.ndarray:
    return np.repeat(np.repeat(pixels, times_w if times_h is None else times_h, axis=0), times_w, axis=1)


def test_enlarged_heatmap_with_a_few_colours_is_every_cell_a_block(qapp):
    rng = np.random.default_rng(0)
    palette = rng.integers(0, 256, (40, 3), dtype=np.uint8)
    pixels = palette[rng.integers(0, 40, (5, 7))]   # [5, 7, 3], asymmetric: rows and columns pinned
    png = enlarged_png_bytes(pixels, 6, 6)
    assert png[25] == 3   # written with a palette
    assert (decoded_rgba(png)[:, :, :3] == nearest_enlarged(pixels, 6)).all()
    wide = enlarged_png_bytes(pixels, 2, 5)   # each axis its own factor: narrow columns, tall rows
    assert (decoded_rgba(wide)[:, :, :3] == nearest_enlarged(pixels, 2, 5)).all()


def test_enlarged_raster_with_many_colours_or_transparency_round_trips(qapp):
    rng = np.random.default_rng(1)
    many = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)   # 600 colours: no palette
    assert (decoded_rgba(enlarged_png_bytes(many, 3, 3))[:, :, :3] == nearest_enlarged(many, 3)).all()
    masked = np.dstack([many[:4, :5], np.where(np.tri(4, 5, dtype=bool), 255, 0).astype(np.uint8)])
    decoded = decoded_rgba(enlarged_png_bytes(masked, 4, 4))
    assert (decoded[:, :, 3] == nearest_enlarged(masked, 4)[:, :, 3]).all()
    visible = decoded[:, :, 3] == 255
    assert (decoded[visible][:, :3] == nearest_enlarged(masked, 4)[visible][:, :3]).all()


def test_figure_png_round_trips(qapp):
    rng = np.random.default_rng(2)
    pixels = np.ascontiguousarray(rng.integers(0, 256, (9, 13, 3), dtype=np.uint8))
    image = QImage(pixels.data, 13, 9, 13 * 3, QImage.Format.Format_RGB888).copy()
    assert (decoded_rgba(image_png_bytes(image))[:, :, :3] == pixels).all()


def test_painted_figure_png_round_trips(qapp):
    """The formats a figure is painted in (RGB32, premultiplied ARGB32) lose nothing on the way to RGB."""
    rng = np.random.default_rng(3)
    pixels = np.ascontiguousarray(rng.integers(0, 256, (9, 13, 3), dtype=np.uint8))   # asymmetric: no transposing
    rgb = QImage(pixels.data, 13, 9, 13 * 3, QImage.Format.Format_RGB888).copy()
    for painted in (QImage.Format.Format_RGB32, QImage.Format.Format_ARGB32_Premultiplied):
        assert (decoded_rgba(image_png_bytes(rgb.convertToFormat(painted)))[:, :, :3] == pixels).all()
