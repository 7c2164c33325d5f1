"""A fast PNG encoder for opaque, mostly flat-colour images (figures, enlarged heatmaps)."""
from __future__ import annotations

import struct
import sys
import zlib

import numpy as np
from PySide6.QtGui import QImage


ZLIB_LEVEL = 1   # fastest deflate: figures are mostly flat colour, which it packs well as it is


def image_png_bytes(image: QImage) -> bytes:
    """An opaque image as a PNG: 8-bit RGB, no filter and zlib level ZLIB_LEVEL, with its DPI (pHYs).

    Written here rather than by QImage.save: fast deflate packs figures (mostly flat colour) well as they
    are, several times faster than Qt's libpng defaults. Unfiltered rows measured smaller than with the
    "Sub" filter on this app's figures, and need no arithmetic (benchmarks: gui.headless.bench_export_all).
    Safe on a worker thread, where it runs in parallel with painting: NumPy reorders the channels and zlib
    compresses with the GIL released (Qt's own format conversion would hold it).
    """
    height, width = image.height(), image.width()
    if image.isNull() or width == 0 or height == 0:
        raise ValueError(f"could not encode a {width} × {height} PNG")
    filtered = np.empty((height, width * 3 + 1), np.uint8)
    filtered[:, 0] = 0                                  # filter type None
    _copy_rgb(image, filtered[:, 1:].reshape(height, width, 3))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)   # 8-bit RGB, no interlace
    density = struct.pack(">IIB", image.dotsPerMeterX(), image.dotsPerMeterY(), 1)
    return b"".join((b"\x89PNG\r\n\x1a\n", _png_chunk(b"IHDR", header), _png_chunk(b"pHYs", density),
                     _png_chunk(b"IDAT", zlib.compress(memoryview(filtered), ZLIB_LEVEL)), _png_chunk(b"IEND", b"")))


_XRGB_FORMATS = (QImage.Format.Format_RGB32, QImage.Format.Format_ARGB32, QImage.Format.Format_ARGB32_Premultiplied)
# where red, green and blue sit in the bytes of a 0xAARRGGBB pixel, as this machine stores the word
_RGB_BYTES_OF_XRGB = (2, 1, 0) if sys.byteorder == "little" else (1, 2, 3)


def _copy_rgb(image: QImage, rgb: np.ndarray) -> None:  # image H × W -> rgb [H, W, 3] filled in place
    """The image's red, green and blue bytes into `rgb`, alpha dropped (the image is opaque)."""
    height, width = rgb.shape[:2]
    if image.format() == QImage.Format.Format_RGB888:
        rgb[...] = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())[:, : width * 3].reshape(height, width, 3)
        return
    if image.format() not in _XRGB_FORMATS:
        image = image.convertToFormat(QImage.Format.Format_RGB32)
    words = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())
    pixels = words[:, : width * 4].reshape(height, width, 4)
    for channel, byte in enumerate(_RGB_BYTES_OF_XRGB):   # one strided copy a channel: GIL released
        rgb[:, :, channel] = pixels[:, :, byte]


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def enlarged_png_bytes(pixels: np.ndarray, times_w: int, times_h: int) -> bytes:  # [H, W, C] -> PNG H*th × W*tw
    """Each pixel as a times_w × times_h block (nearest neighbour): an embedded heatmap no renderer can blur.

    A heatmap has few colours (its colour map's), so it is written with a palette when it can be: one
    byte a pixel. Only the first row of each block is written out; the rows below repeat it, which the
    "Up" filter turns into zeros that deflate passes over quickly.
    """
    height, width, channels = pixels.shape
    colours, indexes = np.unique(pixels.reshape(-1, channels), axis=0, return_inverse=True)
    chunks = []
    if len(colours) <= 256:
        samples = indexes.reshape(height, width, 1).astype(np.uint8)
        header = struct.pack(">IIBBBBB", width * times_w, height * times_h, 8, 3, 0, 0, 0)   # 8-bit palette
        chunks.append(_png_chunk(b"PLTE", colours[:, :3].tobytes()))
        if channels == 4:
            chunks.append(_png_chunk(b"tRNS", colours[:, 3].tobytes()))
    else:
        samples = np.ascontiguousarray(pixels)
        header = struct.pack(">IIBBBBB", width * times_w, height * times_h, 8, 6 if channels == 4 else 2, 0, 0, 0)
    first_rows = np.repeat(samples, times_w, axis=1).reshape(height, -1)
    filtered = np.zeros((height, times_h, 1 + first_rows.shape[1]), np.uint8)
    filtered[:, 1:, 0] = 2                              # filter type Up: every row below the first repeats it
    filtered[:, 0, 1:] = first_rows                     # the first row of each block: filter None
    return b"".join((b"\x89PNG\r\n\x1a\n", _png_chunk(b"IHDR", header), *chunks,
                     _png_chunk(b"IDAT", zlib.compress(filtered.tobytes(), 1)), _png_chunk(b"IEND", b"")))
