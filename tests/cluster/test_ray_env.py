"""runner.callbacks.ray_env: the sweep's SIMLLM_*/MLFLOW_* settings reach Ray's workers through
ray.init's runtime_env (Ray's workers do not inherit the launching process's environment); other
launchers' configs are left as they are. Needs no Ray: it checks the launcher config handed on."""

from omegaconf import OmegaConf

from runner.app import LAUNCHER_ENV
from runner.callbacks import ray_env
from runner.tracking import PARENT_ENV, SWEEP_ENV

RAY = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"


def _cfg(target, init):
    cfg = OmegaConf.create({"hydra": {"launcher": {"_target_": target, "ray": {"init": init, "remote": {}}}}})
    OmegaConf.set_readonly(cfg, True)   # as Hydra hands it to the callbacks
    return cfg


def test_ray_launcher_gets_the_sweep_environment(monkeypatch):
    monkeypatch.setenv(SWEEP_ENV, "/sweeps/a")
    monkeypatch.setenv(PARENT_ENV, "abc123")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    monkeypatch.setenv(LAUNCHER_ENV, "4242")
    monkeypatch.setenv("UNRELATED_VAR", "x")
    cfg = _cfg(RAY, {"address": "h:1", "runtime_env": {"env_vars": {"USER_SET": "1"}, "pip": ["x"]}})
    ray_env(cfg)
    rt = OmegaConf.to_container(cfg.hydra.launcher.ray.init.runtime_env)
    env = rt["env_vars"]
    assert env[SWEEP_ENV] == "/sweeps/a" and env[PARENT_ENV] == "abc123"
    assert env["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "20" and env["USER_SET"] == "1"
    assert LAUNCHER_ENV not in env and "UNRELATED_VAR" not in env
    assert rt["pip"] == ["x"] and cfg.hydra.launcher.ray.init.address == "h:1"


def test_other_launchers_untouched(monkeypatch):
    monkeypatch.setenv(SWEEP_ENV, "/sweeps/a")
    cfg = _cfg("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", {"address": None})
    before = OmegaConf.to_container(cfg)
    ray_env(cfg)
    assert OmegaConf.to_container(cfg) == before
