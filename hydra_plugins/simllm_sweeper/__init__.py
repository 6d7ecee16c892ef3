"""simllm's batched sweeper for Hydra (``hydra/sweeper=simllm``).

Hydra only loads plugins from the ``hydra_plugins`` namespace package, which is why this one
small module lives outside ``runner/``; the work it does is ``runner.app.execute``.
"""
