#!/usr/bin/env bash
# The cluster tests' packages (tests/cluster/): a single-node SLURM cluster from the distribution
# (slurm-wlm, its accounting daemon slurmdbd on MariaDB, munge) and the launchers' Python extras
# into the active environment (the submitit and Ray launchers, beside the joblib one; pip is not
# run again where both already import). The tests
# start the daemons themselves (tests/cluster/slurm.py, `ray start --head`) and stop them at the
# end; where a package cannot be installed here, those tests are skipped with the reason.
set -uo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null; then
  if command -v apt-get >/dev/null; then
    ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      slurm-wlm slurmdbd munge mariadb-server) >/dev/null 2>&1 \
      || echo "ci: SLURM/MariaDB could not be installed; the SLURM tests will be skipped"
  else
    echo "ci: no apt-get; the SLURM tests will be skipped"
  fi
fi
if ! python -c "import hydra_plugins.hydra_submitit_launcher, hydra_plugins.hydra_ray_launcher" 2>/dev/null; then
  pip install -q -e '.[cluster,ray]' || echo "ci: the launcher extras could not be installed; the Ray tests will be skipped"
fi
