"""Engine presets for more serving stacks: Hugging Face text-generation-inference (TGI, v3)
and InternLM LMDeploy (TurboMind engine, and its PyTorch engine). Registered in
core/engines.py (ENGINES).

Every scheduler limit and memory setting below is the engine's shipped default, cited to the
file of the stored repository (huggingface/text-generation-inference, InternLM/lmdeploy) and
the commit it was read at. Host-cost fields have no measurement of these engines: they take
the value of the nearest existing preset, read from that preset (not copied), and say so in
the preset's source text. Modelled since the preset landed: TGI's join rule while a batch runs
(waiting_served_ratio 0.3 / max_waiting_tokens 20, serving/sim_batch_wait.py) and its refusal
(HTTP 429) beyond max_concurrent_requests (a concurrency above 128 does not fit); LMDeploy
PyTorch's step policy (prefill deferral, whole prompts; serving/sim_batch_wait.py). Not modelled
(it changes what a benchmark against these servers sees, and is listed here so that a reader
does not assume otherwise):
- Prefix caching (TGI v3 default; LMDeploy off by default): benchmark prompts rarely share
  prefixes, and the simulator does not model cache hits.
"""

from __future__ import annotations

from perfmodel.core.specs import EngineProfile, HardwareSpec, ModelSpec, SchedulerSpec

# --------------------------------------------------------------------------- TGI (v3)
# Launcher defaults, docs/source/reference/launcher.md at commit 032fc4c4cf25 (the v3 launcher
# reference: `--max-input-tokens` "Default to min(max_allocatable, max_position_embeddings) - 1",
# `--payload-limit`, `--enable-prefill-logprobs`):
# - MAX_CONCURRENT_REQUESTS default 128: no more requests in flight, so none more running;
TGI_MAX_CONCURRENT_REQUESTS = 128
# - MAX_BATCH_PREFILL_TOKENS: launcher/src/main.rs (v3, the version with --payload-limit)
#   `compute_optimal(config, compute_type).unwrap_or(4096)`, capped at max_position_embeddings.
#   compute_optimal = ComputeType.f16_flop() x num_shard / Config.flop() (integer division),
#   kept when above 100. f16_flop matches the nvidia-smi name, spaces -> '-', lowercased,
#   exactly: "nvidia-h100-80gb-hbm3" 900e12 (the H100 SXM's name "NVIDIA H100 80GB HBM3"),
#   "nvidia-l4" 121e12, "nvidia-a10g" 125e12; its "nvidia-a100" (312e12), "nvidia-t4" and
#   "nvidia-4090" entries match no shipping card's name ("NVIDIA A100-SXM4-80GB", "Tesla T4",
#   "NVIDIA GeForce RTX 4090"), which, like every other card (H200, B200, L40S, ...), keep 4096.
TGI_MAX_BATCH_PREFILL_TOKENS = 4096
TGI_F16_FLOPS_BY_GPU = (("h100-sxm", 900e12), ("l4", 121e12), ("a10g", 125e12))
TGI_MIN_OPTIMAL_TOKENS = 100   # compute_optimal: "Ignore calculations that's too low"
# - CUDA_GRAPHS "Default = 1,2,4,8,16,32" (decode batches; main.rs `vec![1, 2, 4, 8, 16, 32]`,
#   none with bitsandbytes or exl2 weights); prompt steps run the Python model eagerly;
TGI_CUDA_GRAPH_MAX_BATCH = 32
# - CUDA_MEMORY_FRACTION default 1.0; the shard then sizes its KV cache from what is free after
#   the warm-up prefill (server/text_generation_server/models/flash_causal_lm.py warmup:
#   num_blocks = free_memory x TGI_WIGGLE_ROOM // block bytes, "Leave 5% for some wiggle
#   room"): 0.95 of the free memory;
TGI_KV_FREE_FRACTION = 0.95
# - attention backend: flashinfer unless the model needs a fallback (launcher resolve_attention:
#   `attention.unwrap_or("flashinfer")`; flashdecoding for head dims other than 64/128/256,
#   paged below compute capability 8), and its page size BLOCK_SIZE 1 (models/globals.py:
#   flashdecoding 256, flashinfer 1, else 16).
TGI_KV_BLOCK_TOKENS = 1
# Scheduling (backends/v3/src/backend.rs batching_task, commit 1d0847a90e6b): a new batch is
# taken from the queue within max_batch_prefill_tokens and run as its own prefill forward
# while the running batch waits ("delaying the running queries by a prefill run", launcher
# doc), then the two batches decode together: separate prefill steps, run before the next
# decode. The loop awaits each forward before planning the next: no overlap scheduler, and the
# per-sequence Python work of the shards (filtering, next-token choosers) runs in series.
# v3 splits prompts longer than the budget ("Chunking Code", docs/source/conceptual/chunking.md
# at commit 042791fbd574, the TGI v3 overview).
# Joining a running batch (backend.rs batching_task @1d0847a9 with queue.rs next_batch):
# waiting requests join only if floor(running x WAITING_SERVED_RATIO) of them fit, or once
# MAX_WAITING_TOKENS decodes passed since the last prefill; launcher reference @032fc4c4:
# WAITING_SERVED_RATIO "[default: 0.3]", MAX_WAITING_TOKENS "[default: 20]". The router takes
# at most MAX_CONCURRENT_REQUESTS at once and answers the rest 429 (refuses, never queues).
TGI_WAITING_SERVED_RATIO = 0.3
TGI_MAX_WAITING_TOKENS = 20
TGI_SCHEDULER = SchedulerSpec(
    max_num_seqs=TGI_MAX_CONCURRENT_REQUESTS, max_num_batched_tokens=TGI_MAX_BATCH_PREFILL_TOKENS,
    chunked_prefill=True, mixed_prefill=False, prefill_first=True, overlap_scheduler=False,
    budget_peak_flops=TGI_F16_FLOPS_BY_GPU, waiting_served_ratio=TGI_WAITING_SERVED_RATIO,
    max_waiting_tokens=TGI_MAX_WAITING_TOKENS, refuses_over_max_seqs=True,
    source="TGI v3 launcher defaults (docs/source/reference/launcher.md @032fc4c4: "
           "max_concurrent_requests 128; max_batch_prefill_tokens 4096, or f16 FLOP/s x GPUs / "
           "model FLOP per token on H100 SXM, L4, A10G: launcher main.rs compute_optimal); backends/v3/src/backend.rs @1d0847a9 (prefill runs as its "
           "own step before the next decode, no overlap; a join needs floor(running x "
           "waiting_served_ratio 0.3) requests or max_waiting_tokens 20 decodes; requests beyond "
           "max_concurrent_requests are refused, HTTP 429)")

