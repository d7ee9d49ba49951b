"""`perfmodel memory`: per-GPU memory of a configuration."""

from __future__ import annotations

from perfmodel.cli import HELP
from perfmodel.cli.common import add_query_args, positive_int, print_json, print_table
from perfmodel.core.engines import ENGINES
from perfmodel.core.units import GB, fmt_bytes

# the model (perfmodel.api and what it imports) is imported by run: `--help` and a usage error
# do not pay for it


TARGET_FIELDS = ("model", "gpu", "weights", "kv", "engine", "tp", "pp", "hardware_dir")


def add_target_args(p, *, engine_default: str = "vllm") -> None:
    """--model, --gpu, precisions, engine, parallelism, hardware dir (shared by commands),
    generated from the Query's fields."""
    add_query_args(p, TARGET_FIELDS, required=("model", "gpu"),
                   defaults={"engine": engine_default}, choices={"engine": sorted(ENGINES)})
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub) -> None:
    p = sub.add_parser("memory", help=HELP["memory"])
    add_target_args(p)
    add_query_args(p, ("ep", "dp"))
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--context", type=positive_int, required=True, help="tokens held per sequence")
    p.set_defaults(func=run)


def run(args) -> int:
    from perfmodel import api
    est = api.memory(args.model, args.gpu, weights=args.weights, kv=args.kv, batch=args.batch,
                     context=args.context, tp=args.tp, pp=args.pp, ep=args.ep, dp=args.dp,
                     engine=args.engine,
                     hardware_dir=args.hardware_dir)
    if args.json:
        print_json(est)
        return 0
    rows = [{"part": k, "GB per GPU": v / GB} for k, v in (
        ("weights", est.weight_bytes), ("KV cache", est.kv_cache_bytes),
        ("activations", est.activation_bytes), ("reserve", est.reserve_bytes),
        ("total", est.total_bytes), ("usable capacity", est.capacity_bytes))]
    print_table(rows)
    print(f"KV per token: {fmt_bytes(est.kv_bytes_per_token)}   fits: {est.fits}   "
          f"max batch at this context: {est.max_batch}   max context at this batch: {est.max_context}")
    return 0
