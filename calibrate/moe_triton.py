"""A vLLM-style Triton fused-MoE GEMM (fp8 w8a8, 128x128 weight blocks), for bench_moe_prefill.py.

torch + triton + the standard library. The kernel is a compact re-statement of vLLM's
`fused_moe_kernel` (vllm/model_executor/layers/fused_moe/fused_moe.py), the default MoE GEMM
of vLLM and SGLang on Hopper for block-quantized fp8 experts when no tuned config or DeepGEMM
is used:
- moe_align_block_size: the routed (token, slot) rows are sorted by expert and every expert's
  row list is padded to a multiple of BLOCK_M with a sentinel id (T*k), so each CTA's tile
  belongs to one expert; padded rows are masked in loads and stores but still computed;
- each CTA gathers its BLOCK_M activation rows by token id (row // top_k), loops over K in
  BLOCK_K steps, multiplying fp8 tiles and applying the activation's 1x128 group scales and the
  weight's 128x128 block scales to each partial product, and scatters its rows to the output
  (row order = the (token, slot) id);
- vLLM's default config for block fp8 (get_default_config): BLOCK_M 64, BLOCK_N 128,
  BLOCK_K 128, GROUP_M 32, 4 warps, 3 stages.
"""
from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:   # the bench reports the missing kernel as skipped
    triton = tl = None

DEFAULT_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 32,
                  "num_warps": 4, "num_stages": 3}
GROUP = 128


def align_block_size(topk_ids, num_experts: int, block_m: int):
    """(sorted_ids, expert_ids, num_padded) as vLLM's moe_align_block_size: experts outside
    [0, num_experts) (another EP rank's) are dropped; ids are (token * k + slot)."""
    flat = topk_ids.flatten()
    sentinel = flat.numel()
    keep = flat < num_experts
    ids = torch.arange(flat.numel(), device=flat.device)[keep]
    ex = flat[keep]
    order = torch.argsort(ex, stable=True)
    ids, ex = ids[order], ex[order]
    counts = torch.bincount(ex, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    start_p = torch.cumsum(padded, 0) - padded
    start = torch.cumsum(counts, 0) - counts
    pos = start_p[ex] + torch.arange(ex.numel(), device=ex.device) - start[ex]
    total = int(padded.sum())
    sorted_ids = torch.full((max(total, block_m),), sentinel, device=flat.device, dtype=torch.int32)
    sorted_ids[pos] = ids.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(num_experts, device=flat.device),
                                         padded // block_m).to(torch.int32)
    return sorted_ids, expert_ids, total


if triton is not None:
    @triton.jit
    def _moe_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, sorted_ptr, expert_ptr, npp_ptr,
                    N, K, EM, num_valid, stride_am, stride_be, stride_bn, stride_cm,
                    stride_asm, stride_bse, stride_bsn,
                    TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EARLY_EXIT: tl.constexpr):
        # EARLY_EXIT (vLLM's): blocks past num_tokens_post_padded (a device scalar at npp_ptr,
        # so the grid is sized for the worst case without a host sync) return at once
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(EM, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * num_pid_n
        first_m = (pid // in_group) * GROUP_M
        size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % in_group) % size_m)
        pid_n = (pid % in_group) // size_m
        if EARLY_EXIT:
            if pid_m * BLOCK_M >= tl.load(npp_ptr):
                return
        offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        tok = tl.load(sorted_ptr + offs).to(tl.int64)
        valid = tok < num_valid
        expert = tl.load(expert_ptr + pid_m).to(tl.int64)
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (tok[:, None] // TOP_K) * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None]
        as_ptrs = as_ptr + (tok // TOP_K) * stride_asm
        bs_ptrs = bs_ptr + expert * stride_bse + (offs_n // 128) * stride_bsn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BLOCK_K)):
            kmask = offs_k < K - kk * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & kmask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
            ks = (kk * BLOCK_K) // 128
            a_s = tl.load(as_ptrs + ks, mask=valid, other=0.0)
            b_s = tl.load(bs_ptrs + ks)
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K
        offs_c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + tok[:, None] * stride_cm + offs_c[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=valid[:, None] & (offs_c[None, :] < N))


def quant_group(x):
    """bf16 (M, K) -> fp8 (M, K) and fp32 scales (M, ceil(K/128)), one per 1x128 group."""
    M, K = x.shape
    pad = (-K) % GROUP
    xf = torch.nn.functional.pad(x.float(), (0, pad)).view(M, -1, GROUP)
    s = xf.abs().amax(-1, keepdim=True).clamp(min=1e-10) / 448.0
    q = (xf / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(M, -1)[:, :K].contiguous()
    return q, s.squeeze(-1).contiguous()


def quant_block_weight(w):
    """bf16 (E, N, K) -> fp8 (E, N, K) and fp32 scales (E, ceil(N/128), ceil(K/128))."""
    E, N, K = w.shape
    pn, pk = (-N) % GROUP, (-K) % GROUP
    wf = torch.nn.functional.pad(w.float(), (0, pk, 0, pn))
    blocks = wf.view(E, (N + pn) // GROUP, GROUP, (K + pk) // GROUP, GROUP)
    s = blocks.abs().amax(dim=(2, 4), keepdim=True).clamp(min=1e-10) / 448.0
    q = (blocks / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    q = q.view(E, N + pn, K + pk)[:, :N, :K].contiguous()
    return q, s.squeeze(4).squeeze(2).contiguous()


def fused_moe_gemm(a_q, a_s, w_q, w_s, out, sorted_ids, expert_ids, num_padded: int,
                   top_k: int, cfg: dict = DEFAULT_CONFIG, npp=None):
    """out[row] = (a[row // top_k] @ w[expert(row)]^T) for every routed row of the sorted list.
    a_q (T, K) fp8, a_s (T, K/128); w_q (E, N, K) fp8, w_s (E, N/128, K/128); out (T*k, N).
    npp: None, or a one-element device tensor of the padded rows in use (the grid stays sized
    for num_padded and blocks past npp exit, as vLLM's kernel)."""
    N, K = w_q.shape[1], w_q.shape[2]
    grid = (triton.cdiv(num_padded, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _moe_kernel[grid](a_q, w_q, out, a_s, w_s, sorted_ids, expert_ids,
                      expert_ids if npp is None else npp,
                      N, K, num_padded, out.shape[0], a_q.stride(0), w_q.stride(0),
                      w_q.stride(1), out.stride(0), a_s.stride(0), w_s.stride(0), w_s.stride(1),
                      TOP_K=top_k, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                      BLOCK_K=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"], EARLY_EXIT=npp is not None,
                      num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return out
