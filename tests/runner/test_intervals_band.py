"""A DES job's intervals rest on the load band of its own summary (compose API, run_job, no
tracking): engine.uncertainty.regimes.load_band of queueing_ms_mean / ttft_ms_mean, named in the
regime of its assumption lines, with the share's numbers in its "interval load band" line.

Test error model: DES Poisson (load open), vllm_v1, 16-bit, measured (h100_sxm has vLLM tables),
every metric and statistic; per band ten residuals b + 0.00, b + 0.01 ... b + 0.09 with b = 0.0
(light), 0.2 (moderate), 0.4 (heavy). By hand: c = b + 0.045, scores |r - c| = 0.005, 0.005,
0.015, 0.015, ..., 0.045, 0.045; 80 %: k = ceil(11 x 0.8) = 9 -> q = 0.045, so the factors are
exp(-(b + 0.09)) and exp(-b): light x0.914 to x1, moderate x0.741 to x0.819, heavy x0.607 to
x0.670. The two jobs (1 and 128 req/s, 60 requests) land in different bands (the default
deployment: 0.605 moderate and 0.924 heavy when written), which the test checks too: the band
follows the job's own run, not its config."""

import json
import math

import numpy as np
import pytest

from engine.uncertainty import fit
from runner.job import run_job

METRICS = ("ttft", "tpot", "e2e", "throughput")
BASE = {"light": 0.0, "moderate": 0.2, "heavy": 0.4}


@pytest.fixture
def table(tmp_path):
    regs, res = [], []
    for band, b in BASE.items():
        for m in METRICS:
            for s in ("center", "tail"):
                regs += [{"metric": m, "stat": s, "load": "open", "band": band, "framework": "vllm_v1",
                          "precision": "16-bit", "backend": "measured"}] * 10
                res += list(b + np.arange(10) / 100)
    return str(fit(regs, res).save(tmp_path / "t.json"))


def _band(share):
    return "light" if share < 0.6 else ("moderate" if share < 0.7 else "heavy")


def test_des_job_takes_the_band_of_its_own_summary(cfg_of, tmp_path, table):
    bands = []
    for rate in (1.0, 128.0):
        cfg = cfg_of("engine=des", "workload=poisson_chat", "workload.num_requests=60", f"workload.rate_rps={rate}",
                     f"uncertainty.table={table}", "tracking.enabled=false", "print_table=false")
        job = tmp_path / str(rate)
        run_job(cfg, job, [])
        s = json.loads((job / "summary.json").read_text())["summary"]
        share = s["queueing_ms_mean"] / s["ttft_ms_mean"]
        band = _band(share)
        bands.append(band)
        b = BASE[band]
        for k in ("ttft_ms_p50", "tpot_ms_p99", "throughput_tok_s"):
            assert s[f"{k}_lo"] == pytest.approx(s[k] * math.exp(-(b + 0.09)), rel=1e-6), (rate, k)
            assert s[f"{k}_hi"] == pytest.approx(s[k] * math.exp(-b), rel=1e-6), (rate, k)
        notes = (job / "assumptions.md").read_text().replace("\\|", "|")
        line = next(x for x in notes.splitlines() if x.startswith("| interval ttft_ms_p50 |"))
        assert (f"regime 'metric=ttft|load=open|band={band}|stat=center|framework=vllm_v1|precision=16-bit|"
                "backend=measured'") in line and "pooled" not in line
        band_line = next(x for x in notes.splitlines() if x.startswith("| interval load band |"))
        assert f"| {band} |" in band_line and f"= {share:.3f}" in band_line
    assert bands[0] != bands[1], bands


def test_static_job_has_band_none_and_no_band_line(cfg_of, tmp_path):
    # an analytical job's regime carries band=none (rows fitted without a band: static -> none,
    # regimes.complete), and it gets no load-band line
    regs = [{"metric": m, "stat": s, "load": "static", "framework": "vllm_v1", "precision": "16-bit",
             "backend": "measured"} for m in METRICS for s in ("center", "tail") for _ in range(10)]
    t = str(fit(regs, np.tile(np.arange(10) / 100, len(METRICS) * 2)).save(tmp_path / "s.json"))
    cfg = cfg_of(f"uncertainty.table={t}", "tracking.enabled=false", "print_table=false")
    run_job(cfg, tmp_path / "job", [])
    notes = (tmp_path / "job" / "assumptions.md").read_text().replace("\\|", "|")
    assert ("regime 'metric=ttft|load=static|band=none|stat=center|framework=vllm_v1|precision=16-bit|"
            "backend=measured'") in notes
    assert "interval load band" not in notes


def test_intervals_from_reads_the_band_column(tmp_path):
    # simllm-validate's table.csv carries each row's band; one written before it has no column:
    # no entry (the command then files DES rows under unknown); a band outside BANDS is refused
    from engine.errors import SpecError
    from runner.tools.validate.intervals import predictions_from

    head = "id,metric,engine,measured,predicted,signed_error,how,skipped,compared_with,framework,precision"
    new, old, bad = tmp_path / "new", tmp_path / "old", tmp_path / "bad"
    for d in (new, old, bad):
        d.mkdir()
    (new / "table.csv").write_text(head + ",band\nA,ttft,des,10,12,0.2,,,ttft_ms_mean,sglang,16-bit,heavy\n"
                                   "B,tpot,analytical,5,5,0,,,tpot_ms_p50,vllm_v1,16-bit,none\n")
    (old / "table.csv").write_text(head + "\nC,ttft,des,10,9,-0.1,,,ttft_ms_mean,sglang,16-bit\n")
    (bad / "table.csv").write_text(head + ",band\nD,ttft,des,10,9,-0.1,,,ttft_ms_mean,sglang,16-bit,busy\n")
    bands: dict = {}
    assert predictions_from([str(new), str(old)], bands) == {"A": 12.0, "B": 5.0, "C": 9.0}
    assert bands == {"A": "heavy", "B": "none"}
    with pytest.raises(SpecError, match="busy"):
        predictions_from([str(bad)], {})


def test_validation_row_takes_the_band_of_its_predicted_summary():
    # set_bands reads the summary each row's prediction came from (the runner's cache): a closed
    # loop with 30 of 40 ms queueing -> share 0.75 -> heavy; a Poisson row 10 of 40 ms -> 0.25 ->
    # light; an analytical row -> none without reading a summary; a skipped row keeps no band
    from runner.tools.validate.cases import Case
    from runner.tools.validate.intervals import set_bands

    class FakeRunner:
        def __init__(self):
            self.asked = []

        def summary(self, case, params=None):
            self.asked.append((case.id, params))
            return {"C": {"queueing_ms_mean": 30.0, "ttft_ms_mean": 40.0},
                    "P": {"queueing_ms_mean": 10.0, "ttft_ms_mean": 40.0}}[case.id]

    cases = [Case("C", "ttft", 50.0, engine="des", workload={"arrival": "closed_loop"}, predicted=45.0),
             Case("P", "tpot", 9.0, engine="des", workload={"arrival": "poisson"}, predicted=10.0),
             Case("S", "tpot", 9.0, engine="analytical", predicted=10.0),
             Case("X", "ttft", 9.0, engine="des", skip="no hardware config")]
    r = FakeRunner()
    set_bands(cases, r, {"compute_efficiency": 0.7})
    assert [c.band for c in cases] == ["heavy", "light", "none", ""]
    assert r.asked == [("C", {"compute_efficiency": 0.7}), ("P", {"compute_efficiency": 0.7})]
