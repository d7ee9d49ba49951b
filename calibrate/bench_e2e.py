"""End-to-end timing of a random-weight Llama-shaped model in plain torch, for calibrate/bench.py.

torch + the standard library only. The model is written out here (RMSNorm, rotary, GQA
attention over a preallocated KV cache, SwiGLU MLP, lm_head on the last position, argmax) so
that it runs eagerly, as one captured CUDA graph per decode step, or with each layer
(and the head) under torch.compile. fp8 linears are per-tensor scaled torch._scaled_mm with a
static activation scale of 1 (weights keep a per-tensor scale); lm_head stays bf16.
Also times Hugging Face generate() on a randomly initialised LlamaForCausalLM when
transformers is importable. The record fields are documented in bench.py.
"""
from __future__ import annotations

import gc
import statistics
import time

import torch
import torch.nn.functional as F

LLAMA_8B = {"name": "llama-3.1-8b-shape", "num_layers": 32, "d_model": 4096, "num_heads": 32,
            "num_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336, "vocab_size": 128256,
            "tied_embeddings": False, "rope_theta": 500000.0}
TINY = {"name": "tiny-llama-shape", "num_layers": 2, "d_model": 256, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "ffn_dim": 512, "vocab_size": 1024,
        "tied_embeddings": False, "rope_theta": 500000.0}
FULL_PLAN = {"batches": (1, 8, 32, 64), "contexts": (512, 4096),
             "prefills": ((1, 128), (1, 512), (1, 2048), (8, 512)),
             "hf_batches": (1, 8), "hf_prompt": 512, "hf_new": 64}
QUICK_PLAN = {"batches": (1, 2), "contexts": (32, 64), "prefills": ((1, 16), (1, 32), (2, 16)),
              "hf_batches": (1, 2), "hf_prompt": 16, "hf_new": 8}
BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)


# ----------------------------------------------------------------------------- the model

