#!/usr/bin/env python3
"""MoE router GEMMs alone: M tokens x D @ D x E, fp32 (input upcast from bf16 first, as vLLM's
minimax_m2.py and glm4_moe.py run their gates) and bf16, for the routers of the catalog's MoE
models. torch + stdlib. CUDA events, median of repeats (bench_timing.Timer).

    python3 calibrate/bench_router_gemm.py --device cuda --out calibrate/data/router-gemm-h200-sxm-<date>.json

JSON (schema_version 1): env, records [{model, D, E, M, dtype, seconds, gemm_seconds, flops}]
(seconds: upcast + GEMM for fp32, the GEMM alone for bf16; gemm_seconds: the GEMM alone).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from bench_env import env_section, nvidia_smi, write_json  # noqa: E402
from bench_timing import Timer  # noqa: E402

# (D, E) from config.json (perfmodel/core/catalog/*.yaml)
ROUTERS = {"minimax-m2.5": (3072, 256), "glm-4.5": (5120, 160), "qwen3-235b-a22b": (4096, 128),
           "deepseek-v3": (7168, 256)}
TOKENS = (64, 256, 1024, 2048, 4096, 8192, 16384)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    dev, timer = a.device, Timer(a.device)
    recs = []
    for model, (D, E) in ROUTERS.items():
        w32 = torch.randn(E, D, device=dev) * 0.02
        w16 = w32.to(torch.bfloat16)
        for M in ((16, 64) if a.quick else TOKENS):
            x = torch.randn(M, D, device=dev, dtype=torch.bfloat16)
            x32 = x.float()
            full = timer.measure(lambda i: x.to(torch.float32) @ w32.t())["seconds"]
            gemm = timer.measure(lambda i: x32 @ w32.t())["seconds"]
            b16 = timer.measure(lambda i: x @ w16.t())["seconds"]
            flops = 2.0 * M * D * E
            recs += [dict(model=model, D=D, E=E, M=M, dtype="fp32", seconds=full,
                          gemm_seconds=gemm, flops=flops),
                     dict(model=model, D=D, E=E, M=M, dtype="bf16", seconds=b16,
                          gemm_seconds=b16, flops=flops)]
            print(f"{model} M={M}: fp32 {1e6 * full:.1f} us (gemm {1e6 * gemm:.1f}), "
                  f"bf16 {1e6 * b16:.1f} us", file=sys.stderr)
    env = env_section(dev)
    env["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32 if dev == "cuda" else None
    if dev == "cuda":
        env["nvidia_smi_after"] = nvidia_smi()
    write_json(a.out, {"schema_version": 1, "env": env, "records": recs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
