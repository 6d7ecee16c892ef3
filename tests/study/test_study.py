"""simllm-study (runner/tools/study.py): figures recorded from job dirs, the generated Markdown
block, and the comparison `check` makes. Expected values are written out by hand below."""

import json
import math

import pytest

from runner.tools import study as st
from experiments import studies


def test_compare_by_hand():
    rec = {"a": 100.0, "b": "PP1-TP8", "c": 1.0, "d": 5, "z": 0.0}
    now = {"a": 101.9, "b": "PP2-TP4", "c": 1.03, "e": 2.0, "z": 0.0}
    rows = {r["key"]: r for r in st.compare(rec, now, 0.02)}
    # a moved 1.9 % (< 2 %): not listed; c moved 3 %; b changed label; d gone; e new; z equal zeros
    assert set(rows) == {"b", "c", "d", "e"}
    assert rows["c"]["change"] == pytest.approx(0.03)
    assert rows["b"]["change"] is None and rows["d"]["now"] is None and rows["e"]["recorded"] is None
    assert st.compare(rec, rec, 0.0) == []


def test_round_keeps_ints_and_labels():
    assert st._round(1234.5678) == 1235.0 and st._round(0.000123456) == 0.0001235
    assert st._round(7) == 7 and st._round("single") == "single" and st._round(math.inf) == "inf"


def test_block_replaced_prose_kept():
    md = "# T\n\nprose before\n\n<!-- BEGIN simllm-study: x -->\nold\n<!-- END simllm-study -->\n\nprose after\n"
    out = st._replace_block(md, "t", "new table")
    assert "prose before" in out and "prose after" in out and "old" not in out and "new table" in out
    assert out.count("<!-- BEGIN simllm-study") == 1
    appended = st._replace_block("# T\n", "t", "tbl")
    assert appended.startswith("# T\n") and appended.rstrip().endswith(st.END)


def _job(d, prompt, part, cstar, ttft_c, ttft1):
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({
        "git_commit": "abc", "overrides": [f"partition={part}", f"workload.prompt_len={prompt}",
                                            "experiment=chunk_star_l70b8", "tracking=none"],
        "summary": {"chunk_star": cstar, "ttft_at_chunk_star_ms": ttft_c, "ttft_ms_p50": ttft1}}))


def test_chunk_study_from_job_dirs(tmp_path, monkeypatch):
    sweep = tmp_path / "run" / "chunk_star_l70b8"
    _job(sweep / "0", 2048, "tp8", 2048.0, 110.0, 110.0)          # C* = the prompt: single pass
    _job(sweep / "1", 2048, "pp8", 512.0, 147.25, 412.7)
    jobs = {"chunk_star_l70b8": st.load_jobs(sweep, "chunk_star_l70b8")}
    assert [j.overrides for j in jobs["chunk_star_l70b8"]] == [
        {"partition": "tp8", "workload.prompt_len": "2048"}, {"partition": "pp8", "workload.prompt_len": "2048"}]
    s = {x.name: x for x in studies.STUDIES}["chunk_star"]
    md, fj = st.write_study(s, jobs, "abc", out=tmp_path)
    figs = json.loads(fj.read_text())
    assert figs["commit"] == "abc" and figs["study"] == "chunk_star"
    assert figs["figures"]["chunk_star_l70b8/tp8/S=2048/chunk_star"] == "single"
    assert figs["figures"]["chunk_star_l70b8/pp8/S=2048/chunk_star"] == 512
    assert figs["figures"]["chunk_star_l70b8/pp8/S=2048/ttft_at_chunk_star_ms"] == 147.2   # 4 digits
    text = md.read_text()
    assert "| tp8 | single / 110 |" in text and "| pp8 | 512 / 147 (413) |" in text
    # a re-run whose pp8 TTFT moved 10 % is reported, the rest is not
    _job(tmp_path / "run2" / "chunk_star_l70b8" / "0", 2048, "tp8", 2048.0, 110.0, 110.0)
    _job(tmp_path / "run2" / "chunk_star_l70b8" / "1", 2048, "pp8", 512.0, 161.975, 412.7)
    now = st.figures_of(s, {"chunk_star_l70b8": st.load_jobs(tmp_path / "run2" / "chunk_star_l70b8",
                                                               "chunk_star_l70b8")})
    moved = st.compare(figs["figures"], now, 0.02)
    assert [r["key"] for r in moved] == ["chunk_star_l70b8/pp8/S=2048/ttft_at_chunk_star_ms"]
    assert moved[0]["change"] == pytest.approx(162.0 / 147.2 - 1)


def test_cli_rejects_unknown_study(capsys):
    assert st.main(["check", "nosuch"]) == 2
    assert "simllm-study: error: study = nosuch: expected one of chunk_star" in capsys.readouterr().err


@pytest.mark.slow
def test_run_experiment_end_to_end(tmp_path):
    """The real path: simllm -m in a subprocess, job dirs read back; the figures are the jobs'
    summary.json values, and a second run of the same code moves nothing."""
    exp = "jalapeno_sensitivity"
    jobs = {exp: st.run_experiment(exp, tmp_path / "a", st.ROOT, "none")}
    assert len(jobs[exp]) == 6
    s = st.Study("t", (exp,), lambda js: {f"{i}/ttft": j.get("ttft_ms_p50") for i, j in enumerate(js[exp])},
                 lambda js, f, o: "tbl")
    first = st.figures_of(s, jobs)
    raw = json.loads((tmp_path / "a" / "0" / "summary.json").read_text())["summary"]["ttft_ms_p50"]
    assert first["0/ttft"] == st._round(raw)
    again = st.figures_of(s, {exp: st.run_experiment(exp, tmp_path / "b", st.ROOT, "none")})
    assert st.compare(first, again, 0.0) == []


def test_failed_job_fails_the_study(tmp_path):
    sweep = tmp_path / "chunk_star_l70b8"
    _job(sweep / "0", 2048, "tp8", 2048.0, 110.0, 110.0)
    (sweep / "1").mkdir()
    (sweep / "1" / "error.txt").write_text("partition.tp = 3: expected a divisor of model.num_heads=64\n")
    with pytest.raises(RuntimeError, match=r"1 job\(s\) of chunk_star_l70b8 failed.*partition.tp = 3"):
        st.load_jobs(sweep, "chunk_star_l70b8")
