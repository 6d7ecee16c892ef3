"""runner.job.commit_of: the commit a job records (``simllm.git_commit``), read from one git
process. Expected values come from git itself, asked separately: ``git rev-parse HEAD`` for the
commit, and a file changed, staged or untracked for the "-dirty" suffix (untracked files never
make a checkout dirty)."""

import shutil
import subprocess

import pytest

from runner.job import commit_of

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    return tmp_path


def test_commit_clean_dirty_staged_untracked(repo):
    assert commit_of(repo) == "unknown"                      # no commit yet
    (repo / "a.txt").write_text("one\n")
    assert commit_of(repo) == "unknown"                      # untracked, still no commit
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "first")
    head = _git(repo, "rev-parse", "HEAD")
    assert commit_of(repo) == head
    (repo / "b.txt").write_text("untracked\n")              # untracked: not dirty
    assert commit_of(repo) == head
    (repo / "a.txt").write_text("two\n")                     # changed in the work tree
    assert commit_of(repo) == head + "-dirty"
    _git(repo, "add", "a.txt")                               # staged
    assert commit_of(repo) == head + "-dirty"
    _git(repo, "commit", "-q", "-m", "second")
    assert commit_of(repo) == _git(repo, "rev-parse", "HEAD") != head


def test_outside_a_checkout_is_unknown(tmp_path):
    assert commit_of(tmp_path / "missing") == "unknown"
    inside = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True)
    if inside.returncode:                                    # tmp_path is not in a checkout
        assert commit_of(tmp_path) == "unknown"
