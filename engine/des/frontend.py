"""The front end as a queue (``framework.frontend_tok_s``): a single FIFO server through which
every token the engine emits passes before the client sees it.

Mechanism. The engine hands each iteration's outputs to the API-server side as one batch: vLLM V1
``EngineCore`` puts one ``EngineCoreOutputs`` per step on its output queue, and ``AsyncLLM``'s
output handler loop takes them one at a time, runs ``OutputProcessor.process_outputs``
(incremental detokenisation, stop strings, one ``RequestOutput`` per request) and puts each
request's output on its stream (github:vllm-project/vllm vllm/v1/engine/async_llm.py
``output_handler``, vllm/v1/engine/output_processor.py; V1, 0.8 and later); SGLang's scheduler
sends each batch's token ids to the DetokenizerManager process, which detokenises the batch and
passes it to the TokenizerManager that streams it (github:sgl-project/sglang
python/sglang/srt/managers/detokenizer_manager.py, tokenizer_manager.py). Both are one process
working through batches in order, in parallel with the GPU. With a service rate of mu tokens/s,
an iteration that ends at a_j and emits m_j tokens leaves the front end at

    f_j = max(a_j, f_{j-1}) + m_j / mu          (a single server, FIFO, batches whole)

and its tokens reach the clients then (every token of the batch at f_j). When mu exceeds the
engine's token rate f_j - a_j stays at m_j / mu; when the engine is faster the queue builds and
delays first tokens and streamed tokens alike, and the client's completion with them. The GPU is
not slowed (the engine does not wait for its output handler), so iterations keep their price.
One front end per replica (one API server process per engine). Units: seconds, tokens/s.

Run form: with D_j = m_0 + ... + m_j and h_j = f_j - D_j, h_j = max(a_j - D_{j-1}, h_{j-1})
(h_{-1} = the time the server frees), so f = maximum.accumulate(max(a - D + m, free)) + D.
"""

import numpy as np


class FrontEnd:
    """A FIFO front end of ``rate`` tokens/s (see the module docstring)."""

    def __init__(self, rate_tok_s: float):
        self.s_per_token = 1.0 / float(rate_tok_s)
        self.free = -np.inf         # when the server finishes the batch it is on

    def batch(self, a: float, m) -> float:
        """The time the ``m`` tokens of an iteration ending at ``a`` reach the clients."""
        f = max(a, self.free) + float(m) * self.s_per_token
        self.free = f
        return f

    def run(self, a: np.ndarray, m) -> np.ndarray:
        """Client times of the steps of a decode run ending at ``a`` (array), ``m`` tokens
        each (a number, or an array per step)."""
        d = np.broadcast_to(np.asarray(m, dtype=float) * self.s_per_token, np.shape(a))
        D = np.cumsum(d)
        h = np.maximum.accumulate(np.maximum(np.asarray(a, dtype=float) - D + d, self.free))
        f = h + D
        self.free = float(f[-1])
        return f


def make(rate_tok_s: float):
    """A ``FrontEnd`` of that rate, or None (no front-end queue) when the rate is 0."""
    return FrontEnd(rate_tok_s) if rate_tok_s else None


__all__ = ["FrontEnd", "make"]