def rms_norm(x, w, eps: float = 1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def linear(x, w):
    """bf16 weight [out, in], or fp8 (weight [out, in], weight scale, activation scale)."""
    if not isinstance(w, tuple):
        return F.linear(x, w)
    wq, w_scale, x_scale = w
    x2 = x.reshape(-1, x.shape[-1]).to(FP8)
    y = torch._scaled_mm(x2, wq.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=BF16)
    return y.view(*x.shape[:-1], y.shape[-1])


def out_features(w) -> int:
    return (w[0] if isinstance(w, tuple) else w).shape[0]


def rope(x, cos, sin):
    """x [B, T, heads, H]; cos, sin [T, H/2]; rotate-half form (as in HF Llama)."""
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def layer_forward(x, w, kc, vc, cos, sin, pos: int):
    """One decoder layer; writes K, V at [pos, pos+T) and attends over [0, pos+T)."""
    attn_norm, wqkv, wo, mlp_norm, wgu, wdown = w
    B, T, _ = x.shape
    K, H = kc.shape[1], kc.shape[3]
    kv_dim = K * H
    q_dim = out_features(wqkv) - 2 * kv_dim
    q, k, v = linear(rms_norm(x, attn_norm), wqkv).split((q_dim, kv_dim, kv_dim), dim=-1)
    q = rope(q.view(B, T, q_dim // H, H), cos, sin).transpose(1, 2)
    kc[:, :, pos:pos + T] = rope(k.view(B, T, K, H), cos, sin).transpose(1, 2)
    vc[:, :, pos:pos + T] = v.view(B, T, K, H).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, kc[:, :, :pos + T], vc[:, :, :pos + T],
                                       is_causal=T > 1, enable_gqa=True)
    x = x + linear(o.transpose(1, 2).reshape(B, T, q_dim), wo)
    gate, up = linear(rms_norm(x, mlp_norm), wgu).chunk(2, dim=-1)
    return x + linear(F.silu(gate) * up, wdown)


def head_forward(x, norm_w, lm_head):
    """Final norm, lm_head and greedy pick on the last position only: [B, D] -> [B]."""
    return F.linear(rms_norm(x, norm_w), lm_head).argmax(dim=-1)


class LlamaShaped:
    def __init__(self, shape: dict, device: str, max_batch: int, max_len: int):
        D, N, K = shape["d_model"], shape["num_heads"], shape["num_kv_heads"]
        H, Fd, V, L = shape["head_dim"], shape["ffn_dim"], shape["vocab_size"], shape["num_layers"]

        def weight(n_out, n_in):
            return torch.randn(n_out, n_in, device=device, dtype=BF16).mul_(n_in ** -0.5)

        def norm(n):
            return torch.randn(n, device=device, dtype=BF16).mul_(0.1).add_(1.0)

        self.embed = torch.randn(V, D, device=device, dtype=BF16)
        self.layers = [(norm(D), weight((N + 2 * K) * H, D), weight(D, N * H), norm(D),
                        weight(2 * Fd, D), weight(D, Fd)) for _ in range(L)]
        self.norm, self.lm_head = norm(D), weight(V, D)
        cache = (max_batch, K, max_len, H)
        self.k_cache = [torch.randn(cache, device=device, dtype=BF16) for _ in range(L)]
        self.v_cache = [torch.randn(cache, device=device, dtype=BF16) for _ in range(L)]
        inv = 1.0 / shape["rope_theta"] ** (torch.arange(0, H, 2, device=device).float() / H)
        ang = torch.outer(torch.arange(max_len, device=device).float(), inv)
        self.cos, self.sin = ang.cos().to(BF16), ang.sin().to(BF16)

    def forward(self, tokens, pos: int, layer_fn=layer_forward, head_fn=head_forward):
        B, T = tokens.shape
        x = F.embedding(tokens, self.embed)
        cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]
        for w, kc, vc in zip(self.layers, self.k_cache, self.v_cache):
            x = layer_fn(x, w, kc[:B], vc[:B], cos, sin, pos)
        return head_fn(x[:, -1], self.norm, self.lm_head)

    def to_fp8(self) -> None:
        """Replace the four linears of every layer by per-tensor scaled e4m3 weights."""
        one = torch.ones((), device=self.embed.device, dtype=torch.float32)

        def quant(w):
            scale = (w.abs().amax().float() / 448.0).clamp(min=1e-12)
            return ((w.float() / scale).to(FP8), scale, one)
        self.layers = [(a, quant(qkv), quant(o), m, quant(gu), quant(d))
                       for a, qkv, o, m, gu, d in self.layers]


# ----------------------------------------------------------------------------- helpers

def weight_bytes(shape: dict) -> int:
    D, N, K, H = shape["d_model"], shape["num_heads"], shape["num_kv_heads"], shape["head_dim"]
    per_layer = (N + 2 * K) * H * D + D * N * H + 3 * D * shape["ffn_dim"] + 2 * D
    return 2 * (shape["num_layers"] * per_layer + 2 * shape["vocab_size"] * D + D)


def kv_bytes_per_token(shape: dict) -> int:
    return 2 * shape["num_layers"] * shape["num_kv_heads"] * shape["head_dim"] * 2


def capture_graph(fn, keep_graph: bool = False):
    """Warm fn up on a side stream, capture one call; returns (graph, its output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep_graph else torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


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
                             warmup=2, head_start=False)


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


# ----------------------------------------------------------------------------- Hugging Face

def build_hf(shape, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=shape["vocab_size"], hidden_size=shape["d_model"],
                      intermediate_size=shape["ffn_dim"], num_hidden_layers=shape["num_layers"],
                      num_attention_heads=shape["num_heads"],
                      num_key_value_heads=shape["num_kv_heads"], head_dim=shape["head_dim"],
                      max_position_embeddings=8192, rope_theta=shape["rope_theta"],
                      tie_word_embeddings=False)
    with torch.device(device):
        try:
            model = LlamaForCausalLM._from_config(cfg, dtype=BF16)
        except TypeError:  # transformers < 4.56 names it torch_dtype
            model = LlamaForCausalLM._from_config(cfg, torch_dtype=BF16)
    return model.to(device=device, dtype=BF16).eval()


def hf_generate_times(ctx, model, batch, prompt, new):
    """Median seconds of generate() with 1 and with `new` new tokens (greedy, fixed length)."""
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=ctx.device)
    mask = torch.ones_like(ids)

    def gen(n):
        ctx.timer.sync()
        t0 = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, pad_token_id=0)
        ctx.timer.sync()
        return time.perf_counter() - t0
    gen(4)
    gc.collect()
    gc.disable()  # as in bench.Timer
    try:
        t_one = statistics.median(gen(1) for _ in range(3))
        t_new = statistics.median(gen(new) for _ in range(2))
    finally:
        gc.enable()
    return t_one, t_new


def run_hf(ctx) -> dict:
    shape = TINY if ctx.quick else LLAMA_8B
    plan = QUICK_PLAN if ctx.quick else FULL_PLAN
    records, skipped = [], []
    try:
        import transformers
        transformers.logging.set_verbosity_error()
        model = build_hf(shape, ctx.device)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        skipped.append({"what": "hf_generate", "reason": reason})
        ctx.log(f"[hf_generate] skipped: {reason}")
        return {"model": shape, "records": records, "skipped": skipped}
    prompt, new = plan["hf_prompt"], plan["hf_new"]
    for B in plan["hf_batches"]:
        try:
            with torch.inference_mode():
                t_one, t_new = hf_generate_times(ctx, model, B, prompt, new)
        except Exception as exc:
            skipped.append({"what": f"hf_generate B={B}", "reason": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        per_token = (t_new - t_one) / (new - 1)
        dec = e2e_record(shape, "hf_generate", "bf16", "decode", B, prompt, None, 1,
                         {"seconds": per_token, "reps": 2})
        dec["generated_tokens"] = new
        pre = e2e_record(shape, "hf_generate", "bf16", "prefill", B, 0, prompt, prompt,
                         {"seconds": t_one, "reps": 3})
        pre["generated_tokens"] = 1
        records += [dec, pre]
        ctx.log(f"[hf_generate B={B} prompt={prompt}] {per_token * 1e3:.2f} ms/token, "
                f"generate(1) {t_one * 1e3:.1f} ms")
    del model
    ctx.free_memory()
    return {"model": shape, "records": records, "skipped": skipped}

