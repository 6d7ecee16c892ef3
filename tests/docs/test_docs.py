"""The documentation cannot go stale: generated pages are current, every console script and config
group has its page, no page speaks of issue numbers or of one machine's paths, the site builds
strictly, and (slow) every documented command still prints what its page shows."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _gen():
    spec = importlib.util.spec_from_file_location("simllm_docs_gen", DOCS / "gen.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _gen()


def _shipped_texts():
    files = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md", ROOT / "mkdocs.yml", DOCS / "gen.py"]
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in files}


def _nav() -> str:
    return (ROOT / "mkdocs.yml").read_text()


def test_config_group_pages_are_current():
    problems = gen.config_problems()
    assert not problems, "\n".join(problems)


def test_every_config_group_has_a_page_in_the_nav():
    nav = _nav()
    groups = gen.config_groups()
    assert {"hardware", "model", "workload", "calibration/noise", "experiment"} <= set(groups)
    for group in groups:
        page = gen.page_for(group).relative_to(DOCS).as_posix()
        assert f": {page}" in nav, f"{page} (config group {group}) is not in mkdocs.yml's nav"


def test_every_option_file_is_listed():
    for group in gen.config_groups():
        text = gen.page_for(group).read_text()
        for f in gen.group_files(group):
            assert f"| `{f.stem}` |" in text, f"{f.stem} missing from {gen.page_for(group).name}"


def test_every_console_script_has_a_page_in_the_nav():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    nav = _nav()
    for name in scripts:
        page = DOCS / "tools" / f"{name}.md"
        assert page.exists(), f"no page for the console script {name}"
        assert f": tools/{name}.md" in nav, f"tools/{name}.md is not in mkdocs.yml's nav"


def test_every_page_is_in_the_nav():
    nav = _nav()
    for p in DOCS.rglob("*.md"):
        rel = p.relative_to(DOCS).as_posix()
        assert f": {rel}" in nav, f"{rel} is not in mkdocs.yml's nav"


def test_no_issue_numbers_or_machine_paths():
    for name, text in _shipped_texts().items():
        for bad in (r"\bissues?\b", r"/work/", r"/tmp/", r"/home/"):
            m = re.search(bad, text, re.I)
            if m:
                line = text[:m.start()].count("\n") + 1
                pytest.fail(f"{name}:{line}: {text.splitlines()[line - 1].strip()!r} matches {bad}")


def test_exec_blocks_parse_and_carry_output():
    n = 0
    for page in sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]:
        for item in gen.parse_page(page.read_text()):
            if isinstance(item, gen.Block):
                n += len(item.commands)
                assert any(c.output for c in item.commands), \
                    f"{page.name}:{item.start + 1}: no output recorded for $ {item.commands[0].text}"
    assert n >= 20


def test_number_tolerance():
    assert gen.same_output(["TTFT 169.39 ms  1,572"], ["TTFT 169.39 ms  1,572"], None)
    assert not gen.same_output(["TTFT 169.39 ms"], ["TTFT 169.40 ms"], None)
    assert gen.same_output(["TTFT 169.39 ms   1,572"], ["TTFT  169.40 ms 1,573"], 0.01)
    assert not gen.same_output(["TTFT 169.39 ms"], ["TPOT 169.39 ms"], 0.01)
    assert not gen.same_output(["TTFT 169.39 ms"], ["TTFT 190.0 ms"], 0.01)


def test_parse_and_rewrite_a_block(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# t\n\n<!-- file: a.txt -->\n```text\nhello\n```\n\n<!-- exec -->\n```console\n"
                    "$ cat a.txt\nstale\n$ echo one \\\n  two\n```\n")
    new, problems = gen.exec_page(page, page.read_text(), check=False, log=lambda s: None)
    assert not problems
    assert "$ cat a.txt\nhello\n$ echo one \\\n  two\none two\n```" in new
    _, problems = gen.exec_page(page, page.read_text(), check=True, log=lambda s: None)
    assert problems and "output differs" in problems[0]
    page.write_text(new)
    _, problems = gen.exec_page(page, new, check=True, log=lambda s: None)
    assert not problems


def test_strict_build(tmp_path):
    if shutil.which("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    p = subprocess.run(["mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.slow
def test_documented_outputs_are_what_the_commands_print():
    """Runs every executed block of every page (python docs/gen.py --check)."""
    problems = []
    for page in gen.pages():
        _, probs = gen.exec_page(page, page.read_text(), check=True, log=lambda s: None)
        problems += probs
    assert not problems, "stale documented outputs (python docs/gen.py rewrites them):\n\n" + "\n\n".join(problems)


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if "://" not in link:
            assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"
