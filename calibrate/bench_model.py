"""A random-weight Llama-shaped decoder in plain torch, for calibrate/bench_e2e.py (and the
layer functions for bench_tp.py). torch + the standard library only.

RMSNorm, rotary, GQA attention over a preallocated KV cache, SwiGLU MLP, lm_head on the last
position, argmax. fp8 linears are per-tensor scaled torch._scaled_mm with a static activation
scale of 1 (weights keep a per-tensor scale); lm_head stays bf16.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

LLAMA_8B = {"name": "llama-3.1-8b-shape", "num_layers": 32, "d_model": 4096, "num_heads": 32,
            "num_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336, "vocab_size": 128256,
            "tied_embeddings": False, "rope_theta": 500000.0}
TINY = {"name": "tiny-llama-shape", "num_layers": 2, "d_model": 256, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "ffn_dim": 512, "vocab_size": 1024,
        "tied_embeddings": False, "rope_theta": 500000.0}
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
    causal = True if T > 1 else False   # a branch: torch.compile(dynamic=True) guards on it
    o = F.scaled_dot_product_attention(q, kc[:, :, :pos + T], vc[:, :, :pos + T],
                                       is_causal=causal, enable_gqa=True)
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

    def tensors(self) -> list:
        """Every weight, cache and table the step reads (for torch.compile's static addresses)."""
        out = [self.embed, self.norm, self.lm_head, self.cos, self.sin, *self.k_cache, *self.v_cache]
        for layer in self.layers:
            for w in layer:
                out += list(w) if isinstance(w, tuple) else [w]
        return out

    def to_fp8(self) -> None:
        """Replace the four linears of every layer by per-tensor scaled e4m3 weights."""
        one = torch.ones((), device=self.embed.device, dtype=torch.float32)

        def quant(w):
            scale = (w.abs().amax().float() / 448.0).clamp(min=1e-12)
            return ((w.float() / scale).to(FP8), scale, one)
        self.layers = [(a, quant(qkv), quant(o), m, quant(gu), quant(d))
                       for a, qkv, o, m, gu, d in self.layers]


# ----------------------------------------------------------------------------- sizes

def weight_bytes(shape: dict) -> int:
    D, N, K, H = shape["d_model"], shape["num_heads"], shape["num_kv_heads"], shape["head_dim"]
    per_layer = (N + 2 * K) * H * D + D * N * H + 3 * D * shape["ffn_dim"] + 2 * D
    return 2 * (shape["num_layers"] * per_layer + 2 * shape["vocab_size"] * D + D)


def kv_bytes_per_token(shape: dict) -> int:
    return 2 * shape["num_layers"] * shape["num_kv_heads"] * shape["head_dim"] * 2
