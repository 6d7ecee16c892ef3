"""The capacity estimate is held to the API server's capacity (engine.plan.bound._api_capped)."""

import numpy as np

from engine.des.config import deployment
from engine.plan import bound
from tests.fixtures import NO_HOST, specs, with_fields


def test_estimate_is_held_to_one_over_the_api_servers_time():
    # one FIFO server of s per request serves at most 1 / s requests/s: 100 ms -> 10 req/s,
    # whatever the engine behind it could take (the same deployment with the server off is faster)
    lengths = bound.Lengths(np.full(64, 512), np.full(64, 128))
    free = deployment(with_fields(specs(), framework=NO_HOST))[0]
    slow = deployment(with_fields(specs(), framework=dict(NO_HOST, per_request_s=0.1)))[0]
    e0 = bound.estimate(free, lengths, 0.99, 0, 0)
    e1 = bound.estimate(slow, lengths, 0.99, 0, 0)
    assert e0.rate_rps > 10.0
    assert e1.rate_rps == 10.0 and e1.limit == "api_server"


def test_the_cap_counts_the_server_time_per_prompt_token():
    # 50 ms per request + 512 prompt tokens x 97.65625 us = 100 ms per request: 10 req/s again
    lengths = bound.Lengths(np.full(64, 512), np.full(64, 128))
    slow = deployment(with_fields(specs(), framework=dict(NO_HOST, per_request_s=0.05,
                                                          per_request_token_s=0.05 / 512)))[0]
    e = bound.estimate(slow, lengths, 0.99, 0, 0)
    assert e.rate_rps == 10.0 and e.limit == "api_server"
