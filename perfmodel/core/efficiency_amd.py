"""GEMM curves of AMD Instinct chips per matmul kind, from AMD's own tuned kernel tables.

ROCm/aiter ships, next to its GEMM kernels, the tables its tuner wrote: for each (M, N, K) on one
chip (gfx, CU count) the fastest kernel and its measured time. The AMD serving stacks run those
kernels: SGLang's ROCm build and vLLM with AITER call aiter's a8w8 GEMMs for fp8 linears. Rows
for the serving shapes are copied to calibrate/data/aiter-*.csv (each header names the aiter
file and commit) and fitted by calibrate/fit_gemm_amd.py with the roofline's own GEMM time
(max(compute at e(M), bytes / bw) + kernel_s; least squares on log time, M >= 128):

| chip (aiter cu_num) | kind | aiter table, shapes | fit gemm_max / half_m | rms (log) | vendor 0.40 / 32 |
|---|---|---|---|---|---|
| MI355X (gfx950, 256) | fp8 | a8w8_tuned_gemm.csv @105a68df, CK rowwise; Llama-3 70B and 405B TP8 shards, M 128-32768 | 0.338 / 240 | 0.24 | pred/meas median 0.72 |
| MI300X (gfx942, 304) | fp8_block | a8w8_blockscale_tuned_gemm.csv @118ba067, CK 1x128 / 128x128 block scales; DeepSeek-V3 shapes, M 128-20480 | 0.228 / 170 | 0.27 | median 0.59 |
| MI355X (gfx950, 256) | fp8_block | same file and shapes | 0.158 / 330 | 0.34 | median 0.41 |

Measured medians over the shapes (TFLOP/s): MI355X fp8 842 at M = 256, 1230 at 1024, 1633 at
8192 (peak 5033; the 70B gate_up shard alone 1002 / 1455 / 2286); MI300X fp8_block 216 / 407 /
592 (peak 2615); MI355X fp8_block 203 / 486 / 777. The spread between shapes (pred/meas 0.6-1.5)
is the kernels' dependence on N and K (the 70B o_proj, K = 1024, and qkv, N = 1280, are the
slowest), which e(M) does not carry.
Not encoded: MI300X / MI325X per-tensor or per-row fp8 (no gfx942 304-CU table of those kernels
at serving shapes was found; hipBLASLt fp8 on square sizes, Azure ND MI300X v5: 955 TFLOP/s at
4096^3, 1159 at 8192^3, i.e. 0.37-0.44 of the peak, matches the vendor 0.40); bf16 (none read).
Assumptions: MI325X takes the MI300X curve (the same gfx942 chip with 304 CUs and the same
peaks; only its HBM differs). The curve of a kind prices every fp8 linear of that kind on the
chip, whichever library runs it: vLLM without AITER (VLLM_ROCM_USE_AITER unset, as in the llm-d
MI355X runs) calls hipBLASLt through torch._scaled_mm, whose gfx950 rate at these shapes no
table found here states.
The fused-MoE law keeps the vendor base (AMD_GROUPED_GEMM_MAX): aiter's fused-MoE kernels have
tables of their own, not fitted here, so a dense-GEMM fit is not carried into them.
"""

from __future__ import annotations

from perfmodel.core.efficiency_spec import GemmCurve

_FIT = "calibrate/fit_gemm_amd.py on calibrate/data/"

_GFX942_BLOCK = GemmCurve(
    gemm_max=0.228, gemm_half_m=170.0,
    source="aiter CK a8w8 block-scale GEMM, gfx942 304 CUs (ROCm/aiter a8w8_blockscale_tuned_gemm"
           ".csv @118ba067, DeepSeek-V3 shapes): " + _FIT + "aiter-a8w8-blockscale-gfx942-cu304-dsv3.csv")
_GFX950_FP8 = GemmCurve(
    gemm_max=0.338, gemm_half_m=240.0,
    source="aiter CK a8w8 rowwise GEMM, gfx950 256 CUs (ROCm/aiter a8w8_tuned_gemm.csv @105a68df, "
           "Llama-3 70B / 405B TP8 shards): " + _FIT + "aiter-a8w8-rowwise-gfx950-llama-tp8.csv")
_GFX950_BLOCK = GemmCurve(
    gemm_max=0.158, gemm_half_m=330.0,
    source="aiter CK a8w8 block-scale GEMM, gfx950 256 CUs (ROCm/aiter a8w8_blockscale_tuned_gemm"
           ".csv @118ba067, DeepSeek-V3 shapes): " + _FIT + "aiter-a8w8-blockscale-gfx950-cu256-dsv3.csv")

AMD_GEMM_BY_DTYPE: dict[str, dict[str, GemmCurve]] = {
    "mi300x": {"fp8_block": _GFX942_BLOCK},
    "mi325x": {"fp8_block": _GFX942_BLOCK},
    "mi355x": {"fp8": _GFX950_FP8, "fp8_block": _GFX950_BLOCK},
}
"""Efficiency.gemm_by_dtype of the AMD chips with an aiter table (module docstring)."""

AMD_GROUPED_GEMM_MAX = 0.40
"""Efficiency.grouped_gemm_max on the chips of AMD_GEMM_BY_DTYPE: the vendor gemm_max
(core/efficiency.py VENDOR['amd']) the fused-MoE law multiplied before these curves, kept."""

AITER_ENGINES = {"vllm": "VLLM_ROCM_USE_AITER=1", "sglang": "SGLANG_USE_AITER=1"}
"""The serving engines whose AMD runs call aiter's kernels, with the switch that turns them on."""


def aiter_assumption(gpu_id: str, engine_id: str) -> str | None:
    """The assumption a prediction on an AMD chip with an aiter table (AMD_GEMM_BY_DTYPE) makes
    about the engine's kernels, or None. Its fp8 GEMM curves are aiter's tuned kernels, which the
    engine runs only with AITER on (vllm-project/vllm PR #14007: aiter's linear and fp8 GEMMs
    under VLLM_ROCM_USE_AITER=1); AMD's published results and InferenceX's AMD scripts set it,
    but vLLM's own default is off, which the model does not price: vllm-project/vllm issue
    #56945 measured batch-1 decode of Qwen3.5-122B-A10B-FP8 on one MI325X 1.7x slower at ~200
    prompt tokens and 3.7x slower at ~12k without it (57 / 26 against 98 / 97 tok/s;
    docs/amd.md "AITER off")."""
    switch = AITER_ENGINES.get(engine_id)
    if gpu_id not in AMD_GEMM_BY_DTYPE or switch is None:
        return None
    note = (f"{engine_id} with AITER on ({switch}), as AMD's published recipes run it: fp8 GEMMs "
            "at aiter's tuned-kernel rates")
    if engine_id == "vllm":
        note += ("; vLLM's own default is off, which is not priced (issue #56945: batch-1 decode "
                 "1.7x slower at ~200 prompt tokens, 3.7x at ~12k; docs/amd.md)")
    return note
