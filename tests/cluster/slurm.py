"""A throw-away single-node SLURM cluster on this machine: munged, MariaDB, slurmdbd, slurmctld and
slurmd, each started in a temporary folder with its own ports, and stopped (and the folder removed)
on exit.

Why every daemon: submitit follows a job's state with ``sacct``, which answers only with an
accounting store (slurmdbd on MariaDB); without it a cancelled job stays ``UNKNOWN`` and the Hydra
launcher would wait on it forever.

The packages come from the distribution (Debian 12: ``apt-get install slurm-wlm slurmdbd munge
mariadb-server``; ``.ci/cluster.sh`` installs them). ``SlurmCluster.env`` is what a client needs:
``SLURM_CONF`` naming this cluster's ``slurm.conf`` (sbatch, squeue, sacct, scancel read it).
``start_slurm()`` raises ``ClusterUnavailable`` with the reason when a binary is missing or a
daemon does not come up; the test fixtures turn that into a skip that names it.
"""

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARIES = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch",
            "sacct", "sacctmgr", "scancel", "squeue", "sinfo")


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be started here (the message says why)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def _wait(pred, timeout_s: float, what: str, log: Path | None = None):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-1500:] if log is not None and log.exists() else ""
    raise ClusterUnavailable(f"{what} did not come up in {timeout_s:g} s {tail}")


