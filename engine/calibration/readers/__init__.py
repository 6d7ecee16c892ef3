"""Measurement readers, one module per benchmark client's format, registered by name
(``readers.base.register``); ``engine.calibration.measurements.read_measurement`` picks one by
name or by the file's content. Import order is detection order (and the order formats are listed in)."""

from engine.calibration.readers import vllm, genai_perf, guidellm, csv_table  # noqa: F401 - registers
from engine.calibration.readers.base import READERS, Reader, detect_format, register

#: The format names, in registration order.
FORMATS = tuple(READERS)

__all__ = ["READERS", "Reader", "FORMATS", "detect_format", "register"]
