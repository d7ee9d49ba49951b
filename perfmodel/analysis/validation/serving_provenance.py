"""Which harness measured a row of the serving data: the source families, and the "aic" rows that
are InferenceMAX measurements copied into AIConfigurator's file (they get InferenceMAX's recipe,
serving_recipe.py).

Provenance: an "aic" source that names a container ("aic ... measured <date> image
image=<docker image>", vLLM and SGLang public images; 661 aggregated rows) is an InferenceMAX
measurement copied into AIConfigurator's file, and gets the InferenceMAX recipe. Evidence in
the shipped file (tests/test_serving_recipe.py counts it): 254 groups of 540 rows carry the
same measured TTFT and TPOT (to 1e-6 ms), every group holds an image= row, and each of the
126 pairs of an image= row with a "db-dump/" row agrees on measurement date and image (e.g.
MiniMax-M2.5 fp8 on 4 x B200, vLLM 1024/1024 at C=64, measured 2026-04-03 on vLLM 0.19.0: the
same TTFT and TPOT under both sources); no "aic" row without image= has such a twin; and the
image= rows run only InferenceX's length grid (1k/1k, 8k/1k, 1k/8k), while AIConfigurator's
own sweeps run many others.
A third kind of copy names neither image nor date: "aic" rows whose TTFT and TPOT equal, to the
0.01 ms they are printed with, those of an InferenceMAX row (image= or db-dump/) of the same
model, GPU, lengths and concurrency (inferencemax_twins). Evidence in the shipped file
(tests/test_serving_recipe.py counts it and shows one pair): all 76 such Qwen3.5-397B rows and
47 Kimi-K2.5 rows have one, and no row of AIConfigurator's own sweeps (Qwen3-32B, Qwen3-235B,
Llama-3.1-8B/70B) does; two equal pairs of values to 0.01 ms by chance are not credible.
Concurrency is compared as run (batch_size x attention_dp_size where stated > 1): 15 of those
Kimi-K2.5 rows (NVFP4, 4 x B200, vLLM 0.17.0, "tp4_ep4") write the run as tp 4, ep 4 at
batch = C, while their originals (db-dump, measured 2026-03-27) write it as tp 4 x
attention_dp 4, moe_ep 16 at batch = C / 4; TTFT and TPOT agree to 0.01 ms at all 15 points
(1k/1k, 1k/8k, 8k/1k; C = 4..64).
A second import names no image: the 441 Llama-3.1-70B rows "aic ... measured 2025-10-29"
(AIC_INFERENCEMAX_IMPORT_DATES; vLLM and TRT-LLM, no engine version) are InferenceMAX v1's
Llama-70B sweep (nvidia/Llama-3.3-70B-Instruct-FP8/FP4, the 3.1-70B architecture). Evidence:
(1) AIConfigurator's own silicon_sample.csv (column silicon_data_source) files them, as
"source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=C; measured=2025-10-29;
wip=False", in the same import as its DeepSeek R1 rows measured 2025-11-02 and 2025-11-10,
which repeat this file's db-dump rows to the last digit (H200 TRT-LLM fp8 1k/1k C=32:
616.3300446991343 ms, 26.12158301838722 ms) and, like every db-dump row measured in 2025-11,
name no image; (2) their points are the whole product of InferenceMAX's 70B sweep
(.github/workflows/70b-tmpl.yml: ISL/OSL 1k/1k, 1k/8k, 8k/1k; TP 1, 2, 4, 8, on H100 2, 4, 8;
concurrency 4..64, the TensorRT-LLM jobs' conc-list 4..128; FP4 on B200 only, TensorRT-LLM on
B200 and H200 only) and nothing else; (3) every other aggregated "aic" row without image=
carries an engine version. tests/test_serving_recipe.py counts (2) and (3) on the shipped file.
"""

from __future__ import annotations

from typing import Literal

# Provenance (module docstring): the marker of an "aic" row that is an InferenceMAX measurement.
AIC_COPIED_IMAGE_TAG = "image="
# Provenance (module docstring): measurement dates of "aic" imports that name no image but are
# InferenceMAX database rows (2025-10-29: its Llama-70B sweep, 441 rows of the shipped file).
AIC_INFERENCEMAX_IMPORT_DATES = ("2025-10-29",)

Family = Literal["aic", "inferencemax", "other"]
INFERENCEX_RUN_PREFIX = "inferencex-run/"
"""Source prefix of an InferenceX run quoted outside the database dumps (an InferenceX issue or
pull request that prints a run's TTFT and TPOT, e.g. data/serving/amd_public_sample.csv): the
same harness and scripts as the db-dump rows, so the same recipe family."""


def _measured(source: str) -> str | None:
    words = source.split()
    return words[words.index("measured") + 1] if "measured" in words[:-1] else None


def _llama70b_import(source: str) -> bool:
    """An "aic" row of the image-less InferenceMAX import (AIC_INFERENCEMAX_IMPORT_DATES)."""
    s = source.strip().lower()
    return (s.split(" ", 1)[0] == "aic" and AIC_COPIED_IMAGE_TAG not in s
            and _measured(s) in AIC_INFERENCEMAX_IMPORT_DATES)


def copied_from_inferencemax(source: str) -> bool:
    """An "aic" source that names a container (`image=`), or that was measured on a date of an
    InferenceMAX import (AIC_INFERENCEMAX_IMPORT_DATES): an InferenceMAX measurement copied
    into AIConfigurator's file (module docstring, "Provenance")."""
    s = source.strip().lower()
    return (s.split(" ", 1)[0] == "aic" and AIC_COPIED_IMAGE_TAG in s) or _llama70b_import(s)


def _concurrency(r) -> str:
    """The run's concurrency as written: batch_size, times attention_dp_size where that is
    stated > 1 (AIConfigurator's batch per attention-DP rank, serving_map._parallel), so a
    copy that writes one run's layout without attention DP still meets its original."""
    batch = r.get("batch_size").strip()
    try:
        dp = int(r.get("attention_dp_size").strip() or 1)
        return str(int(batch) * dp) if dp > 1 else batch
    except ValueError:
        return batch


def _twin_key(r) -> tuple:
    """What a copy shares with its original (module docstring, Provenance): model, GPU, lengths,
    concurrency, and TTFT and TPOT to the 0.01 ms of the rounded copies."""
    cells = tuple(r.get(c).strip().lower() for c in ("model_path", "system", "isl", "osl")) \
        + (_concurrency(r),)
    try:
        values = tuple(f"{float(r.get(c)):.2f}" for c in ("silicon_ttft_ms", "silicon_tpot_ms"))
    except ValueError:
        return cells + ("", "")
    return cells + values


def inferencemax_twins(rows) -> set[int]:
    """Indices of the "aic" rows without image= that repeat an InferenceMAX row's measurement
    (module docstring, Provenance): rows are ServingMeasurement-like (`.get(column)`)."""
    imax = {_twin_key(r) for r in rows if family(r.get("source")) == "inferencemax"}
    return {i for i, r in enumerate(rows)
            if family(r.get("source")) == "aic" and _twin_key(r) in imax}


def family(source: str) -> Family:
    s = source.strip().lower()
    if copied_from_inferencemax(s):
        return "inferencemax"
    if s.split(" ", 1)[0] == "aic":         # AIConfigurator's gap-analysis runs
        return "aic"
    if s.startswith(("db-dump/", INFERENCEX_RUN_PREFIX)):
        return "inferencemax"
    return "other"