# --------------------------------------------------------------------------- LMDeploy TurboMind
# TurbomindEngineConfig defaults, lmdeploy/messages.py at commit 0043859b6cfe:
# - max_batch_size None: "the engine will automatically set it according to the device",
#   lmdeploy/utils.py get_max_batch_size at commit 726c5fe96662: a substring of the CUDA device
#   name, {'a100': 384, 'a800': 384, 'h100': 1024, 'h800': 1024, 'l20y': 1024, 'h200': 1024},
#   first match, else 128;
LMDEPLOY_MAX_BATCH_BY_NAME = (("a100", 384), ("a800", 384), ("h100", 1024), ("h800", 1024),
                              ("l20y", 1024), ("h200", 1024))
LMDEPLOY_MAX_BATCH_DEFAULT = 128
# - cache_max_entry_count 0.8: "the percentage of FREE GPU memory to be reserved for the k/v
#   cache" (versions after v0.2.1);
LMDEPLOY_KV_FREE_FRACTION = 0.8
# - cache_block_seq_len 64: tokens per KV block;
LMDEPLOY_KV_BLOCK_TOKENS = 64
# - max_prefill_token_num 8192: "the number of tokens each iteration during prefill".
LMDEPLOY_MAX_PREFILL_TOKENS = 8192
# Scheduling: TurboMind's LlamaBatch runs the running decodes and the prompt tokens in one
# forward (src/turbomind/models/llama/LlamaBatch.cc: the iteration's input count is the prompt
# tokens plus batch_size decode rows, clamped to max_forward_token_num) and spreads a longer
# prompt over iterations (max_prefill_iters): mixed, chunked steps. Its forward token cap is
# max_prefill_token_num plus the decode rows; the budget here counts the decode rows inside
# 8192 (a simplification: at most max_batch_size tokens fewer per step).
LMDEPLOY_SCHEDULER = SchedulerSpec(
    max_num_seqs=LMDEPLOY_MAX_BATCH_DEFAULT, max_num_seqs_by_name=LMDEPLOY_MAX_BATCH_BY_NAME,
    max_num_batched_tokens=LMDEPLOY_MAX_PREFILL_TOKENS, chunked_prefill=True, mixed_prefill=True,
    source="lmdeploy/messages.py TurbomindEngineConfig @0043859b (max_prefill_token_num 8192); "
           "lmdeploy/utils.py get_max_batch_size @726c5fe9 (384 on A100, 1024 on H100/H800/H200, "
           "else 128); LlamaBatch.cc (prompt tokens and decode rows in one forward)")

