"""End-to-end timing of a random-weight Llama-shaped model in plain torch, for calibrate/bench.py.

torch + the standard library only. Each mode runs the engine preset it stands for
(perfmodel/core/engines.py; the section's "modes" says what ran): eager = torch-eager (plain
PyTorch, gpt-fast's model without compile), graph = torch-graph (the eager step in one CUDA
graph), compile = torch-compile (gpt-fast: the whole step under torch.compile,
mode="reduce-overhead", CUDA graphs); bf16, and fp8 for eager and graph. Hugging Face
generate() (hf-eager) is timed by bench_hf.py. The record fields are documented in bench.py.
"""
from __future__ import annotations

import time

import torch

from bench_hostbound import ClockSampler, measure_rounds
from bench_model import FP8, LLAMA_8B, TINY, LlamaShaped, kv_bytes_per_token, weight_bytes
from bench_timing import capture_graph

FULL_PLAN = {"batches": (1, 8, 32, 64), "contexts": (512, 4096),
             "prefills": ((1, 128), (1, 512), (1, 2048), (8, 512)),
             "hf_configs": ((1, 128), (1, 512), (1, 2048), (4, 512), (8, 512), (16, 1024)),
             "hf_new": 32}
QUICK_PLAN = {"batches": (1, 2), "contexts": (32, 64), "prefills": ((1, 16), (1, 32), (2, 16)),
              "hf_configs": ((1, 16), (2, 16), (1, 32)), "hf_new": 8}


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


def run_host_bound(ctx, shape, mode, dtype, pts, make_fn, records, skipped, clocks) -> None:
    """Eager steps, each timed in ctx.args.rounds interleaved rounds (bench_hostbound.py)."""
    fns = {}
    for pt in pts:
        fns[pt] = make_fn(*pt)[0]
    warm = 0.0 if ctx.args.quick else 1.0
    res = measure_rounds(ctx, fns, rounds=ctx.args.rounds, warmup_s=warm, clocks=clocks)
    for pt, reason in res.pop("errors").items():
        skipped.append({"what": "e2e {} {} {} B={} S={} T={}".format(mode, dtype, *pt), "reason": reason})
    for (phase, B, S, T), m in res.items():
        prompt = T if phase == "prefill" else None
        rec = e2e_record(shape, mode, dtype, phase, B, S, prompt, T, m)
        rec.update({k: m[k] for k in HOST_FIELDS})
        records.append(rec)
        ctx.log(f"[e2e {mode} {dtype} {phase} B={B} S={S} T={T}] {m['seconds'] * 1e3:.2f} ms/step "
                f"(rounds {', '.join(f'{x * 1e3:.1f}' for x in m['rounds_s'])}; host "
                f"{m['host_s'] * 1e3:.1f}, synced {m['synced_s'] * 1e3:.1f}; SM {m['sm_clock_mhz']} MHz)")
    fns.clear()


HOST_FIELDS = ("rounds_s", "spread", "host_s", "synced_s", "sm_clock_mhz", "mem_clock_mhz")


def eager_maker(ctx, model):
    """Eager steps: every op dispatched from Python (kernels: graph mode's counts, copied)."""
    def make(phase, B, S, T):
        tokens = torch.randint(0, model.embed.shape[0], (B, T), device=model.embed.device)
        return (lambda i=0: model.forward(tokens, S)), None, None
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


def compile_step(ctx, model, mode):
    """The torch-compile engine as gpt-fast runs it: the whole model step (all layers, the
    head and the argmax) under one torch.compile, fullgraph, mode="reduce-overhead" (CUDA
    graphs via cudagraph trees). dynamic=True: one compiled graph serves every batch and
    context (fewer compiles in the lease; shape specialisations 1 vs >1 still recompile), and
    cudagraph trees record one CUDA graph per distinct shape. Weights and KV caches are
    marked static addresses, as nn.Module parameters and buffers are in gpt-fast, so the
    graphs read them in place instead of copying them in."""
    import torch._dynamo as dynamo
    cfg = dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 64)
    for t in model.tensors():
        dynamo.mark_static_address(t)
    kw = {} if mode in (None, "default") else {"mode": mode}
    return torch.compile(model.forward, fullgraph=True, dynamic=True, **kw)


