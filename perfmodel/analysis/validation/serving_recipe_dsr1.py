"""Engine flags of InferenceX's DeepSeek R1 TensorRT-LLM scripts (serving_recipe.recipe_for).

The three aggregated DeepSeek R1 TensorRT-LLM recipes (SemiAnalysisAI/InferenceX
benchmarks/dsr1_fp8_h200_trt.sh, dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh) launch
`trtllm-serve --max_num_tokens=$MAX_NUM_TOKENS` with
    MAX_NUM_TOKENS = max(8192, ((CONC + ISL + 64 + 63) / 64) * 64)
and an extra llm-api YAML that sets no `enable_chunked_prefill` (TensorRT-LLM's default: off,
llm_args.py) and, `if [[ "$DP_ATTENTION" == "true" ]]`,
    attention_dp_config: {batching_wait_iters: 0, enable_balance: true, timeout_iters: 60}.
max_num_tokens is each attention-DP rank's own budget (every rank runs its scheduler over the
requests it was given), so the simulator, which schedules all ranks as one, gets dp times it.
With enable_balance, PyExecutor._balance_adp_requests holds scheduled prompts until every DP
rank has one, for at most timeout_iters iterations while every rank runs decodes
(SchedulerSpec.adp_balance_timeout_iters). The fp8 B200 script also writes
`batch_wait_timeout_iters: 40`, `batch_wait_max_tokens_ratio: 0.8` at ISL/OSL 1024/1024 from
CONC 64 (DELAY_BATCHING; TensorRT-LLM skips batch waiting under attention DP, PyExecutor._schedule
`if not self.enable_attention_dp and self.enable_batch_waiting`). Not encoded: the MoE backend
choice (CUTLASS on H200, TRTLLM/DEEPGEMM/CUTLASS on B200) and the fp8 B200 script's piecewise
CUDA graphs for prompt steps (docs/deepseek_serving.md).

The H200 SGLang recipe (benchmarks/dsr1_fp8_h200.sh) launches with `--chunked-prefill-size 32768
--max-prefill-tokens 32768` (SGLang's defaults on a 141 GB GPU: chunk 8192, max prefill 16384,
server_args.py): a prefill batch of up to 32768 new tokens. The Blackwell SGLang recipes
(dsr1_fp4_b200.sh, dsr1_fp8_b200.sh) pass `--chunked-prefill-size 16384`, the default there.
"""

from __future__ import annotations

import math

INFERENCEX_DSR1_MIN_TOKENS = 8192       # MAX_NUM_TOKENS floor (the scripts' `> 8192 ?` test)
INFERENCEX_DSR1_TOKEN_MARGIN = 64       # CONC + ISL + 64
INFERENCEX_DSR1_TOKEN_ROUND = 64        # rounded up to a multiple of 64
INFERENCEX_DSR1_ADP_TIMEOUT_ITERS = 60  # attention_dp_config timeout_iters (enable_balance)
DSR1_MODEL_PREFIX = "deepseek"          # catalog ids the dsr1_* scripts serve (DeepSeek R1 = V3 arch)
# dsr1_fp8_b200_trt.sh DELAY_BATCHING: fp8 weights on B200, 1k/1k, CONC >= 64
INFERENCEX_DSR1_FP8_B200_WAIT_ITERS = 40
INFERENCEX_DSR1_FP8_B200_WAIT_RATIO = 0.8
INFERENCEX_DSR1_FP8_B200_WAIT_LENGTHS = (1024, 1024)
INFERENCEX_DSR1_FP8_B200_WAIT_FROM_CONC = 64


def dsr1_trtllm_flags(model: str | None, engine: str, prompt: int, concurrency: int | None,
                      dp: int | None, *, gpu: str | None = None, weights: str | None = None,
                      output: int | None = None) -> dict | None:
    """Recipe fields of an InferenceX DeepSeek R1 TensorRT-LLM row, with a note; None for any
    other row (another model or engine, or no concurrency). `weights` is the experts' format
    name (fp8, fp4)."""
    if (engine != "trtllm" or concurrency is None or model is None
            or not model.lower().startswith(DSR1_MODEL_PREFIX)):
        return None
    r = INFERENCEX_DSR1_TOKEN_ROUND
    per_rank = max(INFERENCEX_DSR1_MIN_TOKENS,
                   math.ceil((concurrency + prompt + INFERENCEX_DSR1_TOKEN_MARGIN) / r) * r)
    ranks = max(1, dp or 1)
    note = (f"engine: max_num_tokens {per_rank} = max(8192, C + ISL + 64 rounded up to 64), no "
            "chunked prefill (InferenceX dsr1_*_trt.sh)")
    out = dict(max_num_batched_tokens=per_rank * ranks, chunked_prefill=False)
    if ranks > 1:
        out["adp_balance_timeout_iters"] = INFERENCEX_DSR1_ADP_TIMEOUT_ITERS
        note += (f"; per attention-DP rank (x{ranks}); attention_dp_config enable_balance, "
                 f"timeout_iters {INFERENCEX_DSR1_ADP_TIMEOUT_ITERS}: prompts wait until every "
                 "DP rank has one or that many iterations pass")
    elif (gpu == "b200" and weights == "fp8"
          and (prompt, output) == INFERENCEX_DSR1_FP8_B200_WAIT_LENGTHS
          and concurrency >= INFERENCEX_DSR1_FP8_B200_WAIT_FROM_CONC):
        it, ratio = INFERENCEX_DSR1_FP8_B200_WAIT_ITERS, INFERENCEX_DSR1_FP8_B200_WAIT_RATIO
        out.update(batch_wait_timeout_iters=it, batch_wait_max_tokens_ratio=ratio)
        note += (f"; batch_wait_timeout_iters {it}, batch_wait_max_tokens_ratio {ratio:g} "
                 "(dsr1_fp8_b200_trt.sh at 1k/1k from C=64)")
    out["note"] = note
    return out


INFERENCEX_DSR1_SGLANG_H200_CHUNK = 32768   # --chunked-prefill-size = --max-prefill-tokens


def dsr1_sglang_flags(model: str | None, engine: str, gpu: str | None) -> dict | None:
    """The prefill budget of InferenceX's H200 DeepSeek R1 SGLang recipe, with a note; None
    for any other row."""
    if (engine != "sglang" or gpu != "h200-sxm" or model is None
            or not model.lower().startswith(DSR1_MODEL_PREFIX)):
        return None
    c = INFERENCEX_DSR1_SGLANG_H200_CHUNK
    return dict(max_num_batched_tokens=c,
                note=f"engine: SGLang --chunked-prefill-size {c} --max-prefill-tokens {c} "
                     "(InferenceX dsr1_fp8_h200.sh)")


def dsr1_recipe(model: str | None, engine: str, prompt: int, concurrency: int | None,
                dp: int | None, *, gpu: str | None = None, weights: str | None = None,
                output: int | None = None) -> tuple[dict, str] | None:
    """(Recipe field overrides, note) of an InferenceX DeepSeek R1 aggregated row, or None."""
    flags = (dsr1_trtllm_flags(model, engine, prompt, concurrency, dp, gpu=gpu, weights=weights,
                               output=output) or dsr1_sglang_flags(model, engine, gpu))
    if flags is None:
        return None
    note = flags.pop("note")
    return flags, note
