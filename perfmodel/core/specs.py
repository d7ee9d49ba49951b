"""Typed, frozen inputs of the model: what is run (ModelSpec), on what (HardwareSpec),
in which number formats (Precision), by which software (EngineProfile, Efficiency),
how it is spread (Deployment). The traffic is part of the one Query (core/query.py).

All quantities are in base units (bytes, seconds, FLOP/s, bytes/s). See DESIGN.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from perfmodel.core.hardware_spec import (HardwareSpec, LinkSpec, MemoryType,  # noqa: F401
                                          PriceSpec, Vendor)
from perfmodel.core.model_spec import (LinearAttentionSpec, MLASpec, ModelSpec,  # noqa: F401
                                       MoESpec, SparseAttentionSpec)
from perfmodel.core.precision import (PRECISION_NAMES, ModuleFormat, NumberFormat,  # noqa: F401
                                      Precision, parse_format, parse_gguf, parse_weights)
from perfmodel.core.eager_kernels import EagerBlockKernels
from perfmodel.core.spec_base import Dtype, Spec  # noqa: F401

# --------------------------------------------------------------------------- hardware


# --------------------------------------------------------------------------- software


class SchedulerSpec(Spec):
    """An engine's request scheduler: how many sequences run at once, how many tokens one
    step may carry, and how prompts share steps with decodes. Sources in core/engines.py."""

    max_num_seqs: int | None = Field(
        default=None, gt=0, description="Most sequences running at once (None: KV memory decides).")
    max_num_batched_tokens: int | None = Field(
        default=None, gt=0, description="Token budget of one step: decode rows + prompt tokens "
        "(None: unlimited, a whole prompt per step).")
    chunked_prefill: bool = Field(
        default=False, description="A prompt longer than the token budget is split over steps.")
    mixed_prefill: bool = Field(
        default=False, description="Prompt chunks ride in the same step as running decodes "
        "(vLLM V1, TRT-LLM in-flight batching); False: separate prefill steps (SGLang default).")
    prefill_first: bool = Field(
        default=False, description="Waiting prompts are prefilled before the running decodes "
        "step again (SGLang); False: decodes first, prompts fill the rest of the budget (vLLM).")
    kv_reserve_output: bool = Field(
        default=False, description="A request is admitted only if the KV blocks of its whole "
        "prompt + output fit (TensorRT-LLM GUARANTEED_NO_EVICT); False: blocks on demand, "
        "preempting when they run out (vLLM, SGLang).")
    seqs_divided_by_pp: bool = Field(
        default=False, description="max_num_seqs is shared by the pipeline stages (trtllm-bench).")
    recv_interval_steps: int = Field(
        default=1, ge=1, description="A busy engine takes in new requests every n-th decode "
        "step and after a prefill step (SGLang --scheduler-recv-interval, default 1).")
    overlap_scheduler: bool = Field(
        default=False, description="The host schedules step k+1 while step k runs on the GPU "
        "(TensorRT-LLM overlap scheduler, vLLM async scheduling): a busy engine takes a request that arrives during "
        "step k into step k+2 at the earliest, one step later than a synchronous loop.")
    idle_takes_one: bool = Field(default=False, description="An idle engine blocks on its empty "
        "request queue and plans its next step with the one request that wakes it; requests "
        "arriving meanwhile join the step after (TensorRT-LLM PyExecutor, core/engines.py).")
    overlap_off_linear_attention: bool = Field(default=False, description="No overlap for "
        "models with linear-attention layers (SGLang: no_buffer Mamba state + radix cache).")
    overlap_off_pp: bool = Field(default=False, description="No overlap with pp > 1 (SGLang).")
    overlap_disagg_prefill: bool = Field(default=False, description="Disaggregated prefill "
        "workers keep the overlap (SGLang); False: off there (TensorRT-LLM ctx servers).")
    batch_wait_timeout_iters: int = Field(
        default=0, ge=0, description="TensorRT-LLM batch waiting (llm_args.py, default 0: off): "
        "while decodes run, the scheduled prompts are held for up to this many iterations ...")
    batch_wait_max_tokens_ratio: float = Field(
        default=0.0, ge=0, le=1, description="... or until their prompt tokens plus the decode "
        "rows reach this share of max_num_tokens (PyExecutor._waiting_requests; default 0).")
    adp_balance_timeout_iters: int = Field(
        default=0, ge=0, description="TensorRT-LLM attention-DP balance (attention_dp_config "
        "enable_balance, timeout_iters; default off): with attention DP, scheduled prompts wait "
        "until every DP rank has one, at most this many iterations while every rank decodes "
        "(PyExecutor._balance_adp_requests).")
    dp_limits_divided: bool = Field(
        default=False, description="Under attention data parallelism the server's max running "
        "requests and chunked-prefill size are divided among the DP ranks (SGLang: "
        "server_args.py _handle_data_parallelism chunked_prefill_size // dp_size, model_runner "
        "max_running_requests // dp_size); False: every DP rank's scheduler applies them whole "
        "(vLLM engine cores, TensorRT-LLM attention-DP ranks; serving/simulate.py _policy).")
    small_gpu_bytes: float | None = Field(
        default=None, gt=0, description="Below this device memory the small-GPU limits apply.")
    small_gpu_excludes: tuple[str, ...] = Field(
        default=(), description="Device-name substrings that count as small whatever their "
        "memory (vLLM's own rule for the A100, arg_utils.get_batch_defaults).")
    small_gpu_max_num_seqs: int | None = Field(default=None, gt=0)
    small_gpu_max_num_batched_tokens: int | None = Field(default=None, gt=0)
    max_num_seqs_by_name: tuple[tuple[str, int], ...] = Field(
        default=(), description="(device-name substring, max running sequences) rows, first "
        "match wins, overriding max_num_seqs (LMDeploy get_max_batch_size reads the CUDA device "
        "name; core/engines_servers.py). Empty: max_num_seqs.")
    budget_peak_flops: tuple[tuple[str, float], ...] = Field(
        default=(), description="(hardware_db id, FLOP/s) rows of an engine that sizes its "
        "token budget by compute: on a listed card the budget becomes that FLOP/s x the "
        "tensor-parallel GPUs / the model's FLOP per token, capped at its context (TGI v3 "
        "launcher compute_optimal; core/engines_servers.at_deployment, applied by "
        "core/resolve.py). Other cards keep max_num_batched_tokens.")
    waiting_served_ratio: float | None = Field(
        default=None, gt=0, description="TGI v3 join rule (backends/v3/src/backend.rs "
        "batching_task): while a batch runs, waiting requests join it in a prefill step of "
        "their own only if at least floor(running x this ratio) of them are admitted ...")
    max_waiting_tokens: int | None = Field(
        default=None, gt=0, description="... or once this many decode steps passed since the "
        "last prefill (the counter is 1 after a prefill, +1 per decode). None (both): no rule.")
    refuses_over_max_seqs: bool = Field(
        default=False, description="Requests beyond max_num_seqs are refused (TGI router: "
        "max_concurrent_requests, HTTP 429), not queued: a concurrency above it does not fit.")
    prefill_defer_share: float | None = Field(
        default=None, gt=0, le=1, description="LMDeploy PyTorch engine step policy (inputs_maker"
        ".py do_prefill_default): while requests wait beside running decodes, a prefill step runs "
        "only if fewer than this share of max_num_seqs sequences run, or the waiting prompts hold "
        "max_num_batched_tokens tokens, or prefill_interval decode steps ran while they waited; "
        "else the decodes step. None: no rule (every other engine).")
    prefill_interval: int | None = Field(
        default=None, gt=0, description="The decode steps a waiting prefill waits at most "
        "under prefill_defer_share (PytorchEngineConfig.prefill_interval); None: no such guard.")
    whole_prompts: bool = Field(
        default=False, description="Prompts are packed whole into a prefill step while their sum "
        "stays within max_num_batched_tokens (the first always), never split to fill it; one "
        "longer runs alone in budget-sized chunks (LMDeploy PyTorch paging/scheduler.py "
        "_schedule_prefill, LongContextChunker).")
    source: str = Field(default="", description="Where the limits come from.")

    def limits(self, hw: "HardwareSpec", pp: int = 1) -> tuple[int | None, int | None]:
        """(max running sequences, token budget) on this GPU at this pipeline depth."""
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        name = f"{hw.id} {hw.name}".lower()
        seqs = next((n for part, n in self.max_num_seqs_by_name if part in name), seqs)
        if self.small_gpu_bytes is not None:
            if hw.memory_bytes < self.small_gpu_bytes or any(s in name for s in self.small_gpu_excludes):
                seqs, tokens = self.small_gpu_max_num_seqs, self.small_gpu_max_num_batched_tokens
        if seqs is not None and self.seqs_divided_by_pp:
            seqs = max(1, seqs // pp)
        return seqs, tokens

    def overlaps(self, model: "ModelSpec", pp: int = 1) -> bool:
        """Whether the overlap scheduler runs for this model at this pipeline depth."""
        return self.overlap_scheduler and not (
            (self.overlap_off_linear_attention and model.num_linear_attention_layers > 0)
            or (self.overlap_off_pp and pp > 1))


class EngineProfile(Spec):
    """How an inference engine runs the model (documented presets in engines.py)."""

    id: str = Field(description="Engine id, e.g. 'vllm'.")
    name: str = Field(description="Display name.")
    kernels_per_layer: float = Field(gt=0, description="GPU kernels launched per transformer layer.")
    act_quant_kernels_per_layer: float = Field(
        default=0.0, ge=0, description="Extra kernels per layer of a W8A8 step (fp8/int8 "
        "matmuls on their tensor cores): the activation quantize casts an unfused engine "
        "launches before its scaled matmuls. 0: fused into the neighbouring kernels.")
    launch_s: float = Field(ge=0, description="CPU time to issue one kernel (0 inside a CUDA graph).")
    graph_launch_s: float = Field(ge=0, description="CPU time to replay one captured graph per step.")
    prefill_graph_max_tokens: int = Field(
        default=0, ge=0, description="A step carrying prompt tokens runs inside the engine's "
        "(piecewise) CUDA graphs only up to this many token rows; larger ones, and every one "
        "at 0, run eagerly (TRT-LLM and SGLang capture decode batches only; vLLM V1 captures "
        "piecewise graphs up to its largest capture size). Ignored by eager engines.")
    decode_graph_max_batch: int | None = Field(
        default=None, ge=1, description="Largest decode batch (sequences per rank) replayed "
        "from a captured CUDA graph; larger decode steps run eagerly (kernels x "
        "eager_launch_s). None: every decode batch is graphed.")
    decode_graph_max_batch_by_gpu: tuple[tuple[float, int, int], ...] = Field(
        default=(), description="(GPU memory below bytes, max batch at tp < 4, at tp >= 4) rows, "
        "first match wins, overriding decode_graph_max_batch (SGLang sizes its graphs by GPU "
        "memory and TP).")
    eager_launch_s: float = Field(
        default=0.0, ge=0, description="CPU time per kernel of a step the graph engine runs "
        "eagerly (Python module code, custom-op dispatch and the launch itself); 0: every "
        "step is priced as a graph replay.")
    eager_issue_overlap: bool = Field(
        default=True, description="The GPU runs an eagerly issued prompt step's kernels while "
        "the CPU issues the later ones, so the step costs max(GPU, issue); False: the two run "
        "in series, GPU + issue (SGLang, TensorRT-LLM and vLLM, engines.py). Eager decode steps keep "
        "the max.")
    dsa_sparse_prefill: bool = Field(
        default=False, description="A prompt step of a DSA model (ModelSpec.sparse_attention) "
        "whose longest sequence passes index_topk runs the absorbed (MQA) sparse MLA kernel "
        "over index_topk keys per query with the query heads padded to the kernel's head "
        "block (core/sparse_mla.py; SGLang's NSA backend); False: the cheaper MLA form.")
    piecewise_attention_s: float = Field(
        default=0.0, ge=0, description="Host time per layer of a step carrying prompt tokens "
        "that replays piecewise CUDA graphs, whose attention runs eagerly between the graph "
        "pieces (vLLM, engines.py); paid like an eager prompt step's issue (eager_issue_overlap). "
        "0: prompt steps within the captured sizes replay whole graphs.")
    cpu_overhead_per_step_s: float = Field(
        ge=0, description="Scheduler/sampling/Python time per decode step not hidden behind the GPU.")
    per_request_overhead_s: float = Field(
        ge=0, description="Added to TTFT: tokenization, scheduling, first-step set-up.")
    host_per_seq_s: float = Field(
        default=0.0, ge=0, description="Host time per running sequence per step: scheduler "
        "bookkeeping, input preparation, output processing of its new token (engines.py).")
    host_overlap: bool = Field(
        default=True, description="The per-sequence host work runs while the GPU computes the "
        "next step (vLLM async scheduling, SGLang overlap scheduler, TRT-LLM overlap "
        "scheduler): step = max(GPU, issue + host); False: in series, added to the step.")
    attention: Literal["naive", "flash", "paged"] = Field(description="Attention kernel kind.")
    prefill_attention: Literal["native", "fa2"] = Field(
        default="native", description="Which attention kernels a step carrying prompt tokens "
        "runs: 'native' the chip's own (Efficiency.attn_compute); 'fa2' FlashAttention-2-class "
        "kernels (warp-level MMA) where the chip's rate for them differs "
        "(Efficiency.attn_compute_fa2: datacenter Blackwell), e.g. vLLM before its TRT-LLM "
        "prefill kernels (core/engines.py vllm_prefill_attention).")
    fp32_matmul: Literal["fp32", "tf32"] = Field(
        default="fp32", description="What an fp32 matmul (an MoE router the engine upcasts, "
        "MoESpec.router_fp32) runs as: torch's default matmul precision 'highest' keeps IEEE "
        "fp32; 'high' lets cuBLAS use TF32 tensor cores (torch.set_float32_matmul_precision, "
        "which vLLM's GPU worker calls with VLLM_FLOAT32_MATMUL_PRECISION, default 'highest').")
    batching: Literal["static", "continuous"] = Field(description="Batching policy.")
    kv_memory_fraction: float = Field(
        gt=0, le=1, description="Share of device memory the engine lets weights+KV+activations use.")
    kv_fraction_of: Literal["total", "free"] = Field(
        default="total", description="kv_memory_fraction applies to all device memory (vLLM, "
        "SGLang) or to what is free after weights and activations (TensorRT-LLM).")
    kv_block_tokens: int = Field(ge=1, description="KV page size in tokens (1: contiguous per token).")
    kv_prealloc: Literal["none", "max_context", "request", "pool"] = Field(
        default="request", description="What KV memory a sequence holds: 'request' its own "
        "context; 'max_context' a static cache of kv_prealloc_tokens per sequence whatever the "
        "request; 'pool' one pool of kv_prealloc_tokens split among the running sequences "
        "(llama.cpp n_ctx over its slots). See memory.held_context.")
    kv_prealloc_tokens: int | None = Field(
        default=None, ge=1, description="Tokens reserved by 'max_context' (per sequence) or "
        "'pool' (in all), capped at the model's max context; None: the model's max context.")
    quant_kernel_efficiency: float = Field(
        gt=0, le=1, description="Bandwidth efficiency of low-bit weight kernels relative to 16-bit.")
    dequant_flops_per_weight: float = Field(
        ge=0, description="Extra FLOPs per weight element per token row for weight-only dequant.")
    dequant_overlap: bool = Field(
        default=True, description="Low-bit weights are dequantized inside the matmul, overlapped "
        "with it (Marlin/Machete-class kernels); False: dequantized first, multiplied after.")
    fused_elementwise: bool = Field(description="Norm/rotary/activation fused into neighbours.")
    elementwise_traffic: float | None = Field(
        default=None, gt=0,
        description="Bytes moved by norm/rotary/activation/residual kernels relative to one read "
                    "and one write per tensor (fp32 upcasts and unfused chains move more); "
                    "None: 0.5 if fused_elementwise else 1. Set by calibration.")
    supports_fp8: bool = Field(default=True, description="Engine has fp8 kernels.")
    speculative_impl: Literal["research", "serving"] = Field(
        default="serving", description="How speculative decoding runs on it: 'research' (the "
        "methods' reference code on Hugging Face models: default trees, tree construction, "
        "posterior evaluation and KV compaction as Python ops every step) or 'serving' "
        "(vLLM/SGLang/TRT-LLM: chains, fused sampling kernels). analysis/drafts.py.")
    moe_comm_overlap: float = Field(
        default=0.0, ge=0, le=1, description="Share of the EP dispatch/combine all-to-all hidden "
        "behind the expert GEMMs by running two micro-batches in turn (SGLang "
        "--enable-two-batch-overlap with DeepEP; LMSYS blog 'Deploying DeepSeek with PD "
        "disaggregation and large-scale EP', 2025). 0 in the presets: it is opt-in.")
    moe_a2a_kernels: Literal["collective", "one_sided"] = Field(
        default="collective", description="How the engine runs an attention-DP x EP MoE "
        "exchange: 'one_sided' (TensorRT-LLM NVLinkOneSided AlltoAll, DeepEP low-latency: "
        "never faster than their measured dispatch + combine, core/moe_exchange.py) or "
        "'collective' (NCCL all-gather / reduce-scatter or all-to-all: the core's bytes and "
        "link latencies alone; vLLM's default VLLM_ALL2ALL_BACKEND allgather_reducescatter).")
    allreduce_nvls_min_bytes: float = Field(
        default=0.0, ge=0, description="All-reduces above this many bytes (and up to "
        "allreduce_nvls_max_bytes) run on the switch's multicast reduction (NVLink SHARP) where "
        "the link records one and it beats the ring; smaller ones run the engine's one/two-shot "
        "kernels or NCCL's ring (core/parallel.py allreduce_s). Presets and sources in engines.py.")
    allreduce_nvls_max_bytes: float | None = Field(
        default=0.0, ge=0, description="Largest all-reduce run on NVLink SHARP (see "
        "allreduce_nvls_min_bytes); None: no limit; 0: never (the engine turns NVLS off or has "
        "no multimem path).")
    moe_act_quant_kernels: float = Field(
        default=0.0, ge=0, description="Activation-quantize kernels per MoE layer inside the "
        "engine's fused MoE call when the experts run W8A8 (fp8/int8): SGLang's fused_moe "
        "quantizes the input of each of its two grouped GEMMs (invoke_fused_moe_kernel: "
        "sglang_per_token_group_quant_fp8). 0: fused or not measured.")
    eager_blocks: EagerBlockKernels | None = Field(
        default=None, description="Sourced kernel counts of the MLA and MoE blocks of an "
        "eager prompt step (core/host_cost.eager_block_extra_kernels); None: those blocks' "
        "extra kernels are counted at the engine's dense rate (op list x _kernel_scale).")
    moe_stream_fraction: float = Field(
        default=1.0, gt=0, le=1, description="Rate at which the engine's fused MoE kernel streams "
        "the touched experts' weights, relative to a dense GEMM's (its weight bytes are divided "
        "by it; core/grouped_gemm.py). 1: no measurement of the engine's default MoE kernel.")
    scheduler: SchedulerSpec = Field(
        default_factory=SchedulerSpec, description="Request scheduler limits and policy.")

    @property
    def allreduce_nvls_window(self) -> tuple[float, float | None]:
        """(above, up to) the all-reduce bytes this engine runs on NVLink SHARP."""
        return self.allreduce_nvls_min_bytes, self.allreduce_nvls_max_bytes

    def graph_max_batch(self, memory_bytes: float, tp: int) -> int | None:
        """The largest graphed decode batch on a GPU of memory_bytes at tensor parallel tp."""
        for below, small_tp, large_tp in self.decode_graph_max_batch_by_gpu:
            if memory_bytes < below:
                return small_tp if tp < 4 else large_tp
        return self.decode_graph_max_batch
    server_scheduler: SchedulerSpec | None = Field(
        default=None, description="The scheduler of the engine's online server where its defaults "
        "differ from `scheduler` (TensorRT-LLM: trtllm-serve vs the tuned trtllm-bench limits); "
        "the serving simulator (a benchmark against a server) uses it. None: `scheduler`.")
    source: str = Field(default="", description="Where the parameters come from.")


from perfmodel.core.efficiency_spec import (GEMM_KIND_FALLBACK, Efficiency,  # noqa: F401,E402
                                           GemmCurve)


# --------------------------------------------------------------------------- deployment


class Deployment(Spec):
    """How many GPUs and how the model is split over them."""

    tp: int = Field(default=1, gt=0, description="Tensor-parallel degree.")
    pp: int = Field(default=1, gt=0, description="Pipeline-parallel degree.")
    ep: int = Field(default=1, gt=0, description="Expert-parallel degree, over the tp x dp GPUs "
                    "of a stage.")
    dp: int = Field(default=1, gt=0, description="Attention data-parallel degree (SGLang "
                    "--enable-dp-attention, TRT-LLM attention_dp): dp groups of tp GPUs each run "
                    "attention for 1/dp of the batch; routed experts span all tp x dp GPUs.")
    gpus_per_node: int | None = Field(
        default=None, gt=0, description="GPUs sharing the scale-up link (None: the hardware's "
        "scale_up_gpus, else its gpus_per_node, else 8).")

    @property
    def num_gpus(self) -> int:
        return self.tp * self.dp * self.pp
