"""Serving accuracy under load: the simulator (`api.serve`) and the steady-state quick estimate
(`serving.batching.curve`) against the measured mean TTFT and TPOT of the aggregated rows of
shared/data/serving/aic_silicon_sample.csv whose model and GPU are in the catalog (dense:
Llama-3.1-8B/70B, Qwen3-32B on H100/H200/B200), datasheet efficiencies only.

    python benchmarks/accuracy_serve.py [path/to/aic_silicon_sample.csv] [--requests-per-slot 10]

Mapping rules (general, none per row): engine = backend preset; GPU by system; weights:
gemm_quant_mode fp8/fp8_block -> fp8, nvfp4 -> fp4, '' -> the precision column (bf16);
KV cache fp8 for fp8/fp4 checkpoints and bf16 otherwise (README: not stated per row, an
assumption); TP and PP from the row. Workload assumed: closed loop at the row's concurrency,
10 x C requests (InferenceMAX / vLLM bench serve recipe), fixed ISL/OSL lengths.
Error = |predicted / measured - 1| of the means.
"""

from __future__ import annotations

import csv
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from perfmodel import api
from perfmodel.core.errors import PerfModelError
from perfmodel.core.resolve import resolve
from perfmodel.serving.batching import curve, limits

DATA = next((d / "shared" / "data" / "serving" / "aic_silicon_sample.csv"
             for d in Path(__file__).resolve().parents
             if (d / "shared" / "data" / "serving" / "aic_silicon_sample.csv").exists()),
            Path("aic_silicon_sample.csv"))
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
          "meta-llama/Llama-3.1-70B": "llama-3.1-70b", "Qwen/Qwen3-32B": "qwen3-32b"}
GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}
WEIGHTS = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "": None}


def _config(r: dict):
    w = WEIGHTS.get(r["gemm_quant_mode"], "?")
    w = w if w is not None else ("bf16" if r["precision"] in ("", "bf16", "fp16") else r["precision"])
    kv = "fp8" if w in ("fp8", "fp4") else "bf16"
    return (MODELS[r["model_path"]], GPUS[r["system"]], r["backend"], w, kv, int(r["tp_size"]),
            int(r["pp_size"]), int(r["isl"]), int(r["osl"]))


def load(path: Path) -> dict:
    groups = defaultdict(list)
    for r in csv.DictReader(path.open()):
        if r["mode"] != "agg" or r["model_path"] not in MODELS or r["system"] not in GPUS:
            continue
        groups[_config(r)].append((int(r["batch_size"]), float(r["silicon_ttft_ms"]) / 1e3,
                                   float(r["silicon_tpot_ms"]) / 1e3))
    return groups


def predict(cfg, conc: list[int], per_slot: int, ratio: float = 1.0):
    model, gpu, engine, w, kv, tp, pp, isl, osl = cfg
    sim = {}
    for c in sorted(set(conc)):
        rep = api.serve(model, gpu, weights=w, kv=kv, engine=engine, tp=tp, pp=pp,
                        prompt_tokens=isl, output_tokens=osl, concurrencies=[c],
                        num_requests=per_slot * c, range_ratio=ratio)
        p = rep.points[0]
        sim[c] = (p.ttft_mean_s, p.tpot_mean_s)
    sc, _, _ = resolve(model, gpu, weights=w, kv=kv, engine=engine, tp=tp, pp=pp)
    lim = limits(sc, isl, osl)
    grid = np.asarray(sorted(set(conc)), dtype=float)
    cv = curve(sc, grid, isl, osl, lim)
    steady = {int(c): (float(cv.ttft_s[i]), float(cv.tpot_s[i])) for i, c in enumerate(grid)}
    return sim, steady


def _summary(name: str, err: np.ndarray) -> str:
    return (f"{name}: median |err| {np.median(err):6.1%}   within 25% {np.mean(err <= 0.25):6.1%}"
            f"   (n={err.size})")


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv and not argv[0].startswith("--") else DATA
    per_slot = int(argv[argv.index("--requests-per-slot") + 1]) if "--requests-per-slot" in argv else 10
    ratio = float(argv[argv.index("--range-ratio") + 1]) if "--range-ratio" in argv else 1.0
    groups = load(path)
    rows = []            # (engine, gpu, model, c, meas ttft, meas tpot, sim ttft, sim tpot, st ttft, st tpot)
    t0 = time.perf_counter()
    for cfg, pts in groups.items():
        try:
            sim, steady = predict(cfg, [c for c, _, _ in pts], per_slot, ratio)
        except PerfModelError as exc:
            print(f"skip {cfg}: {exc}")
            continue
        for c, ttft, tpot in pts:
            if sim[c][0] is None:
                continue
            rows.append((cfg[2], cfg[1], cfg[0], c, ttft, tpot, *sim[c], *steady[c]))
    elapsed = time.perf_counter() - t0
    a = np.array([r[4:] for r in rows], dtype=float)
    err = {k: np.abs(a[:, i] / a[:, j] - 1.0) for k, i, j in
           (("sim_ttft", 2, 0), ("sim_tpot", 3, 1), ("st_ttft", 4, 0), ("st_tpot", 5, 1))}
    print(f"{len(rows)} rows in {len(groups)} configurations, simulated in {elapsed:.1f} s")
    print(_summary("steady-state TTFT", err["st_ttft"]))
    print(_summary("simulator    TTFT", err["sim_ttft"]))
    print(_summary("steady-state TPOT", err["st_tpot"]))
    print(_summary("simulator    TPOT", err["sim_tpot"]))
    both = np.maximum(err["sim_ttft"], err["sim_tpot"])
    print(f"simulator: TTFT and TPOT both within 25% on {np.mean(both <= 0.25):.1%} of rows")
    keys = sorted({(r[0], r[1], r[2]) for r in rows})
    print(f"\n{'engine':8} {'gpu':9} {'model':14} {'n':>4} {'TTFT st':>8} {'TTFT sim':>9} "
          f"{'TPOT st':>8} {'TPOT sim':>9} {'ttft p/m':>9}")
    for k in keys:
        m = np.array([(r[0], r[1], r[2]) == k for r in rows])
        ratio = np.median(a[m, 2] / a[m, 0])
        print(f"{k[0]:8} {k[1]:9} {k[2]:14} {m.sum():4d} {np.median(err['st_ttft'][m]):8.1%} "
              f"{np.median(err['sim_ttft'][m]):9.1%} {np.median(err['st_tpot'][m]):8.1%} "
              f"{np.median(err['sim_tpot'][m]):9.1%} {ratio:9.2f}")
    conc = np.array([r[3] for r in rows])
    print("\nsimulated / measured TTFT (median) by concurrency:")
    for c in sorted(set(conc.tolist())):
        m = conc == c
        if m.sum() >= 5:
            print(f"  C={c:4d}  n={m.sum():4d}  {np.median(a[m, 2] / a[m, 0]):5.2f}   "
                  f"steady {np.median(a[m, 4] / a[m, 0]):5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
