"""Per-request state and run-wide counters, as numpy arrays indexed by request id (no objects)."""

import numpy as np

from engine.des.workload import RequestStream

#: Log-spaced histogram of inter-token latencies: 200 bins per decade from 1 us to 1000 s.
ITL_BINS_PER_DECADE = 200
#: log10 of the lowest histogram edge in seconds (1 us); public so readers of the histogram
#: (engine.calibration.measurements) rebuild the same edges.
ITL_LO = -6.0
_ITL_NBINS = int(9 * ITL_BINS_PER_DECADE) + 1


#: below this many elements a slot array's integer reduction runs in plain Python (``isum``)
_SMALL = 48


def isum(a) -> int:
    """Sum of a 1-D integer array (a replica's slot row): plain Python on its list below
    ``_SMALL`` elements, where numpy's per-call overhead is most of the time; exact either way."""
    return sum(a.tolist()) if len(a) < _SMALL else int(np.add.reduce(a))


def imin(a) -> int:
    """Minimum of a non-empty 1-D integer array (``isum``'s plain-Python path below ``_SMALL``)."""
    return min(a.tolist()) if len(a) < _SMALL else int(np.minimum.reduce(a))


class State:
    """Timestamps (s, NaN until set) and counters of every request, plus run-wide statistics."""

    def __init__(self, stream: RequestStream):
        n = len(stream)
        self.n = n
        self.prompt = stream.prompt
        self.output = stream.output
        self.priority = stream.priority
        self.hashes = stream.hashes
        self.arrival = stream.arrival_s.copy()
        self.next_turn, self.think_s = stream.next_turn, stream.think_s   # sessions (or None)
        self.klass = stream.klass      # request class index (DesSpec.clients.classes) or None
        self.cancelled = np.zeros(n, bool)          # expired in the queue (DesSpec.cluster.timeout_s)
        nan = lambda: np.full(n, np.nan)  # noqa: E731
        self.scheduled = nan()       # first admission into a running batch
        self.entered_s = nan()       # first entry into a replica's queue (engine.des.ttft_parts)
        self.queued_s = nan()        # latest entry into a replica's queue (engine.des.ahead)
        self.ahead_s = nan()         # wait for the iteration scheduled ahead (engine.des.ahead)
        self.ahead_at = nan()        # when a plan first sees a request held back (engine.des.ahead)
        self.first_token_engine = nan()   # first token as the engine emits it (before the front end)
        self.first_token = nan()
        self.completion = nan()
        self.last_token = nan()      # time of the last token before a preemption (for ITL)
        self.preemptions = np.zeros(n, np.int32)
        self.replica = np.full(n, -1, np.int32)
        self.emitted = np.zeros(n, np.int64)      # tokens emitted before the latest preemption
        self.cached_tokens = np.zeros(n, np.int64)  # prefix-cache hit at first admission
        self.rejected = np.zeros(n, bool)
        self.recomputed = np.zeros(n, np.int64)     # prompt + output tokens prefilled again after preemption
        self.kv_ready = np.zeros(n, bool)
        self.swapped = np.zeros(n, bool)            # KV in host memory (swap preemption)           # KV handed off by a prefill replica
        #: measurement window (t_start, t_end or inf, drop requests completing after t_end) set
        #: by the event loop from DesSpec.clients.warmup_s / exclude_drain; None = every request counts
        self.window = None
        # energy attributed to each request [J] (engine.des.features.power; zero without a power model)
        self.energy_prefill_j = np.zeros(n)
        self.energy_decode_j = np.zeros(n)
        #: per-token timestamps [s], a list of arrays per request (engine.des.outputs.token_times), or None
        self.token_times = None
        # run-wide counters
        self.tokens_out = 0
        self.decode_tokens = 0       # tokens emitted by decode steps (not a prefill's first token)
        self.spec_steps = 0          # speculative decoding: sequence-steps and the tokens they emitted
        self.spec_tokens = 0
        self.prefill_tokens = 0
        self.recompute_tokens = 0
        self.hit_tokens = 0
        self.lookup_tokens = 0
        self.itl_hist = np.zeros(_ITL_NBINS, np.float64)
        self._itl_ones: list = []     # gap arrays of one token each
        self._itl_vals: list = []     # gap arrays of ``_itl_wts`` tokens each
        self._itl_wts: list = []

    def add_itl(self, values: np.ndarray, weight) -> None:
        """Record inter-token gaps ``values`` [s], each standing for ``weight`` tokens (a whole
        number: the histogram's bins hold exact token counts, the same in any order of adding)."""
        if weight == 1.0:
            vals = self._itl_ones
        else:
            vals = self._itl_vals
            self._itl_wts.append(weight)
        vals.append(values)
        if len(vals) >= 16384:
            self.flush_itl()

    def flush_itl(self) -> None:
        """Bin the gaps recorded since the last flush into ``itl_hist``."""
        if self._itl_ones:
            self._bin(np.concatenate(self._itl_ones), None)
            self._itl_ones = []
        if self._itl_vals:
            self._bin(np.concatenate(self._itl_vals),
                      np.repeat(np.asarray(self._itl_wts, dtype=np.float64), list(map(len, self._itl_vals))))
            self._itl_vals, self._itl_wts = [], []

    def _bin(self, vals: np.ndarray, wts) -> None:
        """Add gaps ``vals`` [s] (a fresh array, overwritten) of weights ``wts`` (None: one token
        each) to the histogram; gaps <= 0 are left out."""
        ok = vals > 0
        if not ok.all():
            vals = vals[ok]
            wts = wts[ok] if wts is not None else None
        # bin = clip(int((log10(v) - ITL_LO) x bins per decade)), in place on the concatenated copy
        np.log10(vals, out=vals)
        vals -= ITL_LO
        vals *= ITL_BINS_PER_DECADE
        idx = vals.astype(np.int64)
        np.clip(idx, 0, _ITL_NBINS - 1, out=idx)
        self.itl_hist += np.bincount(idx, weights=wts, minlength=_ITL_NBINS)

    def itl_percentiles_ms(self, qs) -> list:
        """Weighted percentiles of the ITL histogram [ms] (bin centres; bins are 1.2 % wide)."""
        self.flush_itl()
        total = self.itl_hist.sum()
        if total <= 0:
            return [float("nan")] * len(qs)
        cdf = np.cumsum(self.itl_hist) / total
        out = []
        for q in qs:
            i = int(np.searchsorted(cdf, q / 100.0, side="left"))
            out.append(10 ** (ITL_LO + (i + 0.5) / ITL_BINS_PER_DECADE) * 1e3)
        return out
