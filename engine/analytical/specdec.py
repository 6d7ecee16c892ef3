"""Speculative decoding with a draft model or multi-token-prediction (MTP) heads.

Each step drafts gamma tokens, then the target verifies all of them in one pass of gamma + 1
query tokens per sequence. With each draft token accepted independently with probability alpha,
the tokens emitted per step (accepted prefix + the target's own next token) have the mean
    E[tokens] = (1 - alpha^(gamma+1)) / (1 - alpha)          (Leviathan et al., ICML 2023, eq. 1)
Costs per step: drafting gamma x draft_cost_fraction x t_target_step(B) (draft model: a small
model's decode steps; MTP: the extra heads' passes) + verification t_target(B, q = gamma + 1).
    TPOT = (draft + verify) / E[tokens];  throughput = B E[tokens] / (draft + verify)
"""

import numpy as np


def expected_tokens(acceptance, gamma):
    """Mean tokens emitted per speculative step: (1 - a^(g+1)) / (1 - a)."""
    a = np.asarray(acceptance, dtype=float)
    return (1.0 - a ** (gamma + 1)) / (1.0 - a)


def tpot(step_s, verify_s, gamma, draft_cost_fraction, acceptance):
    """TPOT with speculation [s]: (gamma x fraction x step + verify) / E[tokens]."""
    return (gamma * draft_cost_fraction * step_s + verify_s) / expected_tokens(acceptance, gamma)
