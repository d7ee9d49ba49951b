"""`perfmodel ...`: argument parsing and formatting only. Every number comes from the model.

Each command lives in its own module with `register(subparsers)`; errors a user can cause
(PerfModelError, pydantic validation) become one line on stderr and exit code 2. Only the module
of the command being run is imported: the others are listed by name and help (HELP), enough for
`perfmodel --help` and a usage error, so start-up does not pay for every command's imports.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# command modules and the commands each registers, in the order `perfmodel --help` lists them
REGISTRY = {"catalog": ("models", "gpus"), "memory": ("memory",), "predict": ("predict",),
            "sweep": ("sweep",), "serve": ("serve",), "spec": ("spec",), "size": ("size",),
            "claim": ("claim", "attribute"), "validate": ("validate",),
            "calibrate": ("calibrate",), "endpoint": ("bench-endpoint",),
            "serve_disagg": ("serve-disagg",)}
COMMANDS = list(REGISTRY)

HELP = {
    "models": "list the built-in model architectures",
    "gpus": "list the accelerators in the hardware database",
    "memory": "weights, KV cache, activations, fits, max batch/context",
    "predict": "request latency and throughput of one configuration",
    "sweep": "evaluate the cross product of lists (CSV or JSON)",
    "serve": "simulate a serving benchmark on the engine's scheduler "
             "(TTFT/TPOT/ITL percentiles, throughput, goodput)",
    "spec": "speculative decoding: speed-up vs plain decoding at a batch",
    "size": "cheapest GPU deployments for a request rate and latency targets",
    "claim": "check a claimed speed-up, or run a seed document preset",
    "attribute": "split the ratio between two scenarios over levers",
    "validate": "accuracy against published and own measurements",
    "calibrate": "benchmark this machine and fit a calibrated profile",
    "bench-endpoint": "load-test a live OpenAI-compatible server (seed 003's recipe)",
    "serve-disagg": "simulate disaggregated prefill/decode serving "
                    "(TTFT/TPOT percentiles per concurrency)",
}
"""Each command's one-line help: the modules register with it, and it lists a command whose
module is not imported."""


class _Unloaded(Exception):
    """A command listed by name only was chosen after all: build the whole parser."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def __init__(self, *args, listed_only: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._listed_only = listed_only

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {one_line(message)}\n")
        raise SystemExit(2)

    def parse_known_args(self, args=None, namespace=None):
        if self._listed_only:  # never reached when build_parser read argv's command right
            raise _Unloaded
        return super().parse_known_args(args, namespace)


def one_line(message: str) -> str:
    """The message on one line: line breaks and other control or separator characters (a
    file name may hold any of them) are written as escapes, e.g. \\n, \\x0c, \\u2028."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
                   for c in message)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given argv, only the module of the command argv names registers its
    arguments and every other command is listed by name and help. The command is the first
    argument not starting with '-': the top level has no option taking a value, and a dash
    argument argparse reads as the command ('-5', '--') names none. A listed-only command
    entered anyway raises _Unloaded, and main builds the whole parser."""
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    parser = _Parser(prog="perfmodel", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module, names in REGISTRY.items():
        if chosen is None or chosen in names:
            importlib.import_module(f"perfmodel.cli.{module}").register(sub)
        else:
            for name in names:
                sub.add_parser(name, help=HELP[name], listed_only=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            args = build_parser(argv).parse_args(argv)
        except _Unloaded:
            args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2) and --help (exit 0)
        return int(exc.code or 0)
    # imported by every command's module already: here they cost nothing, and `--help` or a
    # usage error never pays for them
    import numpy as np
    from pydantic import ValidationError

    from perfmodel.core.errors import PerfModelError, pydantic_message
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
