"""Per-model flags of InferenceX's SGLang scripts (serving_recipe.recipe_for).

serving_recipe.py replays the receive interval the DeepSeek R1 and Qwen3.5 fp8/bf16 Blackwell
scripts share (`--scheduler-recv-interval` 10 below C=16, 30 from it) on every Blackwell SGLang
row. Scripts that say otherwise (SemiAnalysisAI/InferenceX benchmarks/single_node/):
- Qwen3.5 fp4 on B200: qwen3.5_fp4_b200.sh passes `--scheduler-recv-interval 30` at every
  concurrency (replayed);
- GLM-5: glm5_fp8_b200.sh, glm5_fp8_b300.sh (fixed_seq_len/) and the first
  benchmarks/glm5_fp8_b200.sh pass none (SGLang's default 1: None here), glm5_fp4_b200.sh passes
  10 at every concurrency (replayed). With them the GLM-5 rows' excess over the prediction is a
  constant number of decode steps per configuration (a prompt step priced short, not the
  schedule), where the shared 10/30 rule had matched the 8k rows by accident (docs/serve.md);
- Qwen3.5 fp8 on B300: the config (qwen3.5-fp8-b300-sglang) was added by InferenceX PR #1048
  with the SGLang 0.5.10 image (its post1 build, cu130), TP 4, concurrency 4-256 (perf-changelog),
  the file's db-dump rows measured 2026-04-17. Every stored qwen3.5_fp8_b300.sh
  (benchmarks/single_node/ at 563248391c29, benchmarks/single_node/fixed_seq_len/ at 1534ee2688ab)
  passes `--scheduler-recv-interval 10` at every concurrency, as do the B300 FP8 flags of the
  SGLang cookbook (sgl-project/sgl-cookbook PR #247, 2026-04-16, "based on InferenceX#1035"):
  replayed from SGLang 0.5.10 on (INFERENCEX_SGLANG_OWN_RECV_SINCE). The B300 fp8 0.5.9 rows
  (AIConfigurator gap-analysis runs of 2026-04-03 with a 0.5.9 image, TP 4 and 8, EP 1 and 4)
  predate that config: their script is not known and they keep the shared rule.
The Qwen3.5 fp8 H200 script (qwen3.5_fp8_h200.sh, InferenceX PR #855, 2026-03-04, stored at
2116fc435781) launches `sglang.launch_server --tp $TP` with no --ep-size / --expert-parallel-size:
it checks EP_SIZE but never passes it, so SGLang shards the experts tensor-parallel (its default
ep_size 1) although the config lists ep 8 (the rows' moe_ep_size); the MTP sibling of April
(qwen3.5_fp8_h200_mtp.sh, PR #1001) is the first H200 Qwen3.5 script that passes
--expert-parallel-size. Replayed as expert_parallel 1 (INFERENCEX_SGLANG_NO_EP).
The DeepSeek R1 fp4 B200 script of autumn 2025 (benchmarks/dsr1_fp4_b200_docker.sh) launched SGLang
with `--enable-ep-moe --enable-flashinfer-trtllm-moe` and no --ep-size, while its config gave no
ep (the file's moe_ep_size 1): InferenceX PR #204 ("Replace --enable-ep-moe with --ep-size
$EP_SIZE", "Set ep:4 for all tp:4 entries, ep:8 for all tp:8 entries", perf-changelog.yaml) and
the PR #242 thread (2025-11-17/18: "before PR #204, `--enable-ep-moe` & `--enable-flashinfer-
trtllm-moe` was set", "I re-enabled the EP for the fp4 workloads"). SGLang's deprecated
--enable-ep-moe sets ep_size = tp_size (server_args.py: "NOTE: --enable-ep-moe is deprecated.
Please set `--ep-size` to the same value as `--tp-size` instead"; docs deprecated arguments
table). Replayed as expert_parallel = TP on the fp4 B200 rows measured before 2025-11-17
(INFERENCEX_SGLANG_EP_IS_TP): the file's 2025-11-02 and 2025-11-10 rows.
Every Qwen3.5 script passes --disable-radix-cache (so SGLang keeps its overlap scheduler for
this hybrid model). The GLM-5 H200 script's --mem-fraction-static 0.85 is replayed
(serving_kv.py). Their prompt budgets are not replayed either (docs/serve.md):
--chunked-prefill-size = --max-prefill-tokens = 32768 on B200 (fp8, bf16 and fp4 scripts) and
16384 on H200 pack more prompts per prefill step than the preset's 16384 / 8192, which lowered
these rows' predicted TTFT, already below the measurement at every concurrency.
"""

from __future__ import annotations

from perfmodel.analysis.validation.serving_kv import inferencemax_sglang_mem_fraction
from perfmodel.core.engine_versions import release_of

