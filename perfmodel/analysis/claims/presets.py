"""The seed documents (shared/seeds/) as built-in presets: each puts the source's own
numbers beside the model's predictions and says which it supports and which not, and why.

Nothing here predicts: every 'model' value is computed by the claims package (evaluate,
attribute, explain, solve, quantities) from scenarios, with the same model and defaults
as everywhere. Presets hold only configurations (with their assumptions written out),
the sources' numbers, and the sentences that frame them.

Judging a source number against the model (TOLERANCE = 25%):
- value: supported when model / source lies within [1/1.25, 1.25];
- range [lo, hi]: supported when the model lies within [lo / 1.25, hi x 1.25];
- at_least x: supported when model >= x / 1.25;  at_most x: when model <= x x 1.25.
The tolerance is about the spread of the default efficiencies across engines and cards
(docs/accuracy.md); a calibrated profile narrows it.

A source is also checked against itself (SourceCheck): a stated figure beside the value its
own other figures imply (e.g. E2E = TTFT + (O-1) / decode rate); outside the same tolerance
the source contradicts itself, and the summary says where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.claims.attribute import Step
from perfmodel.analysis.claims.explain import Combination, Explanation
from perfmodel.core.errors import PerfModelError, UnknownIdError

TOLERANCE = 0.25


class SourceRow(BaseModel):
    """One number of the source beside the model's."""

    model_config = ConfigDict(frozen=True)
    step: str
    quantity: str
    unit: str
    source: float | list[float] | None = Field(description="The source's number (a range as "
                                               "[lo, hi]); None: the model's own figure.")
    kind: str = Field(description="value, range, at_least, at_most, or info.")
    model: float | None
    verdict: str = Field(description="supported, not supported, or info.")
    why: str


class SourceCheck(BaseModel):
    """A figure of the source beside what its own other figures imply."""

    model_config = ConfigDict(frozen=True)
    step: str
    quantity: str
    unit: str
    stated: float
    implied: float = Field(description="The value the source's other figures imply.")
    consistent: bool
    why: str = Field(description="The arithmetic, with the source's figures.")


class PresetReport(BaseModel):
    """A seed document checked against the model."""

    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    seed: str
    summary: str
    metric: str
    total: float = Field(description="The model's factor for the source's headline comparison.")
    factors: list[Step]
    shapley: dict[str, float]
    combinations: list[Combination]
    verdict: str
    source_vs_model: list[SourceRow]
    source_checks: list[SourceCheck] = Field(default_factory=list)
    explanations: list[Explanation] = Field(default_factory=list)
    assumptions: list[str]
    warnings: list[str]


def judge(source, model: float | None, kind: str) -> str:
    """supported / not supported by the rule in the module docstring."""
    if kind == "info" or source is None:
        return "info"
    if model is None:
        return "not computed"
    k = 1.0 + TOLERANCE
    if kind == "value":
        ok = source / k <= model <= source * k
    elif kind == "range":
        ok = source[0] / k <= model <= source[1] * k
    elif kind == "at_least":
        ok = model >= source / k
    elif kind == "at_most":
        ok = model <= source * k
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return "supported" if ok else "not supported"


@dataclass
class Rows:
    """Collects SourceRows; `why` is a sentence with the model's own figures in it."""

    rows: list[SourceRow] = field(default_factory=list)
    checks: list[SourceCheck] = field(default_factory=list)

    def add(self, step: str, quantity: str, unit: str, source, model: float | None,
            why: str, kind: str = "value") -> None:
        if source is not None and kind == "value" and isinstance(source, list):
            kind = "range"
        verdict = judge(source, model, kind if source is not None else "info")
        self.rows.append(SourceRow(step=step, quantity=quantity, unit=unit, source=source,
                                   kind=kind if source is not None else "info",
                                   model=None if model is None else float(model),
                                   verdict=verdict, why=why))

    def check(self, step: str, quantity: str, unit: str, stated: float, implied: float,
              why: str) -> None:
        """The source's stated figure against the value its own figures imply."""
        ok = judge(stated, implied, "value") == "supported"
        self.checks.append(SourceCheck(step=step, quantity=quantity, unit=unit,
                                       stated=float(stated), implied=float(implied),
                                       consistent=ok, why=why))

    def summary(self) -> str:
        """Which of the source's numbers the model supports and which not, and where the
        source contradicts itself."""
        def names(v: str) -> str:
            return "; ".join(f"{x.step}: {x.quantity}" for x in self.rows if x.verdict == v)
        ok, bad = names("supported"), names("not supported")
        n_ok = sum(x.verdict == "supported" for x in self.rows)
        n_bad = sum(x.verdict == "not supported" for x in self.rows)
        text = (f"{n_ok} of the source's numbers are supported within {TOLERANCE:.0%} and "
                f"{n_bad} are not. Supported: {ok or 'none'}. Not supported: {bad or 'none'}.")
        bad_checks = [c for c in self.checks if not c.consistent]
        if bad_checks:
            text += (f" The source contradicts itself in {len(bad_checks)} place(s): "
                     + "; ".join(f"{c.step}: {c.quantity} stated {c.stated:.3g} {c.unit}, its "
                                 f"own figures give {c.implied:.3g}" for c in bad_checks) + ".")
        return text


def ratio_text(source, model: float) -> str:
    if source is None or isinstance(source, list):
        return f"model {model:.3g}"
    return f"model {model:.3g} vs source {source:.3g} ({model / source:.2f}x the source)"


_REGISTRY: dict[str, tuple[str, Callable[..., PresetReport]]] = {}


def register(preset_id: str, title: str):
    def deco(fn):
        _REGISTRY[preset_id] = (title, fn)
        return fn
    return deco


def list_presets() -> list[tuple[str, str]]:
    _load()
    return [(k, v[0]) for k, v in _REGISTRY.items()]


def run_preset(preset_id: str, *, search: bool = True) -> PresetReport:
    """Build one preset's report. search=False skips the lever-combination searches
    (combinations come back empty) but computes every source-vs-model row."""
    _load()
    if preset_id not in _REGISTRY:
        raise UnknownIdError("preset", preset_id, list(_REGISTRY))
    try:
        return _REGISTRY[preset_id][1](search=search)
    except PerfModelError as exc:   # a preset that no longer builds is a defect
        raise RuntimeError(f"preset {preset_id} failed: {exc}") from exc


PRESET_MODULES = ("preset_gpt6", "preset_sol14x", "preset_gpt4o")


def _load() -> None:
    import importlib

    for name in PRESET_MODULES:   # a missing preset module is a defect, not an empty list
        importlib.import_module(f"perfmodel.analysis.claims.{name}")
