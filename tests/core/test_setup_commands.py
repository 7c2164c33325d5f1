"""The README's two set-up commands stay true: CI runs command 2 as written, and no dependency is open-ended."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    setup = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("## Set up", 1)[1]
    block = setup.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_has_exactly_two_setup_commands() -> None:
    install_and_run, install_and_test = readme_commands()
    assert install_and_run == "pip install -e . && python main.py"
    assert install_and_test == "pip install -e '.[test]' && python -m pytest"


def test_ci_runs_the_readmes_test_command_in_a_fresh_venv() -> None:
    ci = ROOT.joinpath(".ci", "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci.splitlines()
    assert 'python3 -m venv "$venv"' in ci and "mktemp -d" in ci


def test_every_dependency_has_an_upper_bound() -> None:
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    open_ended = [r for r in requirements if not re.search(r"(<|==)", r)]
    assert open_ended == []


def test_readme_says_how_many_workers_the_tests_run_in_and_how_to_run_them_in_one() -> None:
    pyproject = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text(encoding="utf-8"))
    addopts = pyproject["tool"]["pytest"]["ini_options"]["addopts"].split()
    workers = addopts[addopts.index("-n") + 1]
    assert any(r.startswith("pytest-xdist") for r in pyproject["project"]["optional-dependencies"]["test"])
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    assert f"`-n {workers}`" in readme and "`python -m pytest -n 0`" in readme


def apt_packages(text: str) -> set[str]:
    """The Debian packages named by the `apt-get install` commands in text (continuation lines included)."""
    joined = text.replace("\\\n", " ")
    commands = re.findall(r"apt-get install ([^\n>]*)", joined)
    return {word for command in commands for word in command.split() if not word.startswith("-")}


def test_the_readme_names_every_debian_package_ci_installs() -> None:
    """A newcomer following the README gets what CI has (the vector tests fail without rsvg-convert)."""
    setup = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("## Set up", 1)[1].split("\n## ", 1)[0]
    ci = ROOT.joinpath(".ci", "run").read_text(encoding="utf-8")
    assert {"poppler-utils", "librsvg2-bin"} <= apt_packages(ci)
    assert apt_packages(ci) - apt_packages(setup) == set()
