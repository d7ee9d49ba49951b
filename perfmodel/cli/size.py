"""`perfmodel size`: the cheapest deployments that serve a request rate within TTFT/TPOT targets."""

from __future__ import annotations

import argparse

from perfmodel.cli import HELP
from perfmodel.cli.common import (add_query_args, int_list, nonneg_float, positive_float,
                                  positive_int, print_json, print_table, str_list)
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import ms

# The search (analysis/sizing*.py, the simulator, the hardware database) is imported by the
# functions that run it: `perfmodel size --help` and a usage error do not pay for it.


def price_pair(text: str) -> dict[str, float]:
    """'h100-sxm=2.5' or 'h100-sxm=2.5,l40s=0.9' -> {id: usd_per_hour}; a bare '2.5' prices
    every GPU searched ({'*': 2.5})."""
    out: dict[str, float] = {}
    if "=" not in text and "," not in text:
        return {"*": positive_float(text.strip())}
    for part in text.split(","):
        gid, sep, usd = part.partition("=")
        if not sep or not gid.strip():
            raise argparse.ArgumentTypeError(f"{part!r}: use GPU=USD_PER_HOUR, e.g. h100-sxm=2.5")
        out[gid.strip().lower()] = positive_float(usd.strip())
    return out


def register(sub) -> None:
    p = sub.add_parser("size", help=HELP["size"])
    p.add_argument("--model", required=True, help="catalog id, HF repo id, or path to config.json")
    p.add_argument("--rate", type=nonneg_float, required=True, help="requests per second")
    add_query_args(p, ("prompt_tokens", "output_tokens", "ttft_slo_s", "tpot_slo_s"),
                   required=("prompt_tokens", "output_tokens", "ttft_slo_s", "tpot_slo_s"),
                   help_suffix={"ttft_slo_s": " Mean TTFT.", "tpot_slo_s": " Mean TPOT."})
    p.add_argument("--gpus", type=str_list, default=None, help="GPU ids (default: every GPU)")
    p.add_argument("--precisions", type=str_list, default=None,
                   help="WEIGHTS or WEIGHTS/KV, comma-separated (default: bf16,fp8,int4,fp4)")
    p.add_argument("--engines", type=str_list, default=None, help="engine ids (default: vllm)")
    p.add_argument("--max-gpus", type=positive_int, default=None, help="GPUs at most (default 8)")
    p.add_argument("--nodes", type=positive_int, default=None,
                   help="servers at most: GPUs at most = NODES x the GPU's gpus_per_node "
                        "(hardware YAML); needs one GPU in --gpus, excludes --max-gpus")
    p.add_argument("--counts", type=int_list, default=None, help="only these total GPU counts")
    p.add_argument("--price", type=price_pair, action="append", default=None,
                   help="override a price: USD_PER_GPU_HOUR for every GPU, or GPU=USD_PER_HOUR "
                        "(repeatable); $PERFMODEL_PRICES=file.yaml (gpu id: USD) sets a whole table")
    p.add_argument("--limit", type=positive_int, default=20, help="deployments listed (default 20)")
    p.add_argument("--profile", default=None, help="calibrated profile YAML")
    p.add_argument("--hardware-dir", default=None, help="extra folder of hardware YAML files")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--disagg", action="store_true",
                   help="also search disaggregated prefill/decode layouts on the one GPU of "
                        "--gpus (simulated: slower, opt-in; analysis/sizing_disagg.py)")
    p.set_defaults(func=run)


def _max_gpus(args) -> int:
    """--max-gpus, or --nodes x the one GPU's server size (core/topology.py)."""
    if args.nodes is None:
        return 8 if args.max_gpus is None else args.max_gpus
    if args.max_gpus is not None:
        raise PerfModelError("give --nodes or --max-gpus, not both")
    if not args.gpus or len(args.gpus) != 1:
        raise PerfModelError("--nodes needs exactly one GPU in --gpus (servers hold a "
                             "different number of GPUs per accelerator)")
    from perfmodel.core.hardware import load_gpu
    from perfmodel.core.topology import node_gpus
    return args.nodes * node_gpus(load_gpu(args.gpus[0], args.hardware_dir))


