#!/usr/bin/env python3
"""Microbenchmarks that calibrate perfmodel. Needs only torch and the standard library.

    python calibrate/bench.py --device cuda [--sections gemm,e2e] [--out PATH]
    python calibrate/bench.py --quick --device cpu --out /tmp/raw.json   # tiny shapes, CI

Timing: CUDA events on the GPU (host clock + synchronize on the CPU), warm-up first, the
median over repeats, Python's garbage collector off while timing (as timeit does).
Microbenchmarks (bandwidth, gemm, attention, launch "device") start each repeat behind a short
GPU sleep, so the queue is full and the events time the device alone; `inner` calls run back
to back per repeat and `seconds` is per call. Inputs rotate over enough buffers to exceed
3x L2 and are random, never zeros. e2e steps (bench_e2e.py) are timed back to back without
that head start, so host-side launch cost counts as it does in a real decode loop.

JSON written (schema_version 1), one object; all sizes in bytes, all times in seconds:
  schema_version: 1;  complete: bool;  sections_run: [str];  args: {cli option: value}
  env:        device, torch_version, cuda_version, python_version, hostname, date_utc, argv,
              gpu_name, compute_capability [major, minor], sm_count, l2_bytes,
              total_memory_bytes, nvidia_smi_before, nvidia_smi_after ({driver_version,
              clocks_sm_mhz, clocks_mem_mhz, clocks_max_sm_mhz} or null), cpu_name,
              cpu_count, torch_threads, cpu_affinity (cores the run was pinned to; may be
              absent in older files), cpu ({model_name, vendor_id, family, model,
              stepping, mhz_median, mhz_min, mhz_max ("cpu MHz" over cores), cpufreq_max_mhz,
              logical_cpus, source}: /proc/cpuinfo; absent in older files)
              (GPU fields are null on the CPU)
  every other section: {"records": [...], "skipped": [{"what", "reason"}], "elapsed_s"}
  bandwidth.records: kind ("copy"|"read"|"write"), dtype, buffer_bytes, bytes (moved per
              call; copy counts read + write), seconds, bytes_per_s, reps, inner
  gemm.records:  dtype ("bf16"|"fp16"|"fp8_e4m3"|"int8"), layer ("qkv"|"gate_up"|"down"),
              M, N, K, seconds, flops (2MKN; integer ops for int8), bytes (weights + inputs
              + outputs), flops_per_s, reps, inner.  y[M,N] = x[M,K] @ W[N,K]^T; fp8
              (torch._scaled_mm, per-tensor scales) outputs bf16; int8 (torch._int_mm) int32
  attention.records: kind ("sdpa_gqa": SDPA default dispatch with enable_gqa,
              "sdpa_flash": forced flash backend, "naive": matmul-softmax-matmul), B, S,
              q_heads, kv_heads, head_dim, dtype, seconds, kv_bytes, flops (4*B*S*N*H),
              reps, inner.  One query token per sequence.
  launch.records: mode ("eager"|"graph"), timing ("wall": host clock incl. sync;
              "device": events with the queue pre-filled), kernels, seconds (all kernels),
              seconds_per_kernel, host_seconds_per_launch (host enqueue time / kernels)
  e2e:        model (shape dict: name, num_layers, d_model, num_heads, num_kv_heads,
              head_dim, ffn_dim, vocab_size, tied_embeddings, rope_theta), modes ({mode:
              {engine: the perfmodel engine preset the mode implements, what, scope,
              compiled, cuda_graphs, attention, and for compile compile_mode, fullgraph,
              dynamic; for hf_generate transformers_version, attn_implementation, cache,
              kernels_per_token}}), records:
              model, mode ("eager" | "graph": one CUDA graph per step | "compile": gpt-fast's
              whole-model torch.compile, mode="reduce-overhead" (CUDA graphs) | "hf_generate"),
              dtype ("bf16"|"fp8_e4m3"), phase ("decode"|"prefill"), batch, context (KV
              tokens before the step; 0 for prefill), prompt (prefill length, else null),
              new_tokens (tokens per sequence in the step), seconds (per step; for
              hf_generate decode, per generated token), tokens_per_s (batch*new_tokens/s),
              kernels (kernel+memset+memcpy nodes of the step's CUDA graph, or null; compile:
              of one decode step compiled the same way without CUDA graphs; hf_generate:
              CUDA kernel+memcpy+memset events per generated token, torch.profiler),
              compile_s (first-call time in compile mode, else null), reps.
              hf_generate records add generated_tokens; their decode seconds is
              (t(generate N) - t(generate 1)) / (N - 1), their prefill seconds t(generate 1).
              Host-bound records (eager, hf_generate; bench_hostbound.py) are timed in
              --rounds interleaved rounds after a discarded warm-up and add rounds_s (each
              round's median), spread (max/min - 1 over rounds; seconds is their median),
              sm_clock_mhz, mem_clock_mhz (nvidia-smi, median while timed, or null); eager
              adds host_s (host enqueue of one step) and synced_s (one step + synchronize).
              eager kernels: graph mode's count at the same point and dtype (same kernels).

Modules next to this script (torch + the standard library as well): bench_env (environment,
JSON file), bench_timing (Timer, Ctx, CUDA graph capture), bench_micro (bandwidth, gemm,
attention, launch), bench_model + bench_e2e (e2e), bench_hf (hf).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

try:
    import torch
except ImportError:  # reported in main(), after --help had a chance to work
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_micro  # noqa: E402
from bench_env import env_section, log, nvidia_smi, write_json  # noqa: E402
from bench_timing import Ctx  # noqa: E402

SCHEMA_VERSION = 1
SECTIONS = ("env", "bandwidth", "gemm", "attention", "launch", "e2e", "hf")


# ----------------------------------------------------------------------------- driver

def e2e_section(ctx: Ctx) -> dict:
    import bench_e2e
    return bench_e2e.run_e2e(ctx)


def hf_section(ctx: Ctx) -> dict:
    import bench_hf
    return bench_hf.run_hf(ctx)


RUNNERS = {"bandwidth": bench_micro.bandwidth_section, "gemm": bench_micro.gemm_section,
           "attention": bench_micro.attention_section, "launch": bench_micro.launch_section,
           "e2e": e2e_section, "hf": hf_section}


def default_out(env: dict) -> str:
    name = env["gpu_name"] or f"cpu-{platform.machine()}"
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    return os.path.join("calibrate", "data", f"raw-{slug}-{date}.json")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--quick", action="store_true", help="tiny shapes (CI); same JSON schema")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)} (env always runs)")
    p.add_argument("--out", help="JSON path (default calibrate/data/raw-<gpu>-<date>.json)")
    p.add_argument("--compile-mode", default="reduce-overhead",
                   choices=("reduce-overhead", "default", "max-autotune"),
                   help="torch.compile mode of the whole-model step (default reduce-overhead, "
                        "as gpt-fast = the torch-compile engine preset)")
    p.add_argument("--compile-budget-s", type=float, default=None,
                   help="stop adding torch.compile points after this long (default 300)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved timing rounds of each host-bound e2e point (eager, HF "
                        "generate); the record keeps each round and their median (default 3)")
    p.add_argument("--pin-cpu", type=int, default=None,
                   help="pin the process to this CPU core while it runs (default: no pinning). "
                        "An experiment for host-bound timings (eager, HF generate): on the H200 "
                        "VM it did not remove their noise (calibrate/BENCH_NOTES.md)")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        p.error(f"unknown section(s) {unknown}; choose from {','.join(SECTIONS)}")
    return args


def pin_cpu(args) -> list[int] | None:
    """Pin to one core (Linux); returns the cores the process may run on afterwards."""
    core = -1 if args.pin_cpu is None else args.pin_cpu
    if not hasattr(os, "sched_setaffinity"):
        return None
    if core >= 0:
        try:
            os.sched_setaffinity(0, {core})
        except OSError as exc:
            log(f"[env] could not pin to core {core}: {exc}")
    return sorted(os.sched_getaffinity(0))


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if torch is None:
        print("error: bench.py needs torch; install it with: pip install '.[calibrate]'",
              file=sys.stderr)
        return 2
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA GPU; use --device cpu "
              "(add --quick for a short run)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    pinned = pin_cpu(args)
    env = env_section(args.device)
    env["cpu_affinity"] = pinned
    out = args.out or default_out(env)
    result = {"schema_version": SCHEMA_VERSION, "complete": False, "sections_run": ["env"],
              "args": {k: v for k, v in vars(args).items()}, "env": env}
    log(f"[env] {env['gpu_name'] or env['cpu_name']} torch {env['torch_version']} -> {out}")
    ctx = Ctx(args, env)
    for name in (s for s in SECTIONS if s != "env" and s in args.sections):
        t0 = time.perf_counter()
        part = RUNNERS[name](ctx)
        part["elapsed_s"] = time.perf_counter() - t0
        log(f"[{name}] done in {part['elapsed_s']:.1f} s")
        if name == "hf":   # HF generate records live in e2e, next to the plain-torch ones
            e2e = result.setdefault("e2e", {"model": part.get("model"), "records": [],
                                            "skipped": [], "elapsed_s": 0.0})
            e2e.setdefault("modes", {}).update(part.get("modes") or {})
            e2e["records"] += part["records"]
            e2e["skipped"] += part["skipped"]
            e2e["elapsed_s"] += part["elapsed_s"]
        else:
            result[name] = part
        result["sections_run"].append(name)
        write_json(out, result)
    if ctx.cuda:
        env["nvidia_smi_after"] = nvidia_smi()
    result["complete"] = True
    write_json(out, result)
    log(f"[done] wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
