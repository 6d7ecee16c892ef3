"""FLOPs of prefill and decode (a multiply-add = 2 FLOPs). Vectorised over numpy arrays.

Matmuls: a token passing through a weight matrix of n elements costs 2n FLOPs.
Attention (per layer, nh query heads of dim dh): a query at position i scores i keys
(QK^T: 2*i*dh per head) and mixes i values (AV: 2*i*dh per head): 4*nh*dh*i FLOPs.
"""


def attention_flops_prefill(num_layers, num_heads, head_dim, prompt_len, cached_len=0):
    """Causal attention FLOPs of one sequence's prefill of ``prompt_len`` new tokens.

    Token j (1-based) of the chunk attends to cached_len + j positions, so summing 4*nh*dh*i over
    i = cached_len+1 .. cached_len+S gives 4*nh*dh*(S*cached_len + S(S+1)/2) per layer:
        L * 4 * nh * dh * (S*c + S(S+1)/2)   [FLOP]
    Llama-2-7B, S=512, c=0: 32*4*32*128*131,328 = 68.9 GFLOP (0.9 % of 2*N*S).
    """
    s = prompt_len
    return num_layers * 4.0 * num_heads * head_dim * (s * cached_len + s * (s + 1) / 2.0)


def attention_flops_decode(num_layers, num_heads, head_dim, context_len):
    """Attention FLOPs of one decode token attending to ``context_len`` positions:
    L * 4 * nh * dh * context   [FLOP]."""
    return num_layers * 4.0 * num_heads * head_dim * context_len


def prefill_flops(batch, prompt_len, per_token_matmul, lm_head, num_layers, num_heads, head_dim):
    """FLOPs to prefill ``batch`` prompts of ``prompt_len`` tokens [FLOP].

        B * (2 * P_tok * S + 2 * P_head + attention_prefill(S))
    P_tok: per-token matmul weights of the body; P_head: the LM head, applied to the last token
    only (only its logits are sampled). Spec-sheet form with num_params N: B * 2 * N * S (+attn).
    """
    return batch * (2.0 * per_token_matmul * prompt_len + 2.0 * lm_head
                    + attention_flops_prefill(num_layers, num_heads, head_dim, prompt_len))


def decode_flops_affine(batch, per_token_matmul, lm_head, num_layers, num_heads, head_dim):
    """One decode step for ``batch`` sequences at context c costs a + b*c FLOPs; returns (a, b).

        a = B * 2 * (P_tok + P_head)          (matmuls, every token through the LM head)
        b = B * L * 4 * nh * dh               (attention per position of context)
    """
    a = batch * 2.0 * (per_token_matmul + lm_head)
    b = batch * attention_flops_decode(num_layers, num_heads, head_dim, 1.0)
    return a, b
