"""The features moved to engine.des.features (build, report, bounds) and the KV share of a draft
to engine.des.kv.replica_blocks; ``csv_table`` (engine.des.metrics) keeps this name for
runner.outputs."""

from engine.des.metrics import csv_table

__all__ = ["csv_table"]
