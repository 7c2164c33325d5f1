"""main.build_parser imports the modules declaring subcommands (main.LAZY_COMMANDS) only for arguments that
may run one of them; every command parses as with the whole parser, and help lists every command."""
from __future__ import annotations

import sys

import pytest

import main

COMMAND_LINES = [
    [],
    ["--text", "the cat"],
    ["readouts", "--text", "x", "--out", "o"],
    ["patch", "--clean", "a", "--corrupt", "b", "--out", "o"],
    ["occlude", "--text", "x", "--out", "o", "--model", "m"],
    ["trace", "--text", "x", "--out", "o", "--ablate-heads", "0.1"],
    ["--model", "m", "export", "--text", "x", "--out", "o"],
]


@pytest.fixture()
def not_imported(monkeypatch) -> None:
    """The lazy commands' modules out of sys.modules for the test (put back after): any import shows."""
    for name in main.LAZY_COMMANDS:
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("argv", [[], ["--text", "the cat", "--model", "m"], ["export", "--text", "x", "--out", "o"]])
def test_arguments_that_run_no_lazy_command_import_none_of_their_modules(not_imported, argv):
    main.build_parser(argv)
    assert not set(sys.modules) & set(main.LAZY_COMMANDS)


@pytest.mark.parametrize("argv, module", [
    (["readouts", "--text", "x", "--out", "o"], "core.readouts"),
    (["patch", "--clean", "a", "--corrupt", "b", "--out", "o"], "core.experiment_commands"),
    (["trace", "--text", "x", "--out", "o"], "core.experiment_commands"),   # its intervention flags
])
def test_a_lazy_command_imports_its_module(not_imported, argv, module):
    main.build_parser(argv)
    assert module in sys.modules


@pytest.mark.parametrize("argv", COMMAND_LINES)
def test_every_command_parses_as_with_the_whole_parser(argv):
    assert main.build_parser(argv).parse_args(argv) == main.build_parser().parse_args(argv)


@pytest.mark.parametrize("flag", ["-h", "--help", "--he"])
def test_help_lists_every_command_with_its_help(capsys, flag):
    with pytest.raises(SystemExit):
        main.build_parser([flag]).parse_args([flag])
    listing = capsys.readouterr().out
    for command in ("readouts", "patch", "occlude", "trace", "bench"):
        assert f"    {command} " in listing
    assert "activation patching" in listing   # core.experiment_commands' own help for patch


def test_an_unknown_command_is_told_every_command(capsys):
    with pytest.raises(SystemExit):
        main.build_parser(["raedouts"]).parse_args(["raedouts"])
    message = capsys.readouterr().err
    assert "invalid choice: 'raedouts'" in message and "'readouts'" in message and "'occlude'" in message
    assert len(message.strip().splitlines()) == 1   # one line, not argparse's usage block


@pytest.mark.parametrize("args, told", [(["export", "--theme", "blue"], "choose from 'light', 'dark'"),
                                        (["export", "--layer", "x"], "--layer: invalid int value: 'x'")])
def test_a_bad_option_value_gets_one_line(capsys, args, told):
    with pytest.raises(SystemExit) as exit_info:
        main.build_parser(args).parse_args(args)
    message = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(message.splitlines()) == 1 and told in message
    assert message.startswith("glassbox export: error:") and "--help" in message
