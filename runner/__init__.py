"""simllm runner: the only package that knows Hydra and MLflow. Thin: compose -> specs -> engine ->
files -> MLflow."""

__version__ = "0.1.0"
