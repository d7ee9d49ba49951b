"""Fine-tunes that keep their base model's architecture: an alias names the base catalog entry.

A fine-tune (Vicuna, Code Llama - Python, WizardLM, ...) changes weights, not shapes, so its
cost is its base model's. `load_model("vicuna-7b")` returns the base spec (its id stays the
base's, so results say what was modelled); `alias_of` says which alias resolved to what and why.
"""

from __future__ import annotations

# alias (lowercase) -> (catalog id, why: the fine-tune's published base model)
ALIASES: dict[str, tuple[str, str]] = {
    "vicuna-7b": ("llama-2-7b", "Vicuna v1.5 7B is fine-tuned from Llama 2 7B (lmsys/vicuna-7b-v1.5 card)"),
    "vicuna-13b": ("llama-2-13b", "Vicuna v1.5 13B is fine-tuned from Llama 2 13B (lmsys/vicuna-13b-v1.5 card)"),
    "vicuna-7b-v1.3": ("llama-1-7b", "Vicuna v1.3 7B is fine-tuned from LLaMA 7B (lmsys/vicuna-7b-v1.3 card)"),
    "vicuna-13b-v1.3": ("llama-1-13b", "Vicuna v1.3 13B is fine-tuned from LLaMA 13B (lmsys/vicuna-13b-v1.3 card)"),
    "vicuna-33b": ("llama-1-33b", "Vicuna v1.3 33B is fine-tuned from LLaMA 33B (lmsys/vicuna-33b-v1.3 card)"),
    "codellama-7b-python": ("codellama-7b", "Code Llama - Python 7B: same shapes as Code Llama 7B (Code Llama paper, arXiv:2308.12950)"),
    "codellama-13b-python": ("codellama-13b", "Code Llama - Python 13B: same shapes as Code Llama 13B (arXiv:2308.12950)"),
    "codellama-34b-python": ("codellama-34b", "Code Llama - Python 34B: same shapes as Code Llama 34B (arXiv:2308.12950)"),
    "wizardlm-13b": ("llama-2-13b", "WizardLM-13B-V1.2 is fine-tuned from Llama 2 13B (WizardLM/WizardLM-13B-V1.2 card)"),
    "wizardlm-70b": ("llama-2-70b", "WizardLM-70B-V1.0 is fine-tuned from Llama 2 70B (WizardLM/WizardLM-70B-V1.0 card)"),
    "zephyr-7b": ("mistral-7b", "Zephyr-7B-beta is fine-tuned from Mistral 7B v0.1 (HuggingFaceH4/zephyr-7b-beta card)"),
    "openchat-3.5": ("mistral-7b", "OpenChat 3.5 is fine-tuned from Mistral 7B v0.1 (openchat/openchat_3.5 card)"),
    "deepseek-r1-distill-llama-70b": ("llama-3.3-70b", "DeepSeek-R1-Distill-Llama-70B is distilled into Llama-3.3-70B-Instruct (DeepSeek-R1 card)"),
    "deepseek-r1-distill-llama-8b": ("llama-3.1-8b", "DeepSeek-R1-Distill-Llama-8B is distilled into Llama-3.1-8B (DeepSeek-R1 card)"),
    "deepseek-r1-distill-qwen-7b": ("qwen2.5-7b", "DeepSeek-R1-Distill-Qwen-7B is distilled into Qwen2.5-Math-7B, the Qwen2.5-7B shapes (DeepSeek-R1 card)"),
    "deepseek-r1-distill-qwen-14b": ("qwen2.5-14b", "DeepSeek-R1-Distill-Qwen-14B is distilled into Qwen2.5-14B (DeepSeek-R1 card)"),
    "deepseek-r1-distill-qwen-32b": ("qwen2.5-32b", "DeepSeek-R1-Distill-Qwen-32B is distilled into Qwen2.5-32B (DeepSeek-R1 card)"),
    "deepseek-v3-0324": ("deepseek-v3", "DeepSeek-V3-0324 is a V3 checkpoint (same config.json)"),
    "kimi-k2-thinking": ("kimi-k2", "Kimi-K2-Thinking keeps the Kimi-K2 architecture (moonshotai/Kimi-K2-Thinking config)"),
    "mistral-small-3.1": ("mistral-small-3", "Mistral Small 3.1 (2503) keeps the Mistral Small 3 text model and adds vision"),
    "mistral-small-3.2": ("mistral-small-3", "Mistral Small 3.2 (2506) keeps the Mistral Small 3 text model and adds vision"),
    # checkpoints published under other repo ids: instruct tunes and quantized copies keep the
    # base shapes (the number format is the caller's choice, not the alias's)
    "meta-llama/llama-3.1-8b-instruct": ("llama-3.1-8b", "instruct fine-tune of Llama-3.1-8B (same config.json shapes)"),
    "meta-llama/llama-3.1-70b-instruct": ("llama-3.1-70b", "instruct fine-tune of Llama-3.1-70B (same config.json shapes)"),
    "nvidia/llama-3.1-8b-instruct-fp8": ("llama-3.1-8b", "NVIDIA ModelOpt FP8 checkpoint of Llama-3.1-8B-Instruct (same shapes)"),
    "qwen/qwen3-235b-a22b-fp8": ("qwen3-235b-a22b", "Qwen's FP8 block-scaled checkpoint of Qwen3-235B-A22B (same shapes)"),
    "nvidia/qwen3-32b-nvfp4": ("qwen3-32b", "NVIDIA ModelOpt NVFP4 checkpoint of Qwen3-32B (same shapes)"),
    "nvidia/deepseek-v3.1-nvfp4": ("deepseek-v3.1", "NVIDIA ModelOpt NVFP4 checkpoint of DeepSeek-V3.1 (same shapes)"),
    "mistralai/mistral-large-3-675b-base-2512": ("mistral-large-3", "base pre-trained Mistral Large 3 (same params.json shapes as the 2512 instruct)"),
    "mistralai/mistral-large-3-675b-instruct-2512-bf16": ("mistral-large-3", "BF16 copy of Mistral-Large-3-675B-Instruct-2512 (same shapes; model card)"),
    "mistralai/mistral-large-3-675b-instruct-2512-nvfp4": ("mistral-large-3", "NVFP4 checkpoint of Mistral-Large-3-675B-Instruct-2512 (same shapes; vLLM recipe Mistral/Mistral-Large-3.md)"),
    "zhipuai/glm-5": ("glm-5", "zhipuai is the former Hugging Face organization of Z.ai (zai-org); same GLM-5 checkpoint"),
}


def alias_of(query: str) -> tuple[str, str] | None:
    """(catalog id, why) if `query` is an alias (case-insensitive), else None."""
    return ALIASES.get(str(query).strip().lower())
