"""GEMM rate at the per-GPU tensor-parallel shards of dense prompt steps (torch + stdlib only).

    python3 calibrate/bench_tp_shards.py OUT.json

Llama-3.1-70B and Qwen3-32B (config.json): per layer qkv [D -> (Q + 2 KV)/tp], o [Q/tp -> D],
gate_up [D -> 2F/tp], down [F/tp -> D] at tp 1, 2, 4, 8, M token rows; bf16 (F.linear) and fp8
e4m3 per-tensor (torch._scaled_mm, bf16 out; quantization not timed). For each (kind, model,
layer, M) the four shards are timed back to back, so their ratio does not depend on the clock.
CUDA events around `inner` calls, median of 7 repeats after 3 warm-ups, 4 input sets rotated
(random data). records: kind, model, layer, tp, M, N, K, seconds, flops (2MNK), flops_per_s.
"""
import json, statistics, sys, time
import torch
import torch.nn.functional as F

MODELS = {"llama-3.1-70b": (8192, 8192, 1024, 28672), "qwen3-32b": (5120, 8192, 1024, 25600)}
# (D, Q = heads x head_dim, KV = kv_heads x head_dim, F)


def shapes(D, Q, KV, Fd, tp):
    return {"qkv": (D, (Q + 2 * KV) // tp), "o": (Q // tp, D), "gate_up": (D, 2 * Fd // tp),
            "down": (Fd // tp, D)}   # (K, N)


def timed(fn, flops):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    inner = max(1, int(2e12 / flops))   # ~2 TFLOP per timed repeat
    out = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / inner)
    return statistics.median(out)


def main(path):
    torch.manual_seed(0)
    recs, t0 = [], time.time()
    one = torch.ones((), device="cuda")
    for kind in ("fp8", "bf16"):
        for model, dims in MODELS.items():
            for layer in ("qkv", "o", "gate_up", "down"):
                for M in (1024, 2048, 4096, 8192, 16384):
                    for tp in (1, 2, 4, 8):
                        K, N = shapes(*dims, tp)[layer]
                        xs = [torch.randn(M, K, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
                        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
                        if kind == "fp8":
                            xs = [x.to(torch.float8_e4m3fn) for x in xs]
                            w8 = w.to(torch.float8_e4m3fn)
                            ref = F.linear(xs[0].to(torch.bfloat16), w8.to(torch.bfloat16)).float()
                            got = torch._scaled_mm(xs[0], w8.t(), scale_a=one, scale_b=one,
                                                   out_dtype=torch.bfloat16).float()
                            it = iter(range(10**9))
                            fn = lambda: torch._scaled_mm(xs[next(it) % 4], w8.t(), scale_a=one,
                                                          scale_b=one, out_dtype=torch.bfloat16)
                        else:
                            ref = xs[0].float() @ w.float().t()
                            got = F.linear(xs[0], w).float()
                            it = iter(range(10**9))
                            fn = lambda: F.linear(xs[next(it) % 4], w)
                        err = float((got - ref).norm() / ref.norm())
                        fl = 2.0 * M * N * K
                        s = timed(fn, fl)
                        recs.append(dict(kind=kind, model=model, layer=layer, tp=tp, M=M, N=N, K=K,
                                         seconds=s, flops=fl, flops_per_s=fl / s, rel_err=err))
                        del xs, w
            print(kind, model, f"{time.time() - t0:.0f}s", flush=True)
    env = dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(0),
               cuda=torch.version.cuda, elapsed_s=time.time() - t0)
    json.dump(dict(schema_version=1, env=env, records=recs), open(path, "w"), indent=1)
    for kind in ("fp8", "bf16"):
        for model in MODELS:
            for layer in ("qkv", "o", "gate_up", "down"):
                row = [r for r in recs if (r["kind"], r["model"], r["layer"]) == (kind, model, layer)
                       and r["M"] == 4096]
                print(kind, model, layer, " ".join(f"tp{r['tp']} {r['flops_per_s'] / 1e12:.0f}"
                                                   for r in row))


if __name__ == "__main__":
    main(sys.argv[1])
