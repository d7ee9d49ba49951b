"""Engine presets: how each piece of software runs the model.

The gap between Hugging Face `generate` and a serving engine is one of the largest levers
in the seed documents, so it is modelled, not hidden: eager PyTorch issues every small
kernel from Python (tens of microseconds each), static batching waits for the longest
request, and the HF cache is grown with torch.cat and expanded by repeat_kv each step.

Sources for the parameters (mid-range values, not fitted to any validation row):
- kernels per Llama layer: counted from the implementations (HF modeling_llama eager:
  RMSNorm ~7 ops x2, rotary ~10, q/k/v/o, repeat_kv, SDPA, SwiGLU 5, residuals: ~45;
  measured 48 per layer with transformers 5.17 (1543 per generated token, H200 run 2026-12-01);
  a plain-torch Llama layer launches 44 kernels per layer (1420 per 32-layer decode step,
  counted from its CUDA graph, calibrate/BENCH_NOTES.md): ~44; torch.compile fuses the
  elementwise chains: 452 per step for the whole model (gpt-fast mode, H200 2026-12-01), ~14;
  vLLM/TRT-LLM fuse QKV, norm+residual and SwiGLU:
  ~8-12).
- per-kernel CPU launch cost: PyTorch eager dispatch 5-10 us per op in a tight loop (8.9 us
  measured on the H200 host), 15-20 us per op inside a model's forward (26 ms / 1420 kernels
  measured there); HF module/Python overhead adds more (PyTorch "CUDA Graphs" blog 2021; gpt-fast blog 2023
  "Accelerating generative AI with PyTorch II": eager Llama-7B decode 25 tok/s on A100,
  CPU-bound; with torch.compile + CUDA graphs 107 tok/s).
- per-step scheduler overhead: vLLM V1 blog (Jan 2025, CPU overhead cut to well under
  a millisecond per step); SGLang and TRT-LLM report lower; llama.cpp ~0.3-0.5 ms.
- KV memory: vLLM gpu_memory_utilization 0.9 and block 16; SGLang mem_fraction_static
  ~0.88 and page size 1; TRT-LLM kv_cache_free_gpu_mem_fraction 0.9, tokens_per_block 64
  (perf-overview doc).
- KV preallocation (memory.held_context): the torch engines keep a static cache, one
  [max_seq_len] slot per sequence whatever the request (gpt-fast `setup_caches`, HF
  `StaticCache`); STATIC_CACHE_TOKENS is its length. llama.cpp allocates one KV buffer of
  n_ctx tokens at start and splits it among its slots (server `--parallel`): LLAMA_CPP_N_CTX.
- Low-bit weights: dequantized inside the matmul and overlapped with it by default (Marlin,
  Machete, TRT-LLM's weight-only GEMMs, llama.cpp's mul_mat kernels). In series: hf-eager's
  bitsandbytes path dequantizes the whole matrix first (bitsandbytes/autograd/_functions.py
  matmul_4bit), and the torch engines' tinygemm int4 kernel is bound by its dequant work
  (gpt-fast README: int4 decode streams 862 GB/s on an A100, bf16 1397 GB/s).
"""

from __future__ import annotations

from perfmodel.core.eager_kernels import SGLANG_EAGER_BLOCKS, TRTLLM_EAGER_BLOCKS
from perfmodel.core.engine_versions import (  # noqa: F401 (re-exported)
    VLLM_NATIVE_PREFILL_SINCE, release_of, vllm_prefill_attention)
from perfmodel.core.errors import UnknownIdError
from perfmodel.core.grouped_gemm import SGLANG_FUSED_MOE_STREAM_FRACTION
from perfmodel.core.specs import EngineProfile, SchedulerSpec
from perfmodel.core.units import GiB

