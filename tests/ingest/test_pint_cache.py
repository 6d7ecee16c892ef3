"""pint's on-disk cache of its definition files is an optimisation: a cache file that another
process is still writing (two test workers or Hydra jobs starting together on a cold cache) must
not stop the registry from building. Each step runs in a fresh interpreter with its own cache
folder."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("from engine.ingest.units import registry; r = registry(); "
        "print(r.Quantity('79.15 GiB').to('byte').magnitude, r.Quantity('1 TFLOPS').to('FLOPS').magnitude)")


def _run(cache: Path):
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HOME": str(cache)}
    return subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_truncated_cache_file_builds_the_registry_afresh(tmp_path):
    first = _run(tmp_path)                       # writes pint's cache under tmp_path
    assert first.returncode == 0, first.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files, "pint wrote no cache file: the test would not exercise a truncated one"
    for p in files:                              # as another process would leave them mid-write
        p.write_bytes(b"")
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr
    # 79.15 x 2^30 bytes and 1e12 FLOP/s, as pint converts them with or without its cache
    gib, tflops = map(float, again.stdout.split())
    assert gib == 79.15 * 2 ** 30 and tflops == 1e12