def run(args) -> int:
    from perfmodel.analysis import sizing
    if args.counts and (args.max_gpus is not None or args.nodes is not None):
        cap = _max_gpus(args)   # the API lets counts raise the cap; a stated cap must hold
        if max(args.counts) > cap:
            flag = "--max-gpus" if args.nodes is None else "--nodes"
            raise PerfModelError(f"--counts {max(args.counts)} is beyond {flag} ({cap} GPUs)")
    args.max_gpus = _max_gpus(args)
    prices: dict[str, float] = {}
    for d in args.price or []:
        prices.update(d)
    r = sizing.size(args.model, rate_rps=args.rate, prompt=args.prompt_tokens,
                    output=args.output_tokens, ttft_slo_s=args.ttft_slo_s,
                    tpot_slo_s=args.tpot_slo_s, gpus=args.gpus,
                    precisions=args.precisions, engines=args.engines, max_gpus=args.max_gpus,
                    counts=args.counts, prices=prices, limit=args.limit, profile=args.profile,
                    hardware_dir=args.hardware_dir)
    dis = _disagg(args) if args.disagg else None
    if args.json:
        print_json(r if dis is None else {"aggregated": r, "disaggregated": dis})
        return 0
    q = r.request
    print(f"{q.model}: {q.rate_rps:g} req/s, {q.prompt_tokens} in / {q.output_tokens} out, "
          f"TTFT <= {ms(q.ttft_slo_s):g} ms, TPOT <= {ms(q.tpot_slo_s):g} ms")
    if r.deployments:
        print_table([_row(d) for d in r.deployments])
    if r.infeasible_reason:
        print(f"no deployment: {r.infeasible_reason}")
    if r.nearest_miss is not None:
        print("nearest miss:")
        print_table([_row(r.nearest_miss)])
    for a in r.assumptions:
        print(f"assumed: {a}")
    for w in r.warnings:
        print(f"warning: {w}")
    if dis is not None:
        _print_disagg(dis)
    return 0


def _disagg(args):
    if not args.gpus or len(args.gpus) != 1:
        raise PerfModelError("--disagg searches one GPU type: give exactly one --gpus id")
    from perfmodel.analysis import sizing_disagg
    prec = (args.precisions or ["bf16"])[0]
    weights, _, kv = prec.partition("/")
    return sizing_disagg.size_disagg(
        args.model, args.gpus[0], rate_rps=args.rate, prompt=args.prompt_tokens,
        output=args.output_tokens, ttft_slo_s=args.ttft_slo_s, tpot_slo_s=args.tpot_slo_s, weights=weights, kv=kv or None,
        engine=(args.engines or ["vllm"])[0], max_gpus=max(args.max_gpus, 2),
        hardware_dir=args.hardware_dir)


def _print_disagg(d) -> None:
    print(f"disaggregated ({d.gpu}, {d.weights}, {d.engine}; {d.searched} layouts simulated):")
    b = d.best
    if b is None:
        print(f"  none: {d.reason}")
    else:
        lay = {k: f"{v.workers} x tp{v.tp} ep{v.ep}" for k, v in (("P", b.prefill), ("D", b.decode))}
        print_table([{"gpus": b.num_gpus, "prefill": lay["P"], "decode": lay["D"],
                      "TTFT p90 ms": ms(b.ttft_p90_s), "TPOT p50 ms": ms(b.tpot_p50_s),
                      "out tok/s at rate": b.output_tok_s_total,
                      "$/h": "-" if b.usd_per_hour is None else b.usd_per_hour}])
    for a in d.assumptions:
        print(f"assumed: {a}")


def _row(d) -> dict:
    def opt(x, f=lambda v: v):
        return "-" if x is None else f(x)
    return {"gpu": d.gpu, "n": d.count, "tp": d.tp, "pp": d.pp, "ep": d.ep,
            "dp": d.dp, "precision": d.precision, "engine": d.engine, "conc": d.concurrency,
            "repl": d.replicas, "TTFT ms": opt(d.ttft_s, ms), "TPOT ms": opt(d.tpot_s, ms),
            "out tok/s": d.output_tok_s_total, "headroom": opt(d.headroom),
            "$/h": opt(d.usd_per_hour), "$/Mtok": opt(d.usd_per_mtok),
            "J/tok": opt(d.joules_per_token), "binding": d.binding,
            "sim TTFT p90 ms": opt(d.sim_ttft_p90_s, ms), "sim TPOT p90 ms": opt(d.sim_tpot_p90_s, ms),
            "sim ok": opt(d.sim_meets)}