_COMMON = dict(dequant_flops_per_weight=4.0)
# Assumption: a static-cache server is set up for 32K tokens per sequence. HF StaticCache
# defaults max_cache_len to the model's max_position_embeddings, but 128K of FP16 KV for an
# 8B (17 GB) beside its 16 GB of weights fits no 24 GB card, so a working deployment of a
# long-context model sets it lower; 32K is the shortest common long-context setting.
STATIC_CACHE_TOKENS = 32768
# llama.cpp common.h: `common_params.n_ctx = 4096` (context size; newer builds take 0 = the
# model's training context), one buffer shared by all slots.
LLAMA_CPP_N_CTX = 4096
# gpt-fast's int4 path (tinygemm `_weight_int4pack_mm`) dequantizes in series with its MMAs:
# the gpt-fast README measures Llama-2-7B int4 on A100 at 196.8 tok/s and 862 GB/s, 42% of
# the card's bandwidth (bf16: 1397 GB/s), so that kernel is bound by its dequant work.
_STATIC_CACHE = dict(kv_prealloc="max_context", kv_prealloc_tokens=STATIC_CACHE_TOKENS,
                     dequant_overlap=False)

# Steps that carry prompt tokens run outside the CUDA graphs of the serving engines, so their
# kernels are issued one by one from Python (issue time = kernels x eager_launch_s;
# core/roofline.issue_s):
# - TensorRT-LLM (PyTorch backend): its CUDA graphs are for generation-only batches
#   (llm-api DecodeCudaGraphConfig, "CUDA graph configuration for decode requests"; docs
#   torch_compile_and_piecewise_cuda_graph.md: "the generation-only CUDA Graph only handles
#   pure generation iterations", context and mixed iterations need the opt-in piecewise graphs).
# - SGLang: decode batches only; piecewise prefill graphs are opt-in
#   (--enable-piecewise-cuda-graph, PR #10062) in the releases the serving data measured
#   (0.5.1-0.5.10; "Piecewise Cuda Graph Default Enable" is an open TODO, issue #18130, and
#   they are not captured for MoE EP / attention-DP layouts).
# - vLLM V1: piecewise graphs up to max_cudagraph_capture_size = min(2 x max_num_seqs, 512)
#   tokens (vllm/config/vllm.py _set_cudagraph_sizes); larger steps run the compiled model
#   without graphs.
# SGLang, TensorRT-LLM and vLLM pay a prompt step's issue time in series with its GPU work
# (eager_issue_overlap=False: step = GPU + issue, not max(GPU, issue); eager decode batches,
# for which no such measurement was found, keep the max). Measured: their TTFT
# at low concurrency rises with the prompt by the GPU time while a host term of the same size
# stays on top, which a max() cannot do (a host term large enough to explain the short prompt
# would hide the long one's GPU time):
# - SGLang DeepSeek-R1-0528, 16 x H100, concurrency 1 (tenstorrent/tt-inference-server#356):
#   TTFT 180 ms at 128 prompt tokens, 200 ms at 4096, 264 ms at 8192;
# - InferenceX rows of data/serving (C=4): TRT-LLM 1.2.0rc6 DeepSeek-R1 NVFP4 on 4 x B200,
#   1k -> 8k prompt: 156-162 -> 249 ms, while this model's GPU prefill goes 28 -> 139 ms
#   (excess 128 -> 110 ms); SGLang 0.5.9 DeepSeek-R1 NVFP4 8 x B200 tp8 ep8: 189 -> 246 ms
#   against 25 -> 94 ms of GPU (excess 164 -> 152 ms);
# - InferenceX rows of data/serving (C=4), vLLM 0.18 MiniMax-M2.5 FP8 on 8 x H200, 1k -> 8k
#   prompt: 106 -> 198 ms, while this model's GPU prefill goes 24 -> 107 ms (excess 82 -> 91 ms);
#   over all vLLM InferenceX rows at C <= 8, measured TTFT = 1.2 x predicted + 43 ms (MoE,
#   H200) and + 10 ms (Llama-70B, H200) with the max() (docs/vllm_moe.md).
# Not identified: the host-device synchronization that keeps the CPU from running ahead
# (candidates read: SGLang fused_moe_triton fused_experts_impl has none; DeepEP normal-mode
# dispatch waits for its counts on the CPU, but most rows run without DeepEP). Without one,
# eager PyTorch overlaps the two: the project's plain-torch MoE and dense layers on the H200
# (calibrate/data/moe-layer-h200-sxm-20261202b.json) run in max(issue, GPU) within 1%, so the
# series rule is a property of the engines' steps, taken from their serving measurements.
# EAGER_LAUNCH_S from SGLang PR #13094 (Llama-3.1-8B FP8, TP8, 1024-token prompts, C=1,
# sglang.bench_serving mean TTFT): eager 29.97 ms vs piecewise graphs 19.66 ms. In series, the
# difference, 10.3 ms, is the issue time itself, over the 391 kernels this model counts for
# that step: 26 us per kernel, whatever the step's GPU time (the max() reading needed it:
# 40 us, 48 us once core/parallel.py priced that step's 64 all-reduces). TensorRT-LLM: no A/B
# measurement found, assumed the same (both issue PyTorch modules with custom ops). vLLM's compiled path above the capture size: the
# plain-PyTorch launch cost measured on our H200 host (torch-eager launch_s, 14 us), an upper
# value for inductor's generated wrapper code.
# The MLA/MoE blocks of an eager prompt step are counted from the engines' code: eager_kernels.py.
EAGER_LAUNCH_S = 26e-6
VLLM_GRAPH_MAX_TOKENS = 512
VLLM_EAGER_LAUNCH_S = 14e-6
# vLLM's steps that carry prompt tokens within the capture size replay PIECEWISE graphs (the
# default cudagraph_mode FULL_AND_PIECEWISE keeps full graphs for uniform decode batches only,
# vllm-project/vllm#25444; docs design/cuda_graphs.md): the attention ops are splitting ops
# and run eagerly between the graph pieces, one Python-level attention call per layer.
# Measured: vllm#25444 (Qwen3-Coder-30B-A3B-Instruct-FP8, 48 layers, 1 x H100, 10 requests of
# 1024 in / 128 out at once): PIECEWISE 4.07 req/s against FULL_AND_PIECEWISE 5.98 (4.29 and
# 6.20 with async scheduling). The prompt steps (10 x 1024 tokens, above the 512 capture size)
# run without graphs in both, so the difference is the 127 decode steps of batch 10:
# (10/4.07 - 10/5.98) s / 127 = 6.2 ms per step (5.6 ms with async scheduling), 118-129 us per
# layer: VLLM_PIECEWISE_ATTENTION_S, paid by a graphed prompt step in series like an eager
# one's issue (eager_issue_overlap False). Decode steps keep their full graphs.
VLLM_PIECEWISE_ATTENTION_S = 120e-6
# Decode batches above the largest captured graph run eagerly too (decode_graph_max_batch):
# - TensorRT-LLM: DecodeCudaGraphConfig "If neither [batch_sizes nor max_batch_size] is
#   provided, a default max_batch_size of 128 is used" (llm-api reference, 1.3);
# - vLLM: the same max_cudagraph_capture_size, 512 (a decode row is one token);
# - SGLang: cuda_graph_max_bs by GPU memory and TP (server_args.py, 0.5.x
#   _handle_gpu_memory_settings): A100-40GB/L40 (< 60 GiB) 32 at tp < 4 else 160;
#   H100/A100-80GB (< 90 GiB) and H20/H200 (< 160 GiB) 256 at tp < 4 else 512; B200/MI300 512.
TRTLLM_DECODE_GRAPH_MAX_BATCH = 128
SGLANG_DECODE_GRAPH_BY_GPU = ((60 * GiB, 32, 160), (160 * GiB, 256, 512))
SGLANG_DECODE_GRAPH_MAX_BATCH = 512

