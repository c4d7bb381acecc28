"""Planted bugs of `flops` (each must make a flops test fail): the accounting mistakes of 02.02."""
from conformance.declarations import Patch

_ATTENTION = "    attention = 2 * batch * c.n_heads * new_tokens * keys * c.head_dim * c.n_layers\n"
_PROJECTIONS = '"attention_projections": 2 * rows * c.dim * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) * c.n_layers,'

MUTANTS = [
    # FLOPs
    Patch("no_factor_two",
          "Counts multiply-adds, not FLOPs: every matmul as m x n x k instead of 2 x m x n x k.",
          _ATTENTION + "    return {\n"
          "        " + _PROJECTIONS + "\n"
          "        \"attention_scores\": attention,\n"
          "        \"attention_values\": attention,\n"
          "        \"mlp\": 2 * rows * 3 * c.dim * c.hidden_dim * c.n_layers,\n"
          "        \"lm_head\": 2 * rows * c.dim * c.vocab_size,\n",
          "    attention = batch * c.n_heads * new_tokens * keys * c.head_dim * c.n_layers\n"
          "    return {\n"
          "        \"attention_projections\": rows * c.dim * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) * c.n_layers,\n"
          "        \"attention_scores\": attention,\n"
          "        \"attention_values\": attention,\n"
          "        \"mlp\": rows * 3 * c.dim * c.hidden_dim * c.n_layers,\n"
          "        \"lm_head\": rows * c.dim * c.vocab_size,\n"),
    Patch("gqa_kv_with_q_heads",
          "Counts the K and V projections with the query heads (MHA's count): wrong for GQA/MQA, "
          "where k_proj and v_proj have n_kv_heads x head_dim outputs.",
          _PROJECTIONS,
          '"attention_projections": 2 * rows * c.dim * c.head_dim * (4 * c.n_heads) * c.n_layers,'),
    Patch("no_lm_head",
          "Omits the LM head (the d x V matmul after the last layer): counts only the layers.",
          '        "lm_head": 2 * rows * c.dim * c.vocab_size,\n',
          '        "lm_head": 0,\n'),
    Patch("decode_full_square",
          "Counts the attention scores as the full S x S square (S = context + new tokens) even in "
          "decode, where the new token is one query row against S keys.",
          _ATTENTION,
          "    attention = 2 * batch * c.n_heads * keys * keys * c.head_dim * c.n_layers\n"),
    Patch("causal_half_scores",
          "Counts only the causally visible scores (the triangle FlashAttention's causal kernel "
          "computes), not the full rectangle the reference's masked matmul computes.",
          _ATTENTION,
          "    attention = 2 * batch * c.n_heads * (new_tokens * (2 * context + new_tokens + 1) // 2) "
          "* c.head_dim * c.n_layers\n"),
    Patch("keys_exclude_new",
          "The new tokens attend to the cached context only (off by the new token itself: decode "
          "against N cached tokens counted as N keys, not N + 1).",
          "    keys = context + new_tokens\n",
          "    keys = context if context else new_tokens\n"),
    Patch("mlp_two_matrices",
          "Counts a two-matrix (GELU) MLP: forgets SwiGLU's third matrix (gate and up are both d x F).",
          '        "mlp": 2 * rows * 3 * c.dim * c.hidden_dim * c.n_layers,\n',
          '        "mlp": 2 * rows * 2 * c.dim * c.hidden_dim * c.n_layers,\n'),
    Patch("head_dim_from_dim",
          "Takes head_dim as dim // n_heads in the attention count: wrong when the config gives "
          "head_dim explicitly (Gemma, Qwen3: n_heads x head_dim != dim).",
          _ATTENTION,
          "    attention = 2 * batch * c.n_heads * new_tokens * keys * (c.dim // c.n_heads) * c.n_layers\n"),
    # bytes
    Patch("kv_bytes_with_q_heads",
          "Sizes the KV cache with the query heads: ignores GQA's n_kv_heads (the whole point of 03.05).",
          "    kv_position = 2 * c.n_layers * c.n_kv_heads * c.head_dim * batch * element\n",
          "    kv_position = 2 * c.n_layers * c.n_heads * c.head_dim * batch * element\n"),
    Patch("whole_embedding_read",
          "Counts the whole embedding table as read every pass: a lookup reads only the rows of the "
          "pass's tokens.",
          '        "weights": (parameter_count(c) - c.vocab_size * c.dim + rows * c.dim) * element,\n',
          '        "weights": parameter_count(c) * element,\n'),
    Patch("bytes_assume_fp16",
          "Hard-codes 2 bytes per element (fp16/bf16): wrong for a float32 or float64 model.",
          "    element = torch.empty((), dtype=c.dtype).element_size()\n",
          "    element = 2\n"),
    Patch("kv_read_includes_new",
          "Counts the new tokens' K/V as read back from the cache as well as written (the contract "
          "reads only the context's positions).",
          '        "kv_read": kv_position * context,\n',
          '        "kv_read": kv_position * (context + new_tokens),\n'),
    Patch("intensity_floor_division",
          "Arithmetic intensity by integer division: a decode step's 0.99 FLOPs per byte becomes 0.",
          "    return forward_flops(config, batch=batch, new_tokens=new_tokens, context=context) / forward_bytes(",
          "    return forward_flops(config, batch=batch, new_tokens=new_tokens, context=context) // forward_bytes("),
    # parameters and arguments
    Patch("param_count_no_norms",
          "parameter_count forgets the RMSNorm weights (2d per layer and d for the final norm).",
          "3 * c.dim * c.hidden_dim + 2 * c.dim\n",
          "3 * c.dim * c.hidden_dim\n"),
    Patch("tied_embeddings",
          "parameter_count counts the embedding table and the LM head once (tied, as Llama-3.2-1B): "
          "the reference model's LM head is its own V x d matrix.",
          "    return 2 * c.vocab_size * c.dim + c.n_layers * per_layer + c.dim\n",
          "    return c.vocab_size * c.dim + c.n_layers * per_layer + c.dim\n"),
    Patch("full_model_rejected",
          "The max_seq_len check uses >=: a pass whose last position is max_seq_len - 1 (it fills "
          "the model exactly) is rejected.",
          "    if context + new_tokens > config.max_seq_len:\n",
          "    if context + new_tokens >= config.max_seq_len:\n"),
]
