"""Analytical pruning and ordering of candidates from the step model (no simulation).

Everything here prices passes with ``engine.analytical.step.StepModel`` (the pass price the DES
uses per iteration) and sizes the KV cache with ``engine.des.kv.kv_capacity`` (the one
footprint both engines use). Lengths come from the request stream itself (``lengths``).

1. Memory fit: a replica with no KV blocks left after weights and activations cannot serve.
2. Zero-load SLO feasibility: with no queue, a request of prompt S and N outputs sees
       TTFT0(S) = sum over its prefill chunks (the scheduler's token budget) of the pass time of
                  chunk c after k cached tokens (+ the per-request overhead, + the KV hand-off
                  when disaggregated)
       TPOT0    = the pass time of one decode step at context S + N/2 (batch 1)
   TTFT0 grows with S, so its q-percentile over requests is TTFT0 at the q-percentile prompt; the
   q-percentile of TPOT0 is taken over the requests. A candidate whose zero-load percentile
   already misses an SLO cannot meet it at any rate: pruned with that reason.
3. Capacity estimate (a fluid, mean-value model of continuous batching at steady state). With
   B decoding sequences, each iteration also prefills x = B E[S] / E[N - 1] prompt tokens (what
   arriving requests bring per decode token); the iteration takes
       t(B) = pass time of T = B + x tokens (B decodes at mean context E[S + N/2], x prompt
              tokens at E[S(S+1)/2] / E[S] attended positions each)
   and the unit serves r(B) = B / (E[N - 1] t(B)) requests/s. Feasible B: t(B) <= TPOT SLO
   (a decoding request's TPOT is about one iteration), T <= the token budget, B <= max_num_seqs,
   B E[S + N/2] <= KV tokens (Little's law on the cache), and the q-percentile prompt, prefilled
   in chunks of budget - B tokens beside the B decodes (``mixed_prefill_s``), within the TTFT
   SLO. The estimate is max r(B) over the feasible B. Prefill-first scheduling without chunks (``vllm``): decode iterations t_d(B) and
   whole-prompt iterations at c_pf seconds per prompt token, r(B) = 1 / (E[S] c_pf +
   E[N - 1] t_d(B) / B), TPOT about t_d(B) / (1 - r E[S] c_pf), TTFT the q-percentile prompt's
   prefill plus one decode iteration. Disaggregated units: min of the
   prefill pool (P / (E[S] c_pf)) and the decode pool (D x max B / (E[N-1] t_d(B))).
   It ignores variance (p99 needs headroom) and scheduling losses, so it is an optimistic
   estimate, not a proof: the search uses it to order candidates and to place the first probe,
   and prunes by it only with ``plan.bound_slack`` (the found/estimate ratios are reported).
"""

from dataclasses import dataclass, replace

import numpy as np

from engine.analytical.step import StepModel
from engine.des.kv import kv_capacity
from engine.spec import Specs
from engine.spec.scheduling import scheduler_traits


@dataclass(frozen=True)
class Lengths:
    """What the estimate needs of the request stream (from its prompt/output arrays)."""

    prompt: np.ndarray
    output: np.ndarray

    @property
    def mean_prompt(self) -> float:
        return float(np.mean(self.prompt))

    @property
    def mean_decode(self) -> float:
        """E[N - 1]: decode tokens per request (the first output token comes from prefill)."""
        return max(float(np.mean(self.output)) - 1.0, 1e-9)

    @property
    def mean_context(self) -> float:
        return float(np.mean(self.prompt + self.output / 2.0))

    @property
    def pairs_per_prompt_token(self) -> float:
        s = self.prompt.astype(float)
        return float(np.sum(s * (s + 1) / 2.0) / np.sum(s))


@dataclass(frozen=True)
class Estimate:
    fits: bool
    kv_tokens: float
    ttft0_ms: float           # zero-load TTFT at the SLO percentile
    tpot0_ms: float           # zero-load TPOT at the SLO percentile
    rate_rps: float           # capacity estimate of the unit (0 when infeasible)
    batch: float              # decoding sequences per replica at the estimate
    limit: str                # what caps the estimate (tpot, kv, budget, max_num_seqs, throughput, api_server)
    reason: str               # '' or why the candidate is infeasible


def prefill_s(sm: StepModel, prompt: int, chunk: int) -> float:
    """Zero-load prefill time of one prompt [s]: chunks of ``chunk`` tokens, each a pass of c
    tokens after k cached ones (attended pairs c k + c (c+1) / 2, cached read k), the last
    emitting one logit."""
    t, k = 0.0, 0
    chunk = max(int(chunk), 1)
    while k < prompt:
        c = min(chunk, prompt - k)
        last = k + c >= prompt
        t += float(sm.time(float(c), 1.0 if last else 0.0, prefill_pairs=c * k + c * (c + 1) / 2.0,
                           prefill_read=float(k)))
        k += c
    return t


