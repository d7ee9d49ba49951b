"""End-to-end timing of a random-weight Llama-shaped model in plain torch, for calibrate/bench.py.

torch + the standard library only. The model (bench_model.py) runs eagerly, as one captured
CUDA graph per step, or with each layer (and the head) under torch.compile, in bf16 and fp8.
Hugging Face generate() is timed by bench_hf.py. The record fields are documented in bench.py.
"""
from __future__ import annotations

import time

import torch

from bench_model import (FP8, LLAMA_8B, TINY, LlamaShaped, head_forward,
                         kv_bytes_per_token, layer_forward, weight_bytes)
from bench_timing import capture_graph

FULL_PLAN = {"batches": (1, 8, 32, 64), "contexts": (512, 4096),
             "prefills": ((1, 128), (1, 512), (1, 2048), (8, 512)),
             "hf_batches": (1, 8), "hf_prompt": 512, "hf_new": 64}
QUICK_PLAN = {"batches": (1, 2), "contexts": (32, 64), "prefills": ((1, 16), (1, 32), (2, 16)),
              "hf_batches": (1, 2), "hf_prompt": 16, "hf_new": 8}


# ----------------------------------------------------------------------------- helpers

def graph_work_nodes(graph) -> int:
    """Kernel, memset and memcpy nodes of a CUDA graph captured with keep_graph=True."""
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        from cuda import cudart
    ok = cudart.cudaError_t.cudaSuccess
    handle = graph.raw_cuda_graph()
    err, _, n = cudart.cudaGraphGetNodes(handle, 0)
    assert err == ok, err
    err, nodes, n = cudart.cudaGraphGetNodes(handle, n)
    assert err == ok, err
    kinds = cudart.cudaGraphNodeType
    work = {kinds.cudaGraphNodeTypeKernel, kinds.cudaGraphNodeTypeMemset,
            kinds.cudaGraphNodeTypeMemcpy}
    return sum(1 for node in nodes[:n] if cudart.cudaGraphNodeGetType(node)[1] in work)


def count_kernels(ctx, fn):
    """Kernels (+ memset, memcpy) of one call of fn, read off a CUDA graph of it; or None.

    No profiler: CUPTI, once started, can slow every later launch in the process."""
    if not ctx.cuda:
        return None
    try:
        graph, _ = capture_graph(fn, keep_graph=True)
        n = graph_work_nodes(graph)
        del graph
        return n
    except Exception as exc:  # optional; never fail the run for it
        ctx.log(f"[e2e] kernel count unavailable: {type(exc).__name__}: {exc}"[:200])
        return None


def e2e_record(shape, mode, dtype, phase, batch, context, prompt, new_tokens, m,
               kernels=None, compile_s=None) -> dict:
    return {"model": shape, "mode": mode, "dtype": dtype, "phase": phase, "batch": batch,
            "context": context, "prompt": prompt, "new_tokens": new_tokens,
            "seconds": m["seconds"], "tokens_per_s": batch * new_tokens / m["seconds"],
            "kernels": kernels, "compile_s": compile_s, "reps": m["reps"]}


def measure_step(ctx, fn) -> dict:
    return ctx.timer.measure(fn, target_s=0.25, min_reps=5, max_reps=20, max_inner=1,
                             warmup=2, warmup_s=0.0 if ctx.args.quick else 1.0,
                             head_start=False)


# ----------------------------------------------------------------------------- e2e plan

def points(plan, max_batch):
    """[(phase, batch, context, T)] in the order they run; decode before prefill."""
    dec = [("decode", B, S, 1) for S in plan["contexts"] for B in plan["batches"] if B <= max_batch]
    pre = [("prefill", B, 0, T) for B, T in plan["prefills"] if B <= max_batch]
    return dec, pre


