"""engine.des.outputs.output_format=csv: the per-request table as table.csv (the SimLLM seed's
results/q512.csv), token timestamps as ';'-joined lists; parquet stays the default."""

import json

import polars as pl
import pytest

from engine.des import DesSpec, simulate
from engine.spec import WorkloadSpec
from runner.outputs import write_result

from tests.conftest import compose_specs


@pytest.fixture(scope="module")
def sim():
    from dataclasses import replace
    specs = compose_specs()
    specs = replace(specs, workload=WorkloadSpec(prompt_len=128, output_len=8, num_requests=5,
                                                 arrival="poisson", rate_rps=5.0))
    return simulate(specs, DesSpec(outputs=dict(output_format="csv", token_times=True))).result


def test_csv_table_round_trip(sim, tmp_path):
    paths = write_result(tmp_path, sim, "x: 1\n", {"engine": "des"})
    assert (tmp_path / "table.csv").is_file() and not (tmp_path / "table.parquet").exists()
    assert tmp_path / "table.csv" in paths
    t = pl.read_csv(tmp_path / "table.csv")
    assert t.height == 5
    assert t["ttft_ms"].to_list() == pytest.approx(sim.table["ttft_ms"].to_list())
    # each row's token times: output_len of them, ';'-joined, the last one its completion
    for row, ref in zip(t.iter_rows(named=True), sim.table.iter_rows(named=True)):
        times = [float(v) for v in row["token_times_s"].split(";")]
        assert len(times) == 8 and times[-1] == pytest.approx(ref["completion_s"])
        assert len(row["itl_ms"].split(";")) == 7
    assert json.loads((tmp_path / "summary.json").read_text())["summary"]["num_requests"] == 5


def test_parquet_is_the_default(tmp_path):
    from dataclasses import replace
    specs = compose_specs()
    specs = replace(specs, workload=WorkloadSpec(prompt_len=64, output_len=4, num_requests=2))
    write_result(tmp_path, simulate(specs).result, "x: 1\n", {})
    assert (tmp_path / "table.parquet").is_file() and not (tmp_path / "table.csv").exists()


def test_bad_output_format_names_the_field():
    from engine.errors import SpecError
    with pytest.raises(SpecError, match="engine.des.outputs.output_format"):
        DesSpec(outputs=dict(output_format="xlsx"))
