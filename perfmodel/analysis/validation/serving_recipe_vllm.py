"""vLLM's async scheduling by engine version (serving_recipe.recipe_for).

vLLM's AsyncScheduler plans step n+1 while step n runs (vllm-project/vllm#19970), so a request
that arrives during step n joins step n+2: the simulator's overlap scheduler
(SchedulerSpec.overlap_scheduler). It is on by default since vllm-project/vllm#27614 (merged
late December 2025), first released in vLLM 0.14.0 (2026-01-17: torch-spyre/sendnn-inference#636,
"Add v0.14.0 support ... Disables async scheduling which is now enabled by default
(vllm#27614)", keeping v0.13.0 as the previous release). The `vllm` preset follows the current
default (on); a row of an older version ran the synchronous loop.

Rows of the serving file without a version: the InferenceMAX Llama-70B sweep imported by
AIConfigurator (measured 2025-10-29, serving_recipe.AIC_INFERENCEMAX_IMPORT_DATES) predates the
merge, so it is taken as a release before 0.14.0 (off). Nightly builds ("nightly-<commit>", the
file's are of April 2026) postdate it (on). Any other row without a parsable version keeps the
preset's default, and its assumptions say so.
"""

from __future__ import annotations

from perfmodel.analysis.validation.serving_provenance import _measured
from perfmodel.core.engine_versions import release_of

# First vLLM release with async scheduling on by default (vllm#27614; module docstring).
VLLM_ASYNC_SCHEDULING_SINCE = (0, 14, 0)


# InferenceMAX's Llama-70B vLLM scripts, the recipe of the serving file's image-less 70B sweep
# (measured 2025-10-29, serving_provenance._llama70b_import), write `async-scheduling: true`
# into the `vllm serve --config` file on every GPU: SemiAnalysisAI/InferenceX
# benchmarks/70b_fp8_h100_slurm.sh (2a205bb), 70b_fp8_h200_slurm.sh (both stored versions,
# 6ebc882 and 409e9a4) and 70b_fp8_b200_docker.sh (bb4c7f9), as do the B200 slurm scripts
# (docs/blackwell_vllm.md). vLLM before 0.14.0 has it off by default but takes the flag (its
# AsyncScheduler, vllm#19970); an explicit flag the engine cannot honour stops the server at
# start-up (VllmConfig.__post_init__: "async scheduling only supports `mp`, `uni`, or
# `external_launcher` distributed executor backend", the executors of TP 1 and of TP > 1 on one
# node), so the runs that produced these rows ran the overlapped loop whatever their version.
INFERENCEMAX_LLAMA70B_VLLM_ASYNC = True


def vllm_async_scheduling(version: str | None, *, before_merge: bool = False,
                          script_async: bool = False) -> tuple[bool | None, str]:
    """(overlap_scheduler for a vLLM row of this engine version, the assumption in words).
    `before_merge`: the row has no version but was measured before vllm#27614 merged.
    `script_async`: the row's benchmark script passed `async-scheduling: true`
    (INFERENCEMAX_LLAMA70B_VLLM_ASYNC), which holds whatever the version's default.
    None: the preset's default (on)."""
    v = (version or "").strip().lower()
    if script_async:
        return True, ("engine: async scheduling on: the InferenceMAX Llama-70B vLLM script "
                      "writes `async-scheduling: true` into the server config (a new request "
                      "joins one step late; serving_recipe_vllm.INFERENCEMAX_LLAMA70B_VLLM_ASYNC)")
    release = release_of(v)
    if release is not None:
        on = release >= VLLM_ASYNC_SCHEDULING_SINCE
        return on, (f"engine: vLLM {v} {'runs' if on else 'predates'} async scheduling "
                    "(a new request joins one step late; default since 0.14.0, vllm#27614)")
    if v.startswith("nightly"):
        return True, (f"engine: vLLM {v}, a 2026 nightly after vllm#27614: async scheduling "
                      "on (a new request joins one step late)")
    if before_merge:
        return False, ("engine: no vLLM version; measured before vllm#27614 merged (Dec 2025), "
                       "so assumed a release before 0.14.0: synchronous scheduling")
    return None, ("engine: no vLLM version; assumed current: async scheduling on "
                  "(default since 0.14.0, vllm#27614)")


