"""Burst vs sustained tensor-core throughput and SM clock of one GPU (torch + stdlib only).

A microbenchmark that times ten products behind an idle gap sees the card at its boost clock;
a serving engine keeps the card busy for seconds, and under a power cap the SM clock falls.
This script measures both, and what mixed prompt/decode work and attention see:
  gemm_*     : burst (10 products after a 3 s idle) vs back-to-back for `secs` in 0.5 s windows
  ramp       : each product's time from idle, to see how fast the clock falls
  copy       : a memory-bound copy, burst vs sustained
  decode     : M=64 GEMMs over weights rotated past L2 (memory-bound), sustained
  mixed      : ~25 ms of M=4096 GEMMs then ~25 ms of decode GEMMs, repeated; the GEMM part timed
  attention  : causal SDPA (flash) 8192 tokens, burst vs sustained
nvidia-smi samples SM clock, power and throttle reasons every 250 ms (read only; no setting is
touched). Writes $OUT/sustained-<gpu>.json.
"""
import json, os, subprocess, sys, time, threading
import torch

OUT = os.environ.get("OUT", "/tmp")
dev = torch.device("cuda")
SECS = float(os.environ.get("SUSTAIN_SECS", "30"))


def smi_sampler(stop, rows):
    q = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active,power.limit"
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "250"],
                         stdout=subprocess.PIPE, text=True)
    while not stop.is_set():
        line = p.stdout.readline()
        if not line:
            break
        rows.append((time.time(), line.strip()))
    p.terminate()


def gemm_fn(kind, M, N, K, nbuf=4):
    xs = [torch.randn(M, K, device=dev, dtype=torch.bfloat16) for _ in range(nbuf)]
    ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) for _ in range(nbuf)]
    one = torch.ones((), device=dev, dtype=torch.float32)
    if kind == "fp8":
        xs = [x.to(torch.float8_e4m3fn) for x in xs]
        ws = [w.to(torch.float8_e4m3fn) for w in ws]

    def f(i):
        x, w = xs[i % nbuf], ws[i % nbuf]
        if kind == "fp8":
            return torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return x @ w.t()
    return f, 2.0 * M * N * K


def timed(f, n, start=0):
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(n):
        f(start + i)
    b.record(); torch.cuda.synchronize()
    return a.elapsed_time(b) / 1e3


def burst_and_sustained(name, f, work, secs):
    for i in range(5):
        f(i)
    torch.cuda.synchronize(); time.sleep(3.0)
    burst = work * 10 / timed(f, 10)
    win, t0, i = [], time.time(), 0
    while time.time() - t0 < secs:
        n, el = 0, 0.0
        t1 = time.time()
        while time.time() - t1 < 0.5:
            el += timed(f, 20, i); i += 20; n += 20
        win.append((round(time.time() - t0, 3), work * n / el))
    last = sum(w[1] for w in win[-10:]) / len(win[-10:])
    print(f"{name}: burst {burst:.4g}/s first {win[0][1]:.4g} last {last:.4g} ratio {last / burst:.3f}", flush=True)
    return {"name": name, "burst_per_s": burst, "windows": win, "sustained_per_s": last,
            "t_start": t0}


