"""Qwen3.5's shared-expert gate and the Gated DeltaNet's kernels."""

import json

from perfmodel.core.catalog import load_model
from perfmodel.core.catalog.hf_config import load_hf_config
from perfmodel.core.ops import LINEAR_ATTENTION_OP, ops
from perfmodel.core.params import ffn_matrices
from perfmodel.core.specs import Precision

QWEN35 = load_model("qwen3.5-397b-a17b")
BF16 = Precision.of("bf16")


def test_shared_expert_gate_is_a_d_to_1_gemv_per_moe_layer():
    # modeling_qwen3_5_moe: shared_expert_gate = nn.Linear(hidden_size, 1, bias=False);
    # 60 MoE layers x 4096 weights = 245,760 elements, read in 16 bits like the router
    gate = [x for x in ffn_matrices(QWEN35) if x.name == "shared_gate"]
    assert len(gate) == 1 and gate[0].elements == 60 * 4096 and gate[0].group == "router"
    op = next(o for o in ops(QWEN35, Precision.of("fp8"), 4.0, 1.0, 1024.0) if o.name == "shared_gate")
    assert float(op.cost.kernels) == 60 and float(op.cost.weight_bytes) == 60 * 4096 * 2


def test_models_without_the_gate_have_no_gemv():
    for mid in ("deepseek-v3", "qwen3-235b-a22b", "minimax-m2.5"):
        assert not any(x.name == "shared_gate" for x in ffn_matrices(load_model(mid)))


def test_gated_deltanet_launches_four_kernels_per_linear_layer():
    # conv1d update, gating, delta-rule recurrence, gated RMSNorm: 4 x 45 linear layers
    op = next(o for o in ops(QWEN35, BF16, 1.0, 1.0, 512.0) if o.name == LINEAR_ATTENTION_OP)
    assert float(op.cost.kernels) == 4 * 45


def test_rotary_runs_only_in_the_softmax_attention_layers():
    # Qwen3.5-397B config: 60 layers, full_attention_interval 4 -> 15 with rotary; GDN has none
    op = next(o for o in ops(QWEN35, BF16, 1.0, 1.0, 512.0) if o.name == "rotary")
    assert float(op.cost.kernels) == 15
    # a dense model keeps one rotary per layer (Llama-3.1-8B: 32 layers)
    dense = next(o for o in ops(load_model("llama-3.1-8b"), BF16, 1.0, 1.0, 512.0)
                 if o.name == "rotary")
    assert float(dense.cost.kernels) == 32


def test_hf_config_of_a_qwen_moe_with_a_shared_expert_has_the_gate(tmp_path):
    cfg = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
           "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
           "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
           "vocab_size": 151936, "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_hf_config(tmp_path / "config.json").moe.shared_expert_gate
    cfg.pop("shared_expert_intermediate_size")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert not load_hf_config(tmp_path / "config.json").moe.shared_expert_gate