def mixed_prefill_s(sm: StepModel, prompt: int, budget: int, batch, ctx):
    """Prefill time of one prompt [s] when every iteration also carries ``batch`` decodes at mean
    context ``ctx`` (chunked scheduling, vectorised over the batch): chunks of budget - B tokens,
    pass j of c_j = min(budget - B, S - j (budget - B)) prompt tokens after k_j = j (budget - B)
    cached, plus the B decode tokens. The TTFT a request of that prompt sees at that load, queueing
    for admission left out (so the estimate stays optimistic)."""
    B = np.asarray(batch, dtype=float)
    room = np.maximum(budget - B, 1.0)
    n = int(np.max(np.ceil(prompt / room)))
    t = np.zeros_like(B)
    for j in range(n):
        k = j * room
        c = np.clip(prompt - k, 0.0, room)
        last = (k + c >= prompt) & (c > 0)
        tj = np.asarray(sm.time(B + c, B + last, prefill_pairs=c * k + c * (c + 1) / 2.0,
                                prefill_read=k, decode_seqs=B, decode_ctx=B * ctx), dtype=float)
        t += np.where(c > 0, tj, 0.0)
    return t


def decode_s(sm: StepModel, batch, ctx):
    """Seconds of one decode iteration of ``batch`` sequences at mean context ``ctx``."""
    B = np.asarray(batch, dtype=float)
    return np.asarray(sm.time(B, B, decode_seqs=B, decode_ctx=B * ctx), dtype=float)


def prefill_cost_per_token(sm: StepModel, L: Lengths, budget: int) -> float:
    """c_pf: seconds per prompt token in full prefill passes of ``budget`` tokens (at least one
    mean prompt), whole prompts of the stream's mean length."""
    T = float(max(budget, L.mean_prompt))
    t = float(sm.time(T, T / L.mean_prompt, prefill_pairs=T * L.pairs_per_prompt_token))
    return t / T