# Host work per running sequence per step (scheduler bookkeeping, block tables and input
# preparation, sampled-token output processing and streaming), issue 13. vLLM V1 measured:
# vllm-project/vllm#10634 (after the V1 AsyncLLM PR #9826): Llama-2-7B, batch 256, ShareGPT:
# 5-6 ms between two decode steps, spent in the Python scheduler/IPC under the GIL:
# (5.5 ms - the 0.6 ms fixed step overhead) / 256 sequences = 19 us per sequence, ~20 us.
# (A single loop of it, Scheduler.update_from_output, is 0.29 ms at batch 256 alone:
# vllm#46112.) Assumption: SGLang's and TensorRT-LLM's PyExecutor schedulers, Python loops
# over per-request objects of the same design, cost the same per sequence; no measurement
# of theirs was found. All three run it beside the GPU step (vLLM async scheduling, default
# since vllm#27614, design in vllm#19970; SGLang v0.4 zero-overhead batch scheduler, LMSYS
# blog 2024-12-04; TensorRT-LLM overlap scheduler, on by default, docs
# features/overlap-scheduler), so it costs only where it exceeds the GPU step:
# step = max(GPU, issue + sequences x PYTHON_SCHEDULER_PER_SEQ_S) + fixed overhead.
PYTHON_SCHEDULER_PER_SEQ_S = 20e-6
_HOST_OVERLAP = dict(host_per_seq_s=PYTHON_SCHEDULER_PER_SEQ_S, host_overlap=True)

