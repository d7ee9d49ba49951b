"""The benchmark recipe a serving row was measured with, as the simulator replays it
(serving_recipe.recipe_for builds one per row; serving_predict applies it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.validation.serving_provenance import Family


class Recipe(BaseModel):
    """The benchmark a row was measured with, as the simulator replays it."""

    model_config = ConfigDict(frozen=True)
    family: Family = Field(default="other", description="Which harness measured the row.")
    range_ratio: float = Field(default=1.0, gt=0, le=1,
                               description="Lengths uniform in [ceil(r L), L] (1: fixed).")
    max_num_batched_tokens: int | None = Field(
        default=None, gt=0, description="Token budget per step the deployment set "
        "(None: the engine preset's default).")
    recv_interval_steps: int | None = Field(
        default=None, ge=1, description="SGLang --scheduler-recv-interval the deployment set "
        "(None: the engine preset's default).")
    chunked_prefill: bool | None = Field(
        default=None, description="Whether the deployment split prompts over steps "
        "(None: the engine preset's default).")
    decode_graph_max_batch: int | None = Field(
        default=None, ge=1, description="Largest CUDA-graph decode batch the deployment "
        "captured (None: the engine preset's default).")
    prefill_graph_max_tokens: int | None = Field(default=None, ge=1, description="vLLM "
        "--max-cudagraph-capture-size: steps with prompt tokens graphed up to it (None: preset).")
    mixed_prefill: bool | None = Field(
        default=None, description="Prompt chunks ride in the steps of the running decodes "
        "(SGLang --enable-mixed-chunk; None: the engine preset's default).")
    max_prefill_tokens: int | None = Field(
        default=None, gt=0, description="SGLang --max-prefill-tokens: tokens of one mixed step, "
        "decodes included, capped by the preset's chunk size on the GPU (None: the preset's).")
    batch_wait_timeout_iters: int | None = Field(
        default=None, ge=0, description="TensorRT-LLM batch_wait_timeout_iters the deployment "
        "set (None: the engine preset's default, off).")
    batch_wait_max_tokens_ratio: float | None = Field(
        default=None, ge=0, le=1, description="TensorRT-LLM batch_wait_max_tokens_ratio the "
        "deployment set (None: the engine preset's default, 0).")
    adp_balance_timeout_iters: int | None = Field(
        default=None, ge=0, description="TensorRT-LLM attention_dp_config timeout_iters with "
        "enable_balance (None: the engine preset's default, off).")
    prefill_attention: Literal["native", "fa2"] | None = Field(
        default=None, description="Prompt-step attention kernels of the engine version that "
        "ran (EngineProfile.prefill_attention; None: the preset's).")
    kv_memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="KV pool share (TensorRT-LLM free_gpu_memory_"
        "fraction of free memory, SGLang --mem-fraction-static of the device; None: preset's).")
    overlap_scheduler: bool | None = Field(
        default=None, description="The engine version plans step n+1 while step n runs "
        "(vLLM async scheduling from 0.14.0: serving_recipe_vllm.py; None: the preset's).")
    radix_cache: bool | None = Field(
        default=None, description="SGLang's radix (prefix) cache; False: --disable-radix-cache, "
        "so a hybrid linear-attention model keeps the overlap scheduler (None: the preset's, on).")
    expert_parallel: int | None = Field(
        default=None, ge=1, description="Expert-parallel size the script launched the engine "
        "with, where it differs from the row's moe_ep_size (None: the row's); the simulator "
        "runs it, the row's mapping keeps what the file states.")
    attention_dp: int | None = Field(
        default=None, ge=1, description="Attention data-parallel size the script launched the "
        "engine with, where it differs from the row's (None: the row's); the simulator runs the "
        "same GPUs as tp x attention_dp, the row's mapping keeps what the file states.")
    fp32_matmul: Literal["fp32", "tf32"] | None = Field(
        default=None, description="What the run's fp32 matmuls ran as: 'tf32' where its script "
        "set VLLM_FLOAT32_MATMUL_PRECISION=high (EngineProfile.fp32_matmul; "
        "serving_recipe_vllm.INFERENCEX_VLLM_TF32_SCRIPTS; None: the preset's, fp32).")
    notes: tuple[str, ...] = Field(default=(), description="The recipe in words, with sources.")

    def key(self) -> tuple:
        """What changes a prediction (rows sharing it and a configuration share a call)."""
        return (self.range_ratio, self.max_num_batched_tokens, self.recv_interval_steps,
                self.decode_graph_max_batch, self.mixed_prefill, self.max_prefill_tokens,
                self.chunked_prefill, self.batch_wait_timeout_iters,
                self.batch_wait_max_tokens_ratio, self.adp_balance_timeout_iters,
                self.kv_memory_fraction, self.prefill_attention, self.overlap_scheduler,
                self.radix_cache, self.prefill_graph_max_tokens, self.expert_parallel,
                self.attention_dp, self.fp32_matmul)
