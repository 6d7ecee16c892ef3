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
    device = overlapped(sum of the operators' max(compute, memory), comm(T), overlap)
             + eager [the pass is not replayed from a CUDA graph] (``launch_s``)
    host   = step_overhead + n * per_token_overhead + (T - Bd) * per_prefill_token (``host_s``)
    time   = (1 - f) host + max(device, f host): f = framework.host_overlap, the part of the host
             work an overlap scheduler runs beside the GPU (0: device + host, a synchronous loop;
             1: max(device, host); ``wall``, ``cold``, ``serial``)
(step_overhead = the calibration's scheduler step_overhead + launch_overhead + the framework
profile's step_overhead, per pass; per_token_overhead = the calibration's + the profile's
per_output_token_overhead, per sequence emitting a token, + its per_streamed_token_overhead when the
workload's requests stream (``WorkloadSpec.streams``: a response built every iteration); per_prefill_token = the profile's
per_prefill_token_overhead, per prompt token of the pass (T - Bd: the tokens that are not one
decoding sequence's); host work the GPU waits for in a synchronous loop, so it adds to the pass,
and runs beside the GPU's pass under an overlap scheduler (the fraction host_overlap of it). An eager pass (one
with prompt tokens, a decode batch no captured CUDA graph holds, or any pass where none are
captured) has its kernels launched one by one by the host: eager = num_layers x the profile's
eager_layer_overhead, part of the device time, never hidden (the eager prompt pass synchronises with
the host as it goes - attention metadata, per-layer collectives - so its launches do not hide
behind the GPU; measured closed-loop serving shows the cost once per iteration with prompt
tokens, whatever its prompt length). The front end's
token ceiling (framework.frontend_tok_s) does not lengthen a pass: the engine does not wait for
its output handler; the DES queues the tokens behind it (engine.des.frontend), the analytical
decode holds its steady-state cycle to it (engine.analytical.decode))
FLOPs are divided by tp x sp devices at peak x compute_efficiency; weights by tp (experts by
max(tp, ep)); KV by min(tp, KV heads) x sp; bytes at HBM bandwidth x efficiency; comm from
``engine.analytical.parallel``. A pass walks all pp stages one after another. Units: seconds.
Arguments may be floats or numpy arrays; ``build`` makes the constants arrays over a grid.

Attention aggregates in layer units (``pass_time``; windows applied per layer):
    LPp  prefill layer-pairs: sum over chunks and layers of positions attended (sliding-window
         layers attend at most W positions per query)
    LRp  prefill cached layer-positions read: sum over chunks of (L - Lw) k + Lw min(k, W)
    LPd  decode layer-positions: (L - Lw) C + Lw min(C, Bd W), C = sum of decode contexts
         (exact when all or none of the Bd contexts exceed W)
    attention compute  pp LPp + pr LRp + pt L Tp + pf L [Tp > 0] + dp LPd + ds L Bd + df L [Bd > 0]
    attention memory   mem (LRp + LPd + L T)
(Tp = prefill tokens, Bd = decode sequences). Roofline: pp = prefill pair FLOPs / L / peak_eff
(MLA: per-head keys), dp = decode pair FLOPs (MLA: absorbed over the latent), mem = KV bytes per
layer-position / bandwidth_eff, the rest 0. Kernel backends (``engine.analytical.kernels``): the
per-layer floor, per-token, per-sequence and per-pair seconds fitted to the measured or
transferred attention kernels, mem = 0 (a measured kernel's time already holds its traffic);
dense matmuls, LM head, routed experts and TP/EP collectives are then tabulated functions of the
pass's tokens (``KernelPass``) instead of the roofline constants.
"""

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analytical import attention, memory, parallel, traffic, window
from engine.analytical.params import param_counts
from engine.analytical.precision import weight_bytes_per_param
from engine.errors import SpecError
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
    per_prefill_token_s: Any = 0.0      # host seconds per prompt token in a pass (framework profile)
    expert_flops_per_token: Any = 0.0   # the routed-expert part of flops_per_token
    decode_flops_per_pair: Any = None   # per attended position in decode (MLA: absorbed form)
    comm_alt_latency_s: Any = None      # second all-reduce algorithm (allreduce=auto): min of both
    comm_alt_s_per_token: Any = None
    hop_latency_s: Any = 0.0            # the PP hand-off part of comm_latency_s
    hop_s_per_token: Any = 0.0
    num_layers: int = 1
    roofline: str = "op"
    overlap: float = 0.0
    layer_groups: tuple = ()            # ModelSpec.layer_groups: (kind, count, window W, ...) of
                                        # the layers, for the positions they attend (set by build)
    kern: Any = None                    # KernelPass (engine.analytical.kernels) or None: roofline
    elem_s_per_token: Any = 0.0         # element-wise kernels' bytes / (tp sp) / bw_eff (kernel mode)
    graph_sizes: tuple = ()             # captured CUDA-graph batch sizes a decode pass pads to
    captured: tuple = ()                # batch sizes with a captured CUDA graph (padded or not)
    padded: bool = False                # a decode batch runs the next captured size's graph
    eager_s: Any = 0.0                  # host launch time of a pass no graph holds: num_layers x
                                        # framework eager_layer_overhead [s] (``launch_s``)
    frontend_s_per_token: Any = 0.0     # 1 / framework.frontend_tok_s (detokenise/stream ceiling;
                                        # not in pass_time: engine.des.frontend, analytical decode)
    host_overlap: Any = 0.0             # framework.host_overlap: the fraction f of the host terms that
                                        # runs beside the GPU's pass (an overlap scheduler, ``wall``)

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

    def take(self, idx) -> "StepModel":
        """The constants of the points ``idx`` (an integer index array) of a model built over an
        array of points: every per-point array field (and the kernel tables' rows and attention
        lines) gathered at ``idx``, scalars kept. The constants are elementwise functions of each
        point's own partition, peaks and efficiencies, so a model built once over the distinct
        partitions of a sweep and gathered per pass holds the same numbers as one built over the
        pass's points."""
        def g(v):
            return v[idx] if isinstance(v, np.ndarray) and v.ndim else v

        kw = {k: g(v) for k, v in self.__dict__.items() if k != "kern"}
        kw["kern"] = None if self.kern is None else self.kern.expand(g)
        return StepModel(**kw)

    def touched_fraction(self, tokens):
        """E[routed experts touched]/E for a pass of ``tokens`` tokens (uniform top-k routing)."""
        if not self.num_experts:
            return 0.0
        return traffic.expected_experts_touched(self.num_experts, self.experts_per_token,
                                                tokens) / self.num_experts

    def comm_s(self, tokens):
        """Communication of a pass of ``tokens`` tokens: c0 + c1 T (0 for an empty pass); with
        allreduce=auto the faster of the two all-reduce algorithms. Kernel backends: the tabulated
        TP/EP collectives plus the PP hand-offs. A Python number is priced in plain Python (the
        same float64 operations: the DES prices one pass at a time, where numpy's per-call cost
        on 0-d arrays is most of the time)."""
        if tokens.__class__ is float or tokens.__class__ is int:
            t = float(tokens)
            if t <= 0:
                return 0.0
            if self.kern is not None:
                return self.kern.comm(t) + self.hop_latency_s + self.hop_s_per_token * t
            c = self.comm_latency_s + self.comm_s_per_token * t
            if self.comm_alt_latency_s is not None:
                c = min(c, self.comm_alt_latency_s + self.comm_alt_s_per_token * t)
            return c
        t = np.asarray(tokens, dtype=float)
        if self.kern is not None:
            c = self.kern.comm(t) + self.hop_latency_s + self.hop_s_per_token * t
            return np.where(t > 0, c, 0.0)
        c = self.comm_latency_s + self.comm_s_per_token * t
        if self.comm_alt_latency_s is not None:
            c = np.minimum(c, self.comm_alt_latency_s + self.comm_alt_s_per_token * t)
        return np.where(t > 0, c, 0.0)

    def att_coef(self) -> dict:
        """Per-layer attention coefficients (module docstring): pp, pr, pt, pf (prefill: per
        layer-pair, per cached layer-position read, per token-layer, floor per layer of a pass),
        dp, ds, df (decode: per layer-position, per sequence-layer, floor) [s] and mem (memory s
        per layer-position touched)."""
        k, L = self.kern, self.num_layers
        if k is None:
            return dict(pp=self.flops_per_pair / L, pr=0.0, pt=0.0, pf=0.0,
                        dp=self.decode_flops_per_pair / L, ds=0.0, df=0.0,
                        mem=self.kv_s_per_token / L)
        return dict(pp=k.att_pp, pr=0.0, pt=k.att_pt, pf=k.att_pf, dp=k.att_dp, ds=k.att_ds,
                    df=k.att_df, mem=0.0)

    def attention(self, LPp, LRp, Tp, LPd, Bd, T):
        """(compute-like s, memory s) of a pass's attention from its layer aggregates (module
        docstring); floats or numpy arrays."""
        a, L = self.att_coef(), self.num_layers
        c = (a["pp"] * LPp + a["pr"] * LRp + a["pt"] * L * Tp + a["pf"] * L * (Tp > 0)
             + a["dp"] * LPd + a["ds"] * L * Bd + a["df"] * L * (Bd > 0))
        return c, a["mem"] * (LRp + LPd + L * T)

    def operators(self, tokens, logits, attn_compute_s, attn_memory_s):
        """(compute s, memory s) of the dense, expert and attention operators, as three pairs.
        Kernel backends: the tabulated kernel times (plus element-wise activation traffic) in the
        compute slot, memory 0."""
        k = self.kern
        if k is not None:
            # a measured GEMM's time holds its own activation I/O; the element-wise kernels
            # between the matmuls (norms, rotary, gated activation) are added at HBM speed
            if isinstance(tokens, np.ndarray):    # one grid search for the tables read at T
                pos = k.dense.locate(tokens)
                head = k.lm_head.at(pos) if logits is tokens else k.lm_head(logits)
                dense = k.dense.at(pos) + head + self.elem_s_per_token * tokens
                return (dense, 0.0), (k.experts.at(pos), 0.0), (attn_compute_s, attn_memory_s)
            dense = k.dense(tokens) + k.lm_head(logits) + self.elem_s_per_token * tokens
            return (dense, 0.0), (k.experts(tokens), 0.0), (attn_compute_s, attn_memory_s)
        exp_c = self.expert_flops_per_token * tokens
        dense = ((self.flops_per_token * tokens - exp_c) + self.flops_per_logit * logits,
                 self.dense_weight_s + self.act_s_per_token * tokens)
        experts = (exp_c, self.expert_weight_s * self.touched_fraction(tokens))
        return dense, experts, (attn_compute_s, attn_memory_s)

    def roof(self, ops):
        """Roofline time of a pass from its operators: sum of per-operator maxima ("op") or the
        max of the summed compute and summed memory ("pass")."""
        if self.roofline == "op":
            (c0, m0), (c1, m1), (c2, m2) = ops
            if (isinstance(c0, float) and isinstance(m0, float) and isinstance(c1, float)
                    and isinstance(m1, float) and isinstance(c2, float) and isinstance(m2, float)):
                # one pass priced in plain Python (the DES): the same maxima, summed in the same order
                return (0 + (c0 if c0 >= m0 else m0)) + (c1 if c1 >= m1 else m1) + (c2 if c2 >= m2 else m2)
            return sum(np.maximum(c, m) for c, m in ops)
        return np.maximum(sum(c for c, _ in ops), sum(m for _, m in ops))

    def graph_tokens(self, T, Bd):
        """Tokens the dense operators, LM head and collectives run on: a decode-only pass
        (T = Bd) of at most the largest captured CUDA graph runs the graph of the next captured
        size (``framework.cuda_graph_sizes`` with padding on; vLLM pad_for_cudagraph, SGLang
        cuda_graph_runner), its padded rows costing like real ones; otherwise T itself."""
        g = self.graph_sizes
        if not g:
            return T
        if (T.__class__ is float or np.ndim(T) == 0) and (Bd.__class__ is float or np.ndim(Bd) == 0):
            if T != Bd or T > g[-1] or T <= 0:
                return T
            return float(g[bisect.bisect_left(g, T)])
        sizes = np.asarray(g, dtype=float)
        Tt = np.asarray(T, dtype=float)
        pad = sizes[np.minimum(np.searchsorted(sizes, Tt, side="left"), len(sizes) - 1)]
        return np.where((Tt == Bd) & (Tt <= sizes[-1]) & (Tt > 0), pad, Tt)

    def graphed(self, T, Bd):
        """Whether a pass of T tokens with Bd decoding sequences is replayed from a captured CUDA
        graph: decode-only (T = Bd > 0) and, with padding, at most the largest captured batch
        size; without padding, one of the captured sizes (framework.cuda_graph_sizes; none
        captured: False)."""
        g = self.captured
        if not g:
            return False if np.ndim(T) == 0 else np.zeros(np.shape(T), bool)
        if (T.__class__ is float or np.ndim(T) == 0) and (Bd.__class__ is float or np.ndim(Bd) == 0):
            return bool(T == Bd and 0 < T and (T <= g[-1] if self.padded else T in g))
        Tt = np.asarray(T, dtype=float)
        inside = Tt <= g[-1] if self.padded else np.isin(Tt, g)
        return (Tt == Bd) & (Tt > 0) & inside

    def launch_s(self, T, Bd):
        """Host time of launching a pass's kernels one by one [s]: ``eager_s`` when no CUDA graph
        holds the pass (``graphed``), 0 when one does; floats or arrays."""
        es = self.eager_s
        if es.__class__ is float or es.__class__ is int:
            if not es:
                return 0.0
            if (T.__class__ is float or np.ndim(T) == 0) and (Bd.__class__ is float or np.ndim(Bd) == 0):
                return 0.0 if self.graphed(T, Bd) else float(es)
        return np.where(self.graphed(T, Bd), 0.0, es)

    def host_s(self, n, Tp):
        """Host seconds of one pass's scheduling and bookkeeping [s]: step_overhead_s
        + n per_token_overhead_s + Tp per_prefill_token_s (n sequences emitting a token, Tp
        prompt tokens); the eager launches (``launch_s``) are not in it: they drive the GPU."""
        return self.step_overhead_s + self.per_token_overhead_s * n + self.per_prefill_token_s * Tp

    def wall(self, device_s, host_s):
        """Seconds from one pass's start to the next's for a pass of ``device_s`` on the GPU
        (roof, exposed comm and eager launches) and ``host_s`` of host work (``host_s``) [s]:
        (1 - f) host + max(device, f host), f = ``host_overlap``.

        A synchronous loop (f = 0: vLLM V0, V1 without async scheduling, TensorRT-LLM's C++
        executor, SGLang < 0.4) schedules a pass, runs it and processes its output one after
        another: device + host. An overlap scheduler (SGLang's ``event_loop_overlap``,
        TensorRT-LLM's ``_executor_loop_overlap``, vLLM V1's ``step_with_batch_queue``; they
        schedule ahead, engine.des.ahead) builds and launches pass k + 1 and processes pass
        k - 1's output while pass k is on the GPU; the part f of the host work that does so hides
        behind the GPU until it is the longer (a high-batch floor that does not fall with TP),
        the rest (waits on the previous pass's sampled tokens, work holding the interpreter)
        still runs between passes. f = 1 gives max(device, host). Approximation: a pass's host
        work hides behind its own device time rather than its predecessor's (equal in a steady
        state; the pass after an idle engine pays all of it: ``cold``)."""
        f = self.host_overlap
        if isinstance(f, float) and isinstance(device_s, float) and isinstance(host_s, float):
            if not f:                 # one pass in plain Python (max for np.maximum)
                return device_s + host_s
            fh = f * host_s
            return (1.0 - f) * host_s + (device_s if device_s >= fh else fh)
        if not np.any(f):
            return device_s + host_s
        return (1.0 - f) * host_s + np.maximum(device_s, f * host_s)

    def cold(self, device_s, host_s):
        """Seconds a pass takes beyond ``wall`` when an idle engine starts it: nothing ran before
        it to hide its host work behind, so it pays device + host, min(device, f host) more
        (f = ``host_overlap``; 0 for a synchronous loop) [s]."""
        f = self.host_overlap
        if isinstance(f, float) and isinstance(device_s, float) and isinstance(host_s, float):
            fh = f * host_s           # one pass in plain Python (min for np.minimum)
            return 0.0 * device_s if not f else (device_s if device_s <= fh else fh)
        if not np.any(f):
            return 0.0 * device_s
        return np.minimum(device_s, f * host_s)

    def serial(self, device_s, host_s, passes):
        """Seconds of ``passes`` back-to-back passes of ``device_s`` GPU and ``host_s`` host
        seconds in all, started by an idle engine (a prompt's prefill passes at light load) [s]:
        device + host for a synchronous loop; with overlap f the serial part (1 - f) H adds, the
        first pass's overlapped host work is exposed, each later pass's hides behind the pass
        before it and the last pass's device time ends it: (1 - f) H + h + max(D - d, f H - h) + d
        with d = D / passes, h = f H / passes (passes of equal parts; one pass: D + H)."""
        f = self.host_overlap
        if not np.any(f):
            return device_s + host_s
        n = np.maximum(np.asarray(passes, dtype=float), 1.0)
        hf = f * host_s
        d, h = device_s / n, hf / n
        return (1.0 - f) * host_s + h + np.maximum(device_s - d, hf - h) + d

    def pass_time(self, T, n, LPp, LRp, LPd, Bd):
        """Seconds for one pass of T tokens (n logits) with the attention layer aggregates
        (module docstring): the ``wall`` of its device time (overlapped(roof of the operators,
        comm(T)) + eager launches) and its host time (step_overhead + n per_token_overhead + prompt
        tokens per_prefill_token); dense, LM head and comm at ``graph_tokens`` (attention and
        per-token host costs at the real batch)."""
        return self.pass_parts(T, n, LPp, LRp, LPd, Bd)[0]

    def pass_parts(self, T, n, LPp, LRp, LPd, Bd):
        """(``pass_time`` [s], its roof [s], its ``cold`` extra [s]) from one evaluation of the
        operators: the roof is the sum of the operators' max(compute, memory) before the
        communication and the host costs are added - the roofline-busy part the DES's power model
        charges (engine.des.features.power); the device time is overlapped(roof, comm) + eager
        launches, the host time ``host_s``, and the pass time their ``wall``."""
        att = self.attention(LPp, LRp, T - Bd, LPd, Bd, T)
        Tg = self.graph_tokens(T, Bd)
        ops = self.operators(Tg, n + (Tg - T), *att)
        roof = self.roof(ops)
        comm = self.comm_s(Tg)
        if isinstance(roof, float) and isinstance(comm, float) and isinstance(self.overlap, float):
            # ``parallel.overlapped`` of one pass in plain Python (min for np.minimum)
            ov = roof + comm - self.overlap * (roof if roof <= comm else comm)
        else:
            ov = parallel.overlapped(roof, comm, self.overlap)
        if self.host_overlap:
            dev = ov + self.launch_s(T, Bd)
            host = self.host_s(n, T - Bd)
            return self.wall(dev, host), roof, self.cold(dev, host)
        # synchronous: device + host (``wall``), summed in this order
        return (ov + self.step_overhead_s + self.per_token_overhead_s * n
                + self.per_prefill_token_s * (T - Bd) + self.launch_s(T, Bd)), roof, 0.0

    def breakdown(self, T, n, LPp, LRp, LPd, Bd) -> dict:
        """Seconds of a pass by operator class (``pass_time``'s terms): dense (matmuls, LM head,
        element-wise), attention, experts, comm (what the overlap leaves exposed) and overhead
        (the host terms the device time does not hide, ``wall``, + eager launches); they sum to
        ``pass_time``. Roofline "pass" granularity splits its
        single roof in proportion to each operator's max(compute, memory)."""
        att = self.attention(LPp, LRp, T - Bd, LPd, Bd, T)
        ops = self.operators(T, n, *att)
        each = [np.maximum(c, m) for c, m in ops]
        roof = self.roof(ops)
        scale = roof / max(float(sum(each)), 1e-30)
        comm = self.comm_s(T)
        dev = parallel.overlapped(roof, comm, self.overlap)
        exposed = dev - roof
        dev = dev + self.launch_s(T, Bd)
        return dict(dense=float(each[0] * scale), experts=float(each[1] * scale),
                    attention=float(each[2] * scale), comm=float(exposed),
                    overhead=float(self.wall(dev, self.host_s(n, T - Bd)) - dev + self.launch_s(T, Bd)))

    def decode_positions(self, Bd, C):
        """LPd: layer-positions of Bd decode sequences attending C positions in all, summed over
        the layer groups: (L - Lw) C + Lw min(C, Bd W) (``window.decode_positions``; exact when
        all or none of the contexts exceed W)."""
        return window.decode_positions(self.layer_groups, Bd, C)

    def chunk_positions(self, c: int, k: int):
        """(layer-pairs, cached layer-positions read) of a prefill chunk of c tokens after k
        cached, summed over the layer groups: (L - Lw)(c k + c(c+1)/2) + Lw sum_{j=k+1}^{k+c}
        min(j, W), and (L - Lw) k + Lw min(k, W) (``window.chunk_positions``,
        ``window.kept_positions``). Python ints in, floats out (the DES's per-iteration path)."""
        g = self.layer_groups
        return window.chunk_positions(g, c, k), float(window.kept_positions(g, k))

    def time(self, tokens, logits, prefill_pairs=0.0, prefill_read=0.0, decode_seqs=0.0,
             decode_ctx=0.0):
        """Seconds for one pass from per-sequence aggregates (floats or numpy arrays): prefill
        pairs sum(c k + c(c+1)/2) and cached reads sum(k) of the prefill chunks (full attention
        in every layer: windows need ``chunk_positions`` per chunk), decode sequences and the sum
        of their contexts (windows applied by ``decode_positions``)."""
        L = self.num_layers
        return self.pass_time(tokens, logits, L * prefill_pairs, L * prefill_read,
                              self.decode_positions(decode_seqs, decode_ctx), decode_seqs)


def build(specs: Specs, tp, pp, ep, sp, peak_flops_s=None, hbm_bandwidth_bytes_s=None,
          compute_efficiency=None, memory_bandwidth_efficiency=None) -> StepModel:
    """StepModel constants for the specs with the partition (and optionally the peaks and
    efficiencies) given as numpy arrays: one value per grid point."""
    m, cal, hw, opt = specs.model, specs.calibration, specs.hardware, specs.analytical
    fw = specs.framework
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
    from engine.analytical import kernels
    kern, _ = kernels.build(specs, tp, ep, sp)
    if kern is not None and not (np.allclose(peak1, hw.peak_flops(m.math_dtype))
                                 and np.allclose(bw1, hw.hbm_bandwidth_bytes_s)):
        raise SpecError("calibration.cost.backend", cal.kernels,
                        "roofline when sweeping peak FLOP/s or HBM bandwidth (kernel tables describe "
                        "the chip as it is; give a what-if chip its own hardware YAML and use "
                        "kernels=transfer)")
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
        elem_s_per_token=traffic.elementwise_elems_per_token(m) * act / (tp * sp) / bw,
        comm_latency_s=c0,
        comm_s_per_token=c1,
        step_overhead_s=cal.step_overhead_s + cal.launch_overhead_s + fw.step_overhead_s,
        per_token_overhead_s=cal.per_token_overhead_s + fw.per_output_token_s
        + (fw.per_streamed_token_s if specs.workload.streams() else 0.0),
        per_prefill_token_s=fw.per_prefill_token_s,
        eager_s=L * fw.eager_layer_s,
        captured=tuple(sorted(float(x) for x in fw.cuda_graph_sizes)),
        padded=bool(fw.cuda_graph_padding),
        frontend_s_per_token=1.0 / fw.frontend_tok_s if fw.frontend_tok_s else 0.0,
        host_overlap=float(getattr(fw, "host_overlap", 0.0) or 0.0),
        expert_flops_per_token=expert_tok / peak,
        decode_flops_per_pair=L * attention.pair_flops_per_layer(m, "decode") / peak,
        comm_alt_latency_s=alt0,
        comm_alt_s_per_token=alt1,
        hop_latency_s=h0,
        hop_s_per_token=h1,
        num_layers=L,
        roofline=opt.roofline,
        overlap=opt.overlap,
        layer_groups=m.layer_groups,
        kern=kern,
        graph_sizes=(tuple(float(x) for x in specs.framework.cuda_graph_sizes)
                     if specs.framework.cuda_graph_padding else ()),
    )
