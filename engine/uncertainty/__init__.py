"""Calibrated prediction intervals: split-conformal quantiles of the validation residuals
log(predicted / measured), per regime (metric, statistic, load kind, load band, framework
profile, precision, kernel backend), with thin regimes pooled into coarser ones.

    from engine.uncertainty import ErrorModel, load_band, regime_of
    em = ErrorModel.load()                      # the shipped table (engine/uncertainty/data)
    iv = em.interval(regime_of("ttft_ms_p50", load="static", framework="vllm_v1",
                               precision="16-bit", backend="measured"), level=0.8)
    lo, hi = iv.bounds(169.0)                   # ms: the measured value lies here with prob >= 0.8
    # a DES job: its load band from its own summary (queueing_ms_mean / ttft_ms_mean)
    regime_of("ttft_ms_p50", "closed", "sglang", "16-bit", "measured", band=load_band("closed", summary))

Pure numpy; no Hydra, no MLflow. ``conformal`` holds the math, ``regimes`` the keys.
"""

from engine.uncertainty.conformal import ErrorModel, Interval, conformal_rank, covered, fit, halves, residual
from engine.uncertainty.regimes import HIERARCHY, HEADLINE, LOAD_KINDS, load_band, regime_of

__all__ = ["ErrorModel", "Interval", "conformal_rank", "covered", "fit", "halves", "residual", "HIERARCHY", "HEADLINE",
           "LOAD_KINDS", "load_band", "regime_of"]
