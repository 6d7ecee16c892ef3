"""The ``simllm-validate`` console script: predicted vs published measurements, row by row.

    simllm-validate                                   # ../shared/data/reference/measured_dev.csv, calibration=default
    simllm-validate --csv my_benchmarks.csv --no-tracking --model-config Qwen2.5-7B=path/config.json
    simllm-validate --fit default --force             # fit ONE calibration on the whole set, write conf/calibration/NAME.yaml
    simllm-validate --half-split                      # fit on half the rows, report the error on the other half

Each row of the CSV (columns as in measured_dev.csv; the grammar of each cell is in
``runner.tools.rowgrammar`` and the README's "Benchmark rows" section) becomes one prediction:

* batch rows (``1``, ``batch=N``) with fixed lengths go through the analytical engine (all requests
  start together, lock-step decode); a per-user decode rate is compared as 1000 / TPOT;
* ``concurrency=N`` rows: the DES with a closed loop of N clients as benchmark tools run them
  (users ramping up over ``CLOSED_RAMP_S``, measurement after the ramp and before the drain);
* ``request_rate=R`` rows: the DES with Poisson arrivals at R req/s; ``request_rate=INF`` and
  offline rows: every request queued at t = 0;
* MLPerf ``server`` rows without a rate: the highest Poisson rate whose p99 TTFT and TPOT meet the
  scenario's constraints (``MLPERF_SERVER``), found by bisection; the row's metric at that rate;
* a dataset named instead of lengths (ShareGPT, OpenOrca): lengths drawn from the Sarathi ShareGPT
  trace's shape rescaled to the dataset's means (``rowgrammar.DATASETS``).

The serving framework profile (conf/framework/) comes from the row's framework and version
(``rowgrammar.pick_framework``); a missing TP layout ("submitter-chosen") takes the smallest power
of two whose weights leave half of each GPU's memory for KV, and the row's GPUs beyond one replica
run as data-parallel replicas. Metrics are compared like with like: a published mean with the
simulated mean, a median or unstated statistic with the simulated median, p90/p99 with the same
percentile. Errors are signed, predicted / measured - 1; the summary gives median and max |error|
per metric, per framework profile and per precision, and the coverage (predicted N of M rows,
skipped by reason). Results go to stdout, to outputs/validation/TIME/ (table.csv, report.md,
summary.json) and to an MLflow run.

``--fit NAME`` fits compute, memory-bandwidth and communication efficiency and the overheads
(scipy.optimize.least_squares, soft-L1 on log errors, each metric weighted the same) to all
expressible rows at once - one calibration for the whole set, never per row - and writes
conf/calibration/NAME.yaml. ``--half-split`` fits the same way on every other row (sorted by id)
and reports the error on the rows it did not see, so over-fitting shows.
"""

from runner.tools.validate.cases import (CLOSED_LENGTH_JITTER, CLOSED_RAMP_S, GPT_FAST_OUTPUT, GROUPS,
                                         HF_BASE_MODEL, MLPERF_SERVER, Case, build_case)
from runner.tools.validate.command import main, parser, run
from runner.tools.validate.fit import (FIT_PARAMS, FRAMEWORK_HOST, MIN_FRAMEWORK_ROWS, fit_calibration,
                                       fit_space, fitted_yaml, half_split, write_framework_steps)
from runner.tools.validate.predict import Runner
from runner.tools.validate.report import breakdown, coverage, summarize, table_text
from runner.tools.validate.rows import DEFAULT_CSV, SHAREGPT_TRACE, read_cases

__all__ = ["CLOSED_LENGTH_JITTER", "CLOSED_RAMP_S", "GPT_FAST_OUTPUT", "GROUPS", "HF_BASE_MODEL",
           "MLPERF_SERVER", "Case", "build_case", "main", "parser", "run", "FIT_PARAMS", "FRAMEWORK_HOST",
           "MIN_FRAMEWORK_ROWS", "fit_calibration", "fit_space", "fitted_yaml", "half_split",
           "write_framework_steps", "Runner", "breakdown", "coverage", "summarize", "table_text",
           "DEFAULT_CSV", "SHAREGPT_TRACE", "read_cases"]
