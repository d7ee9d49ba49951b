"""How each source family of the serving data ran its benchmark: the recipe the simulator replays.

The file's `source` column separates two harnesses (data/serving/README.md). Both are closed
loops that send C requests at once and the next one the moment one finishes, and both run a
warm-up of 2 x C requests first that they DRAIN before measuring, so the measured phase starts
from an idle server (the simulator's cold closed loop; a drained warm-up changes nothing a
simulator without JIT or cache effects could see):
- vLLM/InferenceX `benchmark_serving.py --num-warmups`: `await asyncio.gather(*warmup_tasks)`
  before "Starting main benchmark run";
- aiperf `--warmup-request-count`: "By default, AIPerf waits indefinitely for all warmup
  responses before starting profiling" (aiperf docs/tutorials/warmup.md, Grace Period);
  genai-perf's perf_analyzer joins its warm-up workers (`WaitForWarmupAndCleanup`,
  load_manager.cc) before the measured load starts.
Except InferenceX's aggregated rows measured before INFERENCEX_WARMUP_SINCE (its client had no
warm-up then): the simulator's start is the same idle server, but what a cold engine pays once
(kernel JIT or autotuning at a shape first met in the measured run) is in their mean and not in
the prediction (docs/deepseek_serving.md, "Cold server").

Families (first word of `source`):
- "aic" (AIConfigurator's gap-analysis runs, but for the copies serving_provenance.py names): its
  own deployments, made by its generator (ai-dynamo/aiconfigurator
  src/aiconfigurator/generator/) and measured closed loop with
  fixed lengths (isl/osl stddev 0: generator deployment_config.yaml; genai_perf_runner.py).
  Which script ran each row is not stated: some sweeps (1, 2, 8, ..., 128 plus the estimated
  concurrency) are the generator's bench_run.sh.j2 (aiperf, 50 x C requests), others (4, 8,
  ..., 256) are not; eval's genai_perf_runner.py sends 10 x C. 10 x C is simulated.
  The generator sets the engine's token budget per step for an aggregated worker:
  vLLM `--max-num-batched-tokens` and TRT-LLM `max_num_tokens` = max_batch_size + ISL + 1500
  (rule_plugin/vllm.rule, trtllm.rule; TRT-LLM rounds up to tokens_per_block 32), and its
  TRT-LLM templates a KV pool of 80% of the free memory (free_gpu_memory_fraction default 0.80,
  AIC_TRTLLM_KV_FREE_FRACTION). For an
  aggregated SGLang worker its rule asks for `--max-prefill-tokens` ISL + 1500 and mixed chunks
  (rule_plugin/sglang.rule `agg enable_mixed_chunk = true`, which backend_config_mapping.yaml
  names `enable-mixed-chunk`), but whether the flag reaches the command line depends on the
  engine version's template (backend_templates/sglang/cli_args.<version>.j2):
  cli_args.0.5.6.post2.j2 emits `--enable-mixed-chunk` when `enable-mixed-chunk` is set, while
  cli_args.0.5.1.post1.j2 and the unversioned cli_args.j2 test a key `enable-mix-chunk` that
  the mapping never sets, so they emit no mixed-chunk flag; every template emits
  --max-prefill-tokens.
  SGLang then mixes the running decodes into every prefill batch, and they count against the
  batch's tokens (managers/schedule_policy.py PrefillAdder: rem_input_tokens = max_prefill_tokens
  - mixed_with_decode_tokens, the running batch size when mixed; chunks stay within
  chunked_prefill_size): one step carries the decodes plus prompt chunks up to
  min(ISL + 1500, the preset's chunked_prefill_size), the simulator's mixed step with that
  budget. So SGLang rows of a version whose own template emits the flag (AIC_SGLANG_TEMPLATE_
  MIXES_CHUNKS) get mixed chunks; the others keep SGLang's separate prefill batches (prefill
  first) of at most min(ISL + 1500, chunk) new tokens (PrefillAdder admits a further prompt
  only while it fits rem_input_tokens), within about 25% of the 0.5.1 rows (Qwen3-32B on
  H100), where the mixed recipe came out 3-6x below the measured TTFT. Evidence in the shipped file
  (tests/test_serving_recipe.py counts it): none of the 78 dense SGLang 0.5.1.post1 rows, but
  19 of the 46 dense 0.5.6.post2 rows, measured a mean TTFT below half of C x ISL x 2 N /
  (GPUs x datasheet dense peak): less than a wave of C prompts queued for separate prefill
  batches (the default's schedule in the simulator's closed loop) can average even at perfect
  efficiency; prompt chunks spread over the decode steps can. Which later version the generator
  renders with which template (today: exact match, else the closest earlier one,
  rendering/engine.py _select_versioned_template) is not known for the dates of the file's
  0.5.8/0.5.9 rows: they keep the defaults.
- "db-dump/..." (dump date, measurement date, image): the InferenceMAX / InferenceX
  database. Its benchmark_lib.sh runs `benchmark_serving.py --dataset-name random
  --random-range-ratio R --num-prompts ... --max-concurrency C --request-rate inf
  --ignore-eos --num-warmups 2C` with R = 0.8 in its recipes ("random_range_ratio: 0.8,
  sa-bench"), lengths uniform in [int(0.8 L), L] (the copy of vLLM's benchmark_serving.py it
  ships). Engine flags vary per recipe and are not in the file: the presets' defaults stand,
  but for one flag the Blackwell SGLang recipes share: `--scheduler-recv-interval 10` below
  concurrency 16 and 30 from 16 ("Low latency (conc 4,8): recv interval 10; max throughput
  (conc 16+): recv interval 30", the Qwen3.5-397B B200 SGLang script; the same rule in
  benchmarks/dsr1_fp4_b200_docker.sh and dsr1_fp8_b200_docker.sh). SGLang's
  SchedulerRecvSkipper (managers/scheduler_recv_skipper.py) then polls for new requests once
  its counter reaches the interval, adding 1 per decode step and 1000 per prefill step, so a
  request arriving during decodes waits for up to that many steps before its prefill. The
  H200 SGLang script (dsr1_fp8_h200_slurm.sh) does not set it: H200 rows keep SGLang's
  default 1. B300 rows follow the B200 rule; per-script exceptions: serving_recipe_sglang.py.
  Disaggregated InferenceX rows ran other scripts: the Dynamo / srt-slurm benchmarks (srt-slurm
  sa-bench bench.sh: --random-range-ratio 0.8, 10 x C prompts after a drained 2 x C warm-up)
  with Dynamo's worker scripts, whose SGLang prefill and decode commands pass
  `--scheduler-recv-interval 10` at every concurrency (INFERENCEMAX_SGLANG_DISAGG_RECV_*).
The Llama-70B TensorRT-LLM rows (an InferenceMAX import: serving_provenance.py) also get their
  scripts' batch waiting at 1k/1k below TP 8 (batch_wait_timeout_iters 20,
  batch_wait_max_tokens_ratio 0.9); the DeepSeek R1 TensorRT-LLM scripts set neither flag.
Rows of any other source keep the plain recipe (fixed lengths, engine defaults).

Provenance (which "aic" rows are InferenceMAX measurements copied into AIConfigurator's
file, and the evidence): serving_provenance.py.
"""

