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
- Qwen3.5 fp8 on B300: both stored qwen3.5_fp8_b300.sh versions pass 10 at every concurrency,
  but which version ran which rows is not known (docs/hybrid_ttft.md): not replayed.
Every Qwen3.5 script passes --disable-radix-cache (so SGLang keeps its overlap scheduler for
this hybrid model). Their prompt budgets are not replayed either (docs/serve.md):
--chunked-prefill-size = --max-prefill-tokens = 32768 on B200 (fp8, bf16 and fp4 scripts) and
16384 on H200 pack more prompts per prefill step than the preset's 16384 / 8192, which lowered
these rows' predicted TTFT, already below the measurement at every concurrency.
"""

from __future__ import annotations

QWEN35_MODEL_PREFIX = "qwen3.5"
# (model prefix, GPU, experts' format) -> (interval at every concurrency, None: the script
# passes none, SGLang polls every step; script)
INFERENCEX_SGLANG_OWN_RECV = {
    (QWEN35_MODEL_PREFIX, "b200", "fp4"): (30, "qwen3.5_fp4_b200.sh"),
    ("glm-5", "b200", "fp8"): (None, "glm5_fp8_b200.sh"),
    ("glm-5", "b300", "fp8"): (None, "glm5_fp8_b300.sh"),
    ("glm-5", "b200", "fp4"): (10, "glm5_fp4_b200.sh"),
}


def sglang_model_flags(model: str | None, engine: str, gpu: str | None, weights: str | None,
                       disagg: bool = False) -> tuple[dict, list[str]] | None:
    """(Recipe field overrides, notes) of an InferenceX SGLang row whose script disables the
    radix cache or sets its own receive interval, or None. `weights` is the experts' format
    name (fp8, fp4, bf16)."""
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
        if not disagg and name.startswith(prefix) and gpu == g and weights == w:
            fields["recv_interval_steps"] = recv
            flag = (f"--scheduler-recv-interval {recv}" if recv else
                    "no --scheduler-recv-interval (SGLang's default, every step)")
            notes.append(f"engine: SGLang {flag} at every concurrency (InferenceX {script})")
    return (fields, notes) if fields else None
