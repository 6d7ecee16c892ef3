"""Discrete-event serving engine: a request stream served by continuous-batching replicas, each an
iteration-level scheduler over a paged KV pool, behind a router; per-request TTFT/TPOT/ITL.

Reading guide (open in this order):
    run.py          ``simulate(specs) -> SimResult`` / ``run(specs) -> RunResult``: build, loop,
                    summarise; the bound label from the step model's decode pass
    assembly.py     the ONE assembly of a deployment (replicas, KV pools, prefix caches, step
                    functions, features) that ``simulate`` and the live engine both use
    cluster/        the event loop and the fleet, one module per job (its own reading guide):
      loop.py         ``Loop``: iteration ends, arrivals, plans; deterministic ties; no feature
                      branches: cluster features reach it through one ``Hooks`` object (hooks.py,
                      null by default)
      routers.py      the router registry: a class per name, ``pick(rid, snapshot)`` on fresh or
                      delayed signals (signals.py)
      fleet.py        the cluster features' hooks, composed of gateway.py, shedding.py,
                      deadlines.py, autoscaler.py, telemetry.py (time series, decision trace);
                      counterfactual.py the regret of a re-run
    replica.py      one replica: running slots (structure of arrays) that price and commit a plan
      queue.py        its waiting queue and the queue policy (fcfs, priority, sjf)
      admission.py    the KV-fit test (written once), admission, decode reservation, preemption
      departures.py   completion, hand-off to a decode replica, abort
      runs.py         the priced iterations (MixedRun, DecodeRun)
    schedulers/     one module per policy (vllm, sarathi, orca, sglang) with its traits;
                    ``schedule(replica, t) -> Plan``
    kv/             capacity in blocks, the block pool, the prefix cache, host/disk tiers
    features/       optional behaviour behind null objects: plain or speculative decoding, power
                    and the TDP throttle, token timestamps, head-of-line detector, lower bounds,
                    what they add to the results (report.py)
    workload/       the request stream: arrivals, lengths, traces and trace importers, clients,
                    sessions
    pricing.py      step-time functions from engine.analytical.step.StepModel (+ noise hook)
    state.py        per-request timestamps and counters (numpy arrays by request id)
    metrics.py      the per-request table and the percentile summary
    live.py         ``LiveEngine``: the same replicas stepped by an outside clock (simllm-serve)

Extension points (touch counts):
    a scheduler policy   its traits in engine/spec/scheduling.py (one record; engine.spec
                         validation, ``DesSpec.token_budget`` and engine.plan.bound read it) +
                         engine/des/schedulers/<name>.py (a ``Scheduler`` with ``schedule``,
                         ``@register("<name>")``) + its import in schedulers/__init__.py:
                         3 files, 3 places
    a feature            engine/des/features/<name>.py (a ``Feature`` overriding the hooks it
                         needs, or a decoding/power slot strategy) + ``features.build`` (+
                         ``features.report`` for its figures)
    a trace importer     engine/des/workload/importers/<name>.py calling ``register`` + its import
    a router             a class in engine/des/cluster/routers.py (``pick(rid, snapshot)``,
                         ``@register("<name>")``) + the name in engine.spec.des.ROUTERS: 2 files
    a fleet control      engine/des/cluster/<job>.py + its calls from the ``Fleet`` hooks
                         (cluster/fleet.py) + its settings in engine/spec/des.py: 3 files

``run(specs)`` and ``simulate(specs)`` read their settings from ``specs.des`` (DesSpec, one sub-spec
per concern: ``des.scheduling``, ``des.kv``, ``des.clients``, ``des.cluster``, ``des.power``,
``des.outputs``; engine/spec/des.py), whose null scheduler settings come from ``specs.framework``
(FrameworkSpec); a DesSpec passed explicitly
replaces ``specs.des``. Step times come from ``engine.analytical.step``. No Hydra, OmegaConf or
MLflow here.
"""

from engine.des.config import DesSpec
from engine.des.run import SimResult, run, simulate
from engine.des.workload import RequestStream, build_stream

__all__ = ["DesSpec", "run", "simulate", "SimResult", "RequestStream", "build_stream"]