# Scheduler defaults as each engine ships them:
# - vLLM V1 `EngineArgs.get_batch_defaults` (vllm/engine/arg_utils.py): `vllm serve` on a
#   GPU with >= 70 GiB that is not an A100 gets max_num_seqs=1024, max_num_batched_tokens=8192;
#   other GPUs 256 and 2048. Chunked prefill is always on in V1; the scheduler runs the
#   running decodes first and fills the rest of the token budget with prompt chunks.
# - TensorRT-LLM trtllm-bench (tensorrt_llm/bench/build/tuning.py, finetune_setting): max batch
#   capped at 4096 / pp, max_num_tokens capped at 32768; the in-flight batcher runs
#   context and generation requests in one step.
# - SGLang server_args.py (_handle_gpu_memory_settings): chunked_prefill_size 8192 below
#   160 GiB of device memory ("H100, H200, A100, H20"), 16384 from 160 GiB ("B200, MI300"),
#   2048 below 35 GiB (A10, L40, 4090: not modelled, they get 8192); prefill and decode
#   batches run separately unless --enable-mixed-chunk (off by default), and a waiting
#   prefill batch runs before the next decode batch.
# - llama.cpp server: n_batch 2048 tokens (common.h); prompt and generation tokens share
#   one llama_decode call.
# - vLLM async scheduling (AsyncScheduler, vllm#19970): the scheduler plans step n+1 while step
#   n runs, so a request arriving during step n joins step n+2 (overlap_scheduler); on by
#   default since 0.14.0 (vllm#27614). Older versions: analysis/validation/serving_recipe_vllm.py.
VLLM_SCHEDULER = SchedulerSpec(
    max_num_seqs=1024, max_num_batched_tokens=8192, chunked_prefill=True, mixed_prefill=True,
    small_gpu_bytes=70 * GiB, small_gpu_excludes=("a100",), small_gpu_max_num_seqs=256,
    small_gpu_max_num_batched_tokens=2048, overlap_scheduler=True,
    source="vllm/engine/arg_utils.py get_batch_defaults (V1, `vllm serve`); async scheduling "
           "on by default since 0.14.0 (vllm#27614)")
# - SGLang overlap scheduler (Scheduler.event_loop_overlap, python/sglang/srt/managers/
#   scheduler.py; the default loop since v0.4, LMSYS blog 2024-12-04, off only with
#   --disable-overlap-schedule): each iteration receives requests, schedules and launches batch
#   k, then processes batch k-1's results, blocking until k-1 finishes; so the next receive
#   happens as batch k starts, and a request arriving while batch k runs is scheduled into
#   batch k+2 (overlap_scheduler). server_args.py turns it off for hybrid Mamba/GDN models under
#   the default --mamba-scheduler-strategy no_buffer with the radix cache on
#   (_handle_mamba_radix_cache; not modelled: its exceptions for the trtllm_mha backend and
#   speculative decoding, which drop the radix cache instead) and with pp_size > 1
#   (_handle_pipeline_parallelism). Disaggregated prefill and decode workers run their own
#   overlap loops (disaggregation/prefill.py event_loop_overlap_disagg_prefill, decode.py
#   event_loop_overlap_disagg_decode).
SGLANG_SCHEDULER = SchedulerSpec(
    max_num_batched_tokens=16384, chunked_prefill=True, mixed_prefill=False, prefill_first=True,
    small_gpu_bytes=160 * GiB, small_gpu_max_num_batched_tokens=8192, overlap_scheduler=True,
    overlap_off_linear_attention=True, overlap_off_pp=True, overlap_disagg_prefill=True,
    dp_limits_divided=True,
    source="sglang server_args.py (chunked_prefill_size 8192 below 160 GiB, 16384 from 160 GiB; "
           "enable_mixed_chunk off); scheduler.py event_loop_overlap (on by default since v0.4)")
