"""core/ is pure: it never imports Qt or pyqtgraph, and a bundle runs without a display."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUI_MODULES = ("PySide6", "pyqtgraph", "PyQt5", "PyQt6", "shiboken6", "gui")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_core_module_imports_qt_or_the_gui():
    offenders = {str(p.relative_to(ROOT)): sorted(imported_modules(p) & set(GUI_MODULES))
                 for p in (ROOT / "core").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_running_the_shipped_model_loads_no_qt():
    code = ("import sys; from core.bundle import load_bundle; from core.runners import OnnxRunner; "
            "from core.session import analyse; analyse(OnnxRunner(load_bundle()), '订单成交'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
