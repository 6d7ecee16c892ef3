"""The routers: one registry, name -> router class (``DesSpec.cluster.router``; engine.spec.des.ROUTERS
lists the names). A router answers ``pick(rid, snap)``: the replica among ``snap.replicas`` for
request ``rid``, reading load from the signal snapshot (``signals.py``: fresh values, or the
gateway's record taken ``signal_delay_s`` ago). Ties go to the lowest replica index.

    round_robin         in turn over the candidates
    least_outstanding   fewest outstanding (running + waiting, as seen)
    least_kv            lowest KV-block use (seen), then fewest outstanding
    prefix_affinity     longest cached prefix in the replica's own cache (always fresh: the
                        replica's cache), then fewest outstanding
    weighted            score = w_prefix m/M - w_queue q/max(q) - w_kv kv - w_tokens x/max(x), the
                        highest wins; m = leading blocks of the request the gateway routed to that
                        replica before (its own index of routed blocks, llm-d's approximate prefix
                        scorer), M = the request's blocks; needs the gateway's snapshot (in-flight
                        tokens), so it runs with the cluster features only
The weighted router's index (``DesSpec.cluster.prefix_index``): routed (every block ever routed to a
replica, never forgotten), events (a replica's bit is cleared when its cache drops the block, as
a gateway fed by the engines' KV events knows: ``HeardCache``), lru (per replica at most as many
routed blocks as its prefix cache holds, least recently routed forgotten first). A recycled
(drained) replica forgets all its blocks.

A new router: a class here with ``pick`` and ``@register("name")``, and the name in
engine.spec.des.ROUTERS. ``routed`` / ``attach`` / ``forget`` are for routers that keep state
about the replicas (the weighted router's index); the defaults do nothing.
"""

import math
from collections import OrderedDict
from itertools import islice

from engine.des.cluster.signals import Fresh
from engine.des.kv import PrefixCache

#: router name -> router class (``cls(st, des, pool)``)
ROUTERS: dict = {}


def register(name: str):
    def deco(cls):
        ROUTERS[name] = cls
        cls.name = name
        return cls
    return deco


register_router = register


class Policy:
    """A router: ``pick(rid, snap) -> replica``; the hooks below are no-ops."""

    name = ""

    def __init__(self, st, des=None, pool=()):
        self.st, self.des = st, des

    def pick(self, rid, snap):
        raise NotImplementedError

    def routed(self, rid, rep) -> None:
        """``rid`` was sent to ``rep``."""

    def attach(self, rep) -> None:
        """``rep`` joins the pool (or comes back with a new prefix cache)."""

    def forget(self, idx) -> None:
        """Replica ``idx`` was recycled: it comes back empty."""


@register("round_robin")
class RoundRobin(Policy):
    def __init__(self, st, des=None, pool=()):
        super().__init__(st, des)
        self._rr = -1

    def pick(self, rid, snap):
        reps = snap.replicas
        self._rr = (self._rr + 1) % len(reps)
        return reps[self._rr]


@register("least_outstanding")
class LeastOutstanding(Policy):
    def pick(self, rid, snap):
        out = snap.out
        return min(snap.replicas, key=lambda r: (out[r.idx], r.idx))


@register("least_kv")
class LeastKv(Policy):
    def pick(self, rid, snap):
        out, kv = snap.out, snap.kv
        return min(snap.replicas, key=lambda r: (kv[r.idx], out[r.idx], r.idx))


@register("prefix_affinity")
class PrefixAffinity(Policy):
    def pick(self, rid, snap):
        reps, out = snap.replicas, snap.out
        hashes = self.st.hashes[rid] if self.st.hashes is not None else None
        if hashes is None or reps[0].prefix is None:
            return min(reps, key=lambda r: (out[r.idx], r.idx))
        return min(reps, key=lambda r: (-r.prefix.match(hashes, len(hashes)), out[r.idx], r.idx))


