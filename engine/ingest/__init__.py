"""From spec sheets and config.json files to simllm configs (pure; no Hydra, no MLflow).

- ``hwcsv``: a spec-sheet CSV (param,value,unit,precision,source ...) -> a hardware config with
  every number's source and every conversion stated;
- ``hf_config``: a HuggingFace ``config.json`` -> ModelSpec fields;
- ``simple``: the flat spec-sheet style config (num_params, compute_tflops_bf16 ...) -> hardware
  and model configs with the missing architecture terms stated;
- ``dram``: HBM / 3D-stacked DRAM bandwidth from the interface physics;
- ``sheet_vocab``: the params a sheet may carry, their kinds, units and plausibility limits;
- ``units``: the pint registry that knows TFLOPS, TOPS and Gb/s.
"""
