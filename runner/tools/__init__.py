"""The tools around the job path (runner/ keeps compose -> specs -> engine -> files -> tracking):
simllm-report (report, plots, compare over runs read back by runs), simllm-bundle / simllm-replay
(bundle), simllm-sync (sync), simllm-import (import_cli), simllm-calibrate (calibrate),
simllm-validate (validate, with the benchmark-row grammar in rowgrammar) and simllm-kernels
(kernels: the derived kernel tables of engine/cost/data)."""
