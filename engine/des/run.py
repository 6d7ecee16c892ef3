"""Entry points of the discrete-event engine: ``simulate`` (everything) and ``run`` (RunResult).

Step times come from ``engine.analytical.step.StepModel`` for the exact batch composition of
every iteration; an optional ``noise`` callable (array of step times [s] -> array, owning its
own seeded generator) perturbs them, e.g. log-normal jitter and rare jumps from calibration.
"""

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import polars as pl

from engine.analytical.step import StepModel
from engine.des.features import report as feature_report
from engine.des.cluster import NO_HOOKS, Loop, Router, kv_time_average, make_fleet
from engine.des.cluster import results as fleet_results
from engine.des.workload.sessions import transform
from engine.des.assembly import assemble
from engine.des.config import DesSpec, deployment
from engine.des.metrics import request_table, summarize
from engine.des.state import State
from engine.des import ttft_parts
from engine.des.workload import RequestStream, build_stream
from engine.des.pricing import decode_line, probe_line, step_functions, swap_s_per_token  # noqa: F401 (public names)
from engine.result import Assumption, RunResult
from engine.errors import SpecError
from engine.spec import Specs

Noise = Callable[[np.ndarray], np.ndarray]


@dataclass
class DesRunResult(RunResult):
    """A RunResult plus the optional per-iteration timeline (``record_iterations``): one row per
    iteration or decode run with its batch, prefill tokens, KV blocks used, running and waiting."""

    timeline: pl.DataFrame | None = None
    #: cluster features (engine.des.cluster.fleet): name -> frame ("timeseries", "decisions", "regret"),
    #: each written as <name>.parquet next to the table
    frames: dict | None = None
    #: how the runner writes ``table``: parquet (table.parquet) | csv (table.csv; engine.des.outputs.output_format)
    table_format: str = "parquet"


@dataclass
class SimResult:
    """Everything a simulation produced: the RunResult plus the raw state and the timeline."""

    result: RunResult
    state: State
    timeline: pl.DataFrame | None
    mean_in_system: float        # time average of requests arrived and not finished (loop counter)
    sim_time_s: float


def handoff_function(specs: Specs, des: DesSpec):
    """prompt tokens -> KV hand-off time [s] (engine.analytical.disagg.handoff_s for one prompt,
    the link of engine.analytical.disagg, one link per device of the replica, same layout on both
    sides, no overlap with the prefill)."""
    from engine.analytical import disagg, memory

    d = specs.analytical.disagg
    kvpt = memory.kv_bytes_per_token(specs.model)
    links = specs.partition.devices_per_replica

    def f(prompt):
        return float(disagg.handoff_s(1, prompt, kvpt, specs.model.num_layers, des.kv.block_size, links,
                                      d.link_bandwidth_bytes_s, d.link_latency_s, d.per_wr_s,
                                      d.relayout_factor, 0.0))
    return f


def _noise_assumption(n, seed: int) -> Assumption:
    """The step-time noise of calibration.noise, as an assumption line."""
    if not n.enabled:
        return Assumption("noise", "off", "deterministic step times (calibration.noise all zero)")
    return Assumption("noise", f"jitter sigma {n.jitter_sigma:g}, jumps {n.jump_rate_per_s:g}/s of busy "
                      f"time x {n.jump_dist} {n.jump_mean_s * 1e3:g} ms, throttle x{n.throttle_factor:g} "
                      f"after {n.throttle_after_s:g} s busy",
                      f"engine.des.noise jump diffusion, seed engine.des.seed={seed}")


