"""`perfmodel sweep`: evaluate the cross product of lists, write CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
import sys

from perfmodel.cli import HELP
from perfmodel.cli.common import check_out_path, int_list, str_list
from perfmodel.analysis.sweep import SweepSpec, sweep_rows


def register(sub) -> None:
    p = sub.add_parser("sweep", help=HELP["sweep"])
    p.add_argument("--model", type=str_list, required=True, help="comma-separated ids")
    p.add_argument("--gpu", type=str_list, required=True)
    p.add_argument("--weights", type=str_list, default=["bf16"])
    p.add_argument("--kv", type=str_list, default=["bf16"])
    p.add_argument("--engine", type=str_list, default=["vllm"])
    p.add_argument("--batch", type=int_list, default=[1])
    p.add_argument("--prompt-tokens", "--prompt", dest="prompt", type=int_list, default=[512],
                   help="input tokens per request, comma-separated (--prompt: old spelling, "
                        "kept for one release)")
    p.add_argument("--output-tokens", "--output", dest="output", type=int_list, default=[128],
                   help="generated tokens per request, comma-separated (--output: old "
                        "spelling, kept for one release)")
    p.add_argument("--tp", type=int_list, default=[1])
    p.add_argument("--profile", default=None)
    p.add_argument("--hardware-dir", default=None)
    p.add_argument("--format", choices=["csv", "json"], default="csv")
    p.add_argument("--out", default=None, help="file to write (default: stdout)")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.set_defaults(func=run)


def run(args) -> int:
    check_out_path(args.out, "--out")   # before the sweep, not after it
    spec = SweepSpec(models=args.model, gpus=args.gpu, weights=args.weights, kvs=args.kv,
                     engines=args.engine, batches=args.batch, prompts=args.prompt,
                     outputs=args.output, tps=tuple(args.tp))
    rows = sweep_rows(spec, profile=args.profile, hardware_dir=args.hardware_dir,
                      skip_invalid=False)
    if args.json or args.format == "json":
        text = json.dumps({"rows": rows}, indent=1, allow_nan=False)
    else:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        text = buf.getvalue()
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
        sys.stderr.write(f"wrote {len(rows)} configurations to {args.out}\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
