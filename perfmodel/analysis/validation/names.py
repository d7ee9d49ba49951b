"""Free-text names in measurement tables -> perfmodel ids, by general rules only.

GPU: vendor words, capacity ("80GB"), form factor ("SXM4") and memory type are split off;
the remaining base name is looked up in GPU_ALIASES (an explicit table of base names to
hardware_db ids), and the capacity and form factor pick among that base name's variants.
Text in parentheses is commentary ("(330 W power cap)", "(doc: ...)") and never picks a card;
only a form factor or capacity written there ("A100 (PCIe card)") narrows the variants
when the name itself states none, and the row's assumptions say so. A form factor is ignored
for a card sold in one form only ("B200 SXM 180GB" -> b200).
A base name whose variant is not stated maps to the variant benchmarks most likely used
(GPU_DEFAULTS: SXM in 8-GPU servers), said in the row's assumptions; strict mapping refuses it.
A card with no entry, two different cards or one die of a package -> no id, with the reason.

Model: lowercase, '-'-joined, fine-tune suffixes (chat, instruct, hf) dropped, "llama2" ->
"llama-2", and a LLaMA without a generation number is the first generation; the result is
looked up exactly in the catalog (id or Hugging Face repo). A parenthesis that itself names a
catalog model wins (a fine-tune's name followed by its base model).

Framework -> engine preset: FRAMEWORK_ENGINES, first match wins; runtimes without a preset
of their own take the closest documented one (ENGINE_NOTES says which and why).
"""

from __future__ import annotations

import re

from perfmodel.core.catalog import alias_of, list_models, load_model
from perfmodel.core.errors import PerfModelError, closest
from perfmodel.core.hardware import list_gpus
from perfmodel.core.specs import ModelSpec
from perfmodel.core.units import GB

# base name (after normalization) -> hardware_db ids it may mean
GPU_ALIASES: dict[str, tuple[str, ...]] = {
    "h100": ("h100-sxm", "h100-pcie", "h100-nvl"),
    "h200": ("h200-sxm",),
    "a100": ("a100-sxm-80gb", "a100-sxm-40gb", "a100-pcie-80gb"),
    "b100": ("b100",), "b200": ("b200",), "gb200": ("gb200",),
    "l4": ("l4",), "l40": ("l40",), "l40s": ("l40s",), "a10": ("a10",), "a10g": ("a10g",),
    "t4": ("t4",), "v100": ("v100-sxm2-32gb",),
    "rtx 3090": ("rtx-3090",), "rtx 3090 ti": ("rtx-3090-ti",), "rtx 4090": ("rtx-4090",),
    "rtx 5090": ("rtx-5090",), "rtx a6000": ("rtx-a6000",), "rtx 6000 ada": ("rtx-6000-ada",),
    "rtx pro 6000 blackwell": ("rtx-pro-6000-blackwell",),
    "mi250x": ("mi250x",), "mi300x": ("mi300x",), "mi325x": ("mi325x",), "mi355x": ("mi355x",),
    "gaudi2": ("gaudi2",), "gaudi3": ("gaudi3",),
    "tpu v5e": ("tpu-v5e",), "tpu v5p": ("tpu-v5p",), "tpu v6e": ("tpu-v6e",),
    "m2 ultra": ("apple-m2-ultra",), "m3 max": ("apple-m3-max",), "m4 max": ("apple-m4-max",),
    "m1 pro": ("apple-m1-pro",), "m1 max": ("apple-m1-max",), "m1 ultra": ("apple-m1-ultra",),
    "m2 pro": ("apple-m2-pro",), "m2 max": ("apple-m2-max",), "m3 pro": ("apple-m3-pro",),
    "m3 ultra": ("apple-m3-ultra",), "m4 pro": ("apple-m4-pro",),
    "b300": ("b300",), "gb300": ("gb300",), "h20": ("h20",), "h800": ("h800",),
    "gh200": ("gh200",), "gb10": ("gb10",), "dgx spark": ("gb10",), "mi300a": ("mi300a",),
    "agx orin": ("jetson-agx-orin-64gb",), "rx 7900 xtx": ("rx-7900-xtx",),
    "rtx 5080": ("rtx-5080",), "rtx 5070 ti": ("rtx-5070-ti",),
}
# base name -> (variant assumed when the row does not state one, why)
GPU_DEFAULTS: dict[str, tuple[str, str]] = {
    "a100": ("a100-sxm-80gb", "A100 variant not stated: SXM4 80GB assumed (the part of 8-GPU "
                              "HGX/DGX servers most benchmarks ran on)"),
    "h100": ("h100-sxm", "H100 variant not stated: SXM5 80GB assumed (the part of 8-GPU "
                         "HGX/DGX servers most benchmarks ran on)"),
    "agx orin": ("jetson-agx-orin-64gb", "AGX Orin module not stated: the 64 GB "
                                                "developer kit assumed (a 32 GB module exists)"),
}
# base name -> capacity (GB) naming the package's CPU memory, not the GPU's
_HOST_MEMORY_GB = {"gh200": 480.0}
_VENDOR_WORDS = r"\b(nvidia|amd|intel|google|apple|geforce|radeon|instinct|tesla|habana|jetson)\b"
_EDITION = r"\b(server|workstation|max-q)\s+edition\b|\bedition\b"
_MEMTYPE = r"\b(hbm2e?|hbm3e?|gddr6x?|gddr7)\b"
_FORMS = {"sxm": r"\bsxm\d?\b", "pcie": r"\bpcie\b", "nvl": r"\bnvl\b"}
_CAPACITY = re.compile(r"\b(\d+(?:\.\d+)?)\s*gb\b")
_CAPACITY_TOLERANCE = 0.08   # preliminary and shipping capacities differ by a few %
_PACKAGE_PART = re.compile(r"\b(gcd|single die|one die)\b")

