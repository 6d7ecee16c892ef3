"""Every case of the hostile-input corpus (tests/hostile_corpus.py) ends as it should: an error
case with exit status != 0 and one ``<tool>: error:`` line naming the file, row or field and the
limit (no traceback); a valid-but-unusual input (UTF-8 BOM, ``KB``, ``output_len=1``) read with the
values written in it, each value checked against the number in the file or the hand count stated
in the case. The files are generated per case in ``tmp_path``."""

import pytest

from tests.hostile_corpus import cases, classify

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_case_is_clear(case, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMLLM_QUIET", "1")
    outcome, detail = classify(case, tmp_path)
    assert outcome == "clear", f"{case.id}: {outcome}: {detail}"


def test_corpus_covers_every_reader_and_tool():
    """The corpus feeds each reader and console script that reads user files, and each kind of fault: not one
    kind per tool but the set below (ids name the fault)."""
    tools = {c.tool for c in CASES}
    assert tools >= {"simllm", "simllm-calibrate", "simllm-import", "simllm-validate", "simllm-serve"}
    ids = " ".join(c.id for c in CASES)
    for fault in ("header-only", "all-errored", "short-outputs", "latin1", "128kib", "top-level-list",
                  "zero-heads", "fractional-hidden", "vocab-1e30", "utf8-bom", "kilobytes", "negative",
                  "non-numeric", "inf", "validate-empty", "every-request-rejected", "output-len-1",
                  "over-context", "stream-options", "deeply-nested", "content-length"):
        assert fault in ids, fault
    assert sum(c.expect == "ok" for c in CASES) >= 8      # valid inputs that must not be refused