def fit_max_batch(ctx, shape, plan, max_len, skipped) -> int:
    batches = sorted(set(plan["batches"]) | {b for b, _ in plan["prefills"]})
    if not ctx.cuda:
        return batches[-1]
    free, _ = torch.cuda.mem_get_info()
    budget = 0.85 * free - 1.25 * weight_bytes(shape) - 4e9   # weights, fp8 copy, activations
    fits = [b for b in batches if b * max_len * kv_bytes_per_token(shape) <= budget] or [1]
    for b in batches:
        if b > fits[-1]:
            skipped.append({"what": f"e2e batch={b}",
                            "reason": f"KV for {max_len} tokens does not fit in {free / 1e9:.0f} GB free"})
    return fits[-1]


def run_points(ctx, model, shape, mode, dtype, pts, make_fn, records, skipped):
    """Time each point with make_fn(phase, B, S, T) -> (fn, compile_s, count_kernels thunk
    or None, run after timing)."""
    for phase, B, S, T in pts:
        what = f"e2e {mode} {dtype} {phase} B={B} S={S} T={T}"
        try:
            fn, compile_s, count = make_fn(phase, B, S, T)
            m = measure_step(ctx, fn)
            kernels = count() if count else None
        except Exception as exc:  # compile and capture failures are data, not crashes
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            skipped.append({"what": what, "reason": reason})
            ctx.log(f"[{what}] failed: {reason}")
            ctx.free_memory()
            continue
        prompt = T if phase == "prefill" else None
        records.append(e2e_record(shape, mode, dtype, phase, B, S, prompt, T, m, kernels, compile_s))
        ctx.log(f"[{what}] {m['seconds'] * 1e3:.2f} ms/step"
                + (f" (compile {compile_s:.1f} s)" if compile_s is not None else "")
                + (f", {kernels} kernels" if kernels else ""))


def eager_maker(ctx, model, layer_fn=layer_forward, head_fn=head_forward):
    """Eager (or, given compiled layer/head functions, torch.compile) steps; kernels are
    counted once per phase, for compile only (eager records copy graph mode's counts)."""
    counted = set()

    def make(phase, B, S, T):
        tokens = torch.randint(0, model.embed.shape[0], (B, T), device=model.embed.device)
        fn = lambda i=0: model.forward(tokens, S, layer_fn, head_fn)  # noqa: E731
        if layer_fn is layer_forward:
            return fn, None, None
        t0 = time.perf_counter()                # first call compiles (or recompiles)
        fn()
        ctx.timer.sync()
        compile_s = time.perf_counter() - t0
        count = None
        if phase not in counted:
            counted.add(phase)
            count = lambda: count_kernels(ctx, fn)  # noqa: E731
        return fn, compile_s, count
    return make


def graph_maker(ctx, model):
    """One CUDA graph per point; its kernel count comes from the graph itself."""
    def make(phase, B, S, T):
        tokens = torch.randint(0, model.embed.shape[0], (B, T), device=model.embed.device)
        graph, _ = capture_graph(lambda: model.forward(tokens, S), keep_graph=ctx.cuda)
        try:
            kernels = graph_work_nodes(graph)
        except Exception as exc:  # optional
            ctx.log(f"[e2e] kernel count unavailable: {type(exc).__name__}: {exc}"[:200])
            kernels = None
        graph.instantiate()
        return (lambda i: graph.replay()), None, (lambda: kernels)
    return make


def copy_kernels(records, dtype) -> None:
    """Eager runs the kernels that graph mode captured at the same point."""
    key = lambda r: (r["dtype"], r["phase"], r["batch"], r["context"], r["new_tokens"])  # noqa: E731
    counts = {key(r): r["kernels"] for r in records if r["mode"] == "graph" and r["dtype"] == dtype}
    for r in records:
        if r["mode"] == "eager" and r["dtype"] == dtype and r["kernels"] is None:
            r["kernels"] = counts.get(key(r))


def compile_fns(ctx):
    import torch._dynamo as dynamo
    cfg = dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 64)
    mode = None if ctx.args.compile_mode == "default" else ctx.args.compile_mode
    return torch.compile(layer_forward, mode=mode), torch.compile(head_forward, mode=mode)


