"""Admission at the fleet's door (in order): max_model_len (prompt + output above it:
rejected), then shedding (outstanding per active replica above shed_outstanding: arrivals of
priority class >= shed_priority rejected)."""


class Shedding:
    def __init__(self, des, st, trace):
        self.des, self.st, self.trace = des, st, trace
        self.rejected_max_len = 0
        self.shed = 0

    def admit(self, rid: int, t: float, active: list) -> str | None:
        """Reason to reject ``rid`` at arrival (reject_max_len | shed) or None."""
        d, st = self.des.cluster, self.st
        if d.max_model_len and int(st.prompt[rid]) + int(st.output[rid]) > d.max_model_len:
            self.rejected_max_len += 1
            return self.trace.note(t, rid, "reject_max_len")
        if d.shed_outstanding and int(st.priority[rid]) >= d.shed_priority:
            tot = sum(r.n + len(r.waiting) for r in active)
            if tot > d.shed_outstanding * max(len(active), 1):
                self.shed += 1
                return self.trace.note(t, rid, "shed")
        return None


__all__ = ["Shedding"]
