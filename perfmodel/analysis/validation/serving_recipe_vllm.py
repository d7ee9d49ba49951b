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

from perfmodel.core.engines import release_of

# First vLLM release with async scheduling on by default (vllm#27614; module docstring).
VLLM_ASYNC_SCHEDULING_SINCE = (0, 14, 0)


def vllm_async_scheduling(version: str | None, *, before_merge: bool = False
                          ) -> tuple[bool | None, str]:
    """(overlap_scheduler for a vLLM row of this engine version, the assumption in words).
    `before_merge`: the row has no version but was measured before vllm#27614 merged.
    None: the preset's default (on)."""
    v = (version or "").strip().lower()
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
