"""Tensor-parallel decode of a random-weight Llama-shaped model, for calibrate/bench_nccl.py
(sections decode_tp and decode_1gpu). torch + the standard library only; the record fields
are documented in bench_nccl.py.
"""
from __future__ import annotations

import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F

from bench_env import log_rank0 as log
from bench_env import one_line
from bench_model import rms_norm, rope
from bench_timing import capture_replay

# The shapes recorded in bench_nccl.py's JSON (no tied_embeddings; TINY's rope_theta 1e4):
# kept as they are so the raw files stay comparable, not merged with bench_model's.
LLAMA_8B = {"name": "llama-3.1-8b-shape", "num_layers": 32, "d_model": 4096, "num_heads": 32,
            "num_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336, "vocab_size": 128256,
            "rope_theta": 500000.0}
TINY = {"name": "tiny-llama-shape", "num_layers": 2, "d_model": 256, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "ffn_dim": 512, "vocab_size": 1024, "rope_theta": 1e4}
BATCHES, CONTEXTS = (1, 8, 32, 64), (512, 4096)
BF16 = torch.bfloat16


# ----------------------------------------------------------------------------- TP decode

class TPLlama:
    """Random-weight Llama-shaped decoder, rank `rank` of a Megatron split over p ranks."""

    def __init__(self, shape, p, device, max_batch, max_len):
        H, D = shape["head_dim"], shape["d_model"]
        self.p, self.H = p, H
        self.heads = shape["num_heads"] // p
        self.kvh = max(1, shape["num_kv_heads"] // p)
        ffn = shape["ffn_dim"] // p

        def w(*dims):
            return torch.empty(*dims, dtype=BF16, device=device).normal_(0, 0.02)
        self.embed = w(shape["vocab_size"], D)
        self.layers = [(torch.ones(D, dtype=BF16, device=device), w((self.heads + 2 * self.kvh) * H, D),
                        w(D, self.heads * H), torch.ones(D, dtype=BF16, device=device),
                        w(2 * ffn, D), w(D, ffn)) for _ in range(shape["num_layers"])]
        self.norm = torch.ones(D, dtype=BF16, device=device)
        self.lm_head = w(shape["vocab_size"] // p, D)
        kv = (max_batch, self.kvh, max_len, H)
        self.kc = [torch.empty(kv, dtype=BF16, device=device).normal_() for _ in self.layers]
        self.vc = [torch.empty(kv, dtype=BF16, device=device).normal_() for _ in self.layers]
        inv = 1.0 / (shape["rope_theta"] ** (torch.arange(0, H, 2, device=device).float() / H))
        ang = torch.outer(torch.arange(max_len, device=device).float(), inv)
        self.cos, self.sin = ang.cos().to(BF16), ang.sin().to(BF16)
        self.comm = True

    def reduce(self, y):
        if self.p > 1 and self.comm:
            dist.all_reduce(y)
        return y

    def step(self, tokens, pos: int):
        B = tokens.shape[0]
        x = self.embed[tokens]                                   # [B, 1, D]
        cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
        qd, kd = self.heads * self.H, self.kvh * self.H
        for (an, wqkv, wo, mn, wgu, wd), kc, vc in zip(self.layers, self.kc, self.vc):
            q, k, v = F.linear(rms_norm(x, an), wqkv).split((qd, kd, kd), dim=-1)
            q = rope(q.view(B, 1, self.heads, self.H), cos, sin).transpose(1, 2)
            kc[:B, :, pos:pos + 1] = rope(k.view(B, 1, self.kvh, self.H), cos, sin).transpose(1, 2)
            vc[:B, :, pos:pos + 1] = v.view(B, 1, self.kvh, self.H).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, kc[:B, :, :pos + 1], vc[:B, :, :pos + 1],
                                               enable_gqa=True)
            x = x + self.reduce(F.linear(o.transpose(1, 2).reshape(B, 1, qd), wo))
            gate, up = F.linear(rms_norm(x, mn), wgu).chunk(2, dim=-1)
            x = x + self.reduce(F.linear(F.silu(gate) * up, wd))
        return F.linear(rms_norm(x[:, -1], self.norm), self.lm_head).argmax(-1)


def decode_section(ctx, tp: int) -> dict:
    """Decode steps at tp ranks (ctx: bench_nccl.Ctx); every rank calls it."""
    shape = TINY if ctx.args.smoke else LLAMA_8B
    batches = (1, 2) if ctx.args.smoke else BATCHES
    contexts = (16, 32) if ctx.args.smoke else CONTEXTS
    records, skipped = [], []
    model = TPLlama(shape, tp, ctx.dev, max(batches), max(contexts) + 1)
    tokens = torch.randint(0, shape["vocab_size"], (max(batches), 1), device=ctx.dev)
    modes = ["graph", "graph_nocomm", "eager"] if ctx.cuda else ["eager"]
    if tp == 1:
        modes = [m for m in modes if m != "graph_nocomm"]
    for B in batches:
        for S in contexts:
            for mode in modes:
                if ctx.out_of_time():
                    skipped.append({"what": f"{mode} B={B} S={S}", "reason": "time budget"})
                    continue
                model.comm = mode != "graph_nocomm"
                tok = tokens[:B]
                fn = lambda tok=tok, S=S: model.step(tok, S)  # noqa: E731
                try:
                    if mode.startswith("graph"):
                        t = ctx.time(capture_replay(fn), 5, 8)
                    else:
                        t = ctx.time(fn, 3, 5)
                except (RuntimeError, torch.OutOfMemoryError) as exc:
                    skipped.append({"what": f"{mode} B={B} S={S}", "reason": one_line(exc)})
                    continue
                finally:
                    ctx.sync()
                    gc.collect()
                    if ctx.cuda:
                        torch.cuda.empty_cache()
                records.append({"mode": mode, "tp": tp, "batch": B, "context": S, **t,
                                "tokens_per_s": B / t["seconds"],
                                "allreduces_per_step": 2 * shape["num_layers"] if tp > 1 and model.comm else 0,
                                "allreduce_bytes": B * shape["d_model"] * 2})
                log(f"  decode tp={tp} {mode:12s} B={B:3d} S={S:5d} {t['seconds'] * 1e3:8.3f} ms")
    model.comm = True
    return {"model": shape, "records": records, "skipped": skipped}
