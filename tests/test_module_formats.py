"""Per-module weight formats: parsing, bytes per module, compute dtype per kernel, HF configs."""

import pytest

from perfmodel.cli import main
from perfmodel.core.catalog import load_model
from perfmodel.core.catalog.hf_config import checkpoint_weights
from perfmodel.core.efficiency import SUSTAINED_CLOCK_FRACTION, default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.grouped_gemm import expert_depth_factor, grouped_gemm_efficiency
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import weight_bytes_by_group
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision, parse_format, parse_weights


def test_weights_syntax():
    assert parse_weights("fp8") == ("fp8", {})
    assert parse_weights("attention=bf16,experts=fp4") == (None, {"attention": "bf16", "experts": "fp4"})
    assert parse_weights("fp8+experts=fp4") == ("fp8", {"experts": "fp4"})
    p = Precision.of("bf16,experts=fp4")
    assert p.label == "W:bf16,experts=fp4 A:bf16 KV:bf16"
    assert p.for_group("experts").weights.name == "fp4"
    assert p.for_group("experts").activations.name == "fp4"      # NVFP4/MXFP4 kernels: W4A4
    assert p.for_group("shared_experts").weights.name == "bf16"  # mlp module not overridden
    assert Precision.of("fp8") == Precision.of("fp8").for_group("experts")


@pytest.mark.parametrize("text,needle", [
    ("moe=fp4", "unknown module 'moe'"),
    ("fp8,fp4,experts=fp8", "one default format"),
    ("experts=fp4,experts=fp8", "given twice"),
    ("experts=int3", "unknown precision"),
])
def test_bad_weight_specs_name_what_is_wrong(text, needle):
    with pytest.raises(ValueError, match=needle):
        Precision.of(text)


def test_mixed_format_bytes_are_the_sum_over_modules():
    # gpt-oss-20b config.json: 24 layers, d_model 2880, 32 experts of ffn 2880 (gate+up, down)
    # -> routed expert weights 24 * 32 * 3 * 2880^2 elements, stored in MXFP4:
    # 4 bits + an 8-bit scale per 32 elements = 4.25 bits = 0.53125 bytes (OCP MX spec);
    # everything else (attention, router, norms, embedding, lm_head) in bf16 = 2 bytes.
    m = load_model("gpt-oss-20b")
    experts = 24 * 32 * 3 * 2880**2
    full = weight_bytes_by_group(m, Precision.of("bf16"), Deployment())
    mixed = weight_bytes_by_group(m, Precision.of("bf16,experts=fp4"), Deployment())
    assert mixed["experts"] == pytest.approx(experts * 0.53125)
    rest = sum(full.values()) - experts * 2
    assert sum(mixed.values()) == pytest.approx(experts * 0.53125 + rest)
    assert mixed["attention"] == full["attention"]


def test_fp8_block_scales_add_one_fp32_per_128x128_block():
    # DeepSeek-V3 config.json: weight_block_size [128, 128], one fp32 scale per block
    f = parse_format("fp8-b128")
    assert f.bytes_per_element == pytest.approx((8 + 32 / 128**2) / 8)
    assert f.label == "fp8-b128"


def test_each_kernel_runs_in_its_module_format():
    # B200: fp4 tensor cores exist; the experts' GEMM runs at the fp4 peak, attention at bf16
    m, hw, eng = load_model("gpt-oss-20b"), load_gpu("b200"), ENGINES["trtllm"]
    eff = default_efficiency(hw)
    est = step_time(m, hw, Precision.of("bf16,experts=fp4"), eng, eff, 4096, 1, 0)
    ops = {o.name: o for o in est.ops}
    e, q = ops["experts"], ops["q_proj"]
    # achieved FLOP/s = the module's peak x its kernel's efficiency at its rows: q_proj sees
    # 4096 rows (e_gemm); the experts 4096 x 4 routed rows over all 32 experts (every expert is
    # touched) = 512 rows each, in the grouped kernel (core/grouped_gemm.py)
    # (each at its dtype's curve: BLACKWELL_GEMM_BY_DTYPE on a B200), at the clock a B200
    # holds under sustained load (core/efficiency.py SUSTAINED_CLOCK_FRACTION)
    clock = SUSTAINED_CLOCK_FRACTION
    assert q.flops / q.compute_s == pytest.approx(hw.peak_flops_per_s["bf16"] * clock
                                                  * eff.for_gemm("bf16").gemm(4096))
    grouped = (grouped_gemm_efficiency(eff.for_gemm("fp4"), 512, 4)
               / expert_depth_factor(m, Deployment()))
    assert e.flops / e.compute_s == pytest.approx(hw.peak_flops_per_s["fp4"] * clock * grouped,
                                                  rel=1e-6)
    assert est.compute_dtype == "bf16"


def test_quantization_config_of_published_checkpoints():
    # openai/gpt-oss-120b config.json
    assert checkpoint_weights({"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]}) == "bf16,experts=fp4"
    # deepseek-ai/DeepSeek-V3 config.json
    assert checkpoint_weights({"activation_scheme": "dynamic", "fmt": "e4m3",
                               "quant_method": "fp8", "weight_block_size": [128, 128]}) == "fp8-b128"
    assert checkpoint_weights(None) is None
    assert checkpoint_weights({"quant_method": "gptq-something"}) is None
    assert load_model("gpt-oss-120b").checkpoint_weights == "bf16,experts=fp4"


def test_cli_accepts_module_formats_and_refuses_bad_ones(capsys):
    base = ["predict", "--model", "gpt-oss-20b", "--gpu", "h100-sxm", "--batch", "1",
            "--prompt", "64", "--output", "8"]
    assert main(base + ["--weights", "attention=bf16,experts=fp4"]) == 0
    assert main(base + ["--weights", "checkpoint"]) == 0
    capsys.readouterr()
    assert main(base + ["--weights", "experts=fp4,moe=fp8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown module 'moe'" in err
