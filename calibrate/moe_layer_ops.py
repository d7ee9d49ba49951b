"""One GPU's share of one decoder layer's prompt step as a list of (name, fn) ops, in plain
torch + moe_triton's fused MoE kernel (calibrate/bench_moe_layer.py times them; its docstring
says what each op is). torch + stdlib (+ triton)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

import moe_triton as mt  # noqa: E402
from layer_timing import run_layer  # noqa: E402,F401 (the benches import it from here)

# (D, q heads, kv heads, head_dim, rotary_dim, E, top_k, expert F (or dense F), qk_norm, router)
# from each model's config.json (perfmodel/core/catalog/*.yaml)
MODELS = {
    "minimax-m2.5": (3072, 48, 8, 128, 64, 256, 8, 1536, "across", "fp32_sigmoid"),
    "qwen3-235b-a22b": (4096, 64, 4, 128, 128, 128, 8, 1536, "per_head", "softmax"),
    "llama-3.1-70b": (8192, 64, 8, 128, 128, 0, 0, 28672, "none", "none"),
}
SHARDS = (("minimax-m2.5", 8), ("minimax-m2.5", 4), ("minimax-m2.5", 2),
          ("qwen3-235b-a22b", 4), ("qwen3-235b-a22b", 8), ("llama-3.1-70b", 8))
CFG = mt.DEFAULT_CONFIG


def rms(x, w):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def quant_rows(x):
    """Per-token fp8 (vLLM's dynamic per-token quant): (fp8 x, fp32 scale (M, 1))."""
    s = x.abs().amax(-1, keepdim=True).float().clamp(min=1e-10) / 448.0
    return (x.float() / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), s


class Shard:
    def __init__(self, model: str, tp: int, dev: str):
        (D, Hq, Hkv, hd, rot, E, k, Fw, qkn, router) = MODELS[model]
        self.D, self.hq, self.hkv, self.hd, self.rot = D, Hq // tp, max(1, Hkv // tp), hd, rot
        self.E, self.k, self.F, self.qkn, self.router = E, k, Fw // tp, qkn, router
        self.dev, self.fp8 = dev, dev == "cuda"
        bf = dict(device=dev, dtype=torch.bfloat16)
        r = lambda *s: torch.randn(*s, **bf) * 0.02  # noqa: E731
        nq = (self.hq + 2 * self.hkv) * hd
        self.w_qkv, self.w_o = self._lin(r(nq, D)), self._lin(r(D, self.hq * hd))
        self.n1, self.n2 = torch.ones(D, **bf), torch.ones(D, **bf)
        self.qn = torch.ones(self.hq * hd if qkn == "across" else hd, **bf)
        self.kn = torch.ones(self.hkv * hd if qkn == "across" else hd, **bf)
        if E:
            self.w_g = torch.randn(E, D, device=dev, dtype=torch.float32 if "fp32" in router
                                   else torch.bfloat16) * 0.02
            self.bias = torch.randn(E, device=dev) * 0.01
            if self.fp8:
                self.w13 = mt.quant_block_weight(r(E, 2 * self.F, D))
                self.w2 = mt.quant_block_weight(r(E, D, self.F))
            else:
                self.w13, self.w2 = r(E, 2 * self.F, D), r(E, D, self.F)
        else:
            self.w13, self.w2 = self._lin(r(2 * self.F, D)), self._lin(r(D, self.F))

    def _lin(self, w):
        if not self.fp8:
            return w
        s = w.abs().amax(-1, keepdim=True).float().clamp(min=1e-10) / 448.0
        return ((w.float() / s).to(torch.float8_e4m3fn), s.t().contiguous())

    def mm(self, x, w):
        if not self.fp8:
            return x @ w.t()
        xq, xs = quant_rows(x)
        return torch._scaled_mm(xq, w[0].t(), scale_a=xs, scale_b=w[1], out_dtype=torch.bfloat16)


def rope(x, rot: int, pos):
    half = rot // 2
    inv = 1.0 / (10000.0 ** (torch.arange(half, device=x.device, dtype=torch.float32) / half))
    ang = pos[:, None].float() * inv[None, :]
    cos, sin = ang.cos()[:, None, :].to(x.dtype), ang.sin()[:, None, :].to(x.dtype)
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)


def align(topk_ids, E: int, bm: int):
    """vLLM moe_align_block_size with no host sync: (sorted_ids, expert per block, padded
    count as a device scalar); the worst-case length T*k + E*(bm-1), as vLLM sizes it."""
    flat = topk_ids.flatten()
    n = flat.numel()
    cap = n + E * (bm - 1)
    counts = torch.zeros(E, device=flat.device, dtype=torch.long).scatter_add_(
        0, flat, torch.ones_like(flat))
    padded = (counts + bm - 1) // bm * bm
    end_p = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    ex = flat[order]
    start = torch.cumsum(counts, 0) - counts
    pos = (end_p - padded)[ex] + torch.arange(n, device=flat.device) - start[ex]
    sorted_ids = torch.full((cap,), n, device=flat.device, dtype=torch.int32)
    sorted_ids.scatter_(0, pos, order.to(torch.int32))
    blocks = torch.arange(0, cap, bm, device=flat.device)
    expert_ids = torch.searchsorted(end_p, blocks, right=True).clamp(max=E - 1).to(torch.int32)
    return sorted_ids, expert_ids, end_p[-1:].to(torch.int32)


