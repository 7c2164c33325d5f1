"""Before Qt starts: can it open a window here? If not, say how to fix it in one line.

Qt aborts the process when its platform plugin cannot load, and for the X11 ("xcb") plugin its
message names only libxcb-cursor0, even when another library is what is missing. This module
imports no Qt: it looks at the environment and tries to load the X11 libraries the plugin links
against, so the user gets the exact `apt-get install` line instead.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Mapping

# The shared libraries Qt 6's xcb platform plugin (libQt6XcbQpa) links against, with the Debian/Ubuntu
# package that ships each (read off `ldd libQt6XcbQpa.so.6` for PySide6 6.11).
XCB_LIBRARIES: dict[str, str] = {
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}

NO_DISPLAY = ("no display to open a window on (neither DISPLAY nor WAYLAND_DISPLAY is set); "
              "on a machine without a screen, run the window on a virtual one with `xvfb-run python main.py` "
              "(Debian package xvfb), or write figures with `python main.py export`")


def can_load(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def xcb_plugin_error() -> str | None:
    """Load Qt's own xcb library the way the plugin will; the loader's message if that fails, else None."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None  # no PySide6 here: the import that follows reports that itself
    library = Path(next(iter(spec.submodule_search_locations))) / "Qt" / "lib" / "libQt6XcbQpa.so.6"
    if not library.exists():
        return None
    try:
        ctypes.CDLL(str(library))
    except OSError as exc:
        return str(exc)
    return None


def missing_xcb_packages(load: Callable[[str], bool] = can_load) -> list[str]:
    """The Debian packages whose libraries the xcb plugin needs but cannot load, sorted."""
    return sorted({package for soname, package in XCB_LIBRARIES.items() if not load(soname)})


def will_use_xcb(env: Mapping[str, str]) -> bool:
    """True when Qt on Linux will pick its X11 plugin: asked for, or the default outside Wayland."""
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if platform:
        return platform == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def display_problem(env: Mapping[str, str] | None = None, load: Callable[[str], bool] = can_load,
                    plugin_error: Callable[[], str | None] = xcb_plugin_error,
                    system: str = sys.platform) -> str | None:
    """One line saying why Qt would fail to open a window here, or None when it should work."""
    env = os.environ if env is None else env
    if not system.startswith("linux"):
        return None
    if not env.get("QT_QPA_PLATFORM") and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return NO_DISPLAY
    if not will_use_xcb(env):
        return None
    error = plugin_error()
    if error is None:
        return None
    missing = missing_xcb_packages(load)
    if not missing:  # something outside the known list: the loader's own words are the best clue
        return f"Qt's X11 plugin cannot load: {error}"
    return (f"Qt's X11 plugin cannot load {len(missing)} system "
            f"librar{'y' if len(missing) == 1 else 'ies'}; install with: "
            f"sudo apt-get install {' '.join(missing)}")