def assumptions(specs: Specs, des: DesSpec, blocks: int, replicas: int, stream: RequestStream) -> list:
    c = specs.calibration
    out = [
        Assumption("step time", "engine.analytical.step.StepModel per iteration",
                   "the pass price both engines use, for the exact batch (prefill chunks + decode "
                   f"contexts); calibration '{c.name}' (kernels={c.kernels}) and overheads"),
        Assumption("scheduler", f"{des.scheduling.scheduler}, queue {des.scheduling.queue_policy}",
                   f"max_num_seqs={des.scheduling.max_num_seqs}, token budget={des.token_budget}"),
        Assumption("KV cache", f"{blocks} blocks of {des.kv.block_size} tokens per replica",
                   "given" if des.kv.num_kv_blocks else
                   f"(HBM - weights - activations at the largest iteration - reserve) x "
                   f"{specs.kv_usable_fraction}"),
        Assumption("preemption", f"{des.scheduling.preemption}, newest first",
                   "blocks freed; prompt + emitted tokens prefilled again on re-admission"
                   if des.scheduling.preemption == "recompute" else
                   f"KV to host and back at {des.scheduling.swap_bandwidth_gb_s:g} GB/s per device, "
                   "transfers added to the next iteration; host memory unbounded"),
        Assumption("replicas", f"{replicas} behind {des.cluster.router}", "data-parallel, independent KV"),
        Assumption("request stream", stream.source,
                   "closed loop" if stream.users else "open loop"),
        _noise_assumption(c.noise, des.seed),
    ]
    from engine.analytical import kernels
    p = specs.partition
    out.extend(kernels.build(specs, p.tp, p.ep, p.sp)[1])
    if c.per_request_overhead_s:
        out.append(Assumption("per-request overhead", f"{c.per_request_overhead_s * 1e3:g} ms",
                              "delays the request's entry into the queue (in TTFT and E2E)"))
    from engine.spec.framework import host_costs_text
    if host_costs_text(specs.framework):
        out.append(Assumption("framework host costs", host_costs_text(specs.framework),
                              f"profile '{specs.framework.name}'; on top of the calibration's"))
    if des.cluster.prefill_replicas:
        d = specs.analytical.disagg
        out.append(Assumption("disaggregated pools", f"{des.cluster.prefill_replicas} prefill + "
                              f"{replicas - des.cluster.prefill_replicas} decode replicas",
                              f"KV hand-off over {d.link_bandwidth_bytes_s / 1e9:g} GB/s per device, "
                              "not overlapped with the prefill; the table's replica is the decode one"))
    if des.kv.prefix_caching:
        out.append(Assumption("prefix caching", f"{stream.block_tokens}-token hash blocks, LRU",
                              "prompt blocks join the cache when prefilled; hit tokens skip prefill"))
    return out


#: CPU-seconds one simulated request costs, rounded up from 1.0-1.7e-4 measured here (4,000 chat
#: and Azure-conversation requests, one and four replicas): ``auto`` shows the bar from 2 s.
DES_S_PER_REQUEST = 2e-4
PROGRESS_AFTER_S = 2.0


def _progress(des: DesSpec, n: int):
    """tqdm bar on stderr: always with ``progress=on``; with ``auto`` on a terminal when the run
    is expected to take PROGRESS_AFTER_S or more (n x DES_S_PER_REQUEST: from 10,000 requests)."""
    expected_s = n * DES_S_PER_REQUEST
    show = des.outputs.progress == "on" or (des.outputs.progress == "auto" and expected_s >= PROGRESS_AFTER_S
                                    and sys.stderr.isatty())
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=n, unit="req", desc="simllm des", mininterval=0.5, file=sys.stderr)


