"""`perfmodel predict`: TTFT, TPOT, E2E, throughput and the per-op breakdown."""

from __future__ import annotations

from perfmodel import api
from perfmodel.cli.common import nonneg_int, positive_int, print_json, print_table
from perfmodel.cli.memory import add_target_args
from perfmodel.core.profile import load_profile
from perfmodel.core.units import GB, ms
from perfmodel.analysis.validation.intervals import request_intervals


def register(sub) -> None:
    p = sub.add_parser("predict", help="request latency and throughput of one configuration")
    add_target_args(p)
    p.add_argument("--activations", default=None, help="matmul input precision (default from weights)")
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--prompt", type=positive_int, required=True, help="input tokens")
    p.add_argument("--output", type=positive_int, required=True, help="generated tokens")
    p.add_argument("--context", type=nonneg_int, default=None,
                   help="KV length of the reported decode step (default: prompt)")
    p.add_argument("--new-tokens", type=positive_int, default=1,
                   help="tokens per sequence in the reported step (speculative verification)")
    p.add_argument("--attention", choices=["naive", "flash", "paged"], default=None,
                   help="override the engine's attention kernel")
    p.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree")
    p.add_argument("--profile", default=None, help="calibrated profile YAML")
    p.set_defaults(func=run)


def run(args) -> int:
    r = api.predict_request(args.model, args.gpu, weights=args.weights, kv=args.kv,
                            activations=args.activations, engine=args.engine, batch=args.batch,
                            prompt=args.prompt, output=args.output, context=args.context,
                            new_tokens=args.new_tokens, tp=args.tp, pp=args.pp, ep=args.ep,
                            attention=args.attention, profile=args.profile,
                            hardware_dir=args.hardware_dir)
    calibrated = args.profile is not None and load_profile(args.profile).gpu == r.gpu
    intervals = request_intervals(r.model_dump(), r.engine, calibrated)
    if args.json:
        out = r.model_dump(mode="json")
        out.update({k: v for k, v in r.memory.model_dump(mode="json").items()
                    if k not in out})  # the memory command's keys at top level too
        out["intervals"] = intervals  # validation residuals: perfmodel/analysis/validation/intervals.yaml
        print_json(out)
        return 0
    print(f"{r.model} on {r.gpu} x{r.tp * r.pp}, {r.engine}, {r.precision} "
          f"(matmuls in {r.compute_dtype}), batch {r.batch}, {r.prompt_tokens} in / {r.output_tokens} out")
    print_table([
        {"metric": "TTFT", "value": ms(r.ttft_s), "unit": "ms"},
        {"metric": "TPOT", "value": ms(r.tpot_s), "unit": "ms"},
        {"metric": "E2E", "value": r.e2e_s, "unit": "s"},
        {"metric": "decode step @context", "value": ms(r.decode_step_s), "unit": "ms"},
        {"metric": "decode per user", "value": r.decode_tok_s_per_user, "unit": "tok/s"},
        {"metric": "output total (B*O/E2E)", "value": r.output_tok_s_total, "unit": "tok/s"},
        {"metric": "decode total (B/TPOT)", "value": r.decode_tok_s_total, "unit": "tok/s"},
        {"metric": "MBU", "value": r.mbu, "unit": ""},
        {"metric": "MFU", "value": r.mfu, "unit": ""},
        {"metric": "memory per GPU", "value": r.memory.total_bytes / GB, "unit": "GB"},
    ])
    print(f"bound: {r.bound}   fits: {r.fits}   roofline floor: {ms(r.roofline_floor_s):.3g} ms")
    top = sorted(r.ops, key=lambda o: -o.time_s)[:6]
    print("largest ops: " + ", ".join(f"{o.name} {100 * o.share:.0f}% ({o.bound})" for o in top))
    if intervals:
        ttft, tpot = intervals["ttft_s"], intervals["tpot_s"]
        print(f"{100 * intervals['level']:.0f}% range (validation residuals): TTFT "
              f"{ms(ttft['lo']):.3g}-{ms(ttft['hi']):.3g} ms, TPOT "
              f"{ms(tpot['lo']):.3g}-{ms(tpot['hi']):.3g} ms")
    for w in r.warnings:
        print(f"warning: {w}")
    for a in r.assumptions:
        print(f"assumed: {a}")
    return 0
