"""`perfmodel predict`: TTFT, TPOT, E2E, throughput and the per-op breakdown."""

from __future__ import annotations

from perfmodel.cli import HELP
from perfmodel.cli.common import (add_query_args, print_json, print_notes, print_table,
                                  query_from_args)
from perfmodel.cli.memory import TARGET_FIELDS, add_target_args
from perfmodel.core.units import GB, ms

# the model (perfmodel.api and what it imports) and the validation residuals are imported by
# run: `--help` and a usage error do not pay for them

WORKLOAD_FIELDS = ("activations", "batch", "prompt_tokens", "output_tokens", "context_tokens",
                   "new_tokens", "attention", "ep", "dp", "nodes", "profile")


def register(sub) -> None:
    p = sub.add_parser("predict", help=HELP["predict"])
    add_target_args(p)
    add_query_args(p, WORKLOAD_FIELDS, required=("batch", "prompt_tokens", "output_tokens"))
    p.set_defaults(func=run)


def run(args) -> int:
    from perfmodel import api
    from perfmodel.analysis.validation.intervals import request_intervals
    from perfmodel.core.profile import load_profile
    r = api.request_estimate(api.evaluate(query_from_args(args, TARGET_FIELDS + WORKLOAD_FIELDS)))
    calibrated = args.profile is not None and load_profile(args.profile).gpu == r.gpu
    intervals = request_intervals(r.model_dump(), r.engine, calibrated)
    if args.json:
        out = r.model_dump(mode="json")
        out.update({k: v for k, v in r.memory.model_dump(mode="json").items()
                    if k not in out})  # the memory command's keys at top level too
        out["intervals"] = intervals  # validation residuals: perfmodel/analysis/validation/intervals.yaml
        print_json(out)
        return 0
    print(f"{r.model} on {r.gpu} x{r.tp * r.dp * r.pp}, {r.engine}, {r.precision} "
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
    print_notes(r)
    return 0
