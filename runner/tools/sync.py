"""``simllm-sync [DIR ...]``: upload job directories whose MLflow logging failed.

Looks under each DIR (default: outputs/) for job directories holding pending_sync.json and logs
each to the tracking URI it was meant for (or --uri), then removes its marker. The work is
batched: one probe, one client and one experiment look-up per store, one search per sweep for the
runs it already has, and the runs are logged by a pool of threads (``--workers``; one request
each for the run, its metrics+params+tags and its end, plus the artifacts).

The structure is kept: the jobs of a sweep become children (``mlflow.parentRunId``) of the
sweep's parent run, which is found (tag simllm.sweep_id, role sweep) or created, and which then
gets the sweep's table, plot, job counts and overrides, and ends FINISHED (FAILED if a job
failed). Idempotent: each job directory carries a job_uid; a FINISHED run with it that holds the
job's metrics counts as logged and is not logged again. A FAILED, RUNNING or KILLED run with it
(an upload that broke off) does not count: that run is completed in place and read back, and the
marker stays until it reads FINISHED with the job's metrics. Runs left RUNNING by processes of
this host that are gone (tags simllm.host / simllm.pid) are first ended KILLED; a job whose own
process is still uploading it is left to that process.
"""

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from omegaconf import OmegaConf

from runner import outputs
from runner.job import PENDING, run_fields


def _jobs(dirs: list[str]) -> tuple[list[dict], list[str], int]:
    """Pending jobs under ``dirs`` (marker, summary.json read), the lines of unreadable ones, and
    how many are being uploaded right now by their own live process (left to it)."""
    from runner import tracking

    jobs, bad, busy = [], [], 0
    for marker in sorted({m for d in dirs for m in Path(d).rglob(PENDING)}):
        job_dir = marker.parent
        try:
            pending = json.loads(marker.read_text())
            doc = json.loads((job_dir / outputs.SUMMARY).read_text())
            doc["job_uid"]
        except FileNotFoundError:
            continue   # logged (the marker removed) while this looked
        except (OSError, ValueError, KeyError) as e:
            bad.append(f"still pending {job_dir}: cannot read {marker.name} or {outputs.SUMMARY} "
                       f"({type(e).__name__}: {e}); expected the JSON files a job writes")
            continue
        if pending.get("state") == "uploading" and tracking.owner_alive(
                pending.get(tracking.HOST_TAG), pending.get(tracking.PID_TAG),
                pending.get(tracking.PID_START_TAG)):
            busy += 1
            continue
        jobs.append({"dir": job_dir, "marker": marker, "pending": pending, "doc": doc})
    return jobs, bad, busy


