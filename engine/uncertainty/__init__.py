"""Calibrated prediction intervals: split-conformal quantiles of the validation residuals
log(predicted / measured), per regime (metric, statistic, load kind, framework profile,
precision, kernel backend), with thin regimes pooled into coarser ones.

    from engine.uncertainty import ErrorModel, regime_of
    em = ErrorModel.load()                      # the shipped table (engine/uncertainty/data)
    iv = em.interval(regime_of("ttft_ms_p50", load="static", framework="vllm_v1",
                               precision="16-bit", backend="measured"), level=0.8)
    lo, hi = iv.bounds(169.0)                   # ms: the measured value lies here with prob >= 0.8

Pure numpy; no Hydra, no MLflow. ``conformal`` holds the math, ``regimes`` the keys.
"""

from engine.uncertainty.conformal import ErrorModel, Interval, conformal_rank, covered, fit, halves, residual
from engine.uncertainty.regimes import HIERARCHY, HEADLINE, LOAD_KINDS, regime_of

__all__ = ["ErrorModel", "Interval", "conformal_rank", "covered", "fit", "halves", "residual", "HIERARCHY", "HEADLINE",
           "LOAD_KINDS", "regime_of"]