# framework text (lowercase, regex at the start or anywhere) -> engine preset
FRAMEWORK_ENGINES: tuple[tuple[str, str], ...] = (
    (r"(tensorrt-llm|trt-?llm) v0\.", "trtllm-trt"),   # TensorRT engine backend, before 1.0
    (r"tensorrt-llm|trt-?llm", "trtllm"),
    (r"gpt-fast", "torch-compile"),
    (r"^vllm", "vllm"),
    (r"^sglang", "sglang"),
    (r"^(hugging ?face )?(tgi|text[- ]generation[- ]inference)\b", "tgi"),
    (r"^lmdeploy\b.*\bpytorch\b", "lmdeploy-pytorch"),   # its PyTorch engine (--backend pytorch)
    (r"^lmdeploy|turbomind", "lmdeploy"),
    (r"^hf transformers|^hugging ?face|^transformers", "hf-eager"),
    (r"^llama\.cpp|^ollama", "llama-cpp"),
    (r"^exllama", "llama-cpp"),
    (r"^tinychat", "llama-cpp"),
    (r"^mlc", "torch-compile"),
    (r"torch\.compile", "torch-compile"),
    (r"cuda graph", "torch-graph"),
    (r"pytorch eager|torch eager", "torch-eager"),
)
ENGINE_NOTES = {
    "exllama": "ExLlama (v1/v2) -> llama-cpp: hand-written fused CUDA kernels for 4-bit "
               "weights, C++-level dispatch, KV preallocated for the whole context.",
    "tinychat": "TinyChat -> llama-cpp: fused W4A16 AWQ kernels and fused attention, "
                "KV preallocated, no serving scheduler.",
    "mlc": "MLC LLM -> torch-compile: ahead-of-time compiled (TVM) graph with fused "
           "kernels, weight-only 4-bit matmuls, static KV.",
    "torch.compile mode=": "torch.compile without CUDA graphs -> torch-compile, whose preset "
                           "assumes graph replay (mode=reduce-overhead); a calibrated profile "
                           "overrides its launch cost for the mode actually run.",
}