# --------------------------------------------------------------------------- LMDeploy PyTorch
# PytorchEngineConfig defaults, lmdeploy/messages.py at commits 0043859b6cfe and 9f134dc46ed3
# (the same values in both): max_batch_size None, then get_max_batch_size(device_type)
# (lmdeploy/pytorch/engine/config_builder.py update_engine_config; lmdeploy/utils.py: for
# 'cuda' the TurboMind table above by CUDA device name, else 128); cache_max_entry_count 0.8
# of free memory; block_size 64; max_prefill_token_num 4096 ("tokens per iteration");
# prefill_interval 16; eager_mode False (CUDA graphs on).
LMDEPLOY_PT_MAX_PREFILL_TOKENS = 4096
LMDEPLOY_PT_PREFILL_INTERVAL = 16
# Step policy, lmdeploy/pytorch/engine/inputs_maker.py at commit 053945e0b50f,
# do_prefill_default: no waiting request -> decode; else prefill if the consecutive decode
# rounds reached prefill_interval (lmdeploy#4532, merged 2026-04-16, "prevent prefill
# starvation under high decode load"), or the waiting sequences' tokens reach
# max_prefill_token_num, or `num_ready + num_running < max_batches * 0.5`; else decode.
LMDEPLOY_PT_PREFILL_BELOW_SHARE = 0.5
# A prefill forward carries only the newly scheduled sequences (_build_prefill_inputs); the
# running ones decode in forwards of their own (create_model_inputs_delta): separate steps.
# paging/scheduler.py _schedule_prefill @01eecaf6 admits waiting sequences in arrival order
# while `token_count + seq.num_token_ids <= max_prefill_token_num` (the first always), up to
# max_batches running; a lone sequence longer than that is split by the LongContextChunker
# into max_prefill_token_num pieces, each a forward of its own (whole_prompts). Chunked
# prefill proper (misc_config.enable_chunked_prefill, do_prefill_chunked) is off by default.
# The engine loop plans the next forward before it reads the current one's output
# (engine/engine_loop.py @0434b937 _main_loop_get_outputs: prefetch_next_inputs, then
# executor.get_output_async): an overlap loop.
# Not modelled: in the newest inputs_maker.py a long prompt's non-final chunks let a decode
# run in between (and short prompts take turns before them); here the chunks run back to back
# as in the versions before that change.
LMDEPLOY_PT_SCHEDULER = SchedulerSpec(
    max_num_seqs=LMDEPLOY_MAX_BATCH_DEFAULT, max_num_seqs_by_name=LMDEPLOY_MAX_BATCH_BY_NAME,
    max_num_batched_tokens=LMDEPLOY_PT_MAX_PREFILL_TOKENS, chunked_prefill=True,
    mixed_prefill=False, prefill_first=True, overlap_scheduler=True,
    prefill_defer_share=LMDEPLOY_PT_PREFILL_BELOW_SHARE,
    prefill_interval=LMDEPLOY_PT_PREFILL_INTERVAL, whole_prompts=True,
    source="lmdeploy/messages.py PytorchEngineConfig @0043859b, @9f134dc4 (max_prefill_token_num "
           "4096, prefill_interval 16); lmdeploy/utils.py get_max_batch_size @726c5fe9; "
           "pytorch/engine/inputs_maker.py do_prefill_default @053945e0 (prefill beside decodes "
           "only below half of max_batch_size, at 4096 waiting tokens or after 16 decode "
           "rounds); pytorch/paging/scheduler.py _schedule_prefill @01eecaf6 (whole prompts "
           "within 4096 tokens); pytorch/engine/engine_loop.py @0434b937 (next forward planned "
           "before the current output is read)")


