"""gui/platform_check.py: say which system packages Qt's X11 plugin lacks before Qt aborts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gui.platform_check import NO_DISPLAY, XCB_LIBRARIES, display_problem, missing_xcb_packages

ROOT = Path(__file__).resolve().parents[2]
ICCCM_MISSING = "libxcb-icccm.so.4: cannot open shared object file: No such file or directory"


def loader_without(*missing: str):
    return lambda soname: soname not in missing


def test_names_exactly_the_packages_whose_libraries_do_not_load() -> None:
    load = loader_without("libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    assert missing_xcb_packages(load) == ["libxcb-icccm4", "libxcb-keysyms1"]
    problem = display_problem({"DISPLAY": ":0"}, load=load, plugin_error=lambda: ICCCM_MISSING, system="linux")
    assert problem.endswith("sudo apt-get install libxcb-icccm4 libxcb-keysyms1")
    assert "cursor" not in problem  # Qt's own message would point at libxcb-cursor0


def test_every_known_library_maps_to_one_package() -> None:
    assert missing_xcb_packages(lambda _: False) == sorted(set(XCB_LIBRARIES.values()))
    assert missing_xcb_packages(lambda _: True) == []


def test_a_plugin_that_loads_is_no_problem_whatever_the_list_says() -> None:
    assert display_problem({"DISPLAY": ":0"}, load=lambda _: False, plugin_error=lambda: None, system="linux") is None


def test_an_unknown_cause_is_reported_in_the_loaders_words() -> None:
    problem = display_problem({"DISPLAY": ":0"}, load=lambda _: True,
                              plugin_error=lambda: "libfoo.so.9: cannot open shared object file", system="linux")
    assert problem == "Qt's X11 plugin cannot load: libfoo.so.9: cannot open shared object file"


def test_other_platforms_and_wayland_skip_the_xcb_check() -> None:
    broken = dict(load=lambda _: False, plugin_error=lambda: ICCCM_MISSING)
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, system="linux", **broken) is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, system="linux", **broken) is None
    assert display_problem({"DISPLAY": ":0"}, system="darwin", **broken) is None
    assert display_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w"}, system="linux", **broken) is not None


def test_no_display_at_all_says_how_to_run_headless() -> None:
    assert display_problem({}, load=lambda _: True, plugin_error=lambda: None, system="linux") == NO_DISPLAY
    # a window on a virtual screen the user can see and close, not an offscreen window that never exits
    assert "xvfb-run python main.py" in NO_DISPLAY and "main.py export" in NO_DISPLAY
    assert "offscreen" not in NO_DISPLAY


def test_the_app_prints_one_line_and_exits_2_without_a_display() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([sys.executable, str(ROOT / "main.py")], env=env, capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stderr.strip() == f"glassbox: error: {NO_DISPLAY}"