@register("weighted")
class Weighted(Policy):
    """The gateway's weighted score over its own prefix index (module docstring)."""

    def __init__(self, st, des, pool=()):
        super().__init__(st, des)
        self.owner: dict = {}             # prefix hash -> bitmask of replicas routed to
        self._routed = None               # prefix_index=lru: per replica idx an LRU of routed blocks
        if des.cluster.prefix_index == "lru":
            self._routed = {r.idx: OrderedDict() for r in pool}

    def pick(self, rid, snap):
        d, act, out, kv, tok = self.des.cluster, snap.replicas, snap.out, snap.kv, snap.tok
        counts, M = self.match(rid) if d.w_prefix else ({}, 0)
        qmax = max(1, max(int(out[r.idx]) for r in act))
        xmax = max(1.0, max(float(tok[r.idx]) for r in act))
        best, best_s = None, -math.inf
        for r in act:
            s = ((d.w_prefix * counts.get(r.idx, 0) / M) if M else 0.0) - d.w_queue * out[r.idx] / qmax \
                - d.w_kv * kv[r.idx] - d.w_tokens * tok[r.idx] / xmax
            if s > best_s:
                best, best_s = r, s
        return best

    def match(self, rid):
        """({replica idx: leading blocks of ``rid`` routed there before}, blocks of ``rid``)."""
        hashes = self.st.hashes[rid] if self.st.hashes is not None else None
        if hashes is None or not len(hashes):
            return {}, 0
        owner = self.owner
        mask = -1
        counts = {}
        b = 0
        for h in hashes.tolist():
            m = owner.get(h, 0) & mask
            dropped = mask & ~m if mask != -1 else 0
            while dropped:
                low = dropped & -dropped
                counts[low.bit_length() - 1] = b
                dropped ^= low
            mask = m
            if not mask:
                break
            b += 1
        while mask > 0:
            low = mask & -mask
            counts[low.bit_length() - 1] = b
            mask ^= low
        return counts, len(hashes)

    def routed(self, rid, rep):
        if self.st.hashes is None:
            return
        bit = 1 << rep.idx
        owner = self.owner
        hs = self.st.hashes[rid].tolist()
        for h in hs:
            owner[h] = owner.get(h, 0) | bit
        if self._routed is not None:
            lru = self._routed[rep.idx]
            for h in hs:
                lru[h] = None
                lru.move_to_end(h)
            cap = _index_cap(rep)
            if len(lru) > cap:
                forget = self._forget_fn(rep.idx)
                for _ in range(len(lru) - cap):
                    forget(lru.popitem(last=False)[0])

    def attach(self, rep):
        pc = rep.kv.prefix
        if pc is not None and self.des.cluster.prefix_index == "events":
            pc.on_drop = self._forget_fn(rep.idx)

    def forget(self, idx):
        """prefix_index events / lru forget a recycled replica's blocks; routed never forgets."""
        if self.des.cluster.prefix_index == "routed":
            return
        forget = self._forget_fn(idx)
        for h in list(self.owner):
            forget(h)
        if self._routed is not None:
            self._routed[idx].clear()

    def _forget_fn(self, idx):
        owner, keep = self.owner, ~(1 << idx)

        def forget(h):
            m = owner.get(h)
            if m is not None:
                m &= keep
                if m:
                    owner[h] = m
                else:
                    del owner[h]
        return forget


def _index_cap(rep) -> int:
    """Prefix blocks replica ``rep`` can hold: HBM blocks / pages per entry + lower tiers."""
    pc = rep.kv.prefix
    ppe = pc.pages_per_entry if pc is not None else 1
    cap = rep.total // ppe
    if pc is not None and pc.tiered:
        cap += pc.host_cap + pc.disk_cap
    return max(cap, 1)


class HeardCache(PrefixCache):
    """An HBM prefix cache that tells ``on_drop`` which entries it evicts (prefix_index=events:
    the KV events a gateway hears)."""

    on_drop = None

    def evict(self, pages: int) -> int:
        if self.on_drop is None:
            return super().evict(pages)
        # PrefixCache.evict pops min(len(lru), ceil(pages / pages_per_entry)) oldest entries
        gone = list(islice(self.lru, min(len(self.lru), -(-pages // self.pages_per_entry))))
        freed = super().evict(pages)
        for h in gone:
            self.on_drop(h)
        return freed


class Router:
    """A pool's router on fresh signals: ``pick(rid)`` (the event loop without cluster features,
    each pool of a disaggregated deployment, the live engine)."""

    def __init__(self, kind: str, replicas: list, st, des=None):
        self.kind, self.replicas, self.st = kind, replicas, st
        self.policy = ROUTERS[kind](st, des)

    def pick(self, rid: int):
        if len(self.replicas) == 1:
            return self.replicas[0]
        return self.policy.pick(rid, Fresh(self.replicas))


__all__ = ["ROUTERS", "register", "register_router", "Policy", "Router", "HeardCache",
           "RoundRobin", "LeastOutstanding", "LeastKv", "PrefixAffinity", "Weighted"]
