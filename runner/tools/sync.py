"""``simllm-sync [DIR ...]``: upload job directories whose MLflow logging failed.

Looks under each DIR (default: outputs/) for job directories holding pending_sync.json, logs each
to the tracking URI it was meant for (or --uri), and removes the marker. Idempotent: each job
directory carries a job_uid, and a directory already in the experiment is not logged twice.
"""

import argparse
import sys
from pathlib import Path

from omegaconf import OmegaConf

from runner.job import PENDING, track_job_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="simllm-sync", description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["outputs"], help="where to look (default: outputs)")
    ap.add_argument("--uri", help="tracking URI to upload to (default: the one each job used)")
    ap.add_argument("--experiment", help="experiment name (default: the one each job used)")
    args = ap.parse_args(argv)
    markers = sorted({m for d in args.dirs for m in Path(d).rglob(PENDING)})
    if not markers:
        print("simllm-sync: nothing pending")
        return 0
    ok = failed = 0
    for marker in markers:
        job_dir = marker.parent
        pending = OmegaConf.load(marker)
        tracking_cfg = OmegaConf.create({"uri": args.uri or pending.uri,
                                         "experiment": args.experiment or pending.experiment})
        rid = track_job_dir(tracking_cfg, job_dir, quiet=True)
        if rid:
            ok += 1
            print(f"synced {job_dir} -> run {rid}")
        else:
            failed += 1
            err = OmegaConf.load(marker).get("error", "?")
            print(f"still pending {job_dir}: {err}", file=sys.stderr)
    print(f"simllm-sync: {ok} synced, {failed} still pending")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