def _config(job_dir: Path) -> dict:
    """The job's resolved config.yaml as plain containers (PyYAML's C loader: ~10x OmegaConf)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((job_dir / outputs.CONFIG).read_text(), Loader=loader)


def _sync_group(uri: str, exp_id: str, tracking_cfg, sweep_id: str | None, items: list[dict],
                workers: int, verbose: bool) -> tuple[int, int, int]:
    """Log one sweep's pending jobs (or loose jobs: ``sweep_id`` None); (synced, already, failed)."""
    from tqdm import tqdm

    from runner import tracking

    parent = None
    if sweep_id:
        runs = tracking.runs_tagged(uri, exp_id, "simllm.sweep_id", sweep_id)
        parents = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"]
        known = {j["doc"].get("parent_run_id") for j in items}
        parent = next((r.info.run_id for r in parents if r.info.run_id in known), None) or (
            parents[0].info.run_id if parents else None)
        if parent is None:
            parent = tracking.start_parent(uri, exp_id, f"sweep:{Path(sweep_id).name}",
                                           {"simllm.sweep_id": sweep_id, "simllm.role": "sweep"})
    else:
        runs = [r for j in items for r in tracking.runs_tagged(uri, exp_id, "simllm.job_uid",
                                                                 j["doc"]["job_uid"])]
    summaries = {j["doc"]["job_uid"]: j["doc"].get("summary", {}) for j in items}
    by_uid: dict = {}
    for r in runs:   # a FINISHED run holding the job's metrics wins over a FAILED/RUNNING/KILLED one
        uid = r.data.tags.get("simllm.job_uid")
        if uid and (uid not in by_uid or _logged(r, summaries.get(uid, {}))):
            by_uid[uid] = r
    synced = already = failed = 0
    tasks = []
    for j in items:
        try:
            f = run_fields(tracking_cfg, j["dir"], j["doc"], _config(j["dir"]))
        except Exception as e:  # noqa: BLE001 - e.g. config.yaml missing: this job stays pending
            print(f"still pending {j['dir']}: {type(e).__name__}: {e}", file=sys.stderr)
            failed += 1
            continue
        old = by_uid.get(j["doc"]["job_uid"])
        if old is not None and _logged(old, j["doc"].get("summary", {})) and f["status"] == "FINISHED":
            j["marker"].unlink(missing_ok=True)
            already += 1
            if verbose:
                print(f"already logged {j['dir']} -> run {old.info.run_id}")
            continue
        if parent:
            f["tags"]["mlflow.parentRunId"] = parent
        tasks.append((j, f, old.info.run_id if old is not None else None))

    def log(task):
        j, f, run_id = task
        rid = tracking.log_run(uri, exp_id, f["run_name"], f["params"], f["summary"], f["tags"],
                               j["dir"], f["status"], run_id=run_id)
        run = tracking.client(uri).get_run(rid)   # verified before the marker goes
        if run.info.status != f["status"] or not tracking.holds(run, f["summary"]):
            raise RuntimeError(f"run {rid} reads back {run.info.status} with "
                               f"{len(run.data.metrics)} metrics; expected {f['status']} with the "
                               "job's metrics")
        return rid

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool, \
            tqdm(total=len(tasks), desc=f"simllm-sync {sweep_id or 'jobs'}", unit="run",
                 disable=None, file=sys.stderr, leave=False) as bar:
        futures = {pool.submit(log, t): t for t in tasks}
        for fut in as_completed(futures):
            j = futures[fut][0]
            bar.update()
            try:
                rid = fut.result()
            except Exception as e:  # noqa: BLE001 - this job stays pending, the others go on
                failed += 1
                j["marker"].write_text(json.dumps({**j["pending"], "error": f"{type(e).__name__}: {e}"}))
                tqdm.write(f"still pending {j['dir']}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            j["marker"].unlink(missing_ok=True)
            synced += 1
            if verbose:
                tqdm.write(f"synced {j['dir']} -> run {rid}")
    if sweep_id:
        try:
            _finish_parent(uri, parent, items[0]["dir"].parent)
        except Exception as e:  # noqa: BLE001 - the jobs are logged; the record can follow later
            print(f"simllm-sync: warning: could not record sweep {sweep_id} on its parent run "
                  f"{parent}: {type(e).__name__}: {e}", file=sys.stderr)
        print(f"sweep {sweep_id}: {synced} synced, {already} already logged, {failed} still pending "
              f"(parent run {parent})")
    return synced, already, failed


def _logged(run, summary: dict) -> bool:
    """Does this run count as the job's logged run: FINISHED, holding the summary's metrics?"""
    from runner import tracking

    return run.info.status == "FINISHED" and tracking.holds(run, summary)


def _finish_parent(uri: str, parent: str, sweep_dir: Path) -> None:
    """The sweep's record (table, plot, counts, overrides) on its parent run, which ends."""
    from runner.callbacks import finish_sweep_parent, sweep_record, write_sweep_files

    rec = sweep_record(sweep_dir)
    files = write_sweep_files(sweep_dir, rec)
    mr = sweep_dir / "multirun.yaml"
    finish_sweep_parent(uri, parent, OmegaConf.load(mr) if mr.exists() else None, rec, files)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="simllm-sync", description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["outputs"], help="where to look (default: outputs)")
    ap.add_argument("--uri", help="tracking URI to upload to (default: the one each job used)")
    ap.add_argument("--experiment", help="experiment name (default: the one each job used)")
    ap.add_argument("--workers", type=int, default=None,
                    help="runs logged at once (default: 4 to a tracking server, 1 to a database)")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per job")
    args = ap.parse_args(argv)
    for d in args.dirs:
        if not Path(d).is_dir():
            print(f"simllm-sync: error: {d}: no such directory (expected a directory holding job "
                  "directories)", file=sys.stderr)
            return 2
    if args.workers is not None and args.workers < 1:
        print(f"simllm-sync: error: --workers {args.workers}: expected a whole number >= 1",
              file=sys.stderr)
        return 2
    jobs, bad, busy = _jobs(args.dirs)
    for line in bad:
        print(line, file=sys.stderr)
    if busy:
        print(f"simllm-sync: {busy} job(s) being uploaded by their own running process: left to it")
    if not jobs:
        print("simllm-sync: nothing pending" if not bad else f"simllm-sync: 0 synced, {len(bad)} still pending")
        return 1 if bad else 0
    from runner import tracking

    groups: dict = {}
    for j in jobs:
        key = (args.uri or j["pending"].get("uri"), args.experiment or j["pending"].get("experiment"))
        groups.setdefault(key, {}).setdefault(j["doc"].get("sweep_id"), []).append(j)
    ok = already = 0
    failed = len(bad)
    for (uri, exp), sweeps in groups.items():
        n = sum(map(len, sweeps.values()))
        if not uri or not exp:
            print(f"simllm-sync: {n} job(s) name no tracking URI or experiment in {PENDING}: "
                  "give --uri and --experiment", file=sys.stderr)
            failed += n
            continue
        reason = tracking.probe(uri)
        if reason is None:
            try:
                exp_id = tracking.experiment_id(uri, exp)
                ended = tracking.end_dead_runs(uri, exp_id)
                if ended:
                    print(f"simllm-sync: {len(ended)} run(s) left RUNNING by killed processes "
                          f"ended KILLED in {uri}")
            except Exception as e:  # noqa: BLE001
                reason = f"{type(e).__name__}: {e}"
        if reason:
            print(f"simllm-sync: MLflow unavailable at {uri} ({reason}): {n} job(s) still pending",
                  file=sys.stderr)
            failed += n
            continue
        workers = args.workers or (4 if uri.split(":", 1)[0] in ("http", "https") else 1)
        cfg = OmegaConf.create({"uri": uri, "experiment": exp})
        for sweep_id, items in sweeps.items():
            try:
                s, a, f = _sync_group(uri, exp_id, cfg, sweep_id, items, workers, args.verbose)
            except Exception as e:  # noqa: BLE001 - the store failed under this group: next one
                print(f"simllm-sync: {sweep_id or 'jobs'}: {type(e).__name__}: {e}; "
                      f"{len(items)} job(s) still pending", file=sys.stderr)
                s, a, f = 0, 0, len(items)
            ok, already, failed = ok + s, already + a, failed + f
    print(f"simllm-sync: {ok} synced, {already} already logged, {failed} still pending")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
