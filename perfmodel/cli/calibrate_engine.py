"""`perfmodel calibrate engine RUN.json`: fit an engine's overheads to a bench-endpoint run.

perfmodel/cli/calibrate.py adds it under `perfmodel calibrate` with add_engine_parser(sub);
`python -m perfmodel.cli.calibrate_engine RUN.json ...` runs it on its own.
The fit itself is perfmodel/analysis/endpoint/fit.py; this module only parses and formats.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from perfmodel.cli.common import check_out_path, print_json, print_table
from perfmodel.analysis.endpoint.fit import engine_profile, fit_engine, fit_target, load_run
from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.profile import load_profile, save_profile
from perfmodel.core.units import ms

EPILOG = """\
The run is a `perfmodel bench-endpoint --out` file. Each level is modelled as a batch of
min(concurrency, requests) sequences with the level's mean prompt and output length, and
cpu_overhead_per_step_s and per_request_overhead_s (with --fit-launch also launch_s) are
chosen so that the predicted TPOT p50 and TTFT p50 match the measured ones in log least squares.
Ids default to the run's --predict block, then its record (model, framework).
"""


def add_engine_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `engine` to the `perfmodel calibrate` subcommands."""
    p = sub.add_parser("engine", help="fit an engine preset's overheads to a bench-endpoint run",
                       description=__doc__.splitlines()[0], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="JSON written by perfmodel bench-endpoint --out")
    p.add_argument("--model", help="catalog model id (default: the run's predict.model, then record.model)")
    p.add_argument("--gpu", help="hardware id or YAML path (default: the run's predict.gpu)")
    p.add_argument("--engine", help="engine preset id (default: predict.engine, then record.framework)")
    p.add_argument("--weights", help="weight precision id (default: predict.weights, else bf16)")
    p.add_argument("--kv", help="KV-cache precision id")
    p.add_argument("--profile", type=Path,
                   help="base profile: its efficiencies are used for the predictions and kept in --out")
    p.add_argument("--fit-launch", action="store_true",
                   help="also fit launch_s (host cost per kernel; for eager engines)")
    p.add_argument("--out", type=Path, help="write the profile (YAML) here, atomically")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")
    p.set_defaults(func=run_engine)
    return p


def run_engine(args: argparse.Namespace) -> int:
    run = load_run(args.run)
    target = fit_target(run, model=args.model, gpu=args.gpu, engine=args.engine,
                        weights=args.weights, kv=args.kv)
    base = load_profile(args.profile) if args.profile is not None else None
    if args.out is not None and not args.out.parent.is_dir():
        raise PerfModelError(f"--out directory {str(args.out.parent)!r} does not exist")
    check_out_path(args.out, "--out")
    fit = fit_engine(run, target, profile=base, fit_launch=args.fit_launch)
    if args.out is not None:
        save_profile(engine_profile(fit, base=base, source=str(args.run)), args.out)
    if args.json:
        print_json(fit)
        return 0
    t = fit.target
    print(f"{t.model} on {fit.gpu_id}, engine {t.engine}, weights {t.weights}; "
          f"ids from {', '.join(f'{k}={v}' for k, v in t.sources.items())}")
    print_table([{"conc": lv.concurrency, "batch": lv.batch, "prompt": lv.prompt_tokens,
                  "output": lv.output_tokens,
                  "ttft_p50_ms": ms(lv.ttft_p50_s) if lv.ttft_p50_s is not None else "-",
                  "ttft_before_ms": ms(lv.ttft_before_s), "ttft_after_ms": ms(lv.ttft_after_s),
                  "tpot_p50_ms": ms(lv.tpot_p50_s) if lv.tpot_p50_s is not None else "-",
                  "tpot_before_ms": ms(lv.tpot_before_s), "tpot_after_ms": ms(lv.tpot_after_s)}
                 for lv in fit.levels])
    for name, value in fit.params.items():
        print(f"{name}: {value:.4g} s (preset {fit.preset[name]:.4g} s)")
    print(f"RMS log error over {fit.points} p50s: {fit.error_before['rms_log']:.3f} -> "
          f"{fit.error_after['rms_log']:.3f}; max |error| {fit.error_before['max_abs_rel']:.0%} -> "
          f"{fit.error_after['max_abs_rel']:.0%}")
    for w in fit.warnings:
        print(f"warning: {w}")
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry: one-line errors and exit 2, as `perfmodel` gives."""
    from perfmodel.cli import _Parser

    parser = _Parser(prog="perfmodel calibrate")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_engine_parser(sub)
    try:
        args = parser.parse_args(["engine", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return int(args.func(args) or 0)
    except ValidationError as exc:
        sys.stderr.write(f"perfmodel calibrate engine: error: {pydantic_message(exc)}\n")
    except (PerfModelError, OSError) as exc:
        sys.stderr.write(f"perfmodel calibrate engine: error: {exc}\n")
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