def simulate(specs: Specs, des: DesSpec | None = None, *, stream: RequestStream | None = None,
             noise: Noise | None = None) -> SimResult:
    """Simulate the request stream of ``specs.workload`` (or ``stream``) on the deployment
    (``des``, default ``specs.des``, its None settings from ``specs.framework``)."""
    specs, des = deployment(specs, des)
    stream = stream if stream is not None else build_stream(specs.workload, specs.model.context_length,
                                                            specs.model.name)
    stream0 = stream                  # as given: a counterfactual re-run starts from it again
    if des.cluster_features:          # sessions, traffic shape, reasoning outputs (engine.des.workload.sessions)
        stream = transform(stream, des)
    _within_context(stream, specs.model)
    # replicas, KV pools, prefix caches, step functions and features: the one assembly the
    # live engine builds too (engine.des.assembly)
    asm = assemble(specs, des, stream, noise)
    cap, blocks, n_rep, sm, st, reps, feats = asm.cap, asm.blocks, asm.n_rep, asm.sm, asm.st, asm.reps, asm.feats
    make_cache = asm.make_cache
    devices = specs.partition.devices_per_replica * n_rep
    sch = des.scheduling
    bucket = (sch.bucket_rate_rps, sch.bucket_size) if sch.admission == "token_bucket" else None
    router, decode_router, handoff = Router(des.cluster.router, reps, st, des), None, None
    if des.cluster.prefill_replicas:
        pre, dec = reps[:des.cluster.prefill_replicas], reps[des.cluster.prefill_replicas:]   # roles set by assemble
        router, decode_router = Router(des.cluster.router, pre, st, des), Router(des.cluster.router, dec, st, des)
        handoff = handoff_function(specs, des)
    fleet = make_fleet(specs, des, reps, n_rep, st, make_cache)
    loop = Loop(st, reps, router, decode_router=decode_router, handoff_s=handoff, users=stream.users,
                think_time_s=stream.think_time_s,
                request_overhead_s=specs.calibration.per_request_overhead_s,
                api_s=specs.framework.per_request_s, api_dist=specs.framework.per_request_dist,
                api_token_s=specs.framework.per_request_token_s,
                max_blocks_per_request=blocks - int(des.kv.watermark * blocks), block_size=des.kv.block_size,
                bucket=bucket, progress=_progress(des, len(stream)),
                hooks=fleet or NO_HOOKS, des=des)
    t_end = loop.run() if blocks > 0 else 0.0
    if des.clients.client_rtt_ms:             # the client sees each token half a round trip later
        st.first_token += loop._rtt_half
        st.completion += loop._rtt_half
    table = request_table(st)
    s = summarize(st, table, devices=devices, slo_ttft_ms=des.slo_ttft_ms, slo_tpot_ms=des.slo_tpot_ms)
    kv_mean, batch_mean = kv_time_average(reps)
    t0 = float(np.nanmin(st.arrival)) if st.n else 0.0
    span = max(t_end - t0, 0.0)
    mean_in_sys = loop.area / span if span > 0 else float("nan")
    s.update(
        kv_utilisation_mean=kv_mean, batch_size_mean=batch_mean,
        kv_blocks=blocks, kv_capacity_gb=cap.kv_capacity_gb, weights_gb=cap.weights_gb,
        activation_gb=cap.activation_gb, fits_in_memory=bool(blocks > 0),
        replicas=n_rep, devices=devices, iterations=int(sum(r.iterations for r in reps)),
        prefix_evictions=int(sum(r.prefix.evictions for r in reps if r.prefix is not None)),
        rejected_too_long=loop.rejected_too_long, rejected_admission=loop.rejected_bucket,
        mean_in_system=mean_in_sys, utilisation=float(sum(r.busy_s for r in reps) / (span * n_rep))
        if span > 0 else float("nan"),
    )
    frames = None
    if des.cluster_features:
        extra, frames = fleet_results(fleet, reps, st, table, des)
        s.update(extra)
        if fleet is not None and s.get("replica_hours"):
            s["utilisation"] = float(sum(r.busy_s for r in reps) / (s["replica_hours"] * 3600.0))
    if blocks > 0:
        lbs = feature_report.lower_bounds(specs, st)
        s.update(feature_report.summary(specs, feats, st, table, s, span, devices, lbs))
        table = feature_report.table_columns(specs, des, feats, st, table, lbs,
                                             des.clients.client_rtt_ms / 2e3)
    s["bound"] = binding_bound(sm, s, st) if blocks > 0 else "memory_capacity"
    if blocks > 0 and st.n:
        s.update(decode_shares(sm, s, st))
        s.update(ttft_parts.summary(st))   # TTFT along the request's path (engine.des.ttft_parts)
    if blocks <= 0:
        s["memory_reason"] = (f"no KV blocks left: {cap.weights_gb:.1f} GB weights + "
                              f"{cap.activation_gb:.1f} GB activations per device")
    else:
        # the longest request one replica's KV cache holds; a stream none of whose requests fits
        # does not fit in memory (nothing was served: fits_in_memory false, and why)
        s["max_request_tokens"] = loop.max_blocks * des.kv.block_size
        if st.n and loop.rejected_too_long == st.n:
            s["fits_in_memory"] = False
            s["memory_reason"] = (f"no request fits one replica's KV cache of {s['max_request_tokens']} tokens "
                                  f"({blocks} blocks of {des.kv.block_size}, less the watermark); the shortest "
                                  f"needs {int(np.min(st.prompt + st.output))} (prompt + output)")
    timeline = None
    if des.outputs.record_iterations:
        cols = ("replica", "start_s", "end_s", "iterations", "batch", "prefill_tokens",
                "kv_blocks_used", "running", "waiting")
        rows = [r for rep in reps for r in rep.timeline]
        timeline = pl.DataFrame(rows, schema=list(cols), orient="row")
    if des.counterfactual:            # same arrivals, other policy: per-request regret
        from engine.des.cluster import counterfactual as cf
        alt = simulate(specs, cf.alternative(des, des.counterfactual), stream=stream0).result
        frames["regret"] = cf.regret_table(table, alt.table)
        s.update(cf.summary(frames["regret"]))
    result = DesRunResult(summary=s, table=table,
                          assumptions=assumptions(specs, des, blocks, n_rep, stream)
                          + feature_report.assumptions(specs, des, feats), timeline=timeline,
                          table_format=des.outputs.output_format,
                          frames=frames)
    return SimResult(result=result, state=st, timeline=timeline, mean_in_system=mean_in_sys,
                     sim_time_s=t_end)


