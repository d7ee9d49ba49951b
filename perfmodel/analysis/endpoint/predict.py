"""The performance model's prediction beside each measured level (`--predict`).

Each level is predicted as a batch of B = min(concurrency, requests) sequences with the
level's mean prompt length (server usage, else the requested --prompt-tokens) and its mean
measured output length, via perfmodel.api.evaluate of the PredictSpec's Query. The serving
simulation is added beside it as `simulated` with `sim_ratios`: the level replayed as
`perfmodel serve --trace run.json` replays it (serving/trace_record.py: the engine's scheduler
over a closed loop at the level's concurrency, each successful request with its own prompt
and output lengths, in send order). Ratios are measured / predicted
(p50 for latencies): > 1 means the server is slower than the model says (or, for output
tok/s, faster).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.api import Evaluation, evaluate
from perfmodel.core.query import Query, make_query
from perfmodel.serving.trace_record import RECORD_SCHEMA, replay_of

if TYPE_CHECKING:
    from perfmodel.analysis.endpoint.config import EndpointConfig
    from perfmodel.analysis.endpoint.run import BenchmarkRun, LevelResult


class PredictSpec(BaseModel):
    """Which modelled deployment the measurement is compared with (catalog and hardware ids)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="Catalog model id, e.g. llama-3.1-8b")
    gpu: str = Field(min_length=1, description="hardware_db id, e.g. h100-sxm")
    engine: str = Field("vllm", min_length=1, description="Engine preset id")
    weights: str = Field("bf16", min_length=1, description="Weight precision id")
    kv: str | None = Field(None, description="KV-cache precision id (default: the model's)")
    activations: str | None = Field(None, description="Matmul-input precision id (default: "
                                    "the weights' rule)")
    tp: int = Field(1, ge=1, description="Tensor-parallel GPUs (per attention-DP group)")
    pp: int = Field(1, ge=1, description="Pipeline stages")
    ep: int = Field(1, ge=1, description="Expert-parallel degree over the tp x dp GPUs")
    dp: int = Field(1, ge=1, description="Attention data-parallel groups")
    nodes: int | None = Field(None, ge=1, description="Servers the GPUs span (default: as "
                              "many as they fill)")
    profile: str | None = Field(None, description="Calibrated profile YAML path")

    def query(self, **workload) -> Query:
        """The one Query these ids, this layout and a workload make (PerfModelError on a bad
        field); a run saved before the layout fields existed reads as one GPU."""
        return make_query(model=self.model, gpu=self.gpu, engine=self.engine,
                          weights=self.weights, kv=self.kv, activations=self.activations,
                          tp=self.tp, pp=self.pp, ep=self.ep, dp=self.dp, nodes=self.nodes,
                          profile=self.profile, **workload)


class Prediction(BaseModel):
    """The model's estimate for one level, and measured / predicted ratios."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tok_s_total: float
    ratios: dict[str, float] = Field(description="measured / predicted: ttft_p50, tpot_p50, e2e_p50, output_tok_s")
    simulated: dict[str, float] = Field(
        default_factory=dict, description="the serving simulation of this level (api.serve "
        "replaying it as `serve --trace` does: closed loop at the level's concurrency over its "
        "successful requests' own lengths): the LevelStats keys it shares")
    sim_ratios: dict[str, float] = Field(
        default_factory=dict, description="measured / simulated: ttft_p50, ttft_p90, tpot_p50, "
        "itl_p50, e2e_p50, output_tok_s")
    warnings: list[str] = []


def predict_one(spec: PredictSpec, *, batch: int, prompt: int, output: int) -> Evaluation:
    """perfmodel.api.evaluate of the spec's Query at one workload."""
    return evaluate(spec.query(batch=batch, prompt_tokens=prompt, output_tokens=output))


def check_spec(spec: PredictSpec, cfg: "EndpointConfig") -> None:
    """Predict the first level before any request is sent, so a bad id fails fast."""
    predict_one(spec, batch=min(cfg.concurrency[0], cfg.requests), prompt=cfg.prompt_tokens,
                output=cfg.max_tokens)


def _ratio(measured: float | None, predicted: float) -> float | None:
    return measured / predicted if measured is not None and predicted > 0 else None


def predict_level(spec: PredictSpec, cfg: "EndpointConfig", level: "LevelResult") -> Prediction:
    s = level.stats
    prompt = (round((s.prompt_tokens_min + s.prompt_tokens_max) / 2)
              if s.prompt_tokens_min is not None and s.prompt_tokens_max is not None
              else cfg.prompt_tokens)
    output = max(1, round(s.output_tokens_total / s.ok)) if s.ok else cfg.max_tokens
    batch = min(level.concurrency, cfg.requests)
    r = predict_one(spec, batch=batch, prompt=max(1, prompt), output=output)
    ratios = {"ttft_p50": _ratio(s.ttft_p50_s, r.ttft_s), "tpot_p50": _ratio(s.tpot_p50_s, r.tpot_s),
              "e2e_p50": _ratio(s.e2e_p50_s, r.e2e_s),
              "output_tok_s": _ratio(s.output_tok_s if s.ok else None, r.output_tok_s_total)}
    sim = simulate_level(spec, cfg, level)
    sim_ratios = {k: _ratio(m, sim.get(key)) for k, m, key in (
        ("ttft_p50", s.ttft_p50_s, "ttft_p50_s"), ("ttft_p90", s.ttft_p90_s, "ttft_p90_s"),
        ("tpot_p50", s.tpot_p50_s, "tpot_p50_s"), ("itl_p50", s.itl_p50_s, "itl_p50_s"),
        ("e2e_p50", s.e2e_p50_s, "e2e_p50_s"),
        ("output_tok_s", s.output_tok_s if s.ok else None, "output_tok_s_total"))
        if key in sim}
    return Prediction(batch=batch, prompt_tokens=max(1, prompt), output_tokens=output,
                      ttft_s=r.ttft_s, tpot_s=r.tpot_s, e2e_s=r.e2e_s,
                      output_tok_s_total=r.output_tok_s_total,
                      ratios={k: v for k, v in ratios.items() if v is not None},
                      simulated=sim, sim_ratios={k: v for k, v in sim_ratios.items() if v is not None},
                      warnings=list(r.warnings))


SIM_KEYS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "itl_p50_s",
            "itl_p99_s", "e2e_p50_s", "e2e_p90_s", "output_tok_s_total", "request_rate_rps")


def simulate_level(spec: PredictSpec, cfg: "EndpointConfig",
                   level: "LevelResult") -> dict[str, float]:
    """api.serve replaying one measured level (its successful requests' own lengths, the
    config's prompt_tokens where the server reported no usage); {} when no request succeeded
    or the level does not run in the model."""
    from perfmodel.api import serve
    if not level.stats.ok:
        return {}
    replay = replay_of({"schema_version": RECORD_SCHEMA,
                        "config": {"prompt_tokens": cfg.prompt_tokens},
                        "levels": [level.model_dump(mode="json", include={"concurrency", "requests"})]},
                       name=f"concurrency {level.concurrency}")
    rep = serve(spec.query(), replay=replay)
    p = rep.points[0]
    return {k: float(getattr(p, k)) for k in SIM_KEYS if getattr(p, k) is not None}


def with_predictions(run: "BenchmarkRun", spec: PredictSpec) -> "BenchmarkRun":
    """A copy of `run` with a Prediction on every level."""
    levels = [lv.model_copy(update={"prediction": predict_level(spec, run.config, lv)})
              for lv in run.levels]
    return run.model_copy(update={"levels": levels, "predict": spec})
