"""Predicting one row: the specs of a ``Case`` composed once (TP chosen where the row does not
state it: ``engine.plan.auto_tp``), then the analytical engine or the DES with the calibration's
parameters swapped in; MLPerf server rows bisect on the rate (``engine.plan.search.bisect``)."""

import math
from dataclasses import replace

import numpy as np

from runner.tools.validate.cases import Case
from runner.tools.validate.rows import _dataset_lengths


def _setup_key(case: Case) -> tuple:
    """What decides a row's deployment and run: rows that differ only in the metric compared
    (the TTFT and TPOT rows of one benchmark point) share one composition and one simulation."""
    return (tuple(case.overrides), case.engine, case.auto_tp_gpus, case.gpus,
            tuple(sorted(case.des.items())), repr(sorted(case.workload.items())), case.server)


class Runner:
    """Specs per case composed once; ``predict(case, cal)`` with calibration parameters swapped.
    Summaries are kept per (setup, parameters): the metrics of one benchmark point are read
    from one simulation."""

    def __init__(self, calibration: str, des_scale: float = 1.0, extra: tuple = ()):
        self.calibration = calibration
        self.extra = list(extra)     # overrides applied to every row (e.g. calibration.x=...)
        self.des_scale = des_scale   # DES request counts x this (smaller while fitting)
        self._specs = {}
        self._summaries: dict = {}
        self._how: dict = {}

    def specs(self, case: Case):
        key = _setup_key(case)
        if case.id not in self._specs and key in self._specs:
            self._specs[case.id] = self._specs[key]
            case.how += self._how.get(key, "")   # the notes the shared composition added
        if case.id not in self._specs:
            how0 = case.how
            from runner.tools.calibrate import compose
            from runner.convert import des_spec, specs_from_config

            ov = [f"calibration={self.calibration}", "engine=des", *case.overrides, *self.extra]
            cfg = compose(ov)
            specs = specs_from_config(cfg)
            if case.auto_tp_gpus:
                # TP not stated: the rule of engine.plan.auto_tp, at most the row's GPUs
                from engine.plan.auto_tp import auto_tp, weight_bytes

                wb, hb = weight_bytes(specs.model), specs.hardware.hbm_capacity_bytes
                tp = auto_tp(wb, hb, specs.model.num_heads, case.auto_tp_gpus)
                w, hbm = wb / 1e9, hb / 1e9
                ov.append(f"partition.tp={tp}")
                cfg = compose(ov)
                specs = specs_from_config(cfg)
                case.how += f"; TP not stated: TP{tp} (weights {w / tp:.0f} GB of {hbm:.0f} GB per GPU)"
            p = specs.partition
            replicas = max(1, case.gpus // (p.tp * p.pp * p.sp))
            des = des_spec(cfg)
            if case.engine == "des":
                des = des.with_(outputs=dict(progress="off"), clients=case.des,
                                cluster=dict(replicas=replicas,
                                             **({"router": "least_outstanding"} if replicas > 1 else {})))
                if replicas > 1:
                    case.how += f"; {replicas} data-parallel replicas"
            self._specs[case.id] = self._specs[key] = (specs, des)
            self._how[key] = case.how[len(how0):]
        return self._specs[case.id]

    def _stream(self, case: Case, wl: dict):
        """The request stream of a dataset row (None: the WorkloadSpec's own); arrivals from
        ``engine.des.workload.arrivals`` (Poisson seeded 1)."""
        from engine.des.workload import RequestStream, arrivals

        if "dataset" not in wl:
            return None, wl
        n = wl["num_requests"]
        pr, ou = _dataset_lengths(n, tuple(wl["means"]))
        rest = {"prompt_len": int(pr.mean()), "output_len": int(ou.mean())}
        users = wl["concurrency"] if wl["arrival"] == "closed_loop" else 0
        kind = wl["arrival"] if wl["arrival"] in ("poisson", "closed_loop") else "batch"
        arr = arrivals(kind, n, wl.get("rate_rps", 0.0), users=users, rng=1)
        return RequestStream(arrival_s=arr, prompt=pr, output=ou, priority=np.ones(n, np.int8),
                             users=users, source=f"{wl['dataset']} (rescaled Sarathi ShareGPT trace)"), rest

    def _des(self, case: Case, specs, des, wl: dict) -> dict:
        from engine.des import simulate
        from engine.spec import WorkloadSpec

        wl = dict(wl)
        stream, rest = self._stream(case, wl)
        if stream is None:
            wl.pop("means", None)
            sp = replace(specs, workload=WorkloadSpec(**wl))
        else:
            sp = replace(specs, workload=WorkloadSpec(**rest))
        return simulate(sp, des, stream=stream).result.summary

    def _server(self, case: Case, specs, des, wl: dict) -> dict:
        """MLPerf server: bisection on the Poisson rate for the highest one meeting the p99
        constraints (12 steps of ``engine.plan.search.bisect`` on the rate itself, between 0 and the
        offline request throughput)."""
        from engine.plan.search import bisect, midpoint

        ttft_max, tpot_max = case.server
        off = self._des(case, specs, des, {**wl, "arrival": "batch"})
        best = None

        def passes(rate: float) -> bool:
            nonlocal best
            s = self._des(case, specs, des, {**wl, "rate_rps": rate})
            ok = s.get("ttft_ms_p99", math.inf) <= ttft_max and s.get("tpot_ms_p99", math.inf) <= tpot_max
            if ok:
                best = s
            return ok

        lo, _ = bisect(passes, 0.0, float(off.get("request_throughput_rps") or 1.0), midpoint, steps=12)
        if best is None:
            return {}
        best = dict(best)
        best["server_rate_rps"] = lo
        return best

    def _scale(self, case: Case) -> float:
        """The DES request-count scale of ``case``: 1 for a row run by a benchmark client, whose
        run length is part of what it measures (a closed loop's first wave is a larger share of
        a shorter run), else ``des_scale``."""
        return 1.0 if case.workload.get("client") else self.des_scale

    def predict(self, case: Case, params: dict | None = None) -> float:
        s = self.summary(case, params)
        v = s.get(case.key)
        if v is None and case.key == "total_throughput_tok_s" and case.engine == "analytical":
            # a static batch processes prompt + output tokens per request in the same time
            wl = case.workload
            v = s["throughput_tok_s"] * (wl["prompt_len"] + wl["output_len"]) / wl["output_len"]
        return float(v) if v is not None else float("nan")

    def summary(self, case: Case, params: dict | None = None) -> dict:
        """The whole summary of ``case``'s run with ``params`` swapped in (one run per setup and
        parameter set; the rows of one benchmark point share it)."""
        specs, des = self.specs(case)
        # the parameters this row depends on: the calibration's and its own profile's (another
        # profile's host costs do not touch it, so a fit moving them re-runs only that profile's rows)
        own = tuple(sorted((k, v) for k, v in (params or {}).items()
                           if not k.startswith("framework.") or k.startswith(f"framework.{case.framework}.")))
        key = (_setup_key(case), own, self._scale(case))
        s = self._summaries.get(key)
        if s is None:
            if len(self._summaries) > 20_000:
                self._summaries.clear()
            s = self._summaries[key] = self._summary(case, specs, des, params)
        return s

    def _summary(self, case: Case, specs, des, params: dict | None) -> dict:
        """The run's summary (analytical or DES) with ``params`` swapped in."""
        from engine.spec import WorkloadSpec

        if params:
            cal = {k: v for k, v in params.items() if not k.startswith("framework.")}
            specs = replace(specs, calibration=replace(specs.calibration, **cal))
            pre = f"framework.{case.framework}."
            fw = {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}
            if fw:
                specs = replace(specs, framework=replace(specs.framework, **fw))
                if des.framework is not None:
                    des = replace(des, framework=specs.framework)
        wl = dict(case.workload)
        if case.engine == "analytical":
            from engine.analytical import run

            s = run(replace(specs, workload=WorkloadSpec(**wl))).summary
        else:
            if "num_requests" in wl and not wl.get("client"):
                # offline and server rows: the stated (or default) request count per replica, so
                # that DP replicas do not each get a sliver and spend the run draining (client
                # rows keep the client's run: ``_scale``)
                per = (des.cluster.replicas or 1) if (wl.get("arrival") == "batch" or case.server) else 1
                wl["num_requests"] = max(100, int(wl["num_requests"] * self.des_scale)) * per
            s = self._server(case, specs, des, wl) if case.server else self._des(case, specs, des, wl)
            if s:
                s = dict(s)
                s["total_throughput_tok_s"] = s.get("throughput_tok_s", math.nan) + s.get("input_throughput_tok_s", math.nan)
        return s
