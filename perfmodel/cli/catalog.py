"""Catalog commands: `perfmodel models` lists the model catalog, `perfmodel gpus` the
accelerator database.

Each command registers itself with one small `_register_*` function; `register` calls
those that exist. Formatting only: every number comes from the loaded specs.
"""

from __future__ import annotations

import argparse
from typing import Any

from perfmodel.cli import HELP
from perfmodel.core import units
from perfmodel.cli.common import print_json, print_table
from perfmodel.core.hardware import list_gpus, load_gpu
from perfmodel.core.specs import HardwareSpec

MISSING = "-"


def register(sub: argparse._SubParsersAction) -> None:
    _register_models(sub)
    _register_gpus(sub)


# --------------------------------------------------------------------------- models


def _register_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help=HELP["models"],
                       description="List the built-in model catalog: shapes, attention kind, "
                                   "MoE experts, total and active parameters (params.py), context.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    from perfmodel.core.catalog import list_models
    from perfmodel.core.params import count_params

    rows = []
    for m in list_models():
        params = count_params(m)
        rows.append({
            "id": m.id, "name": m.name, "hf_repo": m.hf_repo,
            "layers": m.num_layers, "d_model": m.d_model,
            "heads": m.num_heads, "kv_heads": m.num_kv_heads,
            "attention": m.attention_kind,
            "experts": m.moe.num_experts if m.moe else None,
            "experts_per_token": m.moe.experts_per_token if m.moe else None,
            "sliding_window": m.sliding_window, "sliding_window_layers": m.sliding_window_layers,
            "linear_attention_layers": m.num_linear_attention_layers,
            "sparse_attention_topk": m.sparse_attention.index_topk if m.sparse_attention else None,
            "total_params": params.total, "active_params": params.active,
            "max_context": m.max_context,
        })
    if args.json:
        print_json({"models": rows})
    else:
        print_table([_model_row(r) for r in rows])
    return 0


def _model_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": r["id"], "name": r["name"], "layers": r["layers"], "d_model": r["d_model"],
        "heads/kv": f"{r['heads']}/{r['kv_heads']}",
        "attn": r["attention"] + (f"+swa{r['sliding_window']}" if r["sliding_window"] else "")
        + (f"+dsa{r['sparse_attention_topk']}" if r["sparse_attention_topk"] else "")
        + (f"+linear{r['linear_attention_layers']}" if r["linear_attention_layers"] else ""),
        "moe E/k": f"{r['experts']}/{r['experts_per_token']}" if r["experts"] else MISSING,
        "total": f"{r['total_params'] / units.GIGA:.2f}B",
        "active": f"{r['active_params'] / units.GIGA:.2f}B",
        "max ctx": r["max_context"],
    }


# --------------------------------------------------------------------------- gpus


def _register_gpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpus", help=HELP["gpus"],
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
        "mem GiB": _num(units.gib(g.memory_bytes), ".0f"),
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
