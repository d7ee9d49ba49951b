"""GGUF (llama.cpp) tensor type names and their bits per weight; specs.parse_format reads them."""

from __future__ import annotations

# GGUF (llama.cpp) tensor types -> bits per weight, block scales included. Single types from
# the ggml block layouts (ggml-common.h; k-quants in llama.cpp PR #1684): q4_0 = 32 x 4 bit +
# fp16 scale = 4.5, q4_1 adds an fp16 min = 5.0, q5_0 5.5, q5_1 6.0, q8_0 = 32 x 8 bit + fp16
# scale = 8.5; k-quant super-blocks of 256: q2_k 2.5625, q3_k 3.4375, q4_k 4.5, q5_k 5.5,
# q6_k 6.5625. Mixes (_s/_m/_l give some tensors more bits) -> their whole-model average in
# llama.cpp tools/quantize/README.md (Llama 2 7B column): q2_k 3.35, q3_k_s 3.50, q3_k_m 3.91,
# q3_k_l 4.27, q4_k_s 4.58, q4_k_m 4.84, q5_k_s 5.52, q5_k_m 5.68, q6_k 6.56.
GGUF_BITS_PER_WEIGHT = {
    "q4_0": 4.5, "q4_1": 5.0, "q5_0": 5.5, "q5_1": 6.0, "q8_0": 8.5,
    "q2_k": 3.35, "q3_k_s": 3.50, "q3_k_m": 3.91, "q3_k_l": 4.27, "q4_k_s": 4.58,
    "q4_k_m": 4.84, "q5_k_s": 5.52, "q5_k_m": 5.68, "q6_k": 6.56,
    "q3_k": 3.4375, "q4_k": 4.5, "q5_k": 5.5,
}
GGUF_FLOAT_TYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}