# - TensorRT-LLM overlap scheduler (PyTorch backend, "Enabled by default. To disable, set
#   disable_overlap_scheduler=True", docs features/overlap-scheduler.md; AIConfigurator's
#   generator keeps it on for aggregated workers, rule_plugin/trtllm.rule `agg
#   disable_overlap_scheduler = false`): PyExecutor._executor_loop_overlap schedules and
#   launches step n+1, then processes step n's outputs, so a request that arrives while step n
#   runs was not there when step n+1 was scheduled and starts in step n+2 ("introduces one
#   extra decoding step", same doc). The 0.x C++ runtime (trtllm-trt below) has no such loop.
# - An idle PyExecutor (no active requests) fetches with timeout None, and
#   _get_from_request_queue, finding the queue empty, blocks on request_queue.get() and returns
#   that one item; only a non-empty queue is drained (_pytorch/pyexecutor/py_executor.py
#   _fetch_new_requests from the first PyExecutor through 1.0; executor_request_queue.py
#   _fetch_and_process_requests since, with batch_wait_timeout_ms 0, the default). A closed-loop
#   wave sent at once to an idle engine therefore runs its first prompt alone and the rest in
#   the next step (idle_takes_one).
TRTLLM_SCHEDULER = SchedulerSpec(
    max_num_seqs=4096, max_num_batched_tokens=32768, chunked_prefill=True, mixed_prefill=True,
    seqs_divided_by_pp=True, kv_reserve_output=True, overlap_scheduler=True, idle_takes_one=True,
    source="tensorrt_llm/bench/build/tuning.py finetune_setting (4096 / pp sequences, "
           "max_num_tokens <= 32768); capacity scheduler policy GUARANTEED_NO_EVICT "
           "(the default of executor SchedulerConfig)")
# TensorRT-LLM online server (trtllm-serve, the LLM API): max_num_tokens 8192 and max_batch_size
# 2048 unless set (BuildConfig defaults, tensorrt_llm/builder.py; AIConfigurator uses the same
# 8192, TRTLLM_DEFAULT_MAX_NUM_TOKENS in sdk/backends/trtllm_backend.py). The offline
# trtllm-bench tunes larger limits (TRTLLM_SCHEDULER above). Assumption: prompts longer than
# max_num_tokens are chunked (enable_chunked_prefill), as a deployment serving them must.
TRTLLM_SERVER_SCHEDULER = TRTLLM_SCHEDULER.model_copy(update=dict(
    max_num_seqs=2048, max_num_batched_tokens=8192, seqs_divided_by_pp=False,
    source="trtllm-serve / LLM API BuildConfig defaults (max_num_tokens 8192, max_batch_size "
           "2048); capacity scheduler policy GUARANTEED_NO_EVICT"))
