"""`perfmodel serve`: simulate a serving benchmark (closed loop, open loop or a trace) on the
engine's scheduler and print the percentiles bench-endpoint measures."""

from __future__ import annotations

import argparse
import math

from perfmodel import api
from perfmodel.cli.common import int_list, positive_float, positive_int, print_json, print_table
from perfmodel.cli.memory import add_target_args
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import ms


def float_list(text: str) -> list[float]:
    vals = [positive_float(t) for t in text.split(",") if t.strip()]
    if not vals:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
    return vals


def fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1)")
    return v


def ratio(text: str) -> float:
    v = positive_float(text)
    if v > 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return v


def register(sub) -> None:
    p = sub.add_parser("serve", help="simulate a serving benchmark on the engine's scheduler "
                       "(TTFT/TPOT/ITL percentiles, throughput, goodput)")
    add_target_args(p)
    p.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree")
    p.add_argument("--profile", default=None, help="calibrated profile YAML")
    p.add_argument("--prompt-tokens", "--prompt", dest="prompt", type=positive_int, default=None,
                   help="input tokens per request (--prompt: old spelling, kept for one release)")
    p.add_argument("--output-tokens", "--output", dest="output", type=positive_int, default=None,
                   help="output tokens per request (--output: old spelling, kept for one release)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int_list, help="closed loop: requests in flight, e.g. 1,8,64")
    load.add_argument("--rate", type=float_list, help="open loop: requests per second, e.g. 2,5")
    load.add_argument("--trace", help="CSV with columns arrival_s,prompt_tokens,output_tokens")
    p.add_argument("--requests", type=positive_int, default=None,
                   help="requests per level (closed loop default 10 x concurrency, open loop 1000)")
    p.add_argument("--burstiness", type=positive_float, default=1.0,
                   help="open loop: gamma shape of the gaps (1: Poisson)")
    p.add_argument("--range-ratio", type=ratio, default=1.0,
                   help="lengths uniform in [ratio x L, L] (vLLM --random-range-ratio; 1: fixed)")
    p.add_argument("--prefix-hit", type=fraction, default=0.0, help="share of each prompt cached")
    p.add_argument("--ttft-slo-s", "--ttft-slo", dest="ttft_slo", type=positive_float, default=None,
                   help="TTFT target, seconds")
    p.add_argument("--tpot-slo-s", "--tpot-slo", dest="tpot_slo", type=positive_float, default=None,
                   help="TPOT target, seconds")
    p.add_argument("--timeline", action="store_true", help="include the per-step timeline (JSON)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args) -> int:
    trace = args.trace
    prompt, output = args.prompt, args.output
    if trace is None and (prompt is None or output is None):
        raise PerfModelError("--prompt and --output are required without --trace")
    r = api.serve(args.model, args.gpu, weights=args.weights, kv=args.kv, engine=args.engine,
                  tp=args.tp, pp=args.pp, ep=args.ep, profile=args.profile,
                  prompt_tokens=prompt, output_tokens=output, concurrencies=args.concurrency,
                  rate_rps=args.rate, trace=trace, num_requests=args.requests,
                  range_ratio=args.range_ratio, prefix_hit=args.prefix_hit,
                  burstiness=args.burstiness, ttft_slo_s=args.ttft_slo,
                  tpot_slo_s=args.tpot_slo, timeline=args.timeline, seed=max(args.seed, 0),
                  hardware_dir=args.hardware_dir)
    if args.json:
        print_json(r)
        return 0
    shape = "trace" if r.arrival == "trace" else f"{r.prompt_tokens} in / {r.output_tokens} out"
    print(f"{r.model} on {r.gpu} x{r.tp * r.pp}, {r.engine}, {r.precision}, {shape}, {r.arrival}")
    print_table([_row(p) for p in r.points])
    for p in r.points:
        if not p.fits:
            print(f"level {p.concurrency or p.rate_rps}: {p.reason}")
    print(f"scheduler: {r.scheduler}")
    for w in r.warnings:
        print(f"warning: {w}")
    for a in r.assumptions:
        print(f"assumed: {a}")
    return 0


def _row(p) -> dict:
    def opt(x, f=ms):
        return "-" if x is None else f(x)
    row = {"conc": p.concurrency} if p.concurrency is not None else {"rate/s": p.rate_rps}
    row.update({"n": p.num_requests, "fits": p.fits,
                "TTFT p50 ms": opt(p.ttft_p50_s), "TTFT p90": opt(p.ttft_p90_s),
                "TTFT p99": opt(p.ttft_p99_s), "TPOT p50 ms": opt(p.tpot_p50_s),
                "TPOT p90": opt(p.tpot_p90_s),
                "ITL p99 ms": opt(p.itl_p99_s), "E2E p50 s": opt(p.e2e_p50_s, float),
                "out tok/s": opt(p.output_tok_s_total, float),
                "req/s": opt(p.request_rate_rps, float), "preempt": p.preemptions})
    if p.goodput_rps is not None:
        row["goodput/s"] = p.goodput_rps
    return row
