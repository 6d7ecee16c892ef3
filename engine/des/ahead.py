"""Scheduling one iteration ahead (``FrameworkSpec.schedule_ahead``): when a new request can first run.

Engines that overlap their CPU work with the GPU decide iteration k + 1 while iteration k runs,
so a request that arrives during iteration k is first scheduled into iteration k + 2:

* vLLM V1 with async scheduling (``SchedulerConfig.async_scheduling``; ``EngineCore`` then steps
  with ``step_with_batch_queue`` and a batch queue of 2): each call schedules a new batch while
  the previous one is on the GPU, then blocks on the older batch's result and runs
  ``update_from_output`` for it; requests reach the scheduler between calls
  (``_process_input_queue``), i.e. when iteration k ends, and go into the batch scheduled then,
  which runs after k + 1. First tokens are not held back: a batch's outputs are processed as soon
  as it finishes (github:vllm-project/vllm vllm/v1/engine/core.py ``step_with_batch_queue``,
  vllm/v1/core/sched/async_scheduler.py output placeholders; async scheduling added in vllm-project/vllm PR 19970
  (0.10), on by default from vllm-project/vllm PR 27614).
* SGLang's overlap scheduler (default; ``--disable-overlap-schedule`` turns it off), 0.4 and
  later: ``Scheduler.event_loop_overlap`` receives requests, builds and launches batch k + 1, and
  only then processes batch k's result, so a request received while k runs is in batch k + 2;
  a decode needs no result on the host (the next token ids stay on the GPU, FutureMap)
  (github:sgl-project/sglang python/sglang/srt/managers/scheduler.py).
* TensorRT-LLM's PyTorch executor with the overlap scheduler (``disable_overlap_scheduler``
  false by default since 0.19): ``PyExecutor._executor_loop_overlap`` fetches new requests,
  schedules and launches batch k + 1, then updates the requests of batch k
  (github:NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py).

In the DES, iteration k + 1 is planned when iteration k ends (``Replica.plan`` at T_k); with
schedule_ahead = 1 that plan sees only the requests queued by the start of iteration k (T_{k-1}),
the moment the engine fixed it. An idle engine (nothing else to run) schedules a new request at
once, as all three loops do. A request arriving during step j of a run of decode steps ends the
run one step later (after step j + 1, ``truncate``). Effect at light load: TTFT gains one
iteration (the one already scheduled), TPOT nothing (decodes are scheduled ahead on
placeholders, so a sequence's tokens still come one per iteration).
"""

import heapq

import numpy as np


def hide_new(rep, t):
    """Take out of ``rep``'s queue the new requests the plan at ``t`` cannot see yet: those queued
    after the start of the iteration that just ended at ``t`` (tier-1 entries; preempted requests,
    tier 0, are the scheduler's own). Returns them (to ``restore``), or () when none."""
    if not rep.ahead or rep.t_end != t or rep.t_newest <= rep.t_last_start:
        return ()
    cut, q = rep.t_last_start, rep.st.queued_s
    w = rep.waiting
    hidden = [e for e in w if e[0] == 1 and q[e[3]] > cut]
    if hidden:
        keep = [e for e in w if not (e[0] == 1 and q[e[3]] > cut)]
        heapq.heapify(keep)
        rep.waiting = keep
    return hidden


def restore(rep, hidden) -> None:
    """Put the ``hidden`` queue entries back (heap order by their own keys)."""
    for e in hidden:
        heapq.heappush(rep.waiting, e)


def charge(rep, hidden, t: float, end) -> None:
    """Each request ``hidden`` from the plan at ``t`` waits at least until the iteration planned
    then ends (``end``), when a plan first sees it (``State.ahead_at``): that wait is its
    schedule-ahead share of the queueing time, ``State.ahead_s``, if that plan admits it
    (engine.des.ttft_parts; a request is held back once, as the next plan sees it)."""
    if end is None:
        return
    a, at = rep.st.ahead_s, rep.st.ahead_at
    for e in hidden:
        if a[e[3]] != a[e[3]]:
            a[e[3]] = end - t
            at[e[3]] = end


def extra_step(rep, run, j: int, t: float) -> int:
    """Steps a decode run keeps when a request arrives at ``t`` during its step j (1-based):
    one more than a synchronous loop (the step already scheduled). The request just queued at
    ``t`` is charged that step (``State.ahead_s``) when the step in progress is not the run's
    last (else the next plan holds it back and ``charge`` does)."""
    k = run.k
    rid = rep.newest_rid
    if j < k and rid >= 0 and rep.st.queued_s[rid] == t and rep.st.ahead_s[rid] != rep.st.ahead_s[rid]:
        rep.st.ahead_s[rid] = float(run.cum[j] - run.cum[j - 1])
        rep.st.ahead_at[rid] = run.start + float(run.cum[j])
    return j + 1


def mark_end(rep, run, decode: bool, t: float) -> None:
    """Record when the iteration that ends at ``t`` started (the last step of a decode run)."""
    rep.t_end = t
    if decode:
        rep.t_last_start = run.start + (float(run.cum[-2]) if run.k > 1 else 0.0)
    else:
        rep.t_last_start = run.start


def one_step(rep, t):
    """A decode run planned while new requests are hidden runs one step only (they join the
    iteration after it); returns the run's end time."""
    run = rep.run
    if run.k > 1:
        rep.run = run.first(1)
    return rep.run.start + float(np.asarray(rep.run.cum)[0])


__all__ = ["hide_new", "restore", "charge", "extra_step", "mark_end", "one_step"]
