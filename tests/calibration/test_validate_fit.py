"""``simllm-validate --fit``: which parameters it moves, and the files it writes."""

import shutil
from pathlib import Path

from omegaconf import OmegaConf

from runner.tools import validate
from tests.conftest import require_shared

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def _case(fw, server=()):
    return validate.Case("x", "tpot", 1.0, framework=fw, server=server)


def test_fit_space_one_step_overhead_per_framework_with_rows():
    # 3 trtllm rows, 2 sglang rows, 5 generic rows: trtllm gets its own host time per iteration on
    # top of the calibration's (the baseline), sglang keeps its profile's, generic stays neutral
    use = [_case("trtllm")] * 3 + [_case("sglang")] * 2 + [_case("generic")] * 5
    space = validate.fit_space(use)
    assert "framework.trtllm.step_overhead_s" in space
    assert "framework.sglang.step_overhead_s" not in space
    assert "framework.generic.step_overhead_s" not in space
    assert set(validate.FIT_PARAMS) <= set(space)


def test_host_overlap_is_fitted_only_where_the_engine_schedules_ahead(tmp_path):
    # 20 rows each (enough for every host term): only the profile that schedules ahead gets
    # host_overlap (a synchronous loop has no host work beside the GPU to size); the fitted
    # fraction is written as a plain number, the times in us
    use = [_case("trtllm")] * 20 + [_case("vllm_v1")] * 20
    space = validate.fit_space(use, ahead={"trtllm"})
    assert "framework.trtllm.host_overlap" in space and "framework.vllm_v1.host_overlap" not in space
    assert "framework.vllm_v1.per_output_token_s" in space
    (tmp_path / "framework").mkdir()
    shutil.copy(ROOT / "conf" / "framework" / "trtllm.yaml", tmp_path / "framework" / "trtllm.yaml")
    validate.write_framework_steps(tmp_path, {"framework.trtllm.host_overlap": 0.625,
                                              "framework.trtllm.step_overhead_s": 0.0025},
                                   "rows.csv", use, {"framework.trtllm.host_overlap": (0.5, 0.75)})
    y = OmegaConf.load(tmp_path / "framework" / "trtllm.yaml")
    assert y.host_overlap == 0.625 and y.step_overhead == "2.5e+03 us"
    assert "host_overlap: 0.625   # fitted (95 % 0.5-0.75)" in (tmp_path / "framework" / "trtllm.yaml").read_text()


def test_fit_writes_a_relative_calibration_and_the_profiles_steps(tmp_path, capsys):
    require_shared("traces", validate.SHAREGPT_TRACE)   # skips, naming the file, without ../shared
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf" / "framework", conf / "framework")
    rc = validate.main(["--csv", str(DATA / "benchmark_rows.csv"), "--no-tracking", "--des-scale", "0.1",
                        "--model-config", f"Qwen2.5-7B={DATA / 'qwen2.5-7b-config.json'}",
                        "--fit", "mine", "--max-nfev", "2", "--conf-dir", str(conf),
                        "--set", "calibration.cost.backend=auto", "--output-dir", str(tmp_path / "out")])
    assert rc == 0
    text = (conf / "calibration" / "mine.yaml").read_text()
    assert str(ROOT.parent) not in text and "benchmark_rows.csv" in text     # no machine path
    y = OmegaConf.create(text)
    assert y.name == "mine" and y.cost.backend == "auto" and 0 < y.compute_efficiency <= 1
    out = capsys.readouterr().out
    # every profile the fit moved had its step_overhead line rewritten, the rest of it untouched
    for line in out.splitlines():
        if line.endswith("(step_overhead)"):
            p = Path(line.split()[1])
            new, old = p.read_text(), (ROOT / "conf" / "framework" / p.name).read_text()
            assert "fitted by simllm-validate --fit" in new
            assert [x for x in new.splitlines() if not x.startswith("step_overhead:")] == \
                [x for x in old.splitlines() if not x.startswith("step_overhead:")]
