#!/usr/bin/env python3
"""One GPU's share of one Gated DeltaNet (linear-attention) layer core in a prompt step, eager.

    python3 calibrate/bench_gdn_prefill.py --device cuda --out calibrate/data/gdn-prefill-h200-sxm-<date>.json
    python3 calibrate/bench_gdn_prefill.py --quick --device cpu --out /tmp/g.json   # tiny, CI

What SGLang's Qwen3-Next / Qwen3.5 GatedDeltaNet runs between its input and output projections
in an extend (prompt) batch (sglang srt/layers/attention/hybrid_linear_attn_backend.py,
forward_extend; its fla/ kernels are a vendored copy of flash-linear-attention):
  conv:  causal conv1d (kernel 4, SiLU) over the q|k|v channels, varlen, final conv states out;
  gate:  g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b) (SGLang fuses this into one
         Triton kernel, fused_gdn_gating; plain torch here: an upper bound on its kernels);
  core:  chunk_gated_delta_rule (chunk 64, q/k L2-normalised in the kernel, zero initial state,
         final state out), varlen over the batch's prompts (cu_seqlens);
  norm:  gated RMSNorm of the output, SiLU gate (RMSNormGated).
The projections (in_proj_qkvz, in_proj_ba, out_proj) are GEMMs and are left out: the op list
prices them with the other GEMMs.

The kernels come from flash-linear-attention (`fla`, carried as a wheel: fla-core on PyPI) when it
imports; otherwise (CPU, CI) from a plain torch chunked reference of the same arithmetic
(`torch_chunk_gdn`, HF transformers' torch_chunk_gated_delta_rule form), recorded as
`backend: "torch"` and not a measurement of an engine's kernels. On the GPU the fla output is
checked against the torch reference at a small size (`check`).

Per (tp, prompts x tokens): Qwen3.5-397B-A17B's linear layers at tp GPUs: 16/tp key heads and
64/tp value heads of 128 (config.json linear_num_key_heads 16, linear_num_value_heads 64,
linear_key_head_dim = linear_value_head_dim = 128, linear_conv_kernel_dim 4).
  ops_s: each op's GPU time (CUDA events, the layer queued behind a GPU sleep), median;
  ops_host_s: each op's host time to enqueue it, queued behind that sleep; an op that waits
         for the GPU (a host sync) shows the rest of the sleep here, so `host_sync` says whether
         the layer's enqueue outlasted half of a long sleep;
  layer_gpu_s / layer_wall_s / layer_issue_s: a loop of layers queued behind a sleep (GPU
         time), without it (wall), and the host time to enqueue it, per layer;
  kernels: CUDA kernels, memcpy and memset of one layer (torch.profiler).
JSON (schema_version 1): env, args, check, records [...], elapsed_s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

from bench_env import env_section, log, nvidia_smi, one_line, write_json  # noqa: E402
from layer_timing import host_waits, measure_layer, run_layer  # noqa: E402

try:
    from fla.modules.causal_conv1d.ops import causal_conv1d as fla_conv
    from fla.modules.norm.fused_norm_gate import rms_norm_gated as fla_norm_gated
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk_gdn
except Exception:   # noqa: BLE001 - no fla (or no GPU triton): the torch reference
    fla_conv = fla_norm_gated = fla_chunk_gdn = None

# Qwen3.5-397B-A17B text_config (huggingface.co/Qwen/Qwen3.5-397B-A17B config.json).
KEY_HEADS, VALUE_HEADS, HEAD_DIM, CONV_KERNEL = 16, 64, 128, 4
CHUNK = 64                     # chunk_gated_delta_rule's chunk size (BT = 64)
SHAPES = ((1, 1024), (1, 2048), (1, 4096), (1, 8192), (1, 16384), (4, 1024), (4, 8192),
          (16, 1024))          # (prompts, tokens each)
TPS = (4, 8)


def torch_chunk_gdn(q, k, v, g, beta, chunk: int = CHUNK):
    """Chunked gated delta rule for one sequence, q/k [T, Hk, dk], v [T, Hv, dv], g/beta
    [T, Hv] (g: log decay); returns (o [T, Hv, dv], final state [Hv, dk, dv]). Keys and queries
    are L2-normalised here, queries scaled by dk^-0.5 (as the fla kernel with
    use_qk_l2norm_in_kernel)."""
    T, Hk, dk = q.shape
    Hv, dv = v.shape[1], v.shape[2]
    rep = Hv // Hk
    q = F.normalize(q.float(), dim=-1).repeat_interleave(rep, 1) * dk ** -0.5
    k = F.normalize(k.float(), dim=-1).repeat_interleave(rep, 1)
    v, g, beta = v.float(), g.float(), beta.float()
    pad = (-T) % chunk
    q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, 0, 0, pad)) for x in (g, beta))
    n = (T + pad) // chunk
    q, k, v = (x.reshape(n, chunk, Hv, -1).permute(2, 0, 1, 3) for x in (q, k, v))
    g, beta = (x.reshape(n, chunk, Hv).permute(2, 0, 1) for x in (g, beta))
    kb, vb = k * beta[..., None], v * beta[..., None]
    g = g.cumsum(-1)
    upper = torch.triu(torch.ones(chunk, chunk, dtype=torch.bool, device=q.device))
    strict = torch.triu(torch.ones(chunk, chunk, dtype=torch.bool, device=q.device), 1)
    decay = (g[..., :, None] - g[..., None, :]).masked_fill(strict, -float("inf")).exp()
    a = -((kb @ k.transpose(-1, -2)) * decay).masked_fill(upper, 0)
    for i in range(1, chunk):             # (I + A)^-1 by forward substitution
        a[..., i, :i] = a[..., i, :i] + (a[..., i, :, None] * a[..., :, :i]).sum(-2)
    a = a + torch.eye(chunk, device=q.device)
    w = a @ (kb * g.exp()[..., None])
    u = a @ vb
    S = torch.zeros(Hv, dk, dv, device=q.device)
    o = torch.zeros_like(u)
    for c in range(n):
        att = (q[:, c] @ k[:, c].transpose(-1, -2) * decay[:, c]).masked_fill(strict, 0)
        vn = u[:, c] - w[:, c] @ S
        o[:, c] = (q[:, c] * g[:, c, :, None].exp()) @ S + att @ vn
        S = (S * g[:, c, -1, None, None].exp()
             + (k[:, c] * (g[:, c, -1, None] - g[:, c]).exp()[..., None]).transpose(-1, -2) @ vn)
    o = o.permute(1, 2, 0, 3).reshape(n * chunk, Hv, dv)[:T]
    return o, S


def _inputs(tp: int, N: int, T: int, dev: str) -> dict:
    hk, hv, d = KEY_HEADS // tp, VALUE_HEADS // tp, HEAD_DIM
    M, conv_dim = N * T, (2 * hk + hv) * d
    bf = torch.bfloat16
    return {"hk": hk, "hv": hv, "N": N, "T": T,
            "mixed": torch.randn(1, M, conv_dim, device=dev, dtype=bf),
            "conv_w": torch.randn(conv_dim, CONV_KERNEL, device=dev, dtype=bf) * 0.3,
            "a": torch.randn(M, hv, device=dev, dtype=bf), "b": torch.randn(M, hv, device=dev, dtype=bf),
            "A_log": torch.rand(hv, device=dev) * 2, "dt_bias": torch.rand(hv, device=dev),
            "z": torch.randn(M, hv * d, device=dev, dtype=bf),
            "norm_w": torch.ones(d, device=dev, dtype=bf),
            "cu": torch.arange(0, M + 1, T, device=dev, dtype=torch.long)}


def layer_ops(s: dict):
    """(name, fn) of one GDN core; each fn reads and writes the state dict s."""
    hk, hv, d, N, T = s["hk"], s["hv"], HEAD_DIM, s["N"], s["T"]
    fla = fla_chunk_gdn is not None

    def conv(s):
        if fla:
            s["x"], s["conv_state"] = fla_conv(s["mixed"], s["conv_w"], activation="silu",
                                               output_final_state=True, cu_seqlens=s["cu"])
        else:
            x = s["mixed"].reshape(N, T, -1).transpose(1, 2)
            y = F.conv1d(F.pad(x, (CONV_KERNEL - 1, 0)), s["conv_w"][:, None, :], groups=x.shape[1])
            s["x"] = F.silu(y).transpose(1, 2).reshape(1, N * T, -1)
            s["conv_state"] = x[..., -(CONV_KERNEL - 1):]

    def gate(s):
        s["g"] = -s["A_log"].exp() * F.softplus(s["a"].float() + s["dt_bias"])
        s["beta"] = s["b"].sigmoid()

    def core(s):
        x = s["x"][0]
        q, k, v = x.split([hk * d, hk * d, hv * d], dim=-1)
        q, k, v = q.reshape(-1, hk, d), k.reshape(-1, hk, d), v.reshape(-1, hv, d)
        if fla:
            o, s["state"] = fla_chunk_gdn(
                q[None], k[None], v[None], s["g"][None], s["beta"][None],
                initial_state=torch.zeros(N, hv, d, d, device=x.device, dtype=torch.float32),
                output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=s["cu"])
            s["o"] = o[0]
        else:
            outs = [torch_chunk_gdn(q[i * T:(i + 1) * T], k[i * T:(i + 1) * T],
                                    v[i * T:(i + 1) * T], s["g"][i * T:(i + 1) * T],
                                    s["beta"][i * T:(i + 1) * T]) for i in range(N)]
            s["o"] = torch.cat([o for o, _ in outs]).to(x.dtype)
            s["state"] = torch.stack([st for _, st in outs])

    def norm(s):
        o, z = s["o"].reshape(-1, d), s["z"].reshape(-1, d)
        if fla:
            s["y"] = fla_norm_gated(o, z, s["norm_w"], None, activation="swish")
        else:
            of = o.float()
            s["y"] = (of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + 1e-6)
                      * s["norm_w"].float() * F.silu(z.float())).to(o.dtype)

    return [("conv", conv), ("gate", gate), ("core", core), ("norm", norm)]


def measure(s: dict, reps: int, cuda: bool) -> dict:
    ops = layer_ops(s)
    for _ in range(3):
        run_layer(ops, s)
    rec = measure_layer(ops, s, reps, cuda)
    rec["host_sync"] = host_waits(ops, s, cuda)   # does enqueueing the layer wait for the GPU?
    return rec


def check(dev: str) -> dict:
    """The measured core (fla on the GPU) against torch_chunk_gdn on the same inputs: relative
    error of the output and of the final state, one prompt of 200 tokens (not a chunk multiple)."""
    s = _inputs(8, 1, 200, dev)
    ops = dict(layer_ops(s))
    ops["conv"](s)
    ops["gate"](s)
    ops["core"](s)
    o_meas, st_meas = s["o"].float(), s["state"].float()
    x = s["x"][0]
    hk, hv, d = s["hk"], s["hv"], HEAD_DIM
    q, k, v = x.split([hk * d, hk * d, hv * d], dim=-1)
    o_ref, st_ref = torch_chunk_gdn(q.reshape(-1, hk, d), k.reshape(-1, hk, d),
                                    v.reshape(-1, hv, d), s["g"], s["beta"])
    return {"backend": "fla" if fla_chunk_gdn is not None else "torch",
            "o_rel_err": float((o_meas - o_ref).norm() / o_ref.norm()),
            "state_rel_err": float((st_meas[0] - st_ref).norm() / st_ref.norm())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true", help="tiny shapes (CPU smoke test)")
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    if torch is None:
        log("torch is not installed")
        return 2
    cuda = args.device == "cuda"
    t_start = time.perf_counter()
    result = {"schema_version": 1, "env": env_section(args.device), "args": vars(args),
              "backend": "fla" if fla_chunk_gdn is not None and cuda else "torch",
              "records": [], "skipped": []}
    if result["backend"] == "torch":
        globals().update(fla_conv=None, fla_norm_gated=None, fla_chunk_gdn=None)
    else:
        import fla
        result["fla_version"] = getattr(fla, "__version__", None)
    try:
        result["check"] = check(args.device)
    except Exception as exc:  # noqa: BLE001
        result["check"] = {"error": one_line(exc)}
    log(f"check: {result['check']}")
    shapes, tps = (((1, 70), (2, 64)), (8,)) if args.quick else (SHAPES, TPS)
    for tp in tps:
        for N, T in shapes:
            try:
                s = _inputs(tp, N, T, args.device)
                rec = measure(s, 2 if args.quick else args.reps, cuda)
            except Exception as exc:  # noqa: BLE001 - the run records what failed and goes on
                result["skipped"].append({"what": f"tp{tp} {N}x{T}", "reason": one_line(exc)})
                log(f"skip tp{tp} {N}x{T}: {one_line(exc)}")
                continue
            rec.update(tp=tp, prompts=N, tokens_each=T, tokens=N * T, key_heads_local=s["hk"],
                       value_heads_local=s["hv"], head_dim=HEAD_DIM, chunk=CHUNK)
            result["records"].append(rec)
            log(f"tp{tp} {N}x{T}: gpu {1e3 * (rec['layer_gpu_s'] or 0):.3f} ms wall "
                f"{1e3 * rec['layer_wall_s']:.3f} issue {1e3 * rec['layer_issue_s']:.3f} "
                f"sync {rec['host_sync']} kernels {rec['kernels']} "
                + " ".join(f"{n}={1e6 * v:.0f}" for n, v in rec["ops_s"].items())
                + " host " + " ".join(f"{n}={1e6 * v:.0f}" for n, v in rec["ops_host_s"].items()))
            del s
    if cuda:
        result["env"]["nvidia_smi_after"] = nvidia_smi()
    result["elapsed_s"] = time.perf_counter() - t_start
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
