"""Dynamic activation quantization in front of W8A8 GEMMs: the bytes and time of the kernel
that turns each GEMM's M x K bf16 input into fp8 plus per-token-group scales.

    bytes = M*K * (2       # read the bf16 input
                   + 1     # write the 8-bit copy
                   + 4/128)  # one fp32 scale per 1 x 128 group (DeepSeek-V3 block fp8)
    time  = bytes / (hbm_bw * e_mem * ACT_QUANT_BW_FRACTION)

Measured on our H200 (calibrate/data/gemm-dtype-quant-h200-sxm-20261201.json, quant
records kind=group128 impl=compiled_static, the fused one-kernel quantizer that stands in
for sglang per_token_group_quant_fp8; calibrate/GEMM_DTYPE_NOTES.md "Activation
quantization"): 1.59-3.51 TB/s over M x K from 1024 x 5120 to 16384 x 25600, median 3.19 TB/s.
The fraction is relative to the same card's achievable copy bandwidth, 4.27 TB/s
(calibrate/BENCH_NOTES.md), so it is a property of the kernel family, carried to other chips
through their own bandwidth. Weight-only and 16-bit formats quantize nothing.
"""

from __future__ import annotations

from perfmodel.core.ops import ACT_BYTES

ACT_QUANT_GROUP = 128            # elements per activation scale (1 x 128 token groups)
ACT_QUANT_SCALE_BYTES = 4.0      # one fp32 scale per group
ACT_QUANT_MEASURED_BYTES_PER_S = 3.19e12   # median group128 compiled_static rate, H200 JSON above
H200_COPY_BYTES_PER_S = 4.274e12           # HBM copy, 2 GiB, read + write (BENCH_NOTES.md)
ACT_QUANT_BW_FRACTION = ACT_QUANT_MEASURED_BYTES_PER_S / H200_COPY_BYTES_PER_S   # ~0.75


def act_quant_bytes(elements, out_bytes_per_element: float = 1.0):
    """Bytes one quantization of `elements` = M*K input elements moves: the 16-bit read,
    the quantized write and the group scales."""
    return elements * (ACT_BYTES                                        # bf16 read
                       + out_bytes_per_element                          # fp8/int8 write
                       + ACT_QUANT_SCALE_BYTES / ACT_QUANT_GROUP)       # fp32 scale per group


def act_quant_s(elements, achievable_bw_bytes_per_s: float, out_bytes_per_element: float = 1.0):
    """Seconds of the quantization kernel at the chip's achievable bandwidth (bw * e_mem)
    times the measured kernel-family fraction."""
    return (act_quant_bytes(elements, out_bytes_per_element)
            / (achievable_bw_bytes_per_s * ACT_QUANT_BW_FRACTION))