def run_e2e(ctx) -> dict:
    shape = TINY if ctx.quick else LLAMA_8B
    plan = QUICK_PLAN if ctx.quick else FULL_PLAN
    records, skipped = [], []
    max_len = max(max(plan["contexts"]) + 1, max(t for _, t in plan["prefills"]))
    max_batch = fit_max_batch(ctx, shape, plan, max_len, skipped)
    ctx.log(f"[e2e] building {shape['name']} (max batch {max_batch}, max len {max_len})")
    model = LlamaShaped(shape, ctx.device, max_batch, max_len)
    dec, pre = points(plan, max_batch)
    with torch.inference_mode():
        run_points(ctx, model, shape, "eager", "bf16", dec + pre, eager_maker(ctx, model),
                   records, skipped)
        if ctx.cuda:
            run_points(ctx, model, shape, "graph", "bf16", dec + pre, graph_maker(ctx, model),
                       records, skipped)
            copy_kernels(records, "bf16")
        else:
            skipped.append({"what": "e2e graph", "reason": "CUDA graphs need --device cuda"})
    run_compile(ctx, model, shape, dec + pre, records, skipped)
    with torch.inference_mode():
        run_fp8(ctx, model, shape, dec, records, skipped)
    del model
    ctx.free_memory()
    return {"model": shape, "records": records, "skipped": skipped}


def precompile(ctx, make, pts, deadline, skipped) -> dict:
    """Compile every point before timing any, so the compiler's worker processes are idle
    while the (host-bound) compiled steps are timed; returns {point: make(*point)}."""
    ready = {}
    for pt in pts:
        what = "e2e compile bf16 {} B={} S={} T={}".format(*pt)
        if time.perf_counter() > deadline:
            skipped.append({"what": what, "reason": "compile time budget spent"})
            continue
        try:
            ready[pt] = make(*pt)
        except Exception as exc:  # a compile failure is data, not a crash
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            skipped.append({"what": what, "reason": reason})
            ctx.log(f"[{what}] compile failed: {reason}")
            break
        ctx.log(f"[{what}] compiled in {ready[pt][1]:.1f} s")
    return ready


def run_compile(ctx, model, shape, pts, records, skipped) -> None:
    if ctx.quick and not ctx.cuda:
        skipped.append({"what": "e2e compile",
                        "reason": "skipped in --quick on cpu (inductor's C++ build is too slow for CI)"})
        return
    budget = ctx.args.compile_budget_s
    budget = (120.0 if ctx.cuda else 300.0) if budget is None else budget
    try:
        layer_fn, head_fn = compile_fns(ctx)
    except Exception as exc:
        skipped.append({"what": "e2e compile", "reason": f"{type(exc).__name__}: {exc}"[:300]})
        return
    with torch.inference_mode():
        ready = precompile(ctx, eager_maker(ctx, model, layer_fn, head_fn), pts,
                           time.perf_counter() + budget, skipped)
        run_points(ctx, model, shape, "compile", "bf16", list(ready), lambda *pt: ready[pt],
                   records, skipped)
    import torch._dynamo as dynamo
    dynamo.reset()


def run_fp8(ctx, model, shape, dec, records, skipped) -> None:
    if not ctx.cuda or FP8 is None or torch.cuda.get_device_capability() < (8, 9):
        skipped.append({"what": "e2e fp8", "reason": "fp8 needs a CUDA GPU of compute capability >= 8.9"})
        return
    model.to_fp8()
    ctx.free_memory()
    run_points(ctx, model, shape, "eager", "fp8_e4m3", dec[:1], eager_maker(ctx, model),
               records, skipped)
    run_points(ctx, model, shape, "graph", "fp8_e4m3", dec, graph_maker(ctx, model),
               records, skipped)
    copy_kernels(records, "fp8_e4m3")
