"""One replica's KV memory, by concern:

    capacity.py  blocks per replica from the memory model (KvCapacity, kv_capacity;
                 replica_blocks: a speculative draft's share off)
    pool.py      the paged block pool: free count, watermark, swap traffic (KvPool)
    prefix.py    the HBM prefix cache: pinned entries, LRU eviction (PrefixCache)
    tiers.py     host and disk tiers below it (TieredPrefixCache, tier_setup)

Which sequence holds how many blocks stays in the replica's slot arrays; the pool only moves counts.
"""

from engine.des.kv.capacity import KvCapacity, kv_capacity, pages, replica_blocks
from engine.des.kv.pool import KvPool
from engine.des.kv.prefix import PrefixCache
from engine.des.kv.tiers import TieredPrefixCache, tier_setup

__all__ = ["KvCapacity", "kv_capacity", "replica_blocks", "pages", "KvPool", "PrefixCache", "TieredPrefixCache", "tier_setup"]