def gpu_id(text: str, strict: bool = False) -> tuple[str | None, str, list[str]]:
    """(hardware_db id or None, reason if None, assumptions). `strict` refuses a variant that
    is not stated instead of assuming GPU_DEFAULTS."""
    raw = text.strip()
    low = raw.lower().replace("_", " ")
    assumptions: list[str] = []
    cap = re.search(r"(\d+)\s*w\s+power\s+cap", low)
    if cap:
        assumptions.append(f"{cap.group(1)} W power cap not modelled (datasheet clocks)")
    if "+" in low:
        return None, f"mixed GPUs in one run ({raw!r})", assumptions
    if _PACKAGE_PART.search(low):
        return None, f"one die of a multi-die package ({raw!r}); hardware_db lists packages", assumptions
    main = re.sub(r"\([^)]*\)", " ", low)
    note = " ".join(re.findall(r"\(([^)]*)\)", low))
    capacity = _CAPACITY.search(main)
    main = _CAPACITY.sub(" ", main)
    forms = [f for f, pat in _FORMS.items() if re.search(pat, main)]
    for pat in (_VENDOR_WORDS, _EDITION, _MEMTYPE, *_FORMS.values()):
        main = re.sub(pat, " ", main)
    base = " ".join(main.replace("-", " ").split())
    if base not in GPU_ALIASES:
        return None, f"GPU {raw!r} is not in hardware_db", assumptions
    if not forms and not capacity:   # the note may still state a form factor or capacity
        forms = [f for f, pat in _FORMS.items() if re.search(pat, note)]
        capacity = _CAPACITY.search(note)
        if forms or capacity:
            assumptions.append(f"variant read from the note in {raw!r}")
    if capacity and _HOST_MEMORY_GB.get(base) == float(capacity.group(1)):
        assumptions.append(f"{capacity.group(0)} in {raw!r} is the package's CPU memory, "
                           "not the GPU's")
        capacity = None
    known = {g.id: g for g in list_gpus()}
    cands = [known[i] for i in GPU_ALIASES[base] if i in known]
    if forms and any(f in g.id for g in cands for f in _FORMS):   # sold in several forms
        cands = [g for g in cands if any(f in g.id for f in forms)]
    if capacity:
        want = float(capacity.group(1))
        cands = [g for g in cands if abs(g.memory_bytes / GB / want - 1) <= _CAPACITY_TOLERANCE]
    default = GPU_DEFAULTS.get(base)
    unstated = default is not None and (len(cands) > 1 or not (forms or capacity))
    if len(cands) == 1 and not unstated:
        return cands[0].id, "", assumptions
    if not cands:
        return None, f"GPU {raw!r}: no hardware_db variant of {base!r} matches", assumptions
    if not strict and default is not None and default[0] in {g.id for g in cands}:
        return default[0], "", assumptions + [default[1]]
    return None, (f"GPU {raw!r}: variant not stated (could be "
                  f"{', '.join(g.id for g in cands)})"), assumptions


def _model_key(text: str) -> str:
    s = text.lower().strip()
    s = re.sub(r"\b(target|draft)\b", " ", s)
    s = re.sub(r"[\s_]+", "-", s.strip())
    s = re.sub(r"-(chat|instruct|hf|base|it)(?=-|$)", "", s)
    s = re.sub(r"^llama(\d)", r"llama-\1", s)
    s = re.sub(r"^llama-(\d+(?:\.\d+)?b)$", r"llama-1-\1", s)   # LLaMA 7B = first generation
    return s.strip("-")


def model_id(text: str) -> tuple[ModelSpec | None, str]:
    """(catalog model or None, reason if None) for a model name as written in a table."""
    target = text.split("+")[0]
    inner = re.findall(r"\(([^)]*)\)", target)
    candidates = [_model_key(x) for x in inner] + [_model_key(re.sub(r"\([^)]*\)", " ", target))]
    for key in candidates:
        if not key:
            continue
        try:
            return load_model(key), ""
        except PerfModelError:
            continue
    key = candidates[-1]
    close = closest(key, [m.id for m in list_models()], n=3)
    hint = f" (closest: {', '.join(close)})" if close else ""
    return None, f"unknown model {text.strip()!r} -> {key!r} is not in the catalog{hint}"


def model_alias_notes(text: str) -> list[str]:
    """The row's assumption when its model name resolved through a fine-tune alias."""
    target = text.split("+")[0]
    keys = [_model_key(x) for x in re.findall(r"\(([^)]*)\)", target)]
    keys.append(_model_key(re.sub(r"\([^)]*\)", " ", target)))
    for key in keys:
        alias = alias_of(key)
        if alias is not None:
            return [f"model {text.strip()!r}: fine-tune alias of {alias[0]} ({alias[1]})"]
    return []


def engine_id(text: str) -> tuple[str | None, str, list[str]]:
    """(engine preset or None, reason if None, assumptions) for a framework column."""
    low = text.lower().strip()
    for pat, eng in FRAMEWORK_ENGINES:
        if re.search(pat, low):
            notes = [v for k, v in ENGINE_NOTES.items() if low.startswith(k)]
            return eng, "", notes
    return None, f"framework {text.strip()!r} has no engine preset", []
