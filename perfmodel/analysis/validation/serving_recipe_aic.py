"""AIConfigurator's own benchmark recipes (its generator's rule plugins and engine templates,
repo ai-dynamo/aiconfigurator) for the "aic" rows of the serving data
(serving_recipe.recipe_for)."""

from __future__ import annotations

import math

from perfmodel.analysis.validation.serving_recipe_model import Recipe

# AIConfigurator generator (rule_plugin/{vllm,trtllm}.rule): agg max_num_tokens =
# max_batch_size + isl + 1500, and an aggregated worker's max_batch_size is 512 when the chosen
# configuration's batch is below 512 (`agg_decode max_batch_size = 512 if < 512 else 2x`).
# Assumption: the deployments measured ran batches below 512 (their concurrency sweeps end at
# 128 plus the configuration's own estimate), so 512.
AIC_MARGIN_TOKENS = 1500
AIC_MAX_BATCH_SIZE = 512
AIC_TRTLLM_TOKENS_PER_BLOCK = 32     # trtllm.rule default; max_num_tokens is a multiple of it
# Whether the generator's own template for an SGLang version emits --enable-mixed-chunk
# (backend_templates/sglang/cli_args.<version>.j2; serving_recipe.py docstring): 0.5.6.post2
# tests the key the mapping sets, 0.5.1.post1 a misspelt one. Engine versions a cited template
# names, not row values (tests/test_validate_serving.py exempts exactly these keys from its
# row-value check).
AIC_SGLANG_TEMPLATE_MIXES_CHUNKS = {"0.5.1.post1": False, "0.5.6.post2": True}
# trtllm.rule cuda_graph_batch_sizes up to 512 (serving_recipe.py: the recipes' decode graphs).
AIC_TRTLLM_GRAPH_MAX_BATCH = 512
# AIConfigurator's TRT-LLM engine templates (generator/config/backend_templates/trtllm/
# extra_engine_args.<version>.yaml.j2, 1.0.0rc3 through 1.3.0rc1) write `enable_chunked_prefill:
# {{ enable_chunked_prefill | default(false) }}` and no rule sets it (rule_plugin/trtllm.rule),
# as TensorRT-LLM's own default (llm_args.py `enable_chunked_prefill: bool = Field(default=False)`):
# every prompt runs whole, which the budget max_batch_size + ISL + 1500 always allows.
AIC_TRTLLM_CHUNKED_PREFILL = False
# The same templates write `kv_cache_config: free_gpu_memory_fraction: {{ ... | default(0.80) }}`
# (extra_engine_args.<version>.yaml.j2, and the first generator's templates/trtllm/
# extra_engine_args.yaml.j2) and no rule sets it (rule_plugin/trtllm.rule): the KV pool takes
# 80% of the memory left free, against TensorRT-LLM's own 0.9 (the trtllm preset).
AIC_TRTLLM_KV_FREE_FRACTION = 0.80


def _aic_sglang(prompt: int, version: str | None, disagg: bool) -> Recipe | None:
    """An aggregated SGLang worker's --max-prefill-tokens (every generator template emits it),
    with --enable-mixed-chunk where its version's own template emits that too (module
    docstring of serving_recipe.py); None for a disaggregated worker."""
    if disagg:
        return None
    cap = prompt + AIC_MARGIN_TOKENS
    mixed = AIC_SGLANG_TEMPLATE_MIXES_CHUNKS.get((version or "").strip().lower().lstrip("v"),
                                                 False)
    src = f"backend_templates/sglang/cli_args.{version}.j2" if mixed else "its template"
    flag = "--enable-mixed-chunk " if mixed else ""
    what = ("running decodes ride in each prefill step and count against its tokens" if mixed
            else "separate prefill batches of at most that many new tokens (no mixed-chunk flag "
                 "in the template of this version)")
    return Recipe(family="aic", mixed_prefill=True if mixed else None, max_prefill_tokens=cap,
                  notes=("harness: AIConfigurator benchmark (aiperf/genai-perf closed loop, fixed "
                         "lengths, 2 x C warm-up drained before measuring)",
                         f"engine: SGLang {flag}--max-prefill-tokens {cap} = ISL + "
                         f"{AIC_MARGIN_TOKENS} (AIConfigurator generator: rule_plugin/sglang.rule, "
                         f"emitted by {src}), within the preset's chunk size: {what}"))


def _aic(engine: str, prompt: int, version: str | None = None, disagg: bool = False) -> Recipe:
    base = ("harness: AIConfigurator benchmark (aiperf/genai-perf closed loop, fixed lengths, "
            "2 x C warm-up drained before measuring)")
    if engine in ("vllm", "trtllm"):
        budget = AIC_MAX_BATCH_SIZE + prompt + AIC_MARGIN_TOKENS
        if engine == "trtllm":
            b = AIC_TRTLLM_TOKENS_PER_BLOCK
            budget = math.ceil(budget / b) * b
        flag = "--max-num-batched-tokens" if engine == "vllm" else "max_num_tokens"
        note = (f"engine: {flag} {budget} = max_batch_size {AIC_MAX_BATCH_SIZE} (assumed) + ISL "
                f"+ {AIC_MARGIN_TOKENS} (AIConfigurator generator, rule_plugin/{engine}.rule)")
        graphs = AIC_TRTLLM_GRAPH_MAX_BATCH if engine == "trtllm" else None
        notes = (base, note) + ((f"engine: CUDA graphs for decode batches up to {graphs} "
                                 "(trtllm.rule cuda_graph_batch_sizes)",) if graphs else ())
        chunked = AIC_TRTLLM_CHUNKED_PREFILL if engine == "trtllm" else None
        kv = AIC_TRTLLM_KV_FREE_FRACTION if engine == "trtllm" else None
        if chunked is False:
            notes += ("engine: no chunked prefill (AIConfigurator's TRT-LLM template default, "
                      "enable_chunked_prefill false)",)
        if kv is not None:
            notes += (f"engine: KV pool {kv:.0%} of the free memory (AIConfigurator's TRT-LLM "
                      "template default, kv_cache_config free_gpu_memory_fraction)",)
        return Recipe(family="aic", max_num_batched_tokens=budget, chunked_prefill=chunked,
                      decode_graph_max_batch=graphs, kv_memory_fraction=kv, notes=notes)
    if engine == "sglang":
        mixed = _aic_sglang(prompt, version, disagg)
        if mixed is not None:
            return mixed
    return Recipe(family="aic", notes=(base, f"engine: {engine} preset defaults"))
