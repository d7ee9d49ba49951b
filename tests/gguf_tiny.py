"""Write a tiny random-weight Llama GGUF that llama.cpp loads, tokenizes and serves.

Vocabulary: a SentencePiece-style ("llama") character vocabulary — <unk>, <s>, </s>, the
256 byte-fallback tokens <0x00>..<0xFF>, "▁" (the SentencePiece space) and the printable
ASCII characters — so any text tokenizes (one token per character) and detokenizes.
The lm_head rows of every token except the printable characters are zero, and the others
are large random vectors, so greedy decoding always emits a printable character and never
</s>: every request generates exactly max_tokens tokens. Timing depends on shapes, not values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPACE = "\u2581"  # SentencePiece's visible space
PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) with gguf.TokenType values."""
    from gguf import TokenType

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [SPACE] + PRINTABLE
    types = ([TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
             + [TokenType.NORMAL] * (1 + len(PRINTABLE)))
    scores = [0.0] * 259 + [-float(i) for i in range(1 + len(PRINTABLE))]
    return tokens, scores, [int(t) for t in types]


# weight storage: name -> (GGUF file type, tensor type); norms stay float32 in every case
DTYPES = {"f32": (0, "F32"), "f16": (1, "F16"), "q8_0": (7, "Q8_0")}


def write_tiny_llama(path: Path, *, d_model: int = 64, layers: int = 2, heads: int = 4,
                     kv_heads: int = 2, ffn: int = 128, context: int = 2048, seed: int = 0,
                     dtype: str = "f32") -> Path:
    """Write the GGUF to `path` and return the path. The defaults give a few hundred kB of
    float32; larger shapes and dtype "f16" or "q8_0" (llama.cpp's 8-bit blocks: 32 int8 and one
    f16 scale, 8.5 bits per weight) give a model big enough to measure (write_random_llama)."""
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    file_type, qname = DTYPES[dtype]
    qtype = getattr(GGMLQuantizationType, qname)

    tokens, scores, types = vocabulary()
    vocab, head_dim = len(tokens), d_model // heads
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, std: float = 0.02) -> np.ndarray:
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)  # (out, in)

    def add(name: str, data: np.ndarray) -> None:
        """A weight matrix in the chosen dtype (vectors and embeddings stay float32)."""
        if qname == "F32" or data.ndim == 1:
            w.add_tensor(name, data)
        elif qname == "F16":
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)

    w = GGUFWriter(str(path), "llama")
    w.add_name("perfmodel-tiny-random")
    w.add_context_length(context)
    w.add_embedding_length(d_model)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(file_type)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")

    ones = np.ones(d_model, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(vocab, d_model, 1.0))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        add(f"blk.{i}.attn_q.weight", mat(heads * head_dim, d_model))
        add(f"blk.{i}.attn_k.weight", mat(kv_heads * head_dim, d_model))
        add(f"blk.{i}.attn_v.weight", mat(kv_heads * head_dim, d_model))
        add(f"blk.{i}.attn_output.weight", mat(d_model, heads * head_dim))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        add(f"blk.{i}.ffn_gate.weight", mat(ffn, d_model))
        add(f"blk.{i}.ffn_up.weight", mat(ffn, d_model))
        add(f"blk.{i}.ffn_down.weight", mat(d_model, ffn))
    w.add_tensor("output_norm.weight", ones)
    head = mat(vocab, d_model, 1.0)
    head[: vocab - len(PRINTABLE)] = 0.0  # only printable characters can win greedy decoding
    add("output.weight", head)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def random_llama_bytes(d_model: int, layers: int, heads: int, kv_heads: int, ffn: int,
                       dtype: str) -> float:
    """Bytes of the layer weight matrices (what one decode step streams), excluding norms and
    the tiny vocabulary's embedding and head."""
    head_dim = d_model // heads
    per_layer = (2 * d_model * heads * head_dim          # q, o
                 + 2 * d_model * kv_heads * head_dim      # k, v
                 + 3 * d_model * ffn)                     # gate, up, down
    bits = {"f32": 32, "f16": 16, "q8_0": 8.5}[dtype]
    return layers * per_layer * bits / 8


def write_random_llama(path: Path, *, d_model: int = 2048, layers: int = 8, heads: int = 16,
                       kv_heads: int = 4, ffn: int = 1536, dtype: str = "f16", seed: int = 0,
                       context: int = 2048) -> Path:
    """A random Llama of a few hundred MB (defaults: ~0.3 GB of f16 layer weights) whose decode
    on a CPU streams its weights from DRAM. Same vocabulary and greedy behaviour as the tiny one."""
    return write_tiny_llama(path, d_model=d_model, layers=layers, heads=heads, kv_heads=kv_heads,
                            ffn=ffn, context=context, seed=seed, dtype=dtype)
