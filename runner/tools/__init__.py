"""The tools around the job path (runner/ keeps compose -> specs -> engine -> files -> tracking):
simllm-report (report, plots, compare over runs read back by runs), simllm-bundle / simllm-replay
(bundle), simllm-sync (sync) and simllm-import (import_cli). simllm-calibrate and simllm-validate
stay in runner/ for now (runner/calibrate.py, runner/validate.py)."""
