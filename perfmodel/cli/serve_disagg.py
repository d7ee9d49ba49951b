"""`perfmodel serve-disagg`: simulate disaggregated serving (P prefill workers, D decode workers,
the KV cache moved between them) and print the percentiles `serve` prints.

`add_disagg_args(parser)` and `run_disagg(args)` also serve `perfmodel serve --disagg`, which adds
the pool flags and dispatches here when --disagg is set; `serve-disagg` is kept as an alias."""

from __future__ import annotations

import argparse
import math

from perfmodel.cli import HELP
from perfmodel.cli.common import int_list, lower_id, positive_float, positive_int, print_json, print_table
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import ms

# the model (perfmodel.api and what it imports) is imported by run: `--help` and a usage error
# do not pay for it


def _rates(text: str) -> list[float]:
    vals = [positive_float(t) for t in text.split(",") if t.strip()]
    if not vals:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
    return vals


POOL_DEFAULTS = {**{f"{role}_{k}": v for role in ("prefill", "decode")
                    for k, v in (("workers", None), ("tp", 1), ("pp", 1), ("ep", 1), ("dp", 1),
                                 ("max_batch", None))},
                 "layerwise_transfer": False}
"""The pool flags' defaults (add_disagg_args): `serve` without --disagg refuses a flag set
away from them, which it would otherwise ignore."""


def pool_flags_given(args) -> list[str]:
    """The pool flags set away from their defaults, as typed (--prefill-tp, ...)."""
    return ["--" + k.replace("_", "-") for k, v in POOL_DEFAULTS.items()
            if getattr(args, k, v) != v]


def add_disagg_args(p) -> None:
    """The pool flags: --prefill-workers/-tp/-pp/-ep/-dp and --decode-..., --layerwise-transfer."""
    for role in ("prefill", "decode"):
        p.add_argument(f"--{role}-workers", type=positive_int,
                       default=POOL_DEFAULTS[f"{role}_workers"],
                       help=f"{role} workers (engine instances)")
        p.add_argument(f"--{role}-tp", type=positive_int, default=1, help=f"TP of one {role} worker")
        p.add_argument(f"--{role}-pp", type=positive_int, default=1, help=f"PP of one {role} worker")
        p.add_argument(f"--{role}-ep", type=positive_int, default=1, help=f"EP of one {role} worker")
        p.add_argument(f"--{role}-dp", type=positive_int, default=1,
                       help=f"attention DP of one {role} worker")
        p.add_argument(f"--{role}-max-batch", type=positive_int, default=None,
                       help=f"requests one {role} worker runs at once, over its DP ranks "
                            "(engine max_batch_size; default: the engine preset's limit)")
    p.add_argument("--layerwise-transfer", action="store_true",
                   help="KV sent layer by layer during prefill (Mooncake); default: after it")


def register(sub) -> None:
    p = sub.add_parser("serve-disagg", help=HELP["serve-disagg"])
    p.add_argument("--model", required=True, help="catalog id, HF repo id, or path to config.json")
    p.add_argument("--gpu", required=True, help="hardware_db id or a YAML path")
    p.add_argument("--weights", default="bf16", help="fp32, bf16, fp16, fp8, int8, int4[-gN], fp4")
    p.add_argument("--kv", default=None, help="KV-cache precision (default bf16)")
    p.add_argument("--engine", default="vllm", choices=sorted(ENGINES), type=lower_id)
    p.add_argument("--hardware-dir", default=None, help="extra folder of hardware YAML files")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--profile", default=None, help="calibrated profile YAML")
    p.add_argument("--prompt", type=positive_int, default=None, help="input tokens per request")
    p.add_argument("--output", type=positive_int, default=None, help="output tokens per request")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int_list, help="closed loop: requests in flight")
    load.add_argument("--rate", type=_rates, help="open loop: requests per second")
    load.add_argument("--trace", help="CSV with columns arrival_s,prompt_tokens,output_tokens")
    p.add_argument("--requests", type=positive_int, default=None, help="requests per level")
    p.add_argument("--seed", type=int, default=0)
    add_disagg_args(p)
    p.set_defaults(func=run_disagg)