def compile_maker(ctx, model, step, graphs: bool):
    def make(phase, B, S, T):
        tokens = torch.randint(0, model.embed.shape[0], (B, T), device=model.embed.device)
        mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None) if graphs else None

        def fn(i=0):
            if mark is not None:
                mark()           # each call is a new inference step (cudagraph trees)
            return step(tokens, S)
        t0 = time.perf_counter()                # first call compiles (or recompiles)
        fn()
        ctx.timer.sync()
        return fn, time.perf_counter() - t0, None
    return make


def mode_details(ctx) -> dict:
    """What each e2e mode runs, and the engine preset (perfmodel/core/engines.py) it stands for."""
    mode = ctx.args.compile_mode
    return {
        "eager": {"engine": "torch-eager", "scope": "whole model", "compiled": False,
                  "cuda_graphs": False, "attention": "SDPA default dispatch (enable_gqa)",
                  "what": "plain PyTorch eager, as gpt-fast's model.py without compile: every "
                          "op dispatched from Python"},
        "graph": {"engine": "torch-graph", "scope": "whole model", "compiled": False,
                  "cuda_graphs": ctx.cuda, "attention": "SDPA default dispatch (enable_gqa)",
                  "what": "the eager step captured as one CUDA graph per (B, S, T) point and "
                          "replayed (unfused kernels)"},
        "compile": {"engine": "torch-compile", "scope": "whole model", "compiled": True,
                    "compile_mode": mode, "fullgraph": True, "dynamic": True,
                    "cuda_graphs": ctx.cuda and mode == "reduce-overhead",
                    "attention": "SDPA (extern kernel in the compiled graph)",
                    "what": "gpt-fast's decode: torch.compile of the whole step (layers, head, "
                            "argmax), mode=" + repr(mode) + ", cudagraph trees"},
    }


def run_e2e(ctx) -> dict:
    shape = TINY if ctx.quick else LLAMA_8B
    plan = QUICK_PLAN if ctx.quick else FULL_PLAN
    records, skipped = [], []
    max_len = max(max(plan["contexts"]) + 1, max(t for _, t in plan["prefills"]))
    max_batch = fit_max_batch(ctx, shape, plan, max_len, skipped)
    ctx.log(f"[e2e] building {shape['name']} (max batch {max_batch}, max len {max_len})")
    model = LlamaShaped(shape, ctx.device, max_batch, max_len)
    dec, pre = points(plan, max_batch)
    clocks = ClockSampler(ctx.cuda)
    with torch.inference_mode():
        run_host_bound(ctx, shape, "eager", "bf16", dec + pre, eager_maker(ctx, model),
                       records, skipped, clocks)
        if ctx.cuda:
            run_points(ctx, model, shape, "graph", "bf16", dec + pre, graph_maker(ctx, model),
                       records, skipped)
            copy_kernels(records, "bf16")
        else:
            skipped.append({"what": "e2e graph", "reason": "CUDA graphs need --device cuda"})
    stats = run_compile(ctx, model, shape, dec + pre, records, skipped)
    with torch.inference_mode():
        run_fp8(ctx, model, shape, dec, records, skipped, clocks)
    clocks.stop()
    del model
    ctx.free_memory()
    modes = mode_details(ctx)
    modes["compile"].update(stats)
    return {"model": shape, "modes": modes, "records": records, "skipped": skipped}


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


