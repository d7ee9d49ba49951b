"""The CLI builds its parser from the chosen command's module only (cli/__init__.py): the
listing every other command gets (cli.HELP) must print what the modules themselves register,
and a fresh `perfmodel --help` must not import the commands, numpy or the model."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.cli import HELP, REGISTRY, _Unloaded, build_parser

ROOT = Path(__file__).resolve().parent.parent
FULL = build_parser()


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_registry_names_every_command_the_modules_register_in_order():
    assert list(commands(FULL)) == [n for names in REGISTRY.values() for n in names]
    assert set(HELP) == set(commands(FULL))


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h", "size"], ["nope"], ["models"],
                                  ["size", "--help"], ["claim"]])
def test_listing_matches_the_whole_parser(argv):
    assert build_parser(argv).format_help() == FULL.format_help()


@pytest.mark.parametrize("name", list(HELP))
def test_chosen_command_gets_its_own_module_arguments(name):
    lazy = commands(build_parser([name]))[name]
    assert lazy.format_help() == commands(FULL)[name].format_help()
    assert lazy.get_default("func") is commands(FULL)[name].get_default("func")
    assert not lazy._listed_only


def test_a_command_listed_only_falls_back_rather_than_parse():
    parser = build_parser(["models"])          # size is listed, not loaded
    with pytest.raises(_Unloaded):
        parser.parse_args(["size", "--help"])


def _imported_after(argv: list[str]) -> list[str]:
    code = ("import contextlib, io, json, sys\nfrom perfmodel.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    main({argv!r})\n"
            "print(json.dumps(sorted(sys.modules)))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=True).stdout
    return json.loads(out)


def test_top_level_help_imports_no_command_and_no_numpy():
    mods = _imported_after(["--help"])
    assert [m for m in mods if m.startswith("perfmodel.") and m != "perfmodel.cli"] == []
    assert "numpy" not in mods and "pydantic" not in mods


def test_size_help_imports_size_but_not_the_search_or_other_commands():
    mods = _imported_after(["size", "--help"])
    assert "perfmodel.cli.size" in mods
    assert not {"perfmodel.analysis.sizing", "perfmodel.api", "perfmodel.cli.serve",
                "perfmodel.cli.validate", "perfmodel.cli.endpoint", "httpx"} & set(mods)
