"""The reference of bench_runner.py: a plain ``@hydra.main`` job that logs to MLflow the way a
typical Hydra + MLflow project does (fluent API: set_tracking_uri, set_experiment, start_run,
log_params of the config, log_metrics), with a trivial roofline computation as its work.

    python benchmarks/_plain_app.py -m hbm_bandwidth=2e12,3e12 batch_size=1,2 uri=sqlite:///x.db
"""

from dataclasses import dataclass

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf


@dataclass
class Plain:
    uri: str = "sqlite:///mlflow.db"
    experiment: str = "plain"
    hbm_bandwidth: float = 3.35e12
    peak_flops: float = 989e12
    tp: int = 1
    batch_size: int = 1
    params_b: float = 8.0


ConfigStore.instance().store(name="plain", node=Plain)


@hydra.main(version_base="1.3", config_path=None, config_name="plain")
def main(cfg: Plain) -> None:
    import mlflow

    weights = cfg.params_b * 1e9 * 2 / cfg.tp
    tpot = max(weights / cfg.hbm_bandwidth, 2 * cfg.params_b * 1e9 * cfg.batch_size / cfg.tp / cfg.peak_flops)
    mlflow.set_tracking_uri(cfg.uri)
    mlflow.set_experiment(cfg.experiment)
    with mlflow.start_run():
        mlflow.log_params(OmegaConf.to_container(cfg))
        mlflow.log_metrics({"tpot_ms": tpot * 1e3, "throughput_tok_s": cfg.batch_size / tpot})


if __name__ == "__main__":
    main()
