"""`perfmodel ...`: argument parsing and formatting only. Every number comes from the model.

Each command lives in its own module with `register(subparsers)`; errors a user can cause
(PerfModelError, pydantic validation) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np
from pydantic import ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message

# command modules, in the order `perfmodel --help` lists them
COMMANDS = ["catalog", "memory", "predict", "sweep", "serve", "spec", "size", "claim", "validate",
            "calibrate", "endpoint", "serve_disagg"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {one_line(message)}\n")
        raise SystemExit(2)


def one_line(message: str) -> str:
    """The message on one line: line breaks and other control or separator characters (a
    file name may hold any of them) are written as escapes, e.g. \\n, \\x0c, \\u2028."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
                   for c in message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfmodel", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"perfmodel.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2) and --help (exit 0)
        return int(exc.code or 0)
    try:
        with np.errstate(all="ignore"):  # results are checked (errors.require_finite), not warned
            return int(args.func(args) or 0)
    except ValidationError as exc:
        sys.stderr.write(f"perfmodel {args.command}: error: {one_line(pydantic_message(exc))}\n")
    except PerfModelError as exc:
        sys.stderr.write(f"perfmodel {args.command}: error: {one_line(str(exc))}\n")
    except BrokenPipeError:  # e.g. `perfmodel models | head`: the reader left, nothing to say
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (OSError, KeyboardInterrupt) as exc:
        sys.stderr.write(f"perfmodel {args.command}: error: {one_line(str(exc)) or 'interrupted'}\n")
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
