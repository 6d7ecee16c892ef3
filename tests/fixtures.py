"""Plain engine specs for the engine tests, and hand formulas the tests check the engine against.

The specs are frozen dataclasses built here, with the same values as the conf/ options they name
(tests/runner/test_fixtures_match_conf.py checks that each equals what Hydra composes from conf/),
so tests/engine and tests/cost need neither Hydra nor the runner.
"""


def prefill_chunk_aggregates(chunk_len, cached_len):
    """(attn_pairs, kv_read) of a prefill chunk of ``chunk_len`` tokens after ``cached_len``
    cached ones: pairs = s*k + s(s+1)/2, read = k."""
    return chunk_len * cached_len + chunk_len * (chunk_len + 1) / 2.0, cached_len
