"""Time of one forward pass (an iteration of a serving engine) for an arbitrary batch composition.

The discrete-event engine asks this for every iteration: a mix of prefill chunks and decode tokens.
Every cost of the pass is linear in four aggregates of the batch, so the model is a handful of
constants fixed per configuration (``StepModel.from_specs``) and a few multiply-adds per call:

    tokens      T = sum of prefill chunk tokens + number of decode sequences
    logits      n = sequences that emit a token this pass (decode sequences + finished prompts)
    attn_pairs  P = sum over tokens of positions attended:
                    decode token at context c: c;
                    prefill chunk of s tokens after k cached: s*k + s(s+1)/2
    kv_read     R = cached KV positions read: decode: c each; prefill chunk: k

    FLOPs  = 2 P_tok T + 2 P_head n + 4 L nh dh P
    bytes  = weights streamed(T) + kvpt (R + T) + act_bytes * act_elems * T
    time   = max(FLOPs / (tp sp peak_eff), bytes_per_device / bw_eff) + comm(T)
             + step_overhead + n * per_token_overhead
with the per-device split and the comm term as in ``engine.analytical.pipeline``.
Units: seconds. Arguments may be floats or numpy arrays.
"""

from dataclasses import dataclass

import numpy as np

from engine.analytical import comm, memory, traffic
from engine.analytical.params import param_counts
from engine.analytical.pipeline import _link
from engine.spec import DTYPE_BYTES, Specs


@dataclass(frozen=True)
class StepModel:
    """Per-configuration constants of the iteration-time model (see module docstring)."""

    flops_per_token: float        # 2 P_tok / (tp sp peak_eff)            [s per token]
    flops_per_logit: float        # 2 P_head / (tp sp peak_eff)           [s per sequence]
    flops_per_pair: float         # 4 L nh dh / (tp sp peak_eff)          [s per attended position]
    dense_weight_s: float         # non-expert weights / tp / bw_eff      [s]
    expert_weight_s: float        # all routed experts / tp / bw_eff      [s]
    num_experts: int
    experts_per_token: int
    kv_s_per_token: float         # kvpt / kv_split / bw_eff              [s per KV position]
    act_s_per_token: float        # act bytes / (tp sp) / bw_eff          [s per token]
    comm_latency_s: float         # per pass, independent of T            [s]
    comm_s_per_token: float       # per pass per token                    [s per token]
    step_overhead_s: float
    per_token_overhead_s: float

    @classmethod
    def from_specs(cls, specs: Specs) -> "StepModel":
        m, p, cal = specs.model, specs.partition, specs.calibration
        hw = specs.hardware
        tp, sp, pp = p.tp, p.sp, p.pp
        peak = hw.peak_flops(m.math_dtype) * cal.compute_efficiency * tp * sp
        bw = hw.hbm_bandwidth_bytes_s * cal.memory_bandwidth_efficiency
        pc = param_counts(m)
        wb = DTYPE_BYTES[m.weight_dtype]
        act = DTYPE_BYTES[m.activation_dtype]
        kv_split = np.minimum(tp, m.num_kv_heads) * sp
        # comm per pass: 2 L ring all-reduces over tp + (pp-1) p2p hops, each of T*h*act bytes;
        # alpha-beta is affine in T, so split it into a constant and a per-token part.
        link_bw, link_lat = _link(specs, np.asarray(p.devices_per_replica, dtype=float))
        link_bw, link_lat = float(link_bw), float(link_lat)
        msg_per_token = m.hidden_size * act
        c0 = 2 * m.num_layers * float(comm.ring_allreduce_time(0.0, tp, link_bw, link_lat))
        c1 = 2 * m.num_layers * float(comm.ring_allreduce_time(msg_per_token, tp, link_bw, link_lat)) - c0
        if pp > 1:
            c0 += (pp - 1) * link_lat
            c1 += (pp - 1) * msg_per_token / link_bw
        return cls(
            flops_per_token=2 * pc.per_token_matmul / peak,
            flops_per_logit=2 * pc.lm_head / peak,
            flops_per_pair=4 * m.num_layers * m.num_heads * m.head_dim / peak,
            dense_weight_s=(pc.total - pc.experts - pc.embedding) * wb / tp / bw,
            expert_weight_s=pc.experts * wb / tp / bw,
            num_experts=m.num_experts,
            experts_per_token=m.experts_per_token,
            kv_s_per_token=memory.kv_bytes_per_token(m) / float(kv_split) / bw,
            act_s_per_token=traffic.activation_elems_per_token(m) * act / (tp * sp) / bw,
            comm_latency_s=c0,
            comm_s_per_token=c1,
            step_overhead_s=cal.step_overhead_s,
            per_token_overhead_s=cal.per_token_overhead_s,
        )

    def weight_s(self, tokens):
        """Seconds to stream the weights a pass over ``tokens`` tokens touches (MoE: expected
        experts touched under uniform top-k routing)."""
        if not self.num_experts:
            return self.dense_weight_s
        touched = traffic.expected_experts_touched(self.num_experts, self.experts_per_token, tokens)
        return self.dense_weight_s + self.expert_weight_s * touched / self.num_experts

    def time(self, tokens, logits, attn_pairs, kv_read):
        """Seconds for one pass with these batch aggregates (floats or numpy arrays)."""
        compute = (self.flops_per_token * tokens + self.flops_per_logit * logits
                   + self.flops_per_pair * attn_pairs)
        mem = (self.weight_s(tokens) + self.kv_s_per_token * (kv_read + tokens)
               + self.act_s_per_token * tokens)
        comm_s = np.where(np.asarray(tokens) > 0, self.comm_latency_s + self.comm_s_per_token * tokens, 0.0)
        return (np.maximum(compute, mem) + comm_s + self.step_overhead_s
                + self.per_token_overhead_s * logits)


def prefill_chunk_aggregates(chunk_len, cached_len):
    """(attn_pairs, kv_read) of a prefill chunk of ``chunk_len`` tokens after ``cached_len``
    cached ones: pairs = s*k + s(s+1)/2, read = k."""
    return chunk_len * cached_len + chunk_len * (chunk_len + 1) / 2.0, cached_len