# InferenceX vLLM scripts that capture CUDA graphs for steps of up to 2048 tokens and set the
# token budget per step to twice the prompt: `--max-cudagraph-capture-size 2048` and
# `--max-num-batched-tokens "$((ISL * 2))"` (with --kv-cache-dtype fp8, --stream-interval 20,
# --no-enable-prefix-caching), added to benchmarks/single_node/minimaxm2.5_fp8_b200.sh by
# SemiAnalysisAI/InferenceX PR #947 together with the move to the v0.19.0 image ("Add
# --max-cudagraph-capture-size 2048", "Add --max-num-batched-tokens based on ISL"; under
# review on 2026-04-03), reused as-is by the MiniMax-M2.5 B300 scripts (PRs #1054, #1055: "reuses the
# existing MiniMax-M2.5 FP8/FP4 B200 vLLM recipe as-is", v0.19.0) and present in the v0.19.0
# NVFP4 B200 script (minimaxm2.5_fp4_b200.sh, the fork copy mpashkovskii/InferenceX@01d209c);
# added to kimik2.5_fp4_b200.sh by PR #1047 ("Add kv-cache-dtype fp8,
# max-cudagraph-capture-size 2048, max-num-batched-tokens, and stream-interval 20"), merged
# after PR #1036 (images of 2026-04-15), while that script's image stayed v0.17.0. The scripts
# before these PRs (the March runs: vLLM 0.16-0.18 and the April 3 nightly) set none of them,
# and the Kimi-K2.5 B300 script got them only in June (PR #1698): those rows keep vLLM's
# defaults (capture size min(2 x max_num_seqs, 512), budget 8192).
# (catalog model id, experts' weight format, GPU id) -> (first vLLM release of the script
# version with the flags, or None; first measurement date with them, or None).
INFERENCEX_VLLM_CAPTURE_TOKENS = 2048
INFERENCEX_VLLM_BUDGET_PER_PROMPT = 2
INFERENCEX_VLLM_GRAPHED_SCRIPTS = {
    ("minimax-m2.5", "fp8", "b200"): ((0, 19, 0), None),        # PR #947
    ("minimax-m2.5", "fp4", "b200"): ((0, 19, 0), None),        # v0.19.0 script (fork copy)
    ("minimax-m2.5", "fp8", "b300"): ((0, 19, 0), None),        # PR #1054
    ("minimax-m2.5", "fp4", "b300"): ((0, 19, 0), None),        # PR #1055
    ("kimi-k2.5", "fp4", "b200"): (None, "2026-04-15"),         # PR #1047 (after #1036)
}


def inferencex_vllm_graphs(source: str, engine: str, prompt: int, model: str | None,
                           weights: str | None, gpu: str | None, version: str | None,
                           disagg: bool = False) -> tuple[dict, str] | None:
    """(Recipe fields, the assumption in words) of an aggregated InferenceX vLLM row (`source`
    of the inferencemax family) whose script captured steps of up to
    INFERENCEX_VLLM_CAPTURE_TOKENS tokens with a budget of 2 x ISL
    (INFERENCEX_VLLM_GRAPHED_SCRIPTS), else None. The row's measurement date is read from
    its source ("... measured YYYY-MM-DD ...") where it states one."""
    entry = INFERENCEX_VLLM_GRAPHED_SCRIPTS.get((model or "", weights or "", gpu or ""))
    if entry is None or engine != "vllm" or disagg:
        return None
    measured = _measured(source or "")
    since_release, since_date = entry
    release = release_of(version)
    by_release = since_release is not None and release is not None and release >= since_release
    by_date = since_date is not None and measured is not None and measured >= since_date
    if not (by_release or by_date):
        return None
    cap, budget = INFERENCEX_VLLM_CAPTURE_TOKENS, INFERENCEX_VLLM_BUDGET_PER_PROMPT * prompt
    return (dict(prefill_graph_max_tokens=cap, decode_graph_max_batch=cap,
                 max_num_batched_tokens=budget),
            f"engine: --max-cudagraph-capture-size {cap}, --max-num-batched-tokens {budget} "
            f"= 2 x ISL (InferenceX {model} {weights} {gpu} vLLM script of this run: "
            "serving_recipe_vllm.INFERENCEX_VLLM_GRAPHED_SCRIPTS): steps of up to "
            f"{cap} tokens replay CUDA graphs")


# InferenceX vLLM scripts that launch `vllm serve --tensor-parallel-size=$TP` and nothing else
# of the layout: no --enable-expert-parallel (their check_env_vars does not even read EP_SIZE)
# and no --data-parallel-size, whatever the config's ep / dp-attn entries, so the engine runs
# TP over the GPUs, experts sharded tensor-parallel (vLLM's default), one attention group:
# benchmarks/single_node/kimik2.5_fp4_b200.sh (both stored versions, 7a83b90 and 04107b3; added
# by PR #862 on 2026-03-03 with "TP=8/EP=1 (conc 4-128) and TP=4/EP=4 (conc 4-64)" search-space
# entries) and kimik2.5_fp4_b300.sh (5632483: "reuses the existing Kimi-K2.5 FP4 B200 vLLM
# recipe as-is", adds --no-enable-prefix-caching). The expert-parallel flag was first proposed
# for them in June 2026 (PR #1658, "pass --enable-expert-parallel only when EP_SIZE > 1",
# closed), after every row of the serving file. The MiniMax-M2.5 scripts are not listed: they
# pass --enable-expert-parallel when EP_SIZE > 1, and minimaxm2.5_fp4_b300.sh (5632483) runs
# DP_ATTENTION=true as --tensor-parallel-size=1 --data-parallel-size=$TP, so their rows' own
# layouts may be what ran.
# (catalog model id, experts' weight format, GPU id) -> script
INFERENCEX_VLLM_TP_ONLY_SCRIPTS = {
    ("kimi-k2.5", "fp4", "b200"): "kimik2.5_fp4_b200.sh",
    ("kimi-k2.5", "fp4", "b300"): "kimik2.5_fp4_b300.sh",
}