# All-reduces on the switch's multicast reduction (NVLink SHARP, NVLS; EngineProfile
# .allreduce_nvls_min_bytes / _max_bytes, core/parallel.py allreduce_s), by engine:
# - vLLM: its custom all-reduce (one/two-shot over IPC buffers) up to CUSTOM_ALL_REDUCE_MAX_SIZES
#   (256 KiB at TP8 on sm90; 32 MiB at TP4), then, with VLLM_ALLREDUCE_USE_SYMM_MEM=1 (the
#   default, vllm/envs.py), torch symmetric-memory multimem kernels at TP 4-8 up to
#   SYMM_MEM_ALL_REDUCE_MAX_SIZES (64 MiB at TP8 on sm90, 128 MiB on sm100), then PyNCCL
#   (vllm/distributed/device_communicators/all_reduce_utils.py). vLLM sets NCCL_CUMEM_ENABLE=0
#   (vllm/env_override.py), which is taken to leave NCCL without NVLS. The Hopper TP8 window.
# - TensorRT-LLM (AllReduceStrategy AUTO, 1.0): its one/two-shot kernels up to the workspace,
#   8 MB at TP > 2 (16 MB at TP 2; cpp/tensorrt_llm/common/customAllReduceUtils.h
#   getMaxRequiredWorkspaceSize), NCCL above (ifFallbackToNCCL in thop/allreduceOp.cpp) with
#   NCCL's NVLS default left on: above 8 MB, no limit.
# - SGLang: NCCL_NVLS_ENABLE=0 unless --enable-nccl-nvls (python/sglang/srt/entrypoints/engine.py
#   _set_envs_and_config): never. The other presets keep the ring (the fields' defaults).
# MoE exchange kernels under attention DP x EP (EngineProfile.moe_a2a_kernels):
# - TensorRT-LLM: NVLinkOneSided AlltoAll, its default inside one NVLink domain under
#   attention DP (TensorRT-LLM tech blog 18);
# - SGLang: DeepEP low-latency on decode (--moe-a2a-backend deepep), as its attention-DP x
#   large-EP DeepSeek deployments run (LMSYS blog 'Deploying DeepSeek with PD disaggregation
#   and large-scale EP', 2025); an assumption: the serving file states no flags, and SGLang's
#   own default ('none') gathers the DP ranks' tokens instead;
# - vLLM: VLLM_ALL2ALL_BACKEND defaults to allgather_reducescatter (vllm/envs.py): NCCL
#   collectives, priced by the core's bytes and latencies ('collective', the default).
VLLM_NVLS_WINDOW = dict(allreduce_nvls_min_bytes=256 * 2**10, allreduce_nvls_max_bytes=64 * 2**20)
TRTLLM_NVLS_WINDOW = dict(allreduce_nvls_min_bytes=8e6, allreduce_nvls_max_bytes=None)
LLAMA_CPP_SCHEDULER = SchedulerSpec(
    max_num_batched_tokens=2048, chunked_prefill=True, mixed_prefill=True,
    source="llama.cpp common.h (n_batch 2048)")