def main():
    if not torch.cuda.is_available():
        print("bench_sustained.py: needs a CUDA GPU (it times the card's clock under load)",
              file=sys.stderr)
        raise SystemExit(2)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "secs": SECS, "runs": []}
    stop, smi = threading.Event(), []
    threading.Thread(target=smi_sampler, args=(stop, smi), daemon=True).start()
    time.sleep(2.0)
    # ramp from idle: each bf16 8192^3 product timed on its own
    f, fl = gemm_fn("bf16", 8192, 8192, 8192)
    for i in range(3):
        f(i)
    torch.cuda.synchronize(); time.sleep(5.0)
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(1501)]
    evs[0].record()
    for i in range(1500):
        f(i); evs[i + 1].record()
    torch.cuda.synchronize()
    dts = [evs[i].elapsed_time(evs[i + 1]) / 1e3 for i in range(1500)]
    t, ramp = 0.0, []
    for d in dts:
        t += d; ramp.append((round(t, 5), fl / d))
    res["ramp"] = ramp
    print("ramp: product 1-5 %.0f TF, at 50 ms %.0f, 200 ms %.0f, 1 s %.0f, end %.0f" % tuple(
        x / 1e12 for x in (sum(r[1] for r in ramp[:5]) / 5,
                          next(r[1] for r in ramp if r[0] > 0.05), next(r[1] for r in ramp if r[0] > 0.2),
                          next(r[1] for r in ramp if r[0] > 1.0), ramp[-1][1])), flush=True)
    for kind, shp in [("bf16", (8192, 8192, 8192)), ("fp8", (8192, 8192, 8192)), ("bf16", (4096, 8192, 8192))]:
        f, fl = gemm_fn(kind, *shp)
        r = burst_and_sustained(f"gemm_{kind}_{shp[0]}x{shp[1]}x{shp[2]}", f, fl, SECS)
        r.update(kind=kind, shape=list(shp)); res["runs"].append(r)
        del f; torch.cuda.empty_cache()
    # memory-bound copy, 2 GiB per direction, rotated
    src = [torch.empty(1 << 30, device=dev, dtype=torch.bfloat16).normal_() for _ in range(2)]
    dst = torch.empty_like(src[0])
    def cp(i):
        dst.copy_(src[i % 2])
    res["runs"].append(burst_and_sustained("copy_bytes", cp, 2.0 * src[0].numel() * 2, SECS / 2))
    del src, dst; torch.cuda.empty_cache()
    # decode-like: M=64 over 8 weight sets of 8192x28672 bf16 (3.76 GB, >> L2)
    f, fl = gemm_fn("bf16", 64, 28672, 8192, nbuf=8)
    r = burst_and_sustained("decode_gemm_m64_flops", f, fl, SECS / 2); res["runs"].append(r)
    # mixed: prompt GEMMs (~25 ms) then decode GEMMs (~25 ms), the prompt part timed
    fp, flp = gemm_fn("bf16", 4096, 8192, 8192)
    for i in range(5):
        fp(i); f(i)
    torch.cuda.synchronize(); time.sleep(3.0)
    burst_p = flp * 10 / timed(fp, 10)
    np_, nd = 36, 60   # ~0.7 ms x 36 and ~0.45 ms x 60 at burst clocks
    wins, t0, i = [], time.time(), 0
    while time.time() - t0 < SECS / 2:
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        c = torch.cuda.Event(enable_timing=True)
        a.record()
        for j in range(np_):
            fp(i + j)
        b.record()
        for j in range(nd):
            f(i + j)
        c.record(); torch.cuda.synchronize(); i += np_
        wins.append((round(time.time() - t0, 3), flp * np_ / (a.elapsed_time(b) / 1e3),
                     a.elapsed_time(b) / 1e3, b.elapsed_time(c) / 1e3))
    last = wins[len(wins) // 2:]
    mixed = sum(w[1] for w in last) / len(last)
    share = sum(w[2] for w in last) / sum(w[2] + w[3] for w in last)
    print(f"mixed: prompt GEMM burst {burst_p / 1e12:.0f} TF, in the mix {mixed / 1e12:.0f} TF "
          f"ratio {mixed / burst_p:.3f}; prompt share of time {share:.2f}", flush=True)
    res["runs"].append({"name": "mixed_prompt_decode", "burst_per_s": burst_p, "sustained_per_s": mixed,
                        "prompt_time_share": share, "windows": wins, "t_start": t0})
    del f, fp; torch.cuda.empty_cache()
    # attention: causal flash SDPA, 8 x 64 heads x 8192 x 128 bf16
    B, H, S, D = 2, 64, 8192, 128
    q = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn_like(q); v = torch.randn_like(q)
    def at(i):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    afl = 4.0 * B * H * S * S * D / 2
    res["runs"].append(burst_and_sustained("attention_causal_flops", at, afl, SECS / 2))
    stop.set(); time.sleep(0.5)
    res["smi"] = smi
    name = torch.cuda.get_device_name().lower().replace(" ", "-")
    json.dump(res, open(os.path.join(OUT, f"sustained-{name}.json"), "w"), indent=0)
    for _, s in smi[::20]:
        print(s)


if __name__ == "__main__":
    main()