from __future__ import annotations

from perfmodel.analysis.validation.serving_provenance import (  # noqa: F401 (re-exported)
    AIC_COPIED_IMAGE_TAG, Family, _llama70b_import, _measured, copied_from_inferencemax, family,
    inferencemax_twins)
from perfmodel.analysis.validation.serving_recipe_aic import (  # noqa: F401 (re-exported)
    AIC_MARGIN_TOKENS, AIC_MAX_BATCH_SIZE, AIC_SGLANG_TEMPLATE_MIXES_CHUNKS,
    AIC_TRTLLM_CHUNKED_PREFILL, AIC_TRTLLM_GRAPH_MAX_BATCH, AIC_TRTLLM_KV_FREE_FRACTION,
    AIC_TRTLLM_TOKENS_PER_BLOCK, _aic)
from perfmodel.analysis.validation.serving_recipe_dsr1 import dsr1_recipe
from perfmodel.analysis.validation.serving_recipe_model import Recipe
from perfmodel.analysis.validation.serving_recipe_sglang import sglang_model_flags
from perfmodel.analysis.validation.serving_recipe_vllm import (
    INFERENCEMAX_LLAMA70B_VLLM_ASYNC, inferencex_vllm_fp32_matmul, inferencex_vllm_graphs,
    inferencex_vllm_layout, vllm_async_scheduling)
from perfmodel.analysis.validation.serving_versions import vllm_prefill_kernels

