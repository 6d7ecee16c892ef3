"""Time of one forward pass (an iteration of a serving engine) for an arbitrary batch composition.

The discrete-event engine asks this for every iteration: a mix of prefill chunks and decode tokens.
Every cost of the pass is linear in four aggregates of the batch (routed experts excepted: the
experts touched grow sub-linearly), so the model is a handful of constants fixed per configuration
(``StepModel.from_specs``) and a few multiply-adds per call:

    tokens      T = sum of prefill chunk tokens + number of decode sequences
    logits      n = sequences that emit a token this pass (decode sequences + finished prompts)
    attn_pairs  P = sum over tokens of positions attended:
                    decode token at context c: c;
                    prefill chunk of s tokens after k cached: s*k + s(s+1)/2
    kv_read     R = cached KV positions read: decode: c each; prefill chunk: k

Three operators, each bound by its own roof (``roofline = "op"``; "pass" takes one max of sums):
    dense     compute 2 (P_tok - P_exp) T + 2 P_head n        memory  dense weights + act T
    experts   compute 2 P_exp T                               memory  expert weights x E[touched]/E
    attention compute pair FLOPs x P                          memory  KV bytes x (R + T)
    time = overlapped(sum of the operators' max(compute, memory), comm(T), overlap)
           + step_overhead + n * per_token_overhead
(step_overhead = the calibration's scheduler step_overhead + launch_overhead, per pass)
FLOPs are divided by tp x sp devices at peak x compute_efficiency; weights by tp (experts by
max(tp, ep)); KV by min(tp, KV heads) x sp; bytes at HBM bandwidth x efficiency; comm from
``engine.analytical.parallel``. A pass walks all pp stages one after another. Units: seconds.
Arguments may be floats or numpy arrays; ``build`` makes the constants arrays over a grid.

Limits of the four-aggregate interface: P counts every attended position (sliding windows are
not applied here; the analytical pipeline applies them via layer-pairs), and pairs are costed in
the prefill form (MLA: per-head keys; ``decode_flops_per_pair`` holds the absorbed decode form).
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analytical import attention, memory, parallel, traffic
from engine.analytical.params import param_counts
from engine.analytical.precision import weight_bytes_per_param
from engine.spec import DTYPE_BYTES, Specs


@dataclass(frozen=True)
class StepModel:
    """Per-configuration constants of the iteration-time model (see module docstring).
    Fields may be numpy arrays (one value per grid point) when built by ``build``."""

    flops_per_token: Any          # 2 P_tok / (tp sp peak_eff)            [s per token]
    flops_per_logit: Any          # 2 P_head / (tp sp peak_eff)           [s per sequence]
    flops_per_pair: Any           # L x pair FLOPs / (tp sp peak_eff)     [s per attended position]
    dense_weight_s: Any           # non-expert weights / tp / bw_eff      [s]
    expert_weight_s: Any          # routed experts / max(tp, ep) / bw_eff [s]
    num_experts: int
    experts_per_token: int
    kv_s_per_token: Any           # kvpt / kv_split / bw_eff              [s per KV position]
    act_s_per_token: Any          # act bytes / (tp sp) / bw_eff          [s per token]
    comm_latency_s: Any           # per pass, independent of T            [s]
    comm_s_per_token: Any         # per pass per token                    [s per token]
    step_overhead_s: float
    per_token_overhead_s: float
    expert_flops_per_token: Any = 0.0   # the routed-expert part of flops_per_token
    decode_flops_per_pair: Any = None   # per attended position in decode (MLA: absorbed form)
    comm_alt_latency_s: Any = None      # second all-reduce algorithm (allreduce=auto): min of both
    comm_alt_s_per_token: Any = None
    hop_latency_s: Any = 0.0            # the PP hand-off part of comm_latency_s
    hop_s_per_token: Any = 0.0
    num_layers: int = 1
    roofline: str = "op"
    overlap: float = 0.0

    @classmethod
    def from_specs(cls, specs: Specs) -> "StepModel":
        p = specs.partition
        sm = build(specs, p.tp, p.pp, p.ep, p.sp)
        return sm._as_floats()

    def _as_floats(self) -> "StepModel":
        kw = {}
        for k, v in self.__dict__.items():
            kw[k] = float(v) if isinstance(v, np.ndarray) and v.ndim == 0 else v
        return StepModel(**kw)

    def touched_fraction(self, tokens):
        """E[routed experts touched]/E for a pass of ``tokens`` tokens (uniform top-k routing)."""
        if not self.num_experts:
            return 0.0
        return traffic.expected_experts_touched(self.num_experts, self.experts_per_token,
                                                tokens) / self.num_experts

    def weight_s(self, tokens):
        """Seconds to stream the weights a pass over ``tokens`` tokens touches (MoE: expected
        experts touched under uniform top-k routing)."""
        return self.dense_weight_s + self.expert_weight_s * self.touched_fraction(tokens)

    def comm_s(self, tokens):
        """Communication of a pass of ``tokens`` tokens: c0 + c1 T (0 for an empty pass); with
        allreduce=auto the faster of the two all-reduce algorithms."""
        t = np.asarray(tokens, dtype=float)
        c = self.comm_latency_s + self.comm_s_per_token * t
        if self.comm_alt_latency_s is not None:
            c = np.minimum(c, self.comm_alt_latency_s + self.comm_alt_s_per_token * t)
        return np.where(t > 0, c, 0.0)

    def operators(self, tokens, logits, attn_compute_s, attn_memory_s):
        """(compute s, memory s) of the dense, expert and attention operators, as three pairs."""
        exp_c = self.expert_flops_per_token * tokens
        dense = ((self.flops_per_token * tokens - exp_c) + self.flops_per_logit * logits,
                 self.dense_weight_s + self.act_s_per_token * tokens)
        experts = (exp_c, self.expert_weight_s * self.touched_fraction(tokens))
        return dense, experts, (attn_compute_s, attn_memory_s)

    def roof(self, ops):
        """Roofline time of a pass from its operators: sum of per-operator maxima ("op") or the
        max of the summed compute and summed memory ("pass")."""
        if self.roofline == "op":
            return sum(np.maximum(c, m) for c, m in ops)
        return np.maximum(sum(c for c, _ in ops), sum(m for _, m in ops))

    def time(self, tokens, logits, attn_pairs, kv_read):
        """Seconds for one pass with these batch aggregates (floats or numpy arrays)."""
        ops = self.operators(tokens, logits, self.flops_per_pair * attn_pairs,
                             self.kv_s_per_token * (kv_read + tokens))
        return (parallel.overlapped(self.roof(ops), self.comm_s(tokens), self.overlap)
                + self.step_overhead_s + self.per_token_overhead_s * logits)


def build(specs: Specs, tp, pp, ep, sp, peak_flops_s=None, hbm_bandwidth_bytes_s=None,
          compute_efficiency=None, memory_bandwidth_efficiency=None) -> StepModel:
    """StepModel constants for the specs with the partition (and optionally the peaks and
    efficiencies) given as numpy arrays: one value per grid point."""
    m, cal, hw, opt = specs.model, specs.calibration, specs.hardware, specs.analytical
    tp, pp, ep, sp = (np.asarray(v, dtype=float) for v in (tp, pp, ep, sp))
    peak1 = hw.peak_flops(m.math_dtype) if peak_flops_s is None else peak_flops_s
    ceff = cal.compute_efficiency if compute_efficiency is None else compute_efficiency
    bw1 = hw.hbm_bandwidth_bytes_s if hbm_bandwidth_bytes_s is None else hbm_bandwidth_bytes_s
    beff = cal.memory_bandwidth_efficiency if memory_bandwidth_efficiency is None else memory_bandwidth_efficiency
    peak = np.asarray(peak1 * ceff, dtype=float) * tp * sp
    bw = np.asarray(bw1 * beff, dtype=float)
    pc = param_counts(m)
    wb = weight_bytes_per_param(m)
    act = DTYPE_BYTES[m.activation_dtype]
    L = m.num_layers
    kv_split = np.minimum(tp, memory.kv_heads(m)) * sp
    alg = "ring" if opt.allreduce == "auto" else opt.allreduce
    c0, c1, h0, h1 = parallel.pass_comm(specs, tp, pp, ep, sp, alg)
    alt0 = alt1 = None
    if opt.allreduce == "auto":
        alt0, alt1, _, _ = parallel.pass_comm(specs, tp, pp, ep, sp, "tree")
    # streamed non-expert weights: everything but the experts and the input embedding (a lookup);
    # a tied LM head is the embedding matrix, read once per pass as the head.
    dense_streamed = pc.total - pc.experts - (0.0 if m.tied_embeddings else pc.embedding)
    expert_tok = 2.0 * pc.moe_layers * m.experts_per_token * pc.expert_each
    return StepModel(
        flops_per_token=2 * pc.per_token_matmul / peak,
        flops_per_logit=2 * pc.lm_head / peak,
        flops_per_pair=L * attention.pair_flops_per_layer(m, "prefill") / peak,
        dense_weight_s=dense_streamed * wb / tp / bw,
        expert_weight_s=pc.experts * wb / parallel.expert_shard(tp, ep) / bw,
        num_experts=m.num_experts,
        experts_per_token=m.experts_per_token,
        kv_s_per_token=memory.kv_bytes_per_token(m) / kv_split / bw,
        act_s_per_token=traffic.activation_elems_per_token(m) * act / (tp * sp) / bw,
        comm_latency_s=c0,
        comm_s_per_token=c1,
        step_overhead_s=cal.step_overhead_s + cal.launch_overhead_s,
        per_token_overhead_s=cal.per_token_overhead_s,
        expert_flops_per_token=expert_tok / peak,
        decode_flops_per_pair=L * attention.pair_flops_per_layer(m, "decode") / peak,
        comm_alt_latency_s=alt0,
        comm_alt_s_per_token=alt1,
        hop_latency_s=h0,
        hop_s_per_token=h1,
        num_layers=L,
        roofline=opt.roofline,
        overlap=opt.overlap,
    )


def prefill_chunk_aggregates(chunk_len, cached_len):
    """(attn_pairs, kv_read) of a prefill chunk of ``chunk_len`` tokens after ``cached_len``
    cached ones: pairs = s*k + s(s+1)/2, read = k."""
    return chunk_len * cached_len + chunk_len * (chunk_len + 1) / 2.0, cached_len