def estimate(specs: Specs, L: Lengths, q: float, slo_ttft_ms: float, slo_tpot_ms: float,
             handoff_s=None) -> Estimate:
    """The three analytical checks of the module docstring for one candidate (``specs`` with its
    partition and a resolved ``specs.des``: scheduler, budget, max_num_seqs, block size, replicas,
    prefill_replicas). ``q`` in (0, 1); SLO thresholds 0 = unconstrained; ``handoff_s(prompt)``:
    the disaggregated KV hand-off time."""
    des = specs.des
    cap = kv_capacity(specs, des.kv.block_size, des.scheduling.max_num_batched_tokens, des.scheduling.max_num_seqs)
    kv_tokens = float(cap.blocks * des.kv.block_size)
    if cap.blocks <= 0:
        return Estimate(False, 0.0, np.nan, np.nan, 0.0, 0.0, "memory",
                        f"does not fit: {cap.weights_gb:.1f} GB weights + {cap.activation_gb:.1f} GB "
                        "activations per device leave no KV blocks")
    sm = StepModel.from_specs(specs)
    pol = scheduler_traits(des.scheduling.scheduler)       # the policy's traits (engine.spec.scheduling)
    chunk = des.token_budget if pol.budget_is_chunk else max(
        des.scheduling.max_num_batched_tokens, int(np.max(L.prompt)))
    s_q = int(np.quantile(L.prompt, q, method="higher"))
    ttft0 = prefill_s(sm, s_q, chunk) + specs.request_overhead_s(s_q)
    if des.cluster.prefill_replicas and handoff_s is not None:
        ttft0 += handoff_s(s_q)
    tpot_each = decode_s(sm, 1.0, L.prompt + L.output / 2.0)
    tpot0 = float(np.quantile(tpot_each[L.output > 1] if np.any(L.output > 1) else tpot_each, q))
    ttft0_ms, tpot0_ms = ttft0 * 1e3, tpot0 * 1e3
    why = []
    if slo_ttft_ms and ttft0_ms > slo_ttft_ms:
        why.append(f"zero-load p{q * 100:g} TTFT {ttft0_ms:.0f} ms > SLO {slo_ttft_ms:g} ms")
    if slo_tpot_ms and tpot0_ms > slo_tpot_ms:
        why.append(f"zero-load p{q * 100:g} TPOT {tpot0_ms:.1f} ms > SLO {slo_tpot_ms:g} ms")
    if why:
        return Estimate(True, kv_tokens, ttft0_ms, tpot0_ms, 0.0, 0.0, "slo", "; ".join(why))

    Es, En1, Ectx = L.mean_prompt, L.mean_decode, L.mean_context
    B = np.arange(1, int(des.scheduling.max_num_seqs) + 1, dtype=float)
    kv_ok = B * Ectx <= kv_tokens
    y = slo_tpot_ms * 1e-3 if slo_tpot_ms else np.inf
    budget = des.scheduling.max_num_batched_tokens
    c_pf = prefill_cost_per_token(sm, L, budget)
    td = decode_s(sm, B, Ectx)
    if des.cluster.prefill_replicas:
        P, D = des.cluster.prefill_replicas, (des.cluster.replicas or 1) - des.cluster.prefill_replicas
        ok = kv_ok & (td <= y)
        dec = D * np.where(ok, B / (En1 * td), 0.0)
        i = int(np.argmax(dec))
        pre = P / (Es * c_pf)
        rate = float(min(pre, dec[i]))
        limit = "prefill pool" if pre < dec[i] else _limit(i, ok, kv_ok, td <= y, True, B)
        return _api_capped(specs, L, Estimate(True, kv_tokens, ttft0_ms, tpot0_ms, rate, float(B[i]), limit, ""))
    z = slo_ttft_ms * 1e-3 if slo_ttft_ms else np.inf
    overhead = ttft0 - prefill_s(sm, s_q, chunk)          # per-request overhead (+ hand-off)
    if pol.prefill_first and not pol.chunks:     # separate iterations of whole prompts (vllm)
        r = 1.0 / (Es * c_pf + En1 * td / B)
        f_pf = np.clip(r * Es * c_pf, 0.0, 0.999)
        tpot_ok = td / (1.0 - f_pf) <= y
        budget_ok = np.ones_like(B, dtype=bool)
        ttft_ok = prefill_s(sm, s_q, chunk) + overhead + td <= z   # waits out one decode iteration
    else:
        x = B * Es / En1
        T = B + x
        t = np.asarray(sm.time(T, B + x / Es, prefill_pairs=x * L.pairs_per_prompt_token,
                               decode_seqs=B, decode_ctx=B * Ectx), dtype=float)
        r = B / (En1 * t)
        tpot_ok = t <= y
        budget_ok = T <= budget
        ttft_ok = mixed_prefill_s(sm, s_q, budget, B, Ectx) + overhead <= z
    ok = kv_ok & tpot_ok & budget_ok & ttft_ok
    if not ok.any():
        return Estimate(True, kv_tokens, ttft0_ms, tpot0_ms, 0.0, 0.0, "slo",
                        "no batch meets the TTFT and TPOT SLOs, the KV cache and the token budget at once")
    rr = np.where(ok, r, 0.0)
    i = int(np.argmax(rr))
    return _api_capped(specs, L, Estimate(True, kv_tokens, ttft0_ms, tpot0_ms, float(rr[i]), float(B[i]),
                                       _limit(i, ok, kv_ok, tpot_ok, budget_ok, B, ttft_ok), ""))


def _api_capped(specs: Specs, L: Lengths, e: Estimate) -> Estimate:
    """The estimate held to the API server's capacity: one FIFO server of the framework's
    mean time per request s (per request + the stream's mean prompt x per prompt token) serves
    at most 1 / s requests per second (engine.des.cluster.loop ``ApiServer``), whatever the
    engine behind it could take."""
    fw = specs.framework
    s = fw.per_request_s + L.mean_prompt * fw.per_request_token_s
    if s > 0 and e.rate_rps > 1.0 / s:
        return replace(e, rate_rps=1.0 / s, limit="api_server")
    return e


def _limit(i, ok, kv_ok, tpot_ok, budget_ok, B, ttft_ok=True) -> str:
    """What stops the batch from growing past the best one."""
    if i + 1 >= len(B):
        return "max_num_seqs"
    if ok[i + 1]:
        return "throughput"          # interior maximum: the pass time grows faster than B
    if not np.all(np.asarray(ttft_ok)[i + 1:i + 2] if np.ndim(ttft_ok) else ttft_ok):
        return "ttft"
    if not np.all(tpot_ok[i + 1:i + 2]):
        return "tpot"
    if not np.all(np.asarray(kv_ok)[i + 1:i + 2]):
        return "kv"
    if not np.all(np.asarray(budget_ok)[i + 1:i + 2] if np.ndim(budget_ok) else budget_ok):
        return "budget"
    return "throughput"
