"""simllm engine: pure computation over typed specs (no Hydra, OmegaConf or MLflow here)."""