QWEN35_MODEL_PREFIX = "qwen3.5"
# (model prefix, GPU, experts' format) -> (interval at every concurrency, None: the script
# passes none, SGLang polls every step; script)
INFERENCEX_SGLANG_OWN_RECV = {
    (QWEN35_MODEL_PREFIX, "b200", "fp4"): (30, "qwen3.5_fp4_b200.sh"),
    (QWEN35_MODEL_PREFIX, "b300", "fp8"): (10, "qwen3.5_fp8_b300.sh"),
    ("glm-5", "b200", "fp8"): (None, "glm5_fp8_b200.sh"),
    ("glm-5", "b300", "fp8"): (None, "glm5_fp8_b300.sh"),
    ("glm-5", "b200", "fp4"): (10, "glm5_fp4_b200.sh"),
}
# (model prefix, GPU, experts' format) -> script that passes no expert-parallel flag
INFERENCEX_SGLANG_NO_EP = {(QWEN35_MODEL_PREFIX, "h200-sxm", "fp8"): "qwen3.5_fp8_h200.sh"}

# (model prefix, GPU, experts' format) -> (script, first date not covered): rows measured before
# the date ran the script's --enable-ep-moe, i.e. expert parallel = TP (module docstring). The
# bound is PR #242's opening day, after PR #204 replaced the flag; later fp4 configs state ep = tp.
INFERENCEX_SGLANG_EP_IS_TP = {("deepseek", "b200", "fp4"): ("dsr1_fp4_b200_docker.sh",
                                                            "2025-11-17")}

# Scripts that apply only from the engine release their config was added with (earlier rows of
# that GPU and format were measured by other runs): qwen3.5-fp8-b300-sglang, InferenceX PR #1048,
# image lmsysorg/sglang:v0.5.10.post1-cu130.
INFERENCEX_SGLANG_OWN_RECV_SINCE = {(QWEN35_MODEL_PREFIX, "b300", "fp8"): (0, 5, 10)}


def _script_ran(key: tuple[str, str, str], version: str | None) -> bool:
    """Whether the row's engine version is one the script's config ran (a release at or after
    INFERENCEX_SGLANG_OWN_RECV_SINCE; any version when the script has no such bound)."""
    since = INFERENCEX_SGLANG_OWN_RECV_SINCE.get(key)
    if since is None:
        return True
    release = release_of(version)
    return release is not None and release >= since


def sglang_model_flags(model: str | None, engine: str, gpu: str | None, weights: str | None,
                       disagg: bool = False, version: str | None = None, *,
                       tp: int | None = None,
                       measured: str | None = None) -> tuple[dict, list[str]] | None:
    """(Recipe field overrides, notes) of an InferenceX SGLang row whose script disables the
    radix cache, sets its own receive interval or its own expert parallelism, or None.
    `weights` is the experts' format name (fp8, fp4, bf16); `version` the row's engine version
    (some scripts ran only from a release on: INFERENCEX_SGLANG_OWN_RECV_SINCE); `tp` its
    tensor-parallel size and `measured` its measurement date, YYYY-MM-DD (a script's flag that
    changed on a date: INFERENCEX_SGLANG_EP_IS_TP)."""
    name = (model or "").lower()
    if engine != "sglang":
        return None
    fields: dict = {}
    notes: list[str] = []
    if name.startswith(QWEN35_MODEL_PREFIX):
        fields["radix_cache"] = False
        notes.append("engine: --disable-radix-cache (InferenceX qwen3.5_fp8_{b200,b300,h200}.sh), "
                     "so SGLang keeps its overlap scheduler for this hybrid model")
    for (prefix, g, w), (recv, script) in INFERENCEX_SGLANG_OWN_RECV.items():
        if (not disagg and name.startswith(prefix) and gpu == g and weights == w
                and _script_ran((prefix, g, w), version)):
            fields["recv_interval_steps"] = recv
            flag = (f"--scheduler-recv-interval {recv}" if recv else
                    "no --scheduler-recv-interval (SGLang's default, every step)")
            notes.append(f"engine: SGLang {flag} at every concurrency (InferenceX {script})")
    for (prefix, g, w), script in INFERENCEX_SGLANG_NO_EP.items():
        if not disagg and name.startswith(prefix) and gpu == g and weights == w:
            fields["expert_parallel"] = 1
            notes.append(f"engine: SGLang launched without --ep-size (InferenceX {script} never "
                         "passes EP_SIZE): experts sharded tensor-parallel, ep 1")
    for (prefix, g, w), (script, until) in INFERENCEX_SGLANG_EP_IS_TP.items():
        if (not disagg and name.startswith(prefix) and gpu == g and weights == w
                and tp is not None and tp > 1 and measured is not None and measured < until):
            fields["expert_parallel"] = tp
            notes.append(f"engine: SGLang --enable-ep-moe (InferenceX {script} before PR #204, "
                         f"measured before {until}): expert parallel = TP = {tp}, whatever "
                         "the file's moe_ep_size")
    mem = None if disagg else inferencemax_sglang_mem_fraction(engine, name, gpu)
    if mem is not None:             # its --mem-fraction-static (serving_kv.py)
        fields["kv_memory_fraction"], note = mem
        notes.append(note)
    return (fields, notes) if fields else None
