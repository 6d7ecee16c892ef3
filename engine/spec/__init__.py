"""Typed, frozen specs in SI units. Each validates itself on construction.

Units inside the engine: bytes, seconds, FLOP, FLOP/s, bytes/s, watts. Field names say the unit.
"""

from engine.spec.hardware import HardwareSpec
from engine.spec.model import ModelSpec, DTYPE_BYTES
from engine.spec.partition import PartitionSpec
from engine.spec.workload import WorkloadSpec
from engine.spec.calibration import CalibrationSpec, NoiseSpec
from engine.spec.bundle import Specs
from engine.spec.des import DesSpec
from engine.spec.framework import FrameworkSpec
from engine.spec.analytical import AnalyticalSpec, DisaggSpec, ParetoSpec, SpecDecodeSpec

__all__ = [
    "HardwareSpec",
    "ModelSpec",
    "PartitionSpec",
    "WorkloadSpec",
    "CalibrationSpec",
    "NoiseSpec",
    "Specs",
    "DTYPE_BYTES",
    "AnalyticalSpec",
    "DisaggSpec",
    "SpecDecodeSpec",
    "ParetoSpec",
    "FrameworkSpec",
    "DesSpec",
]