def run_compile(ctx, model, shape, pts, records, skipped) -> dict:
    if ctx.quick and not ctx.cuda:
        skipped.append({"what": "e2e compile",
                        "reason": "skipped in --quick on cpu (inductor's C++ build is too slow for CI)"})
        return {}
    budget = ctx.args.compile_budget_s
    budget = 300.0 if budget is None else budget
    deadline = time.perf_counter() + budget
    mode = ctx.args.compile_mode
    graphs = ctx.cuda and mode == "reduce-overhead"
    try:
        step = compile_step(ctx, model, mode)
    except Exception as exc:
        skipped.append({"what": "e2e compile", "reason": f"{type(exc).__name__}: {exc}"[:300]})
        return {}
    with torch.inference_mode():
        ready = precompile(ctx, compile_maker(ctx, model, step, graphs), compile_order(pts),
                           deadline, skipped)
        run_points(ctx, model, shape, "compile", "bf16", list(ready), lambda *pt: ready[pt],
                   records, skipped)
        ready.clear()
        stats = compile_stats()
        count_compiled_kernels(ctx, model, records, deadline + COUNT_ALLOWANCE_S, skipped)
    import torch._dynamo as dynamo
    dynamo.reset()
    return stats


COUNT_ALLOWANCE_S = 90.0   # the kernel count's one extra compile may start this long after the budget


def compile_order(pts):
    """Points in the order that keeps the most distinct ones inside the compile budget: on
    torch 2.11 each context S (the cache position) and B = 1 vs > 1 compile anew, prefill
    lengths share a graph. Decode at the first context, prefill B = 1, decode at the other
    contexts, then batched prefill."""
    first_s = min((S for phase, _, S, _ in pts if phase == "decode"), default=0)

    def key(p):
        phase, B, S, T = p
        if phase == "prefill":
            return (1 if B == 1 else 3, B, T)
        return (0 if S == first_s else 2, S, B)
    return sorted(pts, key=key)


def compile_stats() -> dict:
    """Dynamo/inductor counters after the timed compile points: graphs compiled, graph
    breaks, and CUDA graph skips (a skip means a step ran without its CUDA graph)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {"unique_graphs": int(counters["stats"].get("unique_graphs", 0)),
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "cudagraph_skips": int(sum(counters["inductor"].get(k, 0) for k in counters["inductor"]
                                       if "cudagraph_skip" in k))}


def count_compiled_kernels(ctx, model, records, deadline, skipped) -> None:
    """Kernels of one compiled decode step (B=1, the first context): cudagraph trees keep no
    graph to read, so the same step is compiled once more without CUDA graphs (the same
    inductor kernels: reduce-overhead only adds the graphs) and captured here. Its count is
    copied to every compile record of the same phase."""
    dec = [r for r in records if r["mode"] == "compile" and r["phase"] == "decode"]
    if not ctx.cuda or not dec:
        return
    if time.perf_counter() > deadline:
        skipped.append({"what": "e2e compile kernel count", "reason": "compile time budget spent"})
        return
    first = min(dec, key=lambda r: (r["batch"], r["context"]))
    try:
        twin = compile_step(ctx, model, "default")
        tokens = torch.randint(0, model.embed.shape[0], (first["batch"], 1), device=model.embed.device)
        n = count_kernels(ctx, lambda: twin(tokens, first["context"]))
    except Exception as exc:  # optional; never fail the run for it
        skipped.append({"what": "e2e compile kernel count", "reason": f"{type(exc).__name__}: {exc}"[:300]})
        return
    for r in dec:
        r["kernels"] = n
    ctx.log(f"[e2e compile] {n} kernels per decode step (B={first['batch']} S={first['context']})")


def run_fp8(ctx, model, shape, dec, records, skipped, clocks) -> None:
    if not ctx.cuda or FP8 is None or torch.cuda.get_device_capability() < (8, 9):
        skipped.append({"what": "e2e fp8", "reason": "fp8 needs a CUDA GPU of compute capability >= 8.9"})
        return
    model.to_fp8()
    ctx.free_memory()
    run_host_bound(ctx, shape, "eager", "fp8_e4m3", dec, eager_maker(ctx, model),
                   records, skipped, clocks)
    run_points(ctx, model, shape, "graph", "fp8_e4m3", dec, graph_maker(ctx, model),
               records, skipped)
    copy_kernels(records, "fp8_e4m3")
