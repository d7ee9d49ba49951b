"""Sweep speed: >= 100,000 configurations vectorized vs a per-configuration Python loop,
and the latency of a single `predict_request` after import. Prints ratios measured side
by side in one run.   python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import time

from perfmodel.api import predict_request
from perfmodel.analysis.sweep import SweepSpec, sweep_arrays


def main() -> None:
    spec = SweepSpec(models=["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mixtral-8x7b", "gemma-2-9b"],
                     gpus=["h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "rtx-4090"],
                     weights=["bf16", "fp8", "int8", "int4"], kvs=["bf16"], engines=["vllm"],
                     batches=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                     prompts=[128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
                     outputs=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192])
    sweep_arrays(spec)  # warm caches (YAML parsing) outside the timing
    t0 = time.perf_counter()
    arrays = sweep_arrays(spec)
    vec_s = time.perf_counter() - t0
    n = len(arrays["batch"])

    sample = 200  # the loop is slow: time a sample and scale per configuration
    combos = [(m, g, w, b, p, o) for m in spec.models for g in spec.gpus for w in spec.weights
              for b in spec.batches[:2] for p in spec.prompts[:5] for o in spec.outputs[:2]][:sample]
    t0 = time.perf_counter()
    for m, g, w, b, p, o in combos:
        try:
            predict_request(m, g, weights=w, kv="bf16", batch=b, prompt=p, output=o)
        except Exception:  # noqa: BLE001 - same configurations the sweep skips
            pass
    loop_per_config = (time.perf_counter() - t0) / len(combos)

    t0 = time.perf_counter()
    reps = 50
    for _ in range(reps):
        predict_request("llama-3.1-8b", "h100-sxm", batch=8, prompt=512, output=128)
    single_ms = (time.perf_counter() - t0) / reps * 1e3

    print(f"configurations evaluated (vectorized): {n}")
    print(f"vectorized sweep: {vec_s:.3f} s  -> {n / vec_s:,.0f} configurations/s")
    print(f"per-configuration loop (predict_request, {len(combos)} sampled): "
          f"{loop_per_config * 1e3:.2f} ms/config -> {1 / loop_per_config:,.0f} configurations/s")
    print(f"speed-up of the vectorized sweep over the loop: {loop_per_config * n / vec_s:,.0f}x")
    print(f"single predict_request after import: {single_ms:.2f} ms")


if __name__ == "__main__":
    main()
