"""Reading the rows: the CSV of measured points into ``Case``s, ``--model-config`` arguments,
and the request lengths of dataset rows (the Sarathi ShareGPT trace's shape, rescaled)."""

import csv
import functools
from pathlib import Path

import numpy as np

from runner import paths
from runner.tools.validate.cases import Case, build_case

DEFAULT_CSV = paths.shared_file("reference", "measured_dev.csv")     # $SIMLLM_SHARED_DATA overrides
SHAREGPT_TRACE = "sarathi_sharegpt_8k_filtered_llama2tok.csv"


def read_cases(path, model_configs: dict | None = None) -> list[Case]:
    from engine.errors import SpecError

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            cases = [build_case(r, model_configs) for r in csv.DictReader(f)]
        if not cases:       # an empty file or a header alone: nothing to validate is no pass
            raise SpecError("--csv", str(path), "a CSV of measured points with a header and at least one row")
        return cases
    except UnicodeDecodeError as e:
        raise SpecError("--csv", str(path), f"UTF-8 text (byte {e.object[e.start:e.start + 1]!r} at "
                        f"offset {e.start})") from None
    except csv.Error as e:
        raise SpecError("--csv", str(path), f"a well-formed CSV ({e})") from None



def _model_config(text: str) -> tuple:
    """--model-config NAME=PATH -> (NAME, PATH); the file must exist."""
    from engine.errors import SpecError

    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not Path(path).is_file():
        raise SpecError("--model-config", text, "NAME=PATH of an existing config.json")
    return name.strip(), str(Path(path).resolve())



@functools.lru_cache(maxsize=8)
def _trace_shape():
    """(prompt, output) lengths of the Sarathi ShareGPT trace (the shape of the dataset rows)."""
    import polars as pl

    path = paths.shared_file("traces", SHAREGPT_TRACE)
    if not path.is_file():
        from engine.errors import SpecError
        raise SpecError("trace", paths.display(path), "the Sarathi ShareGPT trace the dataset-named rows "
                        "take their length shape from (shared data root: $SIMLLM_SHARED_DATA or "
                        "conf/paths)")
    t = pl.read_csv(path)
    return t["num_prefill_tokens"].to_numpy().astype(float), t["num_decode_tokens"].to_numpy().astype(float)


@functools.lru_cache(maxsize=32)
def _dataset_lengths(n: int, means: tuple, seed: int = 0):
    """n (prompt, output) lengths: rows of the Sarathi ShareGPT trace drawn at random, each column
    scaled to the dataset's ``means`` (prompt >= 1, output >= 2)."""
    p, o = _trace_shape()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(p), size=n)
    pr = np.maximum(1, np.rint(p[idx] * means[0] / p.mean())).astype(np.int64)
    ou = np.maximum(2, np.rint(o[idx] * means[1] / o.mean())).astype(np.int64)
    return pr, ou