ENGINES: dict[str, EngineProfile] = {e.id: e for e in [
    # hf-eager and torch-eager host costs: the project's own H200 runs (calibrate/data/,
    # 6 full runs on one VM type, 2026-11-29 and 2026-12-01): HF generate decode B=1 of an
    # 8B shape 44.8-72.7 ms/token (median ~55), 1543 kernels per token (torch.profiler,
    # transformers 5.17, sdpa) = 48 per layer; fitted launch_s 16-31 us, generate's per-token
    # Python 4.8-6.3 ms, generate(1) setup 2-5 ms. gpt-fast blog 2023: eager Llama-7B 25 tok/s
    # (40 ms/token) on an A100, host-bound. Plain torch eager: 1420 kernels per step (44 per
    # layer), 16.6-27 ms per step, fitted launch_s 13-15 us. MEASURED_UNCERTAINTY below.
    # The 7th run (20261201b) times host-bound points in interleaved rounds: HF decode's
    # fastest round 31.7-36.7 ms/token over six (B, prompt) configs, its slow rounds up to
    # 92 ms (the VM's slow host state). hf-eager launch_s 24 us puts the preset's B=1 decode
    # (43 ms) between that fast state and the older runs' medians (~55 ms).
    # fp8 (W8A8, torch._scaled_mm) in plain torch: 1516 kernels per decode step against 1420
    # in bf16 at B=1 S=512 (the step's CUDA graph, raw-h200-sxm-20261201b.json): (1516 -
    # 1420) / 32 layers = 3 activation casts (x.to(float8)) per layer.
    EngineProfile(
        id="hf-eager", name="Hugging Face transformers generate (eager PyTorch)",
        kernels_per_layer=48, launch_s=24e-6, graph_launch_s=0.0,
        cpu_overhead_per_step_s=5.5e-3, per_request_overhead_s=3.5e-3,
        attention="naive", batching="static", kv_memory_fraction=0.95, kv_block_tokens=1,
        kv_prealloc="request", quant_kernel_efficiency=0.5, fused_elementwise=False,
        supports_fp8=False, dequant_overlap=False, speculative_impl="research",
        source="HF modeling_llama; gpt-fast blog (eager baseline); bitsandbytes matmul_4bit "
               "(more than one row: dequantize_4bit, then a 16-bit matmul)", **_COMMON),
    EngineProfile(
        id="torch-eager", name="Plain PyTorch eager (gpt-fast without compile)",
        kernels_per_layer=44, launch_s=14e-6, graph_launch_s=0.0,
        act_quant_kernels_per_layer=3.0,
        cpu_overhead_per_step_s=0.3e-3, per_request_overhead_s=5e-3,
        attention="flash", batching="static", kv_memory_fraction=0.92, kv_block_tokens=1,
        quant_kernel_efficiency=0.6, fused_elementwise=False, **_STATIC_CACHE,
        source="gpt-fast model.py; PyTorch dispatch overhead", **_COMMON),
    EngineProfile(
        id="torch-graph", name="PyTorch with CUDA graphs (unfused kernels)",
        kernels_per_layer=40, launch_s=0.0, graph_launch_s=30e-6,
        act_quant_kernels_per_layer=3.0,
        cpu_overhead_per_step_s=0.2e-3, per_request_overhead_s=5e-3,
        attention="flash", batching="static", kv_memory_fraction=0.92, kv_block_tokens=1,
        quant_kernel_efficiency=0.6, fused_elementwise=False, **_STATIC_CACHE,
        source="PyTorch CUDA graphs blog 2021", **_COMMON),
    EngineProfile(
        id="torch-compile", name="torch.compile (mode=reduce-overhead, gpt-fast)",
        kernels_per_layer=14, launch_s=0.0, graph_launch_s=30e-6,
        cpu_overhead_per_step_s=0.15e-3, per_request_overhead_s=5e-3,
        attention="flash", batching="static", kv_memory_fraction=0.92, kv_block_tokens=1,
        quant_kernel_efficiency=0.85, fused_elementwise=True, **_STATIC_CACHE,
        source="gpt-fast blog 2023 (int8/int4 weight-only kernels)", **_COMMON),
    EngineProfile(
        id="vllm", name="vLLM (V1, CUDA graphs, paged attention)",
        kernels_per_layer=12, launch_s=0.0, graph_launch_s=40e-6,
        cpu_overhead_per_step_s=0.6e-3, per_request_overhead_s=10e-3,
        attention="paged", batching="continuous", kv_memory_fraction=0.90, kv_block_tokens=16,
        kv_prealloc="request", quant_kernel_efficiency=0.85, fused_elementwise=True,
        source="vLLM docs (gpu_memory_utilization=0.9, block_size=16); vLLM V1 blog 2025", scheduler=VLLM_SCHEDULER, **_COMMON, **_HOST_OVERLAP,
        prefill_graph_max_tokens=VLLM_GRAPH_MAX_TOKENS, eager_launch_s=VLLM_EAGER_LAUNCH_S,
        eager_issue_overlap=False, piecewise_attention_s=VLLM_PIECEWISE_ATTENTION_S,
        decode_graph_max_batch=VLLM_GRAPH_MAX_TOKENS, **VLLM_NVLS_WINDOW),
    EngineProfile(
        id="sglang", name="SGLang (radix cache, CUDA graphs)",
        kernels_per_layer=12, launch_s=0.0, graph_launch_s=40e-6,
        cpu_overhead_per_step_s=0.4e-3, per_request_overhead_s=8e-3,
        attention="paged", batching="continuous", kv_memory_fraction=0.88, kv_block_tokens=1,
        kv_prealloc="request", quant_kernel_efficiency=0.85, fused_elementwise=True,
        moe_stream_fraction=SGLANG_FUSED_MOE_STREAM_FRACTION, moe_act_quant_kernels=2.0,
        source="SGLang docs (mem_fraction_static, page_size=1); SGLang v0.4 blog; fused_moe "
               "streaming: sglang PR #11730 (core/grouped_gemm.py)", scheduler=SGLANG_SCHEDULER, **_COMMON, **_HOST_OVERLAP,
        eager_launch_s=EAGER_LAUNCH_S, eager_issue_overlap=False, eager_blocks=SGLANG_EAGER_BLOCKS,
        decode_graph_max_batch=SGLANG_DECODE_GRAPH_MAX_BATCH,
        decode_graph_max_batch_by_gpu=SGLANG_DECODE_GRAPH_BY_GPU, moe_a2a_kernels="one_sided",
        dsa_sparse_prefill=True),   # NSA backend's sparse prompt kernel (core/sparse_mla.py)
    EngineProfile(
        id="trtllm", name="TensorRT-LLM (in-flight batching, paged KV)",
        kernels_per_layer=8, launch_s=0.0, graph_launch_s=30e-6,
        cpu_overhead_per_step_s=0.25e-3, per_request_overhead_s=5e-3,
        attention="paged", batching="continuous", kv_memory_fraction=0.90, kv_fraction_of="free",
        kv_block_tokens=64,
        kv_prealloc="request", quant_kernel_efficiency=0.9, fused_elementwise=True,
        source="TensorRT-LLM perf-overview and kv-cache docs (fraction 0.9, tokens_per_block 64)",
        scheduler=TRTLLM_SCHEDULER, server_scheduler=TRTLLM_SERVER_SCHEDULER, **_COMMON, **_HOST_OVERLAP,
        eager_launch_s=EAGER_LAUNCH_S, eager_issue_overlap=False, eager_blocks=TRTLLM_EAGER_BLOCKS,
        decode_graph_max_batch=TRTLLM_DECODE_GRAPH_MAX_BATCH, **TRTLLM_NVLS_WINDOW,
        moe_a2a_kernels="one_sided"),
    EngineProfile(
        id="llama-cpp", name="llama.cpp server (GGUF, CUDA graphs)",
        kernels_per_layer=15, launch_s=0.0, graph_launch_s=50e-6,
        cpu_overhead_per_step_s=0.5e-3, per_request_overhead_s=10e-3,
        attention="flash", batching="continuous", kv_memory_fraction=0.95, kv_block_tokens=1,
        kv_prealloc="pool", kv_prealloc_tokens=LLAMA_CPP_N_CTX, quant_kernel_efficiency=0.8,
        fused_elementwise=True, supports_fp8=False,
        source="llama.cpp server README (n_ctx shared by the slots); CUDA graphs PR #6766",
        scheduler=LLAMA_CPP_SCHEDULER, **_COMMON),
]}
# TensorRT-LLM before its PyTorch backend (0.x): a TensorRT engine built ahead of time, run by
# the C++ in-flight batching runtime for context and generation steps alike, so no step is
# issued kernel by kernel from Python (the PyTorch backend is "available in version 0.17 and
# later", docs torch.md, and the default from 1.0; the `trtllm` preset above models it).
ENGINES["trtllm-trt"] = ENGINES["trtllm"].model_copy(update=dict(
    id="trtllm-trt", name="TensorRT-LLM TensorRT-engine backend (0.x, C++ runtime)",
    eager_launch_s=0.0, eager_issue_overlap=True, decode_graph_max_batch=None,
    scheduler=TRTLLM_SCHEDULER.model_copy(update=dict(overlap_scheduler=False, idle_takes_one=False)),
    server_scheduler=TRTLLM_SERVER_SCHEDULER.model_copy(update=dict(overlap_scheduler=False,
                                                                     idle_takes_one=False)),
    source="TensorRT-LLM perf-overview and kv-cache docs; TensorRT engine backend (docs torch.md: "
           "the PyTorch backend arrived in 0.17)"))