def moe_gemm(sh: Shard, a, w, out, sorted_ids, expert_ids, npp, T: int):
    """The routed GEMM over (T*k) rows: the Triton kernel on CUDA, a gather reference on CPU."""
    if not sh.fp8:
        ids = sorted_ids.long()
        keep = ids < T * sh.k
        rows = ids[keep]
        exs = expert_ids.long().repeat_interleave(CFG["BLOCK_M"])[:ids.numel()][keep]
        src = a[rows // sh.k] if a.shape[0] == T else a[rows]
        out[rows] = torch.bmm(w[exs], src.unsqueeze(-1)).squeeze(-1).to(out.dtype)
        return out
    top_k = sh.k if a.shape[0] == T else 1
    aq, as_ = mt.quant_group(a)
    wq, ws = w
    return mt.fused_moe_gemm(aq, as_, wq, ws, out, sorted_ids, expert_ids, sorted_ids.numel(),
                             top_k, CFG, npp=npp)
    return out


def layer_ops(sh: Shard, T: int):
    """The layer as a list of (name, fn(state) -> None) over a dict state."""
    pos = torch.arange(T, device=sh.dev)
    hd, hq, hkv = sh.hd, sh.hq, sh.hkv

    def norm1(s):
        s["res"] = s["x"] + s["res"]
        s["h"] = rms(s["res"], sh.n1)

    def qkv(s):
        s["qkv"] = sh.mm(s["h"], sh.w_qkv)

    def qk_norm(s):
        q, k, v = s["qkv"].split([hq * hd, hkv * hd, hkv * hd], -1)
        if sh.qkn == "across":
            q, k = rms(q, sh.qn), rms(k, sh.kn)
        q, k = q.view(T, hq, hd), k.view(T, hkv, hd)
        if sh.qkn == "per_head":
            q, k = rms(q, sh.qn), rms(k, sh.kn)
        s["q"], s["k"], s["v"] = q, k, v.view(T, hkv, hd)

    def rotary(s):
        s["q"], s["k"] = rope(s["q"], sh.rot, pos), rope(s["k"], sh.rot, pos)

    def attention(s):
        q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (s["q"], s["k"], s["v"]))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        s["attn"] = o.squeeze(0).transpose(0, 1).reshape(T, hq * hd)

    def o_proj(s):
        s["o"] = sh.mm(s["attn"], sh.w_o)

    def norm2(s):
        s["res"] = s["o"] + s["res"]
        s["h"] = rms(s["res"], sh.n2)

    ops = [("norm1", norm1), ("qkv", qkv), ("qk_norm", qk_norm), ("rope", rotary),
           ("attention", attention), ("o_proj", o_proj), ("norm2", norm2)]
    return ops + (_moe_ops(sh, T) if sh.E else _dense_mlp_ops(sh))


def _dense_mlp_ops(sh: Shard):
    def gate_up(s):
        s["gu"] = sh.mm(s["h"], sh.w13)

    def act(s):
        g, u = s["gu"].chunk(2, -1)
        s["a"] = F.silu(g) * u

    def down(s):
        s["x"] = sh.mm(s["a"], sh.w2)
    return [("gate_up", gate_up), ("act", act), ("down", down)]


def _moe_ops(sh: Shard, T: int):
    k, D, Fl = sh.k, sh.D, sh.F
    bf = dict(device=sh.dev, dtype=torch.bfloat16)

    def router(s):
        h = s["h"].float() if "fp32" in sh.router else s["h"]
        s["logits"] = h @ sh.w_g.t()

    def topk(s):
        lg = s["logits"].float()
        if "sigmoid" in sh.router:
            sc = lg.sigmoid()
            ids = (sc + sh.bias).topk(k, -1).indices
            w = sc.gather(1, ids)
        else:
            w, ids = lg.softmax(-1).topk(k, -1)
        # dispatch follows the uniform routing drawn in measure() (s["route"]): random weights
        # give degenerate logits (every token picks the same experts); the top-k is still timed
        s["ids"], s["w"] = s.get("route", ids), w / w.sum(-1, keepdim=True)

    def align_(s):
        s["sorted"], s["eids"], s["npp"] = align(s["ids"], sh.E, CFG["BLOCK_M"])

    def gate_up(s):
        out = torch.empty(T * k, 2 * Fl, **bf)
        s["gu"] = moe_gemm(sh, s["h"], sh.w13, out, s["sorted"], s["eids"], s["npp"], T)

    def act(s):
        g, u = s["gu"].chunk(2, -1)
        s["a"] = F.silu(g) * u

    def down(s):
        out = torch.empty(T * k, D, **bf)
        s["dn"] = moe_gemm(sh, s["a"], sh.w2, out, s["sorted"], s["eids"], s["npp"], T)

    def combine(s):
        s["x"] = (s["dn"].view(T, k, D) * s["w"].to(torch.bfloat16)[..., None]).sum(1)
    return [("router", router), ("topk", topk), ("align", align_), ("gate_up", gate_up),
            ("act", act), ("down", down), ("combine", combine)]
