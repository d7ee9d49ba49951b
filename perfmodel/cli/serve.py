"""`perfmodel serve`: simulate a serving benchmark (closed loop, open loop or a trace) on the
engine's scheduler and print the percentiles bench-endpoint measures."""

from __future__ import annotations

import argparse

from perfmodel.cli import HELP
from perfmodel.cli.common import (add_query_args, int_list, positive_float, print_json,
                                  print_notes, print_table, query_from_args)
from perfmodel.cli.serve_disagg import add_disagg_args, pool_flags_given, run_disagg
from perfmodel.cli.memory import TARGET_FIELDS, add_target_args
from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import field_help
from perfmodel.core.units import ms

# the model (perfmodel.api and what it imports) is imported by run: `--help` and a usage error
# do not pay for it


def float_list(text: str) -> list[float]:
    vals = [positive_float(t) for t in text.split(",") if t.strip()]
    if not vals:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
    return vals


SERVE_FIELDS = ("activations", "ep", "dp", "nodes", "profile", "prompt_tokens", "output_tokens",
                "num_requests", "burstiness", "range_ratio", "prefix_hit", "ttft_slo_s",
                "tpot_slo_s", "seed", "max_num_seqs", "max_num_batched_tokens")
"""Query fields `perfmodel serve` takes as flags (the levels and --trace are added beside)."""


def register(sub) -> None:
    p = sub.add_parser("serve", help=HELP["serve"])
    add_target_args(p)
    add_query_args(p, SERVE_FIELDS, defaults={"prompt_tokens": None, "output_tokens": None})
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int_list,
                      help="closed loop: requests in flight, one level or a list, e.g. 1,8,64")
    load.add_argument("--rate-rps", "--rate", dest="rate_rps", type=float_list,
                      help="open loop: requests per second, one level or a list, e.g. 2,5 "
                      "(--rate: old spelling, kept for one release)")
    load.add_argument("--trace", help=field_help("trace"))
    p.add_argument("--timeline", action="store_true", help="include the per-step timeline (JSON)")
    p.add_argument("--disagg", action="store_true",
                   help="disaggregated prefill/decode pools (--prefill-workers/-tp/-pp/-ep/-dp, "
                        "--decode-...; not with --tp/--pp/--ep/--dp; docs/disagg.md)")
    add_disagg_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.disagg:
        ignored = [f"--{k}" for k in ("tp", "pp", "ep", "dp") if getattr(args, k) not in (None, 1)]
        if ignored:
            raise PerfModelError(f"{', '.join(ignored)} set the aggregated layout, which --disagg "
                                 "does not use: give each pool's --prefill-tp/-pp/-ep/-dp and "
                                 "--decode-tp/-pp/-ep/-dp")
        if args.timeline:
            raise PerfModelError("--timeline is not available with --disagg")
        if args.nodes is not None:
            raise PerfModelError("--nodes is not available with --disagg (the pools are laid "
                                 "over the card's scale-up domains: docs/disagg.md)")
        return run_disagg(args)
    pools = pool_flags_given(args)
    if pools:
        raise PerfModelError(f"{', '.join(pools)} describe disaggregated pools: add --disagg")
    if args.timeline and not args.json:
        raise PerfModelError("--timeline adds the per-step timeline to the JSON output: add --json")
    if args.trace is None and (args.prompt_tokens is None or args.output_tokens is None):
        raise PerfModelError("--prompt-tokens and --output-tokens are required without --trace")
    from perfmodel import api
    q = query_from_args(args, TARGET_FIELDS + SERVE_FIELDS + ("trace",))
    r = api.serve(q, concurrencies=args.concurrency, rate_rps=args.rate_rps,
                  timeline=args.timeline)
    if args.json:
        print_json(r)
        return 0
    shape = {"trace": "trace (open loop)",
             "record": "bench-endpoint record (a closed loop per measured level)"}.get(
        r.arrival, f"{r.prompt_tokens} in / {r.output_tokens} out, {r.arrival}")
    print(f"{r.model} on {r.gpu} x{r.tp * r.pp * q.dp}, {r.engine}, {r.precision}, {shape}")
    print_table([_row(p, m) for p, m in zip(r.points, r.measured or [None] * len(r.points))])
    for p in r.points:
        if not p.fits:
            print(f"level {p.concurrency or p.rate_rps}: {p.reason}")
    print(f"scheduler: {r.scheduler}")
    print_notes(r)
    return 0


MEASURED_COLUMNS = (("TTFT p50 ms", "TTFT meas. ms", "ttft_p50_s", ms),
                    ("TPOT p50 ms", "TPOT meas. ms", "tpot_p50_s", ms),
                    ("out tok/s", "tok/s meas.", "output_tok_s_total", float))
"""A replayed record's measured value, in a column after the simulated one it matches."""


def _row(p, measured: dict | None = None) -> dict:
    """One level; with a replayed record's `measured` stats, its TTFT/TPOT p50 and output
    tok/s beside the simulated ones."""
    def opt(x, f=ms):
        return "-" if x is None else f(x)
    row = {"conc": p.concurrency} if p.concurrency is not None else \
        {"rate/s": "trace" if p.rate_rps is None else p.rate_rps}   # a trace: its own arrivals
    row.update({"n": p.num_requests, "fits": p.fits,
                "TTFT p50 ms": opt(p.ttft_p50_s), "TTFT p90": opt(p.ttft_p90_s),
                "TTFT p99": opt(p.ttft_p99_s), "TPOT p50 ms": opt(p.tpot_p50_s),
                "TPOT p90": opt(p.tpot_p90_s),
                "ITL p99 ms": opt(p.itl_p99_s), "E2E p50 s": opt(p.e2e_p50_s, float),
                "out tok/s": opt(p.output_tok_s_total, float),
                "req/s": opt(p.request_rate_rps, float), "preempt": p.preemptions})
    if measured is not None:
        cols = list(row.items())
        for after, name, key, f in MEASURED_COLUMNS:
            at = [k for k, _ in cols].index(after) + 1
            cols.insert(at, (name, opt(measured.get(key), f)))
        row = dict(cols)
    if p.goodput_rps is not None:
        row["goodput/s"] = p.goodput_rps
    return row
