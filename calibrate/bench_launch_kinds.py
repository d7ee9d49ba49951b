#!/usr/bin/env python3
"""Host time to enqueue one Python-level launch, by the kinds an eager prompt step of an MoE/MLA
layer issues (core/eager_kernels.py counts them one each), on one GPU.

    python3 calibrate/bench_launch_kinds.py --device cuda --out calibrate/data/launch-kinds-h200-sxm-<date>.json
    python3 calibrate/bench_launch_kinds.py --quick --device cpu --out /tmp/l.json   # tiny, CI

Kinds (small tensors: the GPU time of each launch is far below its host time):
  torch_add        x.add_(y), an in-place elementwise op (residual adds, `+= shared_output`);
  torch_linear     F.linear on bf16 (a cuBLAS GEMM: projections, router);
  slice_copy       q[:, a:] = q_pe, a strided copy (SGLang MLA's q_pe write, TRT-LLM's k_nope);
  torch_cat        torch.cat of two tensors (TRT-LLM's latent cache concat);
  module_linear    an nn.Linear module call (module __call__ on top of the GEMM);
  custom_op        a Python torch.library custom op around an add (dispatcher + Python body);
  triton_small     a 3-argument Triton kernel;
  triton_fused_moe the vLLM/SGLang-style fused-MoE GEMM launch (calibrate/moe_triton.py, 20
                   runtime and 6 constexpr arguments, through its Python wrapper).
Each: N launches queued behind a GPU sleep (so the CPU never waits for the GPU), host time per
launch, median of `--repeats`; warm-up first (Triton compiles once). On the CPU the kinds run on
CPU tensors and the Triton ones are skipped.
JSON (schema_version 1): env, args, records [{kind, host_s_per_launch, runs}], elapsed_s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

from bench_env import env_section, log, one_line, write_json  # noqa: E402
from layer_timing import gpu_sleep  # noqa: E402

try:
    import moe_triton as mt
    import triton
    import triton.language as tl
except Exception:   # noqa: BLE001 - no triton: those kinds are skipped
    mt = triton = tl = None

if triton is not None:
    @triton.jit
    def _small_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


def _kinds(dev: str, cuda: bool):
    """{kind: zero-argument callable issuing one launch}."""
    dt = torch.bfloat16 if cuda else torch.float32
    x = torch.randn(64, 512, device=dev, dtype=dt)
    y = torch.randn(64, 512, device=dev, dtype=dt)
    w = torch.randn(256, 512, device=dev, dtype=dt)
    q = torch.randn(64, 16, 192, device=dev, dtype=dt)
    pe = torch.randn(64, 16, 64, device=dev, dtype=dt)
    lin = torch.nn.Linear(512, 256, bias=False, device=dev, dtype=dt)

    @torch.library.custom_op("perfmodel_bench::add", mutates_args=("a",))
    def _add(a: torch.Tensor, b: torch.Tensor) -> None:
        a.add_(b)

    kinds = {
        "torch_add": lambda: x.add_(y),
        "torch_linear": lambda: F.linear(x, w),
        "slice_copy": lambda: q[..., 128:].copy_(pe),
        "torch_cat": lambda: torch.cat([x, y], dim=-1),
        "module_linear": lambda: lin(x),
        "custom_op": lambda: torch.ops.perfmodel_bench.add(x, y),
    }
    if cuda and triton is not None:
        n = x.numel()
        kinds["triton_small"] = lambda: _small_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        kinds["triton_fused_moe"] = _fused_moe_launch(dev)
    return kinds


def _fused_moe_launch(dev: str):
    """One launch of moe_triton's fused-MoE GEMM on a tiny routed batch (8 experts, top-2)."""
    T, K, N, E, k = 16, 256, 256, 8, 2
    a_q, a_s = mt.quant_group(torch.randn(T, K, device=dev, dtype=torch.bfloat16))
    w_q, w_s = mt.quant_block_weight(torch.randn(E, N, K, device=dev, dtype=torch.bfloat16))
    topk = torch.randint(0, E, (T, k), device=dev)
    sorted_ids, expert_ids, padded = mt.align_block_size(topk, E, mt.DEFAULT_CONFIG["BLOCK_M"])
    npp = torch.tensor([padded], device=dev, dtype=torch.int32)
    out = torch.empty(T * k, N, device=dev, dtype=torch.bfloat16)
    return lambda: mt.fused_moe_gemm(a_q, a_s, w_q, w_s, out, sorted_ids, expert_ids, padded,
                                     k, npp=npp)


def _per_launch_s(fn, n: int, repeats: int, cuda: bool) -> list[float]:
    """Host seconds per launch of n launches queued behind a GPU sleep, one value per repeat."""
    out = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            gpu_sleep(n * 200e-6 + 5e-3, cuda)      # longer than n launches can take to enqueue
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
        if cuda:
            torch.cuda.synchronize()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--launches", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="tiny run (CI)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if torch is None:
        log("torch is not installed")
        return 2
    if args.quick:
        args.launches, args.repeats = 20, 2
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        log("no CUDA device")
        return 2
    t0 = time.perf_counter()
    records = []
    for kind, fn in _kinds(args.device, cuda).items():
        try:
            _per_launch_s(fn, 20, 1, cuda)          # warm-up (Triton compiles here)
            runs = _per_launch_s(fn, args.launches, args.repeats, cuda)
        except Exception as exc:   # noqa: BLE001 - a kind that cannot run is recorded, not fatal
            records.append({"kind": kind, "skipped": one_line(exc)})
            continue
        records.append({"kind": kind, "host_s_per_launch": statistics.median(runs), "runs": runs})
        log(f"{kind:18s} {1e6 * statistics.median(runs):8.2f} us per launch")
    write_json(args.out, {"schema_version": 1, "env": env_section(args.device),
                          "args": vars(args), "records": records,
                          "elapsed_s": time.perf_counter() - t0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
