"""What one scheduler run takes and gives: its Policy (the engine's parameters), the Trace it
records, and the caps on the work one call may do (StepBudget). The simulation itself is
serving/scheduler.py (with serving/decode_epoch.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.core.errors import PerfModelError


@dataclass(frozen=True)
class Policy:
    """The scheduler parameters one run needs (from SchedulerSpec.limits and the memory model)."""

    static: bool
    mixed: bool
    chunked: bool
    max_seqs: int
    token_budget: int | None
    total_blocks: int
    block_tokens: int
    reserve_output: bool
    request_overhead_s: float
    # SGLang --scheduler-recv-interval (SchedulerRecvSkipper): a busy engine takes new requests
    # in only every n-th decode step and after a prefill step; 1: every iteration (the default)
    recv_interval_steps: int = 1
    # TensorRT-LLM overlap scheduler (SchedulerSpec.overlap_scheduler): step k+1 is scheduled
    # while step k runs, so a busy engine admits only requests visible when the step before
    # the one it plans began
    overlap: bool = False
    # TensorRT-LLM PyExecutor (SchedulerSpec.idle_takes_one): an idle engine that blocked on
    # its empty queue plans its next step with the one request that woke it
    idle_takes_one: bool = False
    # TensorRT-LLM batch waiting (SchedulerSpec.batch_wait_*; PyExecutor._waiting_requests):
    # while decodes run, scheduled prompts are held until batch_wait_tokens (ratio x
    # max_num_tokens) of prompt tokens + decode rows are scheduled or batch_wait_iters
    # iterations were held; 0 iterations: off
    batch_wait_iters: int = 0
    batch_wait_tokens: float = 0.0
    # TensorRT-LLM attention-DP balance (SchedulerSpec.adp_balance_timeout_iters): with
    # adp_ranks DP ranks, prompts beside decodes on every rank wait until each rank has one
    # (adp_ranks prompts scheduled) or adp_wait_iters iterations were held; 0: off
    adp_wait_iters: int = 0
    adp_ranks: int = 1
    # attention DP (serving/simulate.py _policy): a request lives on one DP rank, so one
    # step gives it at most that rank's token budget (None: the step's budget)
    rank_tokens: int | None = None
    # TGI v3 join rule (SchedulerSpec.waiting_served_ratio / max_waiting_tokens; serving/
    # sim_batch_wait.py): beside a running batch a prefill step runs only if it admits at
    # least floor(running x join_ratio) requests or join_wait_steps decode steps passed since
    # the last prefill; None: off (every other engine)
    join_ratio: float | None = None
    join_wait_steps: int = 0
    # LMDeploy PyTorch engine (SchedulerSpec.prefill_defer_share / prefill_interval; serving/
    # sim_batch_wait.py _defer_held): beside running decodes, waiting prompts are prefilled only
    # if fewer than defer_share x max_seqs run, their tokens reach token_budget, or defer_steps
    # decode steps ran while they waited (0: no such guard); None: off (every other engine)
    defer_share: float | None = None
    defer_steps: int = 0
    # prompts packed whole within token_budget, a longer one alone in chunks (SchedulerSpec
    # .whole_prompts)
    whole_prompts: bool = False


@dataclass
class Trace:
    """What happened: per request times, pooled inter-token gaps, per segment timeline."""

    first_s: np.ndarray
    finish_s: np.ndarray
    send_s: np.ndarray
    preemptions: int = 0
    itl_values: list = field(default_factory=list)
    itl_weights: list = field(default_factory=list)
    # timeline segments: start, duration, steps, decode rows, prompt tokens, waiting, KV blocks
    segments: list = field(default_factory=list)
    max_running: int = 0


MAX_SIM_STEPS = 80_000
"""Scheduler iterations (steps or decode-only runs) one `perfmodel serve` call may simulate,
over all its levels: about 20 us each in a decode epoch, 40 us in the general loop, so a
call stays within a few seconds of CPU. A run that needs more stops with a PerfModelError
naming this cap (fewer requests or levels, a larger token budget)."""


class Stalled(PerfModelError):
    """No request can be scheduled: the level does not fit (reported as fits=False)."""


MAX_PRICED_DECODE_STEPS = 20_000_000
"""Decode steps one call may price (each a float of pooled inter-token gaps, a few ns to
price and 8 bytes kept): bounds long outputs x many requests. Over it: a PerfModelError."""

DECODE_PROBE_STEPS = 256   # a decode run is priced in doubling pieces from this many steps


class StepBudget:
    """Scheduler iterations and priced decode steps left to one call (shared by its levels)."""

    def __init__(self, steps: int = MAX_SIM_STEPS, decode_steps: int = MAX_PRICED_DECODE_STEPS):
        self.cap = self.left = int(steps)
        self.decode_cap = self.decode_left = int(decode_steps)

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise PerfModelError(f"the serving simulation needs more than {self.cap} scheduler "
                                 "steps (the cap per call): lower num_requests or the levels, or "
                                 "raise max_num_batched_tokens")

    def spend_decode(self, k: int) -> None:
        self.decode_left -= int(k)
        if self.decode_left < 0:
            raise PerfModelError(f"the serving simulation needs more than {self.decode_cap} decode "
                                 "steps (the cap per call): lower num_requests, output_tokens "
                                 "or the levels")


def poll_steps(n: int, since: int, steps: int) -> int:
    """Decode steps until a request that becomes visible during step `steps` is taken in, when
    a busy engine polls every n steps and `since` steps ran since its last poll (SGLang
    SchedulerRecvSkipper: +1 per decode step, poll at >= n, reset). n = 1: `steps`."""
    if n <= 1:
        return steps
    first = max(n - since, 1)
    return first + -(-max(steps - first, 0) // n) * n


def steps_since_poll(n: int, since: int, k: int) -> int:
    """`since` after k more decode steps (n: a poll is due at once)."""
    if n <= 1:
        return since
    ct = since + k
    return n if ct % n == 0 else ct % n