def tgi_flop_per_token(m: ModelSpec) -> float:
    """The TGI launcher's model FLOP per token (launcher/src/main.rs Config.flop):
    L x [2 H_d D (3 N + 2 K) + 2 x 3 D F k], F the config's intermediate_size (ffn_dim here)
    times k experts per token for an MoE. Its attention term counts 2 N H_d D per token
    whatever the context (the launcher's own approximation, kept as written)."""
    k = m.moe.experts_per_token if m.moe else 1
    attn = 2 * m.head_dim * m.d_model * (3 * m.num_heads + 2 * m.num_kv_heads)  # q, attn, o; k, v
    ffn = 2 * 3 * m.d_model * m.ffn_dim * k                                     # gate, up, down
    return float(m.num_layers * (attn + ffn))


def at_deployment(eng: EngineProfile, m: ModelSpec, hw: HardwareSpec, tp: int) -> EngineProfile:
    """The engine with the limits it derives from the model and the card: the token budget of
    SchedulerSpec.budget_peak_flops (TGI v3 compute_optimal) on a listed card; unchanged
    otherwise (every engine without such a table)."""
    rate = dict(eng.scheduler.budget_peak_flops).get(hw.id)
    if rate is None:
        return eng
    optimal = int(rate) * tp // int(tgi_flop_per_token(m))
    if optimal <= TGI_MIN_OPTIMAL_TOKENS:
        return eng
    sched = eng.scheduler.model_copy(update={"max_num_batched_tokens": min(optimal, m.max_context)})
    return eng.model_copy(update={"scheduler": sched})