def inferencex_vllm_layout(engine: str, model: str | None, weights: str | None,
                           gpu: str | None, disagg: bool = False) -> tuple[dict, str] | None:
    """(Recipe fields, the assumption in words) of an aggregated InferenceX vLLM row whose
    script launches tensor parallelism only (INFERENCEX_VLLM_TP_ONLY_SCRIPTS): the simulator
    runs the row's GPUs as TP, expert_parallel 1, attention_dp 1; else None."""
    script = INFERENCEX_VLLM_TP_ONLY_SCRIPTS.get((model or "", weights or "", gpu or ""))
    if script is None or engine != "vllm" or disagg:
        return None
    return (dict(expert_parallel=1, attention_dp=1),
            f"engine: vllm serve --tensor-parallel-size over all the row's GPUs, without "
            f"--enable-expert-parallel or --data-parallel-size (InferenceX {script}: "
            "serving_recipe_vllm.INFERENCEX_VLLM_TP_ONLY_SCRIPTS): experts sharded "
            "tensor-parallel, whatever ep / attention DP the row states")


# InferenceX vLLM scripts that export VLLM_FLOAT32_MATMUL_PRECISION=high, from the PR that
# added it (the measurements of that PR's own sweep on: each PR also rewrote the script's
# search space, and the rows measured that day are that space):
#   minimaxm2.5_fp4_b200.sh, SemiAnalysisAI/InferenceX PR #1069 (2026-04-17, "Add export
#     VLLM_FLOAT32_MATMUL_PRECISION=high");
#   minimaxm2.5_fp8_b300.sh, PR #1106 (2026-04-21, "Replace VLLM_FLASHINFER_ALLREDUCE_BACKEND=
#     mnnvl with VLLM_FLOAT32_MATMUL_PRECISION=high"; the stored 5632483 copy has it);
#   minimaxm2.5_fp4_b300.sh, PR #1107 (2026-04-21).
# vLLM's GPU worker calls torch.set_float32_matmul_precision(envs.VLLM_FLOAT32_MATMUL_PRECISION)
# (default 'highest'); 'high' lets fp32 matmuls run as TF32 on tensor cores ("enables TF32
# TensorCore acceleration for float32 matmuls ... for MoE gating", vllm-project/recipes#353,
# which cites these three PRs). The fp32 matmul of these rows is MiniMax-M2's router
# (minimax_m2.py: gate in float32, MoESpec.router_fp32). Not listed: minimaxm2.5_fp8_b200.sh,
# whose stored copies do not set it and whose adding PR was not found.
# (catalog model id, experts' weight format, GPU id) -> first measurement date with it
INFERENCEX_VLLM_TF32_SCRIPTS = {
    ("minimax-m2.5", "fp4", "b200"): "2026-04-17",    # PR #1069
    ("minimax-m2.5", "fp8", "b300"): "2026-04-21",    # PR #1106
    ("minimax-m2.5", "fp4", "b300"): "2026-04-21",    # PR #1107
}


def inferencex_vllm_fp32_matmul(source: str, engine: str, model: str | None,
                                weights: str | None, gpu: str | None,
                                disagg: bool = False) -> tuple[dict, str] | None:
    """(Recipe fields, the assumption in words) of an aggregated InferenceX vLLM row measured
    with a script that sets VLLM_FLOAT32_MATMUL_PRECISION=high (INFERENCEX_VLLM_TF32_SCRIPTS,
    from the date of the PR that added it; the measurement date is read from the row's
    source), else None: its fp32 matmuls run as TF32 (Recipe.fp32_matmul)."""
    since = INFERENCEX_VLLM_TF32_SCRIPTS.get((model or "", weights or "", gpu or ""))
    measured = _measured(source or "")
    if since is None or engine != "vllm" or disagg or measured is None or measured < since:
        return None
    return (dict(fp32_matmul="tf32"),
            f"engine: VLLM_FLOAT32_MATMUL_PRECISION=high (InferenceX {model} {weights} {gpu} "
            f"vLLM script from {since}: serving_recipe_vllm.INFERENCEX_VLLM_TF32_SCRIPTS): the "
            "fp32 router GEMM runs as TF32")