# InferenceX recipes: "random_range_ratio: 0.8, sa-bench" (srt-slurm recipe READMEs);
# benchmark_lib.sh passes it to benchmark_serving.py --random-range-ratio.
INFERENCEMAX_RANGE_RATIO = 0.8
# Warm-up: InferenceX's single-node runs went through kimbochen/bench_serving (cloned by the
# launch scripts, e.g. runners/launch_b200-nvd.sh), whose benchmark() sends one test request
# and then the measured requests: no warm-up. `--num-warmups 2C` came with InferenceX PR #480
# ("upstream kimbochen/bench_serving, adding warmup", opened 2026-01-17); aggregated rows
# measured before that day ran on a cold server (the file has none between it and the merge).
INFERENCEX_WARMUP_SINCE = "2026-01-17"
# InferenceX Blackwell SGLang scripts: SCHEDULER_RECV_INTERVAL=30 if CONC >= 16 else 10.
INFERENCEMAX_SGLANG_RECV_INTERVAL = 10
INFERENCEMAX_SGLANG_RECV_INTERVAL_HIGH = 30
INFERENCEMAX_SGLANG_RECV_HIGH_FROM = 16          # concurrency
INFERENCEMAX_SGLANG_RECV_GPUS = ("b200", "b300")  # B300: assumed as B200 (docstring)
# Largest captured decode batch the recipes set. AIConfigurator trtllm.rule:
# cuda_graph_batch_sizes up to 512 (plus max_batch_size +- 8). InferenceX: the Blackwell
# TRT-LLM scripts `cuda_graph_config: max_batch_size: 512` (dsr1_fp4_b200_trt.sh), the H200 one
# 128 (dsr1_fp8_h200_trt.sh); the H200 SGLang script `--cuda-graph-max-bs 512` at 1k/1k and 256
# otherwise (dsr1_fp8_h200.sh). Other recipes keep the preset's default.
INFERENCEMAX_TRTLLM_GRAPH_MAX_BATCH = {"b200": 512, "b300": 512, "h200-sxm": 128}
# InferenceX's disaggregated SGLang recipes (benchmarks/dsr1_fp4_gb200_dynamo-sglang_slurm.sh)
# launch the workers with ai-dynamo/dynamo's SGLang slurm_jobs worker scripts; the GB200 FP4
# one published with dynamo 0.7.0 passes `--scheduler-recv-interval 10` to both its prefill
# and decode `python3 -m dynamo.sglang` commands. Assumption: the other versions and the
# B200/GB300/B300 recipes pass the same (none was found). A DP-attention worker cannot take
# the flag (serving/disagg_report._recv_pools).
INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL = 10
INFERENCEMAX_SGLANG_DISAGG_RECV_GPUS = ("b200", "b300", "gb200", "gb300")

# InferenceMAX's Llama-70B TensorRT-LLM scripts (benchmarks/70b_fp8_h200_trt_slurm.sh,
# 70b_fp4_b200_trt_slurm.sh): `trtllm-serve --max_num_tokens $MAX_MODEL_LEN` with no
# enable_chunked_prefill (TensorRT-LLM's default: off) and cuda_graph_config max_batch_size 1024;
# the 70B sweep passes max-model-len ISL + OSL (full-sweep-tmpl.yml: 2048 for 1k/1k, 9216 for
# 1k/8k and 8k/1k). At 1k/1k below TP 8 they also write `batch_wait_max_tokens_ratio: 0.9`,
# `batch_wait_timeout_iters: 20` into the extra llm-api config (`if [[ "$ISL" == "1024" &&
# "$OSL" == "1024" && ${TP} -lt 8 ]]`): TensorRT-LLM's batch waiting (SchedulerSpec.batch_wait_*).
# The DeepSeek R1 TensorRT-LLM scripts (dsr1_fp4_b200_trt[_slurm].sh, dsr1_fp8_h200_trt[_slurm].sh)
# set neither flag: their rows keep TensorRT-LLM's default (off).
INFERENCEMAX_LLAMA70B_TRTLLM_GRAPH_MAX_BATCH = 1024
INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_ITERS = 20
INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_RATIO = 0.9
INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_LENGTHS = (1024, 1024)   # ISL, OSL
INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_BELOW_TP = 8



def _warmup(source: str, disagg: bool) -> str:
    """The warm-up of an InferenceX row's harness, in words (INFERENCEX_WARMUP_SINCE)."""
    day = _measured(source)
    if disagg or day is None or day >= INFERENCEX_WARMUP_SINCE:
        return "2 x C warm-up drained"
    return ("no warm-up (kimbochen/bench_serving before InferenceX PR #480: one test request, "
            "then the measured run on a cold server; first-use costs such as kernel JIT at a "
            "new shape fall into the measured mean and are not simulated)")


