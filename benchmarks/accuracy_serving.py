"""Serving-model accuracy: predicted maximum throughput and max batch vs the published
output_tok_s_total and max_batch rows of data/public_measurements.csv (TensorRT-LLM).

    python benchmarks/accuracy_serving.py [path/to/public_measurements.csv]

Row kinds and what is predicted (all with the `trtllm` engine preset, datasheet efficiencies):
- offline / saturated rows (trtllm-bench throughput, Triton at rate INF): max_throughput,
  i.e. continuous batching at the largest concurrency that fits;
- static-batch rows (gptSessionBenchmark, v0.5-v0.7 blogs, batch B given): static batching
  at batch B, output tokens / (prefill + decode of the whole batch);
- max_batch rows (largest power-of-2 static batch that ran): our KV limit at
  prompt + output, rounded down to a power of two (TRT-LLM packs inputs, so activation
  memory is bounded as for the continuous preset).
Assumed where the CSV says "unspecified": fp8 KV cache for fp8/fp4 checkpoints (ModelOpt
and --fp8_kv_cache builds), 16-bit KV otherwise. NVFP4 is fp4 with a scale per 16 values.
"""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from perfmodel.api import resolve
from perfmodel.serving.batching import curve, limits
from perfmodel.core.errors import PerfModelError
from perfmodel.serving.curve import max_throughput

GPUS = {"H100 SXM 80GB": "h100-sxm", "H100 SXM 80GB HBM3": "h100-sxm", "H200 SXM 141GB": "h200-sxm",
        "L40S": "l40s", "A100 SXM4 80GB": "a100-sxm-80gb", "A100 SXM 80GB": "a100-sxm-80gb",
        "B200 180GB": "b200", "GB200 192GB (NVL72 node, 1 GPU used)": "gb200",
        "RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-blackwell"}
MODELS = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.1 70B": "llama-3.1-70b",
          "Llama 3.1 405B": "llama-3.1-405b", "Llama 3.3 70B": "llama-3.3-70b",
          "Mistral 7B": "mistral-7b", "Mixtral 8x7B": "mixtral-8x7b",
          "Mixtral 8x22B": "mixtral-8x22b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
          "Qwen3-30B-A3B": "qwen3-30b-a3b", "Llama 2 7B": "llama-2-7b",
          "Llama 2 13B": "llama-2-13b", "Llama 2 70B": "llama-2-70b"}


def precision(row: dict) -> tuple[str, str]:
    w = row["weight_precision"].split()[0]
    w = "fp4-g16" if w == "fp4" else w
    kv = row["kv_precision"]
    if kv.startswith("unspecified"):
        kv = "fp8" if w.startswith(("fp8", "fp4")) else w
    return w, kv


def kind(row: dict) -> str:
    how = row["batch_or_concurrency"].lower()
    if row["metric"] == "max_batch":
        return "max_batch"
    if "offline" in how or "rate inf" in how:
        return "offline"
    return "static"


def predict(row: dict) -> float | None:
    gpu, model = GPUS.get(row["gpu"]), MODELS.get(row["model"])
    if gpu is None or model is None:
        return None
    w, kv = precision(row)
    tp = int(row["tensor_parallel"])
    P, O = int(row["input_len"]), int(row["output_len"])
    k = kind(row)
    if k == "offline":
        return max_throughput(model, gpu, weights=w, kv=kv, engine="trtllm", tp=tp,
                              prompt=P, output=O).output_tok_s_total
    sc, _, _ = resolve(model, gpu, weights=w, kv=kv, engine="trtllm", tp=tp)
    # TRT-LLM packs the batch's tokens (remove_input_padding), so activation memory stays
    # bounded as for a continuous engine: the limit comes from the unchanged preset
    lim = replace(limits(sc, P, O), static=True, mixed=False)
    sc = replace(sc, engine=sc.engine.model_copy(update={"batching": "static"}))
    if k == "max_batch":
        return float(2 ** int(math.log2(lim.kv_max))) if lim.kv_max else 0.0
    B = int(row["batch_or_concurrency"].split()[-1])
    return float(curve(sc, [B], P, O, lim).output_tok_s_total[0])


def main(path: str) -> None:
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] in ("output_tok_s_total", "max_batch")]
    errors: dict[str, list[float]] = {}
    print(f"{'kind':9} {'gpu':24} {'model':16} {'prec':10} {'tp':>2} {'ISL/OSL':>11} "
          f"{'published':>10} {'predicted':>10} {'error':>7}")
    for r in rows:
        try:
            pred = predict(r)
        except PerfModelError as exc:
            print(f"skip {r['gpu']} {r['model']}: {exc}")
            continue
        if pred is None:
            print(f"skip {r['gpu']} / {r['model']}: not in the catalog or hardware_db")
            continue
        pub = float(r["value"])
        err = pred / pub - 1.0
        k = kind(r)
        errors.setdefault(k, []).append(err)
        w, kv = precision(r)
        print(f"{k:9} {GPUS[r['gpu']]:24} {MODELS[r['model']]:16} {w + '/' + kv:10} "
              f"{r['tensor_parallel']:>2} {r['input_len'] + '/' + r['output_len']:>11} "
              f"{pub:10.0f} {pred:10.0f} {100 * err:+6.0f}%")
    print()
    for k, e in errors.items():
        a = np.abs(np.array(e))
        print(f"{k:9}: {len(e)} rows, median |error| {100 * np.median(a):.0f}%, "
              f"mean |error| {100 * a.mean():.0f}%, max {100 * a.max():.0f}%, "
              f"mean signed {100 * np.mean(e):+.0f}%")


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "data" / "public_measurements.csv"
    main(sys.argv[1] if len(sys.argv) > 1 else str(default))
