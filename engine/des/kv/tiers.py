"""KV offload tiers below HBM for the prefix cache: host DRAM, then local disk (LMCache / vLLM
KV-offload style), LRU eviction down the tiers.

The HBM tier is engine.des.kv.prefix.PrefixCache (pinned entries in use, unpinned ones in LRU
order). With tiers, an HBM entry evicted for space moves to the host tier (most recently used
there); when the host tier is full its least recently used entry moves to disk; when the disk is
full its least recently used entry is dropped. A lookup (``match``) counts leading prefix blocks
present in any tier. A hit on a lower tier promotes the entry back into HBM (pinned while the
request runs; it needs ``pages_per_entry`` free blocks there) and costs the transfer
    t = blocks x block_tokens x kv_bytes_per_token / bandwidth_of_that_tier
(kv_bytes_per_token of the whole model; the bandwidth the replica's aggregate link: host =
hardware.host_bandwidth per device x devices per replica unless kv_host_bandwidth_gb_s is set;
disk = kv_disk_bandwidth_gb_s), added to the next iteration before it runs, like a swap-in (the
load is not overlapped with compute: LMCache's synchronous retrieve). A lower-tier copy is moved,
not duplicated (an entry lives in exactly one tier).

Capacities in entries: floor(tier bytes / (block_tokens x kv_bytes_per_token)) per replica.
Per-tier hit tokens are counted at a request's first admission (``hit_tokens``: hbm, host, disk).
"""

from collections import OrderedDict

from engine.des.kv.prefix import PrefixCache


class TieredPrefixCache(PrefixCache):
    """PrefixCache with host and disk tiers (capacities in entries; seconds per entry moved up)."""

    tiered = True

    def __init__(self, pages_per_entry: int, host_entries: int, disk_entries: int,
                 host_s_per_entry: float, disk_s_per_entry: float):
        super().__init__(pages_per_entry)
        self.host: OrderedDict = OrderedDict()
        self.disk: OrderedDict = OrderedDict()
        self.host_cap, self.disk_cap = host_entries, disk_entries
        self.host_s, self.disk_s = host_s_per_entry, disk_s_per_entry
        self.hit_entries = {"hbm": 0, "host": 0, "disk": 0}
        self.demotions = {"host": 0, "disk": 0}
        self.dropped = 0
        self.on_drop = None       # f(hash) when an entry leaves the last tier (engine.des.cluster.fleet)

    def match(self, hashes, limit: int) -> int:
        n = 0
        lru, pins, host, disk = self.lru, self.pins, self.host, self.disk
        for h in hashes[:limit]:
            if h in pins or h in lru or h in host or h in disk:
                n += 1
            else:
                break
        return n

    def lower(self, hashes) -> tuple[int, float, int, int]:
        """(HBM pages the lower-tier entries of ``hashes`` need, transfer s, host entries, disk
        entries) for promoting them; pure."""
        nh = nd = 0
        host, disk = self.host, self.disk
        for h in hashes:
            if h in host:
                nh += 1
            elif h in disk:
                nd += 1
        return ((nh + nd) * self.pages_per_entry, nh * self.host_s + nd * self.disk_s, nh, nd)

    def acquire(self, hashes) -> None:
        """Pin the entries (promoting lower-tier ones into HBM; the caller takes their pages)."""
        lru, pins, host, disk = self.lru, self.pins, self.host, self.disk
        for h in hashes:
            if h in pins:
                pins[h] += 1
            elif h in lru:
                del lru[h]
                pins[h] = 1
            else:
                if h in host:
                    del host[h]
                else:
                    del disk[h]
                pins[h] = 1

    def insert_pinned(self, hashes) -> int:
        """As PrefixCache's; an entry present in a lower tier is superseded by the fresh HBM copy."""
        host, disk = self.host, self.disk
        for h in hashes:
            if h in host:
                del host[h]
            elif h in disk:
                del disk[h]
        return super().insert_pinned(hashes)

    def evict(self, pages: int) -> int:
        """Evict HBM LRU entries (to the host tier, its overflow to disk, disk's overflow
        dropped) until ``pages`` pages are freed; returns the pages freed."""
        freed = 0
        lru = self.lru
        while freed < pages and lru:
            h, _ = lru.popitem(last=False)
            freed += self.pages_per_entry
            self.evictions += 1
            self._down(h)
        return freed

    def _down(self, h) -> None:
        if self.host_cap:
            self.host[h] = None
            self.demotions["host"] += 1
            if len(self.host) <= self.host_cap:
                return
            h, _ = self.host.popitem(last=False)
        if self.disk_cap:
            self.disk[h] = None
            self.demotions["disk"] += 1
            if len(self.disk) <= self.disk_cap:
                return
            h, _ = self.disk.popitem(last=False)
        self.dropped += 1
        if self.on_drop is not None:      # the gateway's prefix index forgets it (prefix_index=events)
            self.on_drop(h)


def tier_setup(specs, des, block_tokens: int) -> tuple[int, int, float, float]:
    """(host entries, disk entries, s per host entry, s per disk entry) of one replica from the
    DesSpec tiers and the hardware's host link (see the module docstring)."""
    from engine.analytical import memory
    from engine.errors import SpecError

    kvpt = float(memory.kv_bytes_per_token(specs.model))
    entry_bytes = block_tokens * kvpt
    devices = specs.partition.devices_per_replica
    host_bw = des.kv.kv_host_bandwidth_gb_s * 1e9
    if des.kv.kv_host_gb and not host_bw:
        hb = specs.hardware.host_bandwidth_bytes_s
        if not hb:
            raise SpecError("engine.des.kv.kv_host_bandwidth_gb_s", des.kv.kv_host_bandwidth_gb_s,
                            f"a host-link bandwidth for kv_host_gb={des.kv.kv_host_gb:g}: hardware "
                            f"{specs.hardware.name} has no host_bandwidth; set hardware.host_bandwidth "
                            "or engine.des.kv.kv_host_bandwidth_gb_s")
        host_bw = hb * devices
    host_entries = int(des.kv.kv_host_gb * 1e9 // entry_bytes)
    disk_entries = int(des.kv.kv_disk_gb * 1e9 // entry_bytes)
    host_s = entry_bytes / host_bw if host_entries else 0.0
    disk_s = entry_bytes / (des.kv.kv_disk_bandwidth_gb_s * 1e9) if disk_entries else 0.0
    return host_entries, disk_entries, host_s, disk_s


__all__ = ["TieredPrefixCache", "tier_setup"]