def server_presets(base: dict[str, EngineProfile]) -> list[EngineProfile]:
    """The TGI and LMDeploy (TurboMind, PyTorch) presets. `base` holds the presets of
    core/engines.py, whose host costs stand in where these engines have no measurement (named
    in each source text)."""
    vllm, sglang, trt = base["vllm"], base["sglang"], base["trtllm-trt"]
    tgi = EngineProfile(
        id="tgi", name="Hugging Face text-generation-inference (v3, flashinfer, CUDA graphs)",
        # a PyTorch model with fused QKV, fused add+RMSNorm and custom rotary/attention kernels
        # (server/text_generation_server/models/custom_modeling/flash_llama_modeling.py), issued
        # from Python like vLLM's and SGLang's: their per-layer kernel count, graph replay,
        # per-step and per-request host costs, and SGLang's eager issue cost for prompt steps
        # and decode batches above the captured sizes (no TGI measurement found).
        kernels_per_layer=vllm.kernels_per_layer, launch_s=0.0,
        graph_launch_s=vllm.graph_launch_s, cpu_overhead_per_step_s=vllm.cpu_overhead_per_step_s,
        per_request_overhead_s=vllm.per_request_overhead_s,
        host_per_seq_s=vllm.host_per_seq_s, host_overlap=False,
        eager_launch_s=sglang.eager_launch_s, eager_issue_overlap=sglang.eager_issue_overlap,
        decode_graph_max_batch=TGI_CUDA_GRAPH_MAX_BATCH,
        attention="paged", batching="continuous", kv_memory_fraction=TGI_KV_FREE_FRACTION,
        kv_fraction_of="free", kv_block_tokens=TGI_KV_BLOCK_TOKENS, kv_prealloc="request",
        # GPTQ/AWQ weights run Marlin kernels ("Marlin kernels will be used automatically for
        # GPTQ/AWQ models", launcher --quantize doc), as vLLM's do: vLLM's rate
        quant_kernel_efficiency=vllm.quant_kernel_efficiency,
        dequant_flops_per_weight=vllm.dequant_flops_per_weight, fused_elementwise=True,
        supports_fp8=True, scheduler=TGI_SCHEDULER,
        source="TGI v3 launcher reference (docs/source/reference/launcher.md @032fc4c4) and "
               "launcher/src/main.rs (cuda graphs 1-32, flashinfer); flash_causal_lm.py warmup "
               "(KV = 0.95 of free memory); models/globals.py (flashinfer page size 1). Host "
               "costs: no TGI measurement, vLLM's preset values (kernels/layer, graph replay, "
               "step and request overhead, per-sequence Python) and SGLang's eager issue cost")
    lmdeploy = EngineProfile(
        id="lmdeploy", name="LMDeploy TurboMind (C++ engine, paged KV)",
        # TurboMind is a C++/CUDA runtime of the FasterTransformer lineage: no Python per
        # kernel or per step. No measurement of its host cost was found: the TensorRT-LLM
        # C++-runtime preset's (trtllm-trt) kernel count and host costs.
        kernels_per_layer=trt.kernels_per_layer, launch_s=trt.launch_s,
        graph_launch_s=trt.graph_launch_s, cpu_overhead_per_step_s=trt.cpu_overhead_per_step_s,
        per_request_overhead_s=trt.per_request_overhead_s,
        attention="paged", batching="continuous", kv_memory_fraction=LMDEPLOY_KV_FREE_FRACTION,
        kv_fraction_of="free", kv_block_tokens=LMDEPLOY_KV_BLOCK_TOKENS, kv_prealloc="request",
        # AWQ/GPTQ w4a16 through TurboMind's own fused dequant GEMMs (src/turbomind/kernels/gemm):
        # no efficiency measurement, the TensorRT-LLM weight-only GEMMs' rate
        quant_kernel_efficiency=trt.quant_kernel_efficiency,
        dequant_flops_per_weight=trt.dequant_flops_per_weight, fused_elementwise=True,
        # TurbomindEngineConfig.model_format "one of [hf, awq, gptq]" (messages.py @0043859b):
        # no fp8 weight format, so fp8 matmuls run in 16 bits (KV int8/int4 is quant_policy 8/4,
        # a KV precision, not an engine switch here)
        supports_fp8=False, scheduler=LMDEPLOY_SCHEDULER,
        source="lmdeploy/messages.py TurbomindEngineConfig @0043859b (cache_max_entry_count 0.8 "
               "of free memory, cache_block_seq_len 64, max_prefill_token_num 8192); "
               "lmdeploy/utils.py get_max_batch_size @726c5fe9. Host costs: no LMDeploy "
               "measurement, the trtllm-trt preset's (C++ runtime)")
    lmdeploy_pt = EngineProfile(
        id="lmdeploy-pytorch", name="LMDeploy PyTorch engine (Triton kernels, decode CUDA graphs)",
        # A PyTorch model of LMDeploy's own modules (lmdeploy/pytorch/models) over Triton
        # kernels (lmdeploy/pytorch/kernels/cuda: paged attention, fused MoE, fused RMSNorm +
        # residual, rotary, SiLU-and-mul), issued from Python as vLLM's are: vLLM's kernels per
        # layer, graph replay, step and request overhead, and its per-sequence Python run beside
        # the GPU (the engine loop prefetches the next forward). Decode forwards replay CUDA
        # graphs of every batch up to max_batches (backends/cuda/graph_runner.py @0222d47a: a
        # graph per decode batch rounded up to a power of two, captured on first use; the
        # model's support_cuda_graph is its decoding flag), so prompt forwards run eagerly:
        # the eager issue cost measured for SGLang (EAGER_LAUNCH_S, in series with the GPU).
        # No LMDeploy PyTorch measurement of these host costs was found.
        kernels_per_layer=vllm.kernels_per_layer, launch_s=0.0,
        graph_launch_s=vllm.graph_launch_s, cpu_overhead_per_step_s=vllm.cpu_overhead_per_step_s,
        per_request_overhead_s=vllm.per_request_overhead_s,
        host_per_seq_s=vllm.host_per_seq_s, host_overlap=vllm.host_overlap,
        eager_launch_s=sglang.eager_launch_s, eager_issue_overlap=sglang.eager_issue_overlap,
        decode_graph_max_batch=None,
        attention="paged", batching="continuous", kv_memory_fraction=LMDEPLOY_KV_FREE_FRACTION,
        kv_fraction_of="free", kv_block_tokens=LMDEPLOY_KV_BLOCK_TOKENS, kv_prealloc="request",
        # low-bit weights: no efficiency measurement of LMDeploy's kernels, vLLM's rate
        quant_kernel_efficiency=vllm.quant_kernel_efficiency,
        dequant_flops_per_weight=vllm.dequant_flops_per_weight, fused_elementwise=True,
        # PytorchEngineConfig.model_format "weight quantization policy, options: ['fp8']"
        # (messages.py @9f134dc4)
        supports_fp8=True, scheduler=LMDEPLOY_PT_SCHEDULER,
        source="lmdeploy/messages.py PytorchEngineConfig @0043859b/@9f134dc4 (cache_max_entry_count "
               "0.8 of free memory, block_size 64, eager_mode False, model_format fp8); "
               "backends/cuda/graph_runner.py @0222d47a (decode graphs up to max_batches). Host "
               "costs: no LMDeploy measurement, vLLM's preset values and SGLang's eager issue "
               "cost for prompt forwards")
    return [tgi, lmdeploy, lmdeploy_pt]