# Hugging Face TGI (v3) and LMDeploy TurboMind: sourced scheduler and memory defaults, host costs
# of the nearest preset above (core/engines_servers.py).
from perfmodel.core.engines_servers import server_presets  # noqa: E402
ENGINES.update({e.id: e for e in server_presets(ENGINES)})

# How far a preset's datasheet-only step time (default efficiencies) may miss the project's
# own measurements of the engine it names: the median |predicted / measured - 1| over one
# calibrate/bench.py run's points of that engine (tests/test_presets_measured.py checks every
# committed run). Host-bound presets are wide: the same H200 VM type gave eager steps of 16.6
# or 27 ms and HF decode of 45-73 ms/token at one shape (calibrate/BENCH_NOTES.md). Presets
# without an own measurement (vllm, sglang, trtllm, llama-cpp) are not listed.
MEASURED_UNCERTAINTY: dict[str, float] = {
    "hf-eager": 0.30, "torch-eager": 0.35, "torch-graph": 0.20, "torch-compile": 0.15}


def load_engine(engine_id: str) -> EngineProfile:
    """Exact preset look-up; unknown ids list the closest."""
    key = str(engine_id).strip().lower()
    if key not in ENGINES:
        raise UnknownIdError("engine", engine_id, list(ENGINES))
    return ENGINES[key]


def list_engines() -> list[EngineProfile]:
    return list(ENGINES.values())
