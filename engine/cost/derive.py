"""Measured kernel tables (../shared/data/kernels, parquet) -> the compact tables shipped in
engine/cost/data/tables.npz.

Pure: takes the directory of the measured tables and the spec-sheet peaks of each table set, and
returns a dict of numpy arrays (``save`` writes it, ``load`` reads it back). What is kept:

* latencies in **seconds** (the source is milliseconds per call), float32, on fixed grids of the
  shape axes that matter (GRIDS below); grid points the source did not measure are NaN (filled
  at load time by engine.cost.grid.fill_missing, never stored);
* GEMM: per (chip, framework, dtype) a [m, n, k] grid. The m grid drops the m = 2^j + 1 points
  of the source (tile-boundary probes) and some intermediate sizes; n and k drop 32, 64 and 51200;
* attention: per (chip, framework, kv dtype, head_dim in 64/128/256) a [combo, batch, length]
  grid, combo = (heads, kv_heads) per GPU as ``_kept_heads`` selects; no
  sliding window (window_size 0), bf16 attention math. Decode length = context = isl + step;
* MLA (context_mla_perf / generation_mla_perf): per (chip, framework, kv dtype) [heads, batch, len];
* MoE: balanced routing only; per (chip, framework, dtype) a [config, tokens] grid, config =
  (hidden, inter, topk, experts, tp, ep) with tp x ep <= 8 or tp = 1 and ep <= 64;
* collectives: NCCL all_reduce / all_gather / alltoall (fp16 rows) and the framework's own
  all-reduce (bf16, the CUDA-graph variant where both are measured) per [n_gpus, message bytes].
  ``message_size`` in the source counts ELEMENTS: bytes = 2 x message_size for fp16/bf16 (checked:
  the fp16 rows take twice the time of the int8 rows of equal message_size at large sizes, and
  8-GPU NCCL all-reduce bus bandwidth then stays below the NVLink per-direction figure).

Keys are "chip/framework/op/..."; axis grids are under "axes/..."; versions under ".../version".
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

FRAMEWORKS = ("trtllm", "vllm", "sglang")
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
               "int8_wo": "int8_wo", "int4_wo": "int4_wo", "nvfp4": "nvfp4",
               "w4a16_mxfp4": "mxfp4_w4a16", "w4a8_mxfp4_mxfp8": "mxfp4_w4a8"}
#: Spec-sheet peaks stored per table set, in this order (FLOP/s, byte/s; NaN = not on the sheet).
PEAK_KEYS = ("bf16", "fp8", "fp4", "int8", "hbm_bandwidth", "scaleup_bandwidth")

GRIDS = {
    "gemm/m": [1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256, 512, 768, 1024, 1536,
               2048, 3072, 4096, 8192, 16384, 32768],
    "gemm/n": [128, 256, 512, 768, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192,
               10240, 12288, 16384, 65536],
    "attn_prefill/batch": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "attn_prefill/len": [1, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "attn_decode/batch": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
    "attn_decode/len": [2, 8, 32, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
    "mla/heads": [1, 2, 4, 8, 16, 32, 64, 128],
    "moe/tokens": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "comm/n_gpus": [2, 4, 8],
    "comm/bytes": [2 ** j for j in range(9, 31)],
}
GRIDS["gemm/k"] = GRIDS["gemm/n"]
GRIDS["mla_prefill/batch"] = GRIDS["attn_prefill/batch"]
GRIDS["mla_prefill/len"] = GRIDS["attn_prefill/len"]
GRIDS["mla_decode/batch"] = GRIDS["attn_decode/batch"]
GRIDS["mla_decode/len"] = GRIDS["attn_decode/len"]
HEAD_DIMS = (64, 128, 256)


def _table(root: Path, chip: str, op_dir: str, fw: str, name: str):
    """(DataFrame, version) of the newest version folder holding ``name``.parquet, or (None, None)."""
    paths = sorted((root / chip / op_dir / fw).glob(f"*/{name}.parquet"))
    if not paths:
        return None, None
    p = paths[-1]
    return pl.read_parquet(p), p.parent.name


def _grid(df: pl.DataFrame, cols: list, grids: list) -> np.ndarray:
    """Rows -> float32 array over the grids (seconds; min over duplicate rows; NaN unmeasured)."""
    out = np.full([len(g) for g in grids], np.nan)
    index = [{v: i for i, v in enumerate(g)} for g in grids]
    keep = pl.all_horizontal([pl.col(c).is_in(list(g)) for c, g in zip(cols, grids)])
    d = df.filter(keep).group_by(cols).agg(pl.col("latency").min())
    if d.height == 0:
        return out.astype(np.float32)
    pos = tuple(np.array([index[a][v] for v in d[c].to_list()], dtype=np.intp) for a, c in enumerate(cols))
    out[pos] = d["latency"].to_numpy() * 1e-3          # ms per call -> s
    return out.astype(np.float32)


def _gemm(t: dict, root: Path, chip: str, fw: str):
    df, ver = _table(root, chip, "gemm", fw, "gemm_perf")
    if df is None:
        return
    t[f"{chip}/{fw}/gemm/version"] = np.array(ver)
    for src, dt in DTYPE_NAMES.items():
        d = df.filter(pl.col("gemm_dtype") == src)
        if d.height:
            g = _grid(d, ["m", "n", "k"], [GRIDS["gemm/m"], GRIDS["gemm/n"], GRIDS["gemm/k"]])
            if np.isfinite(g).any():
                t[f"{chip}/{fw}/gemm/{dt}"] = g


def _kept_heads(heads: int, kv_heads: int) -> bool:
    """Head configurations kept: kv_heads 1, 2, 4 or 8 with a power-of-two group size up to 16,
    and multi-head attention (kv_heads = heads) up to 64 heads. Others scale from these."""
    if heads % kv_heads:
        return False
    ratio = heads // kv_heads
    if ratio == 1:
        return heads <= 64 and heads & (heads - 1) == 0
    return kv_heads in (1, 2, 4, 8) and ratio in (2, 4, 8, 16)


def _attention(t: dict, root: Path, chip: str, fw: str):
    for op, name in (("attn_prefill", "context_attention_perf"), ("attn_decode", "generation_attention_perf")):
        df, ver = _table(root, chip, "attention", fw, name)
        if df is None:
            continue
        t[f"{chip}/{fw}/{op}/version"] = np.array(ver)
        if "window_size" in df.columns:
            df = df.filter(pl.col("window_size") == 0)
        df = df.filter(pl.col("attn_dtype") == "bfloat16")
        df = df.with_columns((pl.col("isl") + pl.col("step")).alias("len"))
        for kv_src, kv in (("bfloat16", "bf16"), ("fp8", "fp8")):
            for hd in HEAD_DIMS:
                d = df.filter((pl.col("kv_cache_dtype") == kv_src) & (pl.col("head_dim") == hd))
                combos = sorted({(h, g) for h, g in d.select("num_heads", "num_key_value_heads").iter_rows()
                                 if _kept_heads(h, g)})
                if not combos:
                    continue
                arrs = []
                for h, g in combos:
                    dd = d.filter((pl.col("num_heads") == h) & (pl.col("num_key_value_heads") == g))
                    arrs.append(_grid(dd, ["batch_size", "len"], [GRIDS[f"{op}/batch"], GRIDS[f"{op}/len"]]))
                arr = np.stack(arrs)
                ok = np.isfinite(arr).any(axis=(1, 2))
                if ok.any():
                    t[f"{chip}/{fw}/{op}/{kv}/hd{hd}"] = arr[ok]
                    t[f"{chip}/{fw}/{op}/{kv}/hd{hd}/combos"] = np.array(combos, dtype=np.int32)[ok]


def _mla(t: dict, root: Path, chip: str, fw: str):
    for op, name in (("mla_prefill", "context_mla_perf"), ("mla_decode", "generation_mla_perf")):
        df, ver = _table(root, chip, "mla", fw, name)
        if df is None:
            continue
        t[f"{chip}/{fw}/{op}/version"] = np.array(ver)
        df = df.filter(pl.col("mla_dtype") == "bfloat16").with_columns((pl.col("isl") + pl.col("step")).alias("len"))
        for kv_src, kv in (("bfloat16", "bf16"), ("fp8", "fp8")):
            d = df.filter(pl.col("kv_cache_dtype") == kv_src)
            if d.height:
                g = _grid(d, ["num_heads", "batch_size", "len"],
                          [GRIDS["mla/heads"], GRIDS[f"{op}/batch"], GRIDS[f"{op}/len"]])
                if np.isfinite(g).any():
                    t[f"{chip}/{fw}/{op}/{kv}"] = g


def _moe(t: dict, root: Path, chip: str, fw: str):
    df, ver = _table(root, chip, "moe", fw, "moe_perf")
    if df is None:
        return
    t[f"{chip}/{fw}/moe/version"] = np.array(ver)
    df = df.filter((pl.col("distribution") == "balanced")
                   & (((pl.col("moe_tp_size") * pl.col("moe_ep_size")) <= 8)
                      | ((pl.col("moe_tp_size") == 1) & (pl.col("moe_ep_size") <= 64))))
    cfg_cols = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    for src, dt in DTYPE_NAMES.items():
        d = df.filter(pl.col("moe_dtype") == src)
        if not d.height:
            continue
        configs = sorted(set(d.select(cfg_cols).iter_rows()))
        arrs = []
        for c in configs:
            dd = d.filter(pl.all_horizontal([pl.col(k) == v for k, v in zip(cfg_cols, c)]))
            arrs.append(_grid(dd, ["num_tokens"], [GRIDS["moe/tokens"]]))
        arr = np.stack(arrs)
        ok = np.isfinite(arr).sum(axis=1) >= 2
        if ok.any():
            t[f"{chip}/{fw}/moe/{dt}"] = arr[ok]
            t[f"{chip}/{fw}/moe/{dt}/configs"] = np.array(configs, dtype=np.int32)[ok]


def _elements_to_bytes(df: pl.DataFrame, dtype_col: str) -> pl.DataFrame:
    width = {"half": 2, "bfloat16": 2, "float16": 2, "int8": 1, "float32": 4, "fp8": 1}
    return df.with_columns((pl.col("message_size") * pl.col(dtype_col).replace_strict(width)).alias("bytes"))


def _comm(t: dict, root: Path, chip: str):
    df, ver = _table(root, chip, "comm", "nccl", "nccl_perf")
    if df is not None:
        t[f"{chip}/nccl/version"] = np.array(ver)
        df = _elements_to_bytes(df.filter(pl.col("nccl_dtype") == "half"), "nccl_dtype")
        for op in ("all_reduce", "all_gather", "alltoall"):
            d = df.filter(pl.col("op_name") == op)
            if d.height:
                t[f"{chip}/nccl/{op}"] = _grid(d, ["num_gpus", "bytes"], [GRIDS["comm/n_gpus"], GRIDS["comm/bytes"]])
    for fw in FRAMEWORKS:
        df, ver = _table(root, chip, "comm", fw, "custom_allreduce_perf")
        if df is None:
            continue
        if "backend" in df.columns and df["backend"].str.ends_with("_graph").any():
            df = df.filter(pl.col("backend").str.ends_with("_graph"))
        t[f"{chip}/{fw}/custom_allreduce/version"] = np.array(ver)
        df = _elements_to_bytes(df, "allreduce_dtype")
        t[f"{chip}/{fw}/custom_allreduce"] = _grid(df, ["num_gpus", "bytes"], [GRIDS["comm/n_gpus"], GRIDS["comm/bytes"]])


def derive(kernels_dir, peaks: dict) -> dict:
    """All compact tables from the measured tables under ``kernels_dir``.

    ``peaks``: table-set name (the folder, e.g. "h100_sxm") -> {"bf16": FLOP/s, "fp8": ..., "fp4":
    ..., "int8": ..., "hbm_bandwidth": byte/s, "scaleup_bandwidth": byte/s, "source": text}; only
    table sets with peaks are derived (the transfer curves need them).
    """
    root = Path(kernels_dir)
    t: dict = {}
    for name, g in GRIDS.items():
        t[f"axes/{name}"] = np.array(g, dtype=np.float64)
    for chip in sorted(peaks):
        if not (root / chip).is_dir():
            continue
        p = peaks[chip]
        t[f"peaks/{chip}"] = np.array([np.nan if p.get(k) is None else float(p[k]) for k in PEAK_KEYS])
        t[f"peaks/{chip}/source"] = np.array(str(p.get("source", "")))
        for fw in FRAMEWORKS:
            _gemm(t, root, chip, fw)
            _attention(t, root, chip, fw)
            _mla(t, root, chip, fw)
            _moe(t, root, chip, fw)
        _comm(t, root, chip)
    t["chips"] = np.array(sorted(k.split("/")[1] for k in t if k.startswith("peaks/") and k.count("/") == 1))
    return t


def save(tables: dict, path) -> None:
    """Write the tables as one compressed .npz (no pickled objects)."""
    np.savez_compressed(path, **tables)


def load(path) -> dict:
    """Read tables written by ``save``."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


class LazyTables(Mapping):
    """Tables written by ``save``, each array decompressed on its first access (then kept): the
    same keys and arrays as ``load``. A run reads a few of the ~760 arrays; decompressing them all
    cost ~0.07 CPU-s of every process that priced anything with measured kernels. The file's
    bytes are read at once (no file handle stays open: safe across fork)."""

    def __init__(self, path):
        import io

        self._z = np.load(io.BytesIO(Path(path).read_bytes()), allow_pickle=False)
        self._keys = tuple(self._z.files)
        self._known = frozenset(self._keys)
        self._arrays: dict = {}

    def __getitem__(self, key):
        a = self._arrays.get(key)
        if a is None:
            if key not in self._known:
                raise KeyError(key)
            a = self._arrays[key] = self._z[key]
        return a

    def __contains__(self, key):
        return key in self._known

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def same(a: dict, b: dict) -> list:
    """Keys whose arrays differ between two table dicts (NaN equal to NaN); [] when identical."""
    diff = sorted(set(a) ^ set(b))
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if x.dtype.kind in "fc":
            if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
                diff.append(k)
        elif x.shape != y.shape or not np.array_equal(x, y):
            diff.append(k)
    return diff