class SlurmCluster:
    def __init__(self, root: Path, conf: Path, cpus: int, host: str):
        self.root, self.conf, self.cpus, self.host = root, conf, cpus, host
        self.env = {"SLURM_CONF": str(conf)}

    def cmd(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a SLURM client command (``squeue``, ``scancel``, ...) against this cluster."""
        r = subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def jobs(self) -> list[tuple[str, str]]:
        """(job id, state) of every job in the queue (array tasks one each: ``123_4``)."""
        out = self.cmd("squeue", "-h", "-r", "-o", "%i %T").stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def accounted(self) -> dict[str, str]:
        """job id (array tasks as ``123_4``) -> final or current state, from sacct."""
        out = self.cmd("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-S", "now-1days").stdout
        return {a: b.split()[0] for a, b in (line.split("|", 1) for line in out.splitlines() if "|" in line)}

    def elapsed_s(self, job_id: str) -> list[int]:
        """Run time in seconds (sacct ElapsedRaw) of each array task of ``job_id`` that ran."""
        out = self.cmd("sacct", "-X", "-n", "-P", "-o", "JobID,ElapsedRaw", "-S", "now-1days").stdout
        return [int(b) for a, b in (line.split("|", 1) for line in out.splitlines() if "|" in line)
                if a.startswith(f"{job_id}_") and "[" not in a and b.strip().isdigit() and int(b) > 0]


@contextlib.contextmanager
def start_slurm(cpus: int = 2, timeout_s: float = 90):
    """Yield a running SlurmCluster with one node of ``cpus`` CPUs (module docstring)."""
    missing = [b for b in BINARIES if _which(b) is None]
    if missing:
        raise ClusterUnavailable(f"not installed: {', '.join(missing)} (.ci/cluster.sh installs "
                                 "slurm-wlm, slurmdbd, munge and mariadb-server)")
    if os.geteuid() != 0:
        raise ClusterUnavailable("the SLURM daemons need root here (slurmd runs jobs as their user)")
    for user in ("munge", "mysql"):
        try:
            pwd.getpwnam(user)
        except KeyError as e:
            raise ClusterUnavailable(f"no '{user}' user (its package did not install)") from e
    # outside pytest's tmp tree: munge and mysql must reach their folders
    root = Path(tempfile.mkdtemp(prefix="simllm-slurm-"))
    os.chmod(root, 0o755)
    procs: list[subprocess.Popen] = []
    logs = {}

    def daemon(name, argv, user=None):
        logs[name] = root / f"{name}.log"
        with open(logs[name], "w") as log:
            pre = ["runuser", "-u", user, "--"] if user else []
            procs.append(subprocess.Popen(pre + argv, stdout=log, stderr=subprocess.STDOUT,
                                          env={**os.environ, "SLURM_CONF": str(root / "slurm.conf")},
                                          start_new_session=True))
        return procs[-1]

    def alive(p, name):
        if p.poll() is not None:
            raise ClusterUnavailable(f"{name} exited {p.returncode}: "
                                     f"{logs[name].read_text(errors='replace')[-1500:]}")
        return True

    try:
        # munge: its own socket and key copy, run as the munge user
        mdir = root / "munge"
        mdir.mkdir()
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            subprocess.run([_which("mungekey") or "mungekey", "--create", "--keyfile", str(mdir / "munge.key")],
                           check=True, capture_output=True)
        else:
            shutil.copy(key, mdir / "munge.key")
        os.chmod(mdir / "munge.key", 0o600)
        shutil.chown(mdir / "munge.key", "munge", "munge")
        shutil.chown(mdir, "munge", "munge")
        os.chmod(mdir, 0o755)
        # The SLURM clients look for munged at its default socket only (sacctmgr ignores
        # AuthInfo=socket=), so one munged serves there; one already running is used as it is.
        msock = Path("/run/munge/munge.socket.2")
        if not _munge_ok():
            msock.parent.mkdir(parents=True, exist_ok=True)
            shutil.chown(msock.parent, "munge", "munge")
            m = daemon("munged", [_which("munged"), "--foreground", f"--socket={msock}",
                                  f"--key-file={mdir / 'munge.key'}", f"--pid-file={mdir / 'munged.pid'}",
                                  f"--log-file={mdir / 'munged.log'}", f"--seed-file={mdir / 'munged.seed'}"],
                       user="munge")
            _wait(lambda: alive(m, "munged") and _munge_ok(), timeout_s, "munged", logs["munged"])

        # MariaDB for slurmdbd, loopback TCP on a free port
        db = root / "db"
        db.mkdir()
        shutil.chown(db, "mysql", "mysql")
        r = subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={db}", "--user=mysql",
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           capture_output=True, text=True)
        if r.returncode:
            raise ClusterUnavailable(f"mariadb-install-db failed: {r.stderr.strip()[-800:]}")
        dbport, dbsock = _free_port(), db / "mysql.sock"
        d = daemon("mariadbd", [_which("mariadbd"), "--no-defaults", f"--datadir={db}", f"--socket={dbsock}",
                                f"--port={dbport}", "--bind-address=127.0.0.1", "--user=mysql",
                                f"--pid-file={db / 'mariadbd.pid'}", "--innodb-buffer-pool-size=32M",
                                "--skip-log-bin"])
        _wait(lambda: alive(d, "mariadbd") and dbsock.exists(), timeout_s, "mariadbd", logs["mariadbd"])
        mysql = _which("mariadb") or _which("mysql")
        sql = ("CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        r = subprocess.run([mysql, "--no-defaults", f"--socket={dbsock}", "-u", "root", "-e", sql],
                           capture_output=True, text=True)
        if r.returncode:
            raise ClusterUnavailable(f"MariaDB user setup failed: {r.stderr.strip()}")

        host = socket.gethostname().split(".")[0]
        dbdport, ctlport, dport = _free_port(), _free_port(), _free_port()
        for sub in ("state", "spool", "run"):
            (root / sub).mkdir()
        dbd = root / "slurmdbd.conf"
        dbd.write_text("\n".join([
            "AuthType=auth/munge", "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={dbdport}",
            "SlurmUser=root", f"LogFile={root / 'slurmdbd.daemon.log'}", f"PidFile={root / 'run/slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={dbport}",
            "StorageUser=slurm", "StoragePass=slurm", "StorageLoc=slurm_acct_db", ""]))
        os.chmod(dbd, 0o600)
        (root / "plugstack.conf").write_text("")
        mem = max(512, int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20) - 1024)
        conf = root / "slurm.conf"
        conf.write_text("\n".join([
            "ClusterName=simllm", f"SlurmctldHost={host}(127.0.0.1)", "AuthType=auth/munge",
            "CredType=cred/munge", "SlurmUser=root", f"SlurmctldPort={ctlport}", f"SlurmdPort={dport}",
            f"StateSaveLocation={root / 'state'}", f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'run/slurmctld.pid'}", f"SlurmdPidFile={root / 'run/slurmd.pid'}",
            f"SlurmctldLogFile={root / 'slurmctld.daemon.log'}", f"SlurmdLogFile={root / 'slurmd.daemon.log'}",
            f"PlugStackConfig={root / 'plugstack.conf'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "ReturnToService=2",
            # batch_sched_delay=0: a task that ends within 3 s of its start frees its CPU for the
            # next array task at the scheduler's next pass (about a second), not 3 s after the
            # last start (the default): an array of 1.2 s tasks, two CPUs, went from 1.5 to 1.06 s
            # per task; tasks of 2.3 s and more saw no change. The resume's tasks (skips) are short.
            "SchedulerType=sched/backfill", "SchedulerParameters=batch_sched_delay=0",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={dbdport}", "JobCompType=jobcomp/none",
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5", "MinJobAge=300",
            "MaxArraySize=10001", "MaxJobCount=20000", "SlurmctldParameters=enable_configless",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO", ""]))
        env = {**os.environ, "SLURM_CONF": str(conf)}

        b = daemon("slurmdbd", [_which("slurmdbd"), "-D"])
        _wait(lambda: alive(b, "slurmdbd") and _listening(dbdport), timeout_s, "slurmdbd", logs["slurmdbd"])
        r = subprocess.run([_which("sacctmgr"), "-i", "add", "cluster", "simllm"], env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode and "already exists" not in (r.stdout + r.stderr).lower():
            raise ClusterUnavailable(f"sacctmgr add cluster failed: {r.stdout} {r.stderr}")
        c = daemon("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(conf)])
        _wait(lambda: alive(c, "slurmctld") and _listening(ctlport), timeout_s, "slurmctld", logs["slurmctld"])
        s = daemon("slurmd", [_which("slurmd"), "-D", "-f", str(conf), "-N", host])

        def idle():
            alive(s, "slurmd")
            r = subprocess.run([_which("sinfo"), "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True)
            return r.returncode == 0 and r.stdout.strip().startswith(("idle", "mix", "alloc"))

        _wait(idle, timeout_s, "slurmd (node idle)", logs["slurmd"])
        yield SlurmCluster(root, conf, cpus, host)
    finally:
        if procs:  # jobs first, then the daemons in reverse order of start
            subprocess.run([_which("scancel") or "scancel", "--full", "-u", "root"],
                           env={**os.environ, "SLURM_CONF": str(root / "slurm.conf")}, capture_output=True)
        for p in reversed(procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 15)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 9)
                p.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _munge_ok() -> bool:
    """A credential made by ``munge`` decodes with ``unmunge``: a munged answers at the default socket."""
    try:
        enc = subprocess.run([_which("munge") or "munge", "-n"], capture_output=True, timeout=10)
        dec = subprocess.run([_which("unmunge") or "unmunge"], input=enc.stdout, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return enc.returncode == 0 and dec.returncode == 0