def _arg(args, *names):
    """The first of `names` the namespace has (serve-disagg and serve --disagg spell some
    flags differently: --prompt / --prompt-tokens, --rate / --rate-rps, --requests /
    --num-requests)."""
    return next((getattr(args, n) for n in names if hasattr(args, n)), None)


def run_disagg(args) -> int:
    if args.prefill_workers is None or args.decode_workers is None:
        raise PerfModelError("--prefill-workers and --decode-workers are required")
    prompt, output = _arg(args, "prompt", "prompt_tokens"), _arg(args, "output", "output_tokens")
    if args.trace is None and (prompt is None or output is None):
        raise PerfModelError("prompt and output lengths are required without --trace")
    for flag in ("max_num_seqs", "max_num_batched_tokens"):
        if getattr(args, flag, None) is not None:
            raise PerfModelError(f"--{flag.replace('_', '-')} is not modelled with --disagg")
    pools = {role: dict(workers=getattr(args, f"{role}_workers"), tp=getattr(args, f"{role}_tp"),
                        pp=getattr(args, f"{role}_pp"), ep=getattr(args, f"{role}_ep"),
                        dp=getattr(args, f"{role}_dp"),
                        max_batch=getattr(args, f"{role}_max_batch"))
             for role in ("prefill", "decode")}
    extra = {k: getattr(args, k) for k in ("activations", "range_ratio", "prefix_hit",
                                           "burstiness", "ttft_slo_s", "tpot_slo_s")
             if getattr(args, k, None) is not None}
    from perfmodel import api
    r = api.serve_disagg(args.model, args.gpu, prefill=pools["prefill"], decode=pools["decode"],
                         weights=args.weights, kv=args.kv, engine=args.engine,
                         profile=args.profile, prompt_tokens=prompt, output_tokens=output,
                         concurrencies=args.concurrency, rate_rps=_arg(args, "rate", "rate_rps"),
                         trace=args.trace, num_requests=_arg(args, "requests", "num_requests"),
                         layerwise_transfer=args.layerwise_transfer,
                         seed=max(args.seed or 0, 0), hardware_dir=args.hardware_dir, **extra)
    if args.json:
        print_json(r)
        return 0
    lay = {k: f"{v.workers} x (tp{v.tp} pp{v.pp} ep{v.ep} dp{v.dp})"
           for k, v in (("prefill", r.prefill), ("decode", r.decode))}
    print(f"{r.model} on {r.num_gpus} x {r.gpu}, {r.engine}, {r.precision}; prefill "
          f"{lay['prefill']}, decode {lay['decode']}; KV over {r.kv_link}")
    print_table([_row(p) for p in r.points])
    for p in r.points:
        if not p.fits:
            print(f"level {p.concurrency or p.rate_rps}: {p.reason}")
    for w in r.warnings:
        print(f"warning: {w}")
    for a in r.assumptions:
        print(f"assumed: {a}")
    return 0


def _row(p) -> dict:
    def opt(x, f=ms):
        return "-" if x is None or not math.isfinite(x) else f(x)
    row = {"conc": p.concurrency} if p.concurrency is not None else \
        {"rate/s": "trace" if p.rate_rps is None else p.rate_rps}   # a trace: its own arrivals
    row.update({"n": p.num_requests, "fits": p.fits, "TTFT p50 ms": opt(p.ttft_p50_s),
                "TTFT p90": opt(p.ttft_p90_s), "TPOT p50 ms": opt(p.tpot_p50_s),
                "TPOT p90": opt(p.tpot_p90_s), "out tok/s": opt(p.output_tok_s_total, float),
                "req/s": opt(p.request_rate_rps, float), "preempt": p.preemptions})
    return row
