"""Catalog commands: `perfmodel gpus` lists the accelerator database.

Each command registers itself with one small `_register_*` function; `register` calls
those that exist. Formatting only: every number comes from the loaded specs.
"""

from __future__ import annotations

import argparse
from typing import Any

from perfmodel import units
from perfmodel.cli.common import print_json, print_table
from perfmodel.hardware import list_gpus, load_gpu
from perfmodel.specs import HardwareSpec

MISSING = "-"


def register(sub: argparse._SubParsersAction) -> None:
    _register_gpus(sub)


# --------------------------------------------------------------------------- gpus


def _register_gpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpus", help="list the accelerators in the hardware database",
        description="List accelerators: dense datasheet peaks, memory, bandwidth, power, "
                    "price. Cards in --hardware-dir or $PERFMODEL_HARDWARE_DIR override "
                    "built-in cards with the same id.")
    p.add_argument("ids", nargs="*", metavar="ID",
                   help="show only these cards (exact ids or paths to .yaml files)")
    p.add_argument("--hardware-dir", metavar="DIR",
                   help="extra directory of hardware YAML files, searched first")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list of the full specs instead of a table")
    p.set_defaults(func=_run_gpus)


def _run_gpus(args: argparse.Namespace) -> int:
    if args.ids:
        gpus = [load_gpu(i, args.hardware_dir) for i in args.ids]
    else:
        gpus = list_gpus(args.hardware_dir)
    if args.json:
        print_json(gpus)
    else:
        print_table([_gpu_row(g) for g in gpus])
    return 0


def _gpu_row(g: HardwareSpec) -> dict[str, Any]:
    return {
        "id": g.id,
        "name": g.name,
        "mem GB": _num(units.gb(g.memory_bytes), ".0f"),
        "BW TB/s": _num(g.memory_bandwidth_bytes_per_s / units.TB, ".2f"),
        "bf16 TFLOPS": _peak(g, "bf16"),
        "fp8 TFLOPS": _peak(g, "fp8"),
        "TDP W": _num(g.tdp_w, ".0f"),
        "$/h": _num(g.price.usd_per_hour if g.price else None, ".2f"),
    }


def _peak(g: HardwareSpec, dtype: str) -> str:
    flops = g.peak_flops_per_s.get(dtype)  # type: ignore[call-overload]
    return _num(units.tflops(flops) if flops else None, ".0f")


def _num(value: float | None, fmt: str) -> str:
    return MISSING if value is None else format(value, fmt)
