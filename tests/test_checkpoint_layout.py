"""A MoE checkpoint that quantizes only its routed experts keeps that layout in validation."""

from perfmodel.analysis.validation.serving_map import Capabilities, ServingTarget, map_serving_row
from perfmodel.analysis.validation.serving_table import rows_from_dicts
from perfmodel.core.catalog import load_model
from perfmodel.core.catalog.hf_config import checkpoint_weights
from perfmodel.core.memory import weight_bytes_by_group
from perfmodel.core.specs import Deployment, Precision


def _map(**over):
    row = dict(id="t", backend="vllm", backend_version="1.0", model_path="moonshotai/Kimi-K2.5",
               system="h200_sxm", precision="int4", mode="agg", isl="1024", osl="1024",
               gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo", batch_size="4", tp_size="8",
               pp_size="1", attention_dp_size="1", moe_tp_size="8", moe_ep_size="1",
               silicon_ttft_ms="100", silicon_tpot_ms="10", source="test")
    row.update({k: str(v) for k, v in over.items()})
    return map_serving_row(rows_from_dicts("t", [row])[0], Capabilities())


def test_kimi_int4_rows_keep_bf16_attention_and_int4_g32_experts():
    # Kimi-K2.5 config.json quantization_config (compressed-tensors, pack-quantized): int4 weights
    # in groups of 32; ignore lm_head, self_attn, shared_experts and the dense mlp projections
    t = _map()
    assert isinstance(t, ServingTarget)
    assert (t.weights, t.activations, t.kv) == ("bf16,experts=int4-g32", "bf16", "bf16")
    assert any("routed experts" in a for a in t.assumptions)
    assert not any("128 assumed" in a for a in t.assumptions)


def test_other_formats_of_the_same_model_are_not_rewritten():
    # nvidia's NVFP4 checkpoint is a different file: the row's own format stands
    t = _map(model_path="nvidia/Kimi-K2.5-NVFP4", precision="fp4", gemm_quant_mode="nvfp4",
             moe_quant_mode="nvfp4")
    assert (t.weights, t.activations) == ("fp4-g16", "fp4")


def test_checkpoints_without_an_expert_layout_are_unchanged():
    # DeepSeek-V3's checkpoint quantizes every linear layer (fp8-b128): no module layout to keep
    t = _map(model_path="deepseek-ai/DeepSeek-V3", precision="fp8", gemm_quant_mode="fp8",
             moe_quant_mode="fp8_block", backend="sglang")
    assert (t.weights, t.activations, t.kv) == ("fp8-b128", "fp8", "fp8")


def test_the_layout_reads_more_bytes_than_all_int4():
    # attention and shared experts at 2 bytes instead of ~0.52, experts with a scale per 32
    # weights instead of per 128: every group is at least as heavy, experts and total strictly
    m = load_model("kimi-k2.5")
    layout = weight_bytes_by_group(m, Precision.of("bf16,experts=int4-g32"), Deployment())
    flat = weight_bytes_by_group(m, Precision.of("int4-g128", None, "bf16"), Deployment())
    assert all(layout[g] >= flat[g] for g in flat)
    assert layout["experts"] > flat["experts"]
    assert layout["attention"] > 3.5 * flat["attention"]   # 16 bits vs ~4.1
    assert sum(layout.values()) > sum(flat.values())


KIMI_QC = {"quant_method": "compressed-tensors", "format": "pack-quantized",
           "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                         "weights": {"num_bits": 4, "type": "int",
                                                     "group_size": 32, "strategy": "group",
                                                     "symmetric": True}}},
           "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                      "re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*"]}


def test_hf_quantization_config_gives_the_catalog_layout():
    # the compressed-tensors block of Kimi-K2.5's config.json (int4, group 32, attention and
    # shared experts ignored) reads as the layout the catalog records
    assert checkpoint_weights(KIMI_QC) == load_model("kimi-k2.5").checkpoint_weights
    all_linear = {**KIMI_QC, "ignore": ["lm_head"]}
    assert checkpoint_weights(all_linear) is None            # not an experts-only layout
    w8a8 = {**KIMI_QC, "config_groups": {"g": {**KIMI_QC["config_groups"]["group_0"],
                                               "input_activations": {"num_bits": 8}}}}
    assert checkpoint_weights(w8a8) is None                  # activations quantized: not W4A16
