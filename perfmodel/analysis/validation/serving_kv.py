"""The KV-cache pool a serving row's engine ran, where the row does not state it (issue 13:
TTFT at high concurrency is set by how many requests the KV pool admits).

The serving file states no KV precision (data/serving/README.md); serving_map.py assumes fp8
for fp8/fp4 weights, else bf16. Two rules refine it with what the engine and the recipe set:

- KV format. SGLang on a DeepSeek Sparse Attention model (DeepSeek-V3.2, GLM-5:
  ModelSpec.sparse_attention) turns its default `--kv-cache-dtype auto` into fp8_e4m3 on a GPU
  of compute capability 10 or more and into bfloat16 below ("if self.kv_cache_dtype == 'auto':
  self.kv_cache_dtype = 'fp8_e4m3' if major >= 10 else 'bfloat16'", "Setting KV cache dtype to
  ... for DeepSeek DSA on SM{major} device": sgl-project/sglang python/sglang/srt/server_args.py,
  _handle_model_specific_adjustments; GLM-5's GlmMoeDsaForCausalLM joined is_deepseek_nsa in
  sgl-project/sglang#18521, merged 2026-02-10). Compute capability 10 and up is NVIDIA
  Blackwell, the NVIDIA chips with fp4 tensor cores (a datasheet fact: hardware_db peak fp4):
  B200, B300, GB200, GB300 run fp8, H100 and H200 bf16 (AMD GPUs report a major of 9 to
  torch.cuda.get_device_capability: bf16). A recipe that passes --kv-cache-dtype is not in
  the file: InferenceX's GLM-5 H200 script (benchmarks/single_node/glm5_fp8_h200.sh and its
  fixed_seq_len copy) passes none, so the default holds; its B200 one passes fp8_e4m3, the
  default there anyway.
- Pool share. The same H200 script launches `--mem-fraction-static 0.85` (the sglang preset
  keeps 0.88 of the device for weights and KV): INFERENCEX_SGLANG_MEM_FRACTION.

The DSA index keys stay fp8 with their scales in either format (core/ops.py index_key_bytes),
so a bf16 GLM-5 token costs 78 x (576 x 2 + 132) bytes on each GPU, an fp8 one 78 x (576 + 132).
"""

from __future__ import annotations

from perfmodel.core.hardware_spec import HardwareSpec
from perfmodel.core.specs import ModelSpec

SGLANG_DSA_FP8_KV = "fp8"      # fp8_e4m3 from compute capability 10 (server_args.py)
SGLANG_DSA_BF16_KV = "bf16"    # bfloat16 below it
# InferenceX SGLang scripts' --mem-fraction-static, by (catalog model, GPU): the GLM-5 H200
# recipe (benchmarks/single_node/glm5_fp8_h200.sh; the fixed_seq_len copy sets the same).
INFERENCEX_SGLANG_MEM_FRACTION = {("glm-5", "h200-sxm"): 0.85}


def cc10_or_newer(hw: HardwareSpec) -> bool:
    """NVIDIA compute capability 10 or more (Blackwell): the NVIDIA chips with fp4 tensor
    cores (module docstring)."""
    return hw.vendor == "nvidia" and hw.has("fp4")


def engine_kv(engine: str, spec: ModelSpec, hw: HardwareSpec) -> tuple[str, str] | None:
    """(KV format, the rule in words) the engine picks by itself for this model on this GPU
    when the deployment leaves it at its default; None where no rule applies (the caller's
    assumption stands)."""
    if engine != "sglang" or spec.sparse_attention is None:
        return None
    new = cc10_or_newer(hw)
    kv = SGLANG_DSA_FP8_KV if new else SGLANG_DSA_BF16_KV
    where = "compute capability 10 or more" if new else "below compute capability 10"
    return kv, (f"KV cache {kv}: SGLang's default for a DeepSeek Sparse Attention model "
                f"{where} (--kv-cache-dtype auto -> {'fp8_e4m3' if new else 'bfloat16'}, "
                "server_args.py; the row states no KV format)")


def inferencemax_sglang_mem_fraction(engine: str, model: str | None,
                                     gpu: str | None) -> tuple[float, str] | None:
    """(--mem-fraction-static, the note) of the InferenceX SGLang script for this model and
    GPU, else None (the preset's share stands)."""
    frac = INFERENCEX_SGLANG_MEM_FRACTION.get((model or "", gpu or "")) if engine == "sglang" \
        else None
    if frac is None:
        return None
    return frac, (f"engine: SGLang --mem-fraction-static {frac:g} (InferenceX {model} {gpu} "
                  "script): weights and KV pool take that share of the device")