def _inferencemax_recv(engine: str, concurrency: int | None, gpu: str | None,
                       disagg: bool) -> int | None:
    """--scheduler-recv-interval of a Blackwell SGLang recipe (aggregated: by concurrency;
    disaggregated: INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL at every level), else None."""
    if engine != "sglang" or concurrency is None:
        return None
    if disagg:
        return (INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL
                if gpu in INFERENCEMAX_SGLANG_DISAGG_RECV_GPUS else None)
    if gpu not in INFERENCEMAX_SGLANG_RECV_GPUS:
        return None
    if concurrency >= INFERENCEMAX_SGLANG_RECV_HIGH_FROM:
        return INFERENCEMAX_SGLANG_RECV_INTERVAL_HIGH
    return INFERENCEMAX_SGLANG_RECV_INTERVAL


def _inferencemax_graphs(engine: str, gpu: str | None, prompt: int,
                         output: int | None) -> int | None:
    """The largest captured decode batch an InferenceX recipe sets, else None."""
    if engine == "trtllm":
        return INFERENCEMAX_TRTLLM_GRAPH_MAX_BATCH.get(gpu or "")
    if engine == "sglang" and gpu == "h200-sxm":
        return 512 if (prompt, output) == (1024, 1024) else 256
    return None


def _llama70b_batch_wait(prompt: int, output: int,
                         tp: int | None) -> tuple[int | None, float | None, str]:
    """The batch-waiting flags of InferenceMAX's Llama-70B TensorRT-LLM scripts: 1k/1k below
    TP 8 only (the scripts' condition); (None, None, "") elsewhere or without a TP."""
    if (tp is None or (prompt, output) != INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_LENGTHS
            or tp >= INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_BELOW_TP):
        return None, None, ""
    it = INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_ITERS
    ratio = INFERENCEMAX_LLAMA70B_TRTLLM_BATCH_WAIT_RATIO
    return it, ratio, (f"engine: batch_wait_timeout_iters {it}, batch_wait_max_tokens_ratio "
                       f"{ratio:g} (InferenceMAX Llama-70B TensorRT-LLM scripts at 1k/1k below "
                       "TP 8): prompts beside running decodes wait for that many iterations "
                       "or that share of max_num_tokens")


def recipe_for(source: str, engine: str, prompt: int, *, concurrency: int | None = None,
               gpu: str | None = None, disagg: bool = False, output: int | None = None,
               version: str | None = None, tp: int | None = None,
               inferencemax_twin: bool = False, dp: int | None = None, model: str | None = None,
               weights: str | None = None) -> Recipe:
    """The recipe of a row from its `source` cell, engine preset id and prompt length (and,
    for the flags that depend on them, its concurrency, GPU id, mode, engine version,
    tensor- and attention-data-parallel sizes, catalog model id and experts' weight format),
    with the prompt attention kernels of an old vLLM (serving_versions.py).
    `inferencemax_twin`: the row repeats an InferenceMAX row's measurement
    (inferencemax_twins), so it gets that harness's recipe. A vLLM row gets its version's
    scheduling loop (serving_recipe_vllm.py)."""
    recipe = _recipe(source, engine, prompt, concurrency=concurrency, gpu=gpu, disagg=disagg,
                     output=output, version=version, tp=tp, inferencemax_twin=inferencemax_twin,
                     dp=dp, model=model, weights=weights)
    kernels, note = vllm_prefill_kernels(engine, version, _llama70b_import(source))
    if kernels is not None:
        recipe = recipe.model_copy(update=dict(prefill_attention=kernels,
                                               notes=recipe.notes + (note,)))
    if engine != "vllm":
        return recipe
    sweep = _llama70b_import(source)
    on, note = vllm_async_scheduling(version, before_merge=sweep,
                                     script_async=sweep and INFERENCEMAX_LLAMA70B_VLLM_ASYNC)
    return recipe.model_copy(update=dict(overlap_scheduler=on, notes=recipe.notes + (note,)))


