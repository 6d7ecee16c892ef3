"""KvPool: one replica's paged KV blocks, its prefix cache and swap traffic.

Block accounting (vLLM's BlockSpaceManager / KVCacheManager in closed form): the pool has
``total`` blocks of ``block_size`` tokens; ``free`` counts blocks no sequence and no prefix-cache
entry holds. Admission keeps ``watermark`` x total blocks free (vLLM V0's watermark; 0 in the
profiles whose schedulers have none). Blocks held by unpinned prefix-cache entries are
``evictable``: they count as available and are evicted least-recently-used first when a sequence
needs them (engine.des.kv.prefix.PrefixCache). Which sequence holds how many blocks stays in the
replica's slot arrays; the pool only moves counts.

Swap (preemption=swap): a preempted decoding sequence's KV goes to host memory and comes back on
re-admission, each transfer taking tokens x ``swap_s_per_token`` (one device's KV shard over its
host link); the transfer time accumulates in ``pending_s`` and is added to the next iteration
(vLLM swaps between iterations).
"""

from engine.des.kv.prefix import PrefixCache


class KvPool:
    """Free-block count, watermark, prefix cache (pinning, LRU eviction) and swap traffic."""

    __slots__ = ("total", "free", "wm", "bs", "prefix", "bt", "swap_s_per_token", "pending_s")

    def __init__(self, total_blocks: int, block_size: int, watermark: float,
                 prefix: PrefixCache | None, block_tokens: int):
        self.total = total_blocks
        self.free = total_blocks
        self.wm = int(watermark * total_blocks)
        self.bs = block_size
        self.prefix = prefix
        self.bt = block_tokens        # tokens per prefix-cache hash block
        self.swap_s_per_token = 0.0   # > 0: preempt decoding sequences by swapping their KV
        self.pending_s = 0.0          # swap transfer time to add to the next iteration

    @property
    def used(self) -> int:
        return self.total - self.free

    @property
    def load(self) -> float:
        """Fraction of blocks in use (1 when the pool is empty)."""
        return (self.total - self.free) / self.total if self.total else 1.0

    def avail(self) -> int:
        """Blocks a sequence can get now: free plus evictable prefix-cache blocks."""
        return self.free + (self.prefix.evictable_pages if self.prefix is not None else 0)

    def admits(self, need: int) -> bool:
        """Would ``need`` more blocks leave the watermark free?"""
        return self.avail() - need >= self.wm

    def take(self, need: int) -> None:
        """Hand ``need`` blocks to a sequence, evicting unpinned prefix entries when short."""
        if need > self.free:
            self.free += self.prefix.evict(need - self.free)
        self.free -= need

    def give(self, blocks: int) -> None:
        """Blocks back from a sequence."""
        self.free += blocks

    def match(self, hashes, limit: int) -> int:
        """Leading prefix-cache entries of ``hashes`` present (at most ``limit``)."""
        return self.prefix.match(hashes, limit)

    def pin(self, hashes) -> None:
        """A sequence uses these cached prefix entries (a hit): pinned while it runs."""
        self.prefix.acquire(hashes)

    def unpin(self, hashes) -> None:
        """The sequence stopped using them: unpinned entries become evictable (LRU)."""
        self.prefix.release(hashes)

    def cache_prompt(self, hashes, held_blocks: int, new_blocks: int) -> None:
        """A prefilled prompt's full prefix blocks join the cache (pinned): the sequence now holds
        ``new_blocks`` instead of ``held_blocks``, and the entries that were new take their pages
        from it."""
        new = self.prefix.insert_pinned(hashes)
        self.free += held_blocks - new_blocks - new * self.prefix.pages_per_entry

    def swap_out(self, tokens: int) -> None:
        self.pending_s += tokens * self.swap_s_per_token

    def swap_in(self, tokens: int) -> None:
        self.pending_s += tokens * self.swap_s_per_token

    def take_pending(self) -> float:
        """Swap time to add to the iteration being planned (then zero)."""
        x, self.pending_s = self.pending_s, 0.0
        return x
