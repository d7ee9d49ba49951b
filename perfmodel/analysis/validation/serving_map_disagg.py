"""Mapping rules for disaggregated rows (mode=disagg) of the serving data.

General rules only (nothing names a row, a model or a measured value):
- each role (prefill_*, decode_*) gets the aggregated rows' parallel rule (serving_map._parallel)
  on its own columns: tp, pp, ep = moe_ep, attention DP stated or implied by moe_tp x moe_ep;
- experts split over more GPUs than the attention TP group by moe_tp (moe_tp > tp, e.g.
  attention DP 32 with moe_tp 32, moe_ep 1): read as EP = moe_tp x moe_ep / tp, the
  deployment's expert parallelism (stated in the row's assumptions). The file writes the
  InferenceX 'DEP' layouts of SGLang 0.5.5 (its post2 image) this way: its config
  (.github/configs/nvidia-master.yaml, dsr1-fp8/fp4-gb200-dynamo-sglang entries of that
  image) gives them as tp 1, ep N, dp-attn true ("1 decode worker at
  DEP32"), and the script that ran them (ai-dynamo/dynamo components/backends/sglang/
  slurm_jobs/scripts/gb200-fp8.sh, which the config names as hard-coding the layout) passes
  --tp-size = --dp-size = the GPUs with --enable-dp-attention --enable-deepep-moe
  --deepep-mode low_latency: DeepEP, whose SGLang flag sets ep_size = tp_size. So the
  all-to-all of attention DP x EP (core/parallel.comm_times) is the run's exchange, not a
  stand-in for MoE TP's gather/reduce-scatter;
- workers: {role}_num_workers; unstated -> 1 (stated in the row's assumptions);
- max batch of one worker: {role}_batch_size x the role's attention DP ({role}_batch_size is
  the engine's max_batch_size per attention-DP rank that the harness sets per role: TRT-LLM's
  disaggregated recipes give the context and generation servers their own max_batch_size,
  SGLang's --max-running-requests / vLLM's --max-num-seqs per server); unstated -> the
  engine preset's limit. The decode role's equals the concurrency rule below divided over
  its workers (the run fills the decode batch), and it replaces the preset's limit, which
  is per server: TRT-LLM's max_batch_size bounds each attention-DP rank's own scheduler
  (decode_batch_size 512 x DP 8 = 4096 requests on a worker whose preset says 2048), so the
  preset alone would queue requests that the deployment runs. The prefill role's is not
  read on InferenceX rows (source db-dump/...): the file gives
  prefill_batch_size 1 on every one of them, while the recipes they ran give the context
  servers their own, larger limits (ai-dynamo/dynamo components/backends/trtllm/
  performance_sweeps configs, GB200: ctx max_batch_size 16 with max_num_tokens 16384 at
  1k/1k, 2 with 16640 at 8k/1k, per attention-DP rank; the SGLang prefill workers
  --max-running-requests 512, --chunked-prefill-size 24576), so 1 is not the engine's limit
  there and the preset's limit stands (the family's rule for flags not in the file).
  AIConfigurator rows keep it: its generator writes it as the prefill worker's max_batch_size
  (rule_plugin: `prefill max_batch_size = (max_batch_size if max_batch_size else 1)`);
- concurrency: the row's batch_size when given, else decode_batch_size x decode workers x
  decode attention DP (decode_batch_size is per attention-DP rank of one decode worker: the
  ids' c<N> equal this product on the rows that state both), else the id's `_c<N>_`.
"""

from __future__ import annotations

import re

from perfmodel.analysis.validation.serving_recipe import family
from perfmodel.analysis.validation.serving_table import ServingMeasurement

ROLES = ("prefill", "decode")
_ID_CONC = re.compile(r"_c(\d+)_")


class RoleView:
    """The columns of one role of a disaggregated row, read as an aggregated row's."""

    def __init__(self, r: ServingMeasurement, role: str):
        self._r, self._role = r, role

    def get(self, column: str) -> str:
        return self._r.get(f"{self._role}_{column}")


def _count(text: str) -> int | None:
    t = text.strip()
    if re.fullmatch(r"\d+(\.0+)?", t) and float(t) > 0:
        return int(float(t))
    return None


def workers(r: ServingMeasurement, role: str) -> tuple[int, list[str]]:
    n = _count(r.get(f"{role}_num_workers"))
    if n is None:
        return 1, [f"{role} workers not stated: 1 assumed"]
    return n, []


def expert_span(r, tp: int, ep: int, dp: int) -> tuple[int, list[str]]:
    """(EP, notes): EP widened to moe_tp x moe_ep / tp when moe_tp spans more GPUs than
    the attention TP group (the module rule)."""
    moe_tp, moe_ep = _count(r.get("moe_tp_size")) or 1, _count(r.get("moe_ep_size")) or 1
    span = moe_tp * moe_ep
    if moe_tp > tp and span % tp == 0 and span // tp > ep and span // tp <= tp * dp:
        new = span // tp
        return new, [f"experts split over moe_tp {moe_tp} x moe_ep {moe_ep} GPUs: read as "
                     f"EP {new} (the file writes InferenceX's 'DEP' layouts, tp 1 x ep N "
                     "with attention DP, as moe_tp N)"]
    return ep, []


def max_batch(r: ServingMeasurement, role: str, dp: int) -> tuple[int | None, list[str]]:
    """(requests one worker of the role runs at once, notes): the module rule; None if
    unstated or not the engine's limit (InferenceX rows)."""
    b = _count(r.get(f"{role}_batch_size"))
    if b and role == "prefill" and family(r.get("source")) == "inferencemax":
        return None, [f"{role}_batch_size {b} not read as the engine's max batch (InferenceX "
                      "recipes set the context servers' own): the engine preset's limit"]
    return (b * dp if b else None), []


def concurrency(r: ServingMeasurement, decode_workers: int, decode_dp: int) -> int | None:
    """Requests in flight over the whole deployment (see the module rule)."""
    c = _count(r.get("batch_size"))
    if c:
        return c
    b = _count(r.get("decode_batch_size"))
    if b and _count(r.get("decode_num_workers")):
        return b * decode_workers * decode_dp
    m = _ID_CONC.search(r.get("id"))
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None