def _recipe(source: str, engine: str, prompt: int, *, concurrency: int | None, gpu: str | None,
            disagg: bool, output: int | None, version: str | None, tp: int | None,
            inferencemax_twin: bool, dp: int | None, model: str | None,
            weights: str | None) -> Recipe:
    """recipe_for before the engine version's kernels and scheduling loop."""
    fam = family(source)
    twin = inferencemax_twin and fam == "aic"
    if twin:
        fam = "inferencemax"
    if fam == "aic":
        return _aic(engine, prompt, version, disagg)
    if fam == "inferencemax":
        r = INFERENCEMAX_RANGE_RATIO
        notes = [f"harness: InferenceMAX benchmark_serving.py closed loop, lengths uniform in "
                 f"[{r:g} x L, L] (--random-range-ratio {r:g}), {_warmup(source, disagg)}; "
                 "engine flags not in the file: preset defaults"]
        if twin:
            notes.insert(0, "provenance: an InferenceMAX measurement copied into "
                            "AIConfigurator's file (its TTFT and TPOT repeat an InferenceMAX "
                            "row's to 0.01 ms; serving_provenance.py)")
        elif copied_from_inferencemax(source):
            why = ("its source names the container image=; such rows repeat db-dump rows' "
                   "values, date and image" if AIC_COPIED_IMAGE_TAG in source.lower() else
                   "measured on the date of InferenceMAX's Llama-70B sweep imported without "
                   "an image; serving_provenance.py")
            notes.insert(0, "provenance: an InferenceMAX measurement copied into "
                            f"AIConfigurator's file ({why})")
        recv = _inferencemax_recv(engine, concurrency, gpu, disagg)
        graphs = None if disagg else _inferencemax_graphs(engine, gpu, prompt, output)
        budget = chunked = wait_iters = wait_ratio = None
        if engine == "trtllm" and _llama70b_import(source) and output is not None:
            budget, chunked = prompt + output, False
            graphs = INFERENCEMAX_LLAMA70B_TRTLLM_GRAPH_MAX_BATCH
            notes.append(f"engine: max_num_tokens {budget} = max-model-len ISL + OSL, no "
                         "chunked prefill (InferenceMAX Llama-70B TensorRT-LLM scripts)")
            wait_iters, wait_ratio, note = _llama70b_batch_wait(prompt, output, tp)
            if note:
                notes.append(note)
        fields = dict(recv_interval_steps=recv, decode_graph_max_batch=graphs,
                      max_num_batched_tokens=budget, chunked_prefill=chunked,
                      batch_wait_timeout_iters=wait_iters, batch_wait_max_tokens_ratio=wait_ratio)
        dsr1 = None if disagg else dsr1_recipe(model, engine, prompt, concurrency, dp,
                                               gpu=gpu, weights=weights, output=output)
        if dsr1 is not None:
            fields.update(dsr1[0])
            notes.append(dsr1[1])
        graphed = inferencex_vllm_graphs(source, engine, prompt, model, weights, gpu, version,
                                         disagg)
        if graphed is not None:
            fields, notes = {**fields, **graphed[0]}, notes + [graphed[1]]
        layout = inferencex_vllm_layout(engine, model, weights, gpu, disagg)
        if layout is not None:
            fields, notes = {**fields, **layout[0]}, notes + [layout[1]]
        tf32 = inferencex_vllm_fp32_matmul(source, engine, model, weights, gpu, disagg)
        if tf32 is not None:
            fields, notes = {**fields, **tf32[0]}, notes + [tf32[1]]
        own = sglang_model_flags(model, engine, gpu, weights, disagg, version, tp=tp,
                                 measured=_measured(source))
        if own is not None:         # GLM-5 and Qwen3.5 scripts: their own receive interval
            fields.update(own[0])
            notes.extend(own[1])
            recv = fields["recv_interval_steps"]
        if graphs is not None:
            notes.append(f"engine: CUDA graphs for decode batches up to {graphs} (InferenceX "
                         f"{engine} script for {gpu})")
        if recv is not None and disagg:
            notes.append(f"engine: SGLang --scheduler-recv-interval {recv} on the workers "
                         "without attention DP (InferenceX dynamo-sglang recipes: dynamo's "
                         "slurm_jobs worker scripts)")
        elif recv is not None and not (own and "recv_interval_steps" in own[0]):
            notes.append(f"engine: SGLang --scheduler-recv-interval {recv} (InferenceMAX "
                         f"Blackwell SGLang scripts: 10 below C=16, 30 from it)")
        return Recipe(family="inferencemax", range_ratio=r, notes=tuple(notes), **fields)
    return Recipe(notes=("harness not stated: closed loop, fixed lengths, engine defaults",))