def _within_context(stream: RequestStream, model) -> None:
    """Every request of the stream as simulated (request classes, sessions and reasoning outputs
    applied, or a stream given by the caller) fits ``model.context_length``; the first one over
    is named. (Trace rows and drawn lengths are refused earlier, by name: build_stream.)"""
    ctx = model.context_length
    if not ctx or not len(stream):
        return
    over = np.flatnonzero(stream.prompt + stream.output > ctx)
    if len(over):
        i = int(over[0])
        raise SpecError("workload", f"request {i}: {int(stream.prompt[i])} prompt + {int(stream.output[i])} "
                        f"output tokens", f"requests of at most model.context_length = {ctx} tokens ({model.name}); "
                        f"{len(over)} of {len(stream)} are longer")


def decode_shares(sm: StepModel, s: dict, st: State) -> dict:
    """``decode_share_<class>``: share of a decode step's time per operator class
    (``StepModel.breakdown``) at the mean batch and the mean mid-decode context."""
    b = max(float(s.get("batch_size_mean") or 1.0), 1.0)
    ctx = float(np.mean(st.prompt) + np.mean(st.output) / 2)
    parts = sm.breakdown(b, b, 0.0, 0.0, float(sm.decode_positions(b, b * ctx)), b)
    tot = sum(parts.values()) or 1.0
    return {f"decode_share_{k}": v / tot for k, v in parts.items()}


def decode_step_terms(sm: StepModel, batch: float, ctx: float):
    """(compute s, memory s, comm s, roof s) of one decode step of ``batch`` sequences with ``ctx``
    cached tokens each, from the step model's own pass terms (``StepModel.pass_time``'s: the
    attended layer-positions with sliding windows, ``decode_positions``; the decode pair FLOPs,
    MLA's absorbed form; CUDA-graph padding; touched experts): each sequence attends ctx + 1
    positions. compute and memory are the operators' roofline sides summed; with a kernel backend
    (measured times, no compute/memory split) they come from the same pass priced by the
    roofline (``kern=None``), while comm and roof are the backend's."""
    from dataclasses import replace

    B = float(batch)
    LPd = sm.decode_positions(B, B * (ctx + 1.0))
    Tg = sm.graph_tokens(B, B)

    def ops(m):
        return m.operators(Tg, B + (Tg - B), *m.attention(0.0, 0.0, 0.0, LPd, B, B))

    roofline = ops(sm if sm.kern is None else replace(sm, kern=None))
    compute = float(sum(np.sum(c) for c, _ in roofline))
    memory = float(sum(np.sum(m) for _, m in roofline))
    return compute, memory, float(sm.comm_s(Tg)), float(sm.roof(ops(sm)))


def binding_bound(sm: StepModel, s: dict, st: State) -> str:
    """What limits the simulated service: ``queueing`` when the median request waits at least as
    long in the queue as half its TTFT; otherwise the roof a decode step hits at the mean batch and
    mean mid-decode context (``decode_step_terms``): ``comm`` when the collectives take longer than
    the operators' roof, else compute (compute time > memory time) or memory."""
    if s.get("queueing_ms_p50", 0) >= 0.5 * s.get("ttft_ms_p50", float("inf")):
        return "queueing"
    b = max(float(s.get("batch_size_mean") or 1.0), 1.0)
    ctx = float(np.mean(st.prompt) + np.mean(st.output) / 2) if st.n else 0.0
    compute, memory, comm, roof = decode_step_terms(sm, b, ctx)
    if comm > roof:
        return "comm"
    return "compute" if compute > memory else "memory"


def run(specs: Specs, des: DesSpec | None = None, *, noise: Noise | None = None) -> RunResult:
    """``engine.des.run(specs, des) -> RunResult``: per-request table, percentile summary."""
    return simulate(specs, des, noise=noise).result
