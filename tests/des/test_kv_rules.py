"""KV capacity by each framework's own rule (engine.analytical.kvcache.kv_room, read by the DES
through engine.des.kv.kv_capacity) and SGLang's new-token-ratio admission and retraction
(engine.des.admission), on plain specs.

Hand arithmetic for Qwen3-32B (64 layers, hidden 5120, 64 query heads and 8 KV heads of 128, FFN
25600 gated, vocabulary 151936, untied embeddings) on one H100 whose runtime reports V = 80e9 x
1.062333 = 84,986,640,000 bytes (conf/hardware/h100_sxm.yaml: hbm_capacity 80 GB, the sheet's
hbm_visible 79.15 GiB as hbm_visible_fraction; every framework rule sizes against V):

    parameters   per layer: q 5120 x 8192 + k, v 2 x 5120 x 1024 + o 8192 x 5120
                 + gate/up/down 3 x 5120 x 25600 = 487,587,840; x 64 = 31,205,621,760
                 + embedding and head 2 x 151936 x 5120 = 1,555,824,640
                 + RMSNorm weights 2 x 5120 per layer + 5120 final = 660,480
                 = 32,762,106,880 (Qwen3's q/k norms, 16,384, are not in the model spec)
    weights      BF16: x 2 = 65,524,213,760 bytes; FP8: 32,762,106,880 bytes (per device / tp)
    KV per token 2 (K, V) x 8 heads x 128 x 64 layers x 2 bytes = 262,144 (BF16); 131,072 (FP8);
                 split min(tp, 8) ways over a replica
    activations  the profiling pass: T tokens x (2 x 5120 + 2 x 25600 / tp) x act bytes
                 + S rows x 151936 x 4 bytes / tp (fp32 logits)

vLLM V1 (V x 0.9 - weights - activations at T = 8192, S = 1024), BF16 TP1:
    act = 8192 x 61440 x 2 + 1024 x 151936 x 4 = 1,006,632,960 + 622,329,856 = 1,628,962,816
    KV = 76,487,976,000 - 65,524,213,760 - 1,628,962,816 = 9,334,799,424 B -> 35,609 tokens
SGLang (mem_fraction_static = round((G - reserved) / G, 3), G = V / 2^20 = 81,049.6 MiB,
    reserved = 512 + 1.5 x 8192 + 2 x 160 + 1024 x tp / 8 MiB; KV = (V - R) x f - weights, R the
    0.7 GiB = 751,619,276.8 B in use before the weights load), BF16 TP1:
    reserved = 13,248 MiB, f = round(67,801.6 / 81,049.6, 3) = 0.837
    KV = 70,504,712,345 - 65,524,213,760 = 4,980,498,585 B -> 18,999 tokens
    TP2: reserved 13,376, f = round(0.83497, 3) = 0.835: KV = 70,336,242,304 - 32,762,106,880
    = 37,574,135,424 B per device, x 2 / 262,144 -> 286,667 tokens
TensorRT-LLM ((V - weights - activations at T = 8192, S = 2048 - 2 GB reserve) x 0.9), BF16 TP1:
    act = 1,006,632,960 + 2048 x 151936 x 4 = 2,251,292,672
    KV = (V - 65,524,213,760 - 2,251,292,672 - 2e9) x 0.9 = 13,690,020,211 B -> 52,223 tokens
The neutral profile keeps (V - weights - activations at T = 8192, S = 256 - 2 GB) x 0.9.
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical import kvcache
from engine.des.kv import kv_capacity
from engine.des.replica import Replica
from engine.des.state import State
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import DesSpec, FrameworkSpec, ModelSpec, PartitionSpec
from tests.fixtures import FRAMEWORK, specs

QWEN3_32B = ModelSpec(name="qwen3_32b", num_layers=64, hidden_size=5120, num_heads=64, num_kv_heads=8,
                      head_dim=128, ffn_size=25600, vocab_size=151936, attention="gqa",
                      tied_embeddings=False)
QWEN3_32B_FP8 = replace(QWEN3_32B, weight_dtype="fp8", kv_dtype="fp8", activation_dtype="fp8")

#: the memory-relevant values of conf/framework/sglang.yaml and trtllm.yaml
SGLANG = FrameworkSpec(name="sglang", scheduler="sglang", chunked_prefill=True, chunk_size=8192,
                       max_num_seqs=1024, max_num_batched_tokens=16384, block_size=1,
                       cuda_graph_sizes=(1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104,
                                         112, 120, 128, 136, 144, 152, 160), watermark=0.0,
                       kv_rule="static_fraction", runtime_reserve_bytes=0.7 * 2 ** 30,
                       new_token_ratio=0.7, new_token_ratio_min=0.098,
                       retract_decode_steps=20)
TRTLLM = FrameworkSpec(name="trtllm", scheduler="orca", chunked_prefill=True, chunk_size=0,
                       max_num_seqs=2048, max_num_batched_tokens=8192, preemption="none",
                       block_size=32, kv_usable_fraction=0.9, watermark=0.0)

PARAMS = 487_587_840 * 64 + 2 * 151_936 * 5_120 + 660_480
#: the memory the H100's runtime reports (module docstring)
V = 80e9 * 1.062333


def _hand(rule, fp8, tp):
    """The engine's own rule by hand (module docstring), tokens of KV per replica."""
    wb = 1 if fp8 else 2
    w = PARAMS * wb / tp
    per_token = 2 * 8 * 128 * 64 * wb
    act_row = (2 * 5120 + 2 * 25600 / tp) * wb

    def act(T, S):
        return T * act_row + S * 151936 * 4 / tp

    if rule == "vllm":
        kv = V * 0.9 - w - act(8192, 1024)
    elif rule == "sglang":
        g = V / 2 ** 20
        reserved = max(512 + 1.5 * 8192 + 2 * 160 + 1024 * tp / 8, 10 * 1024)
        kv = (V - 0.7 * 2 ** 30) * round((g - reserved) / g, 3) - w
    elif rule == "trtllm":
        kv = (V - w - act(8192, 2048) - 2e9) * 0.9
    else:
        kv = (V - w - act(8192, 256) - 2e9) * 0.9
    return max(kv, 0.0) * min(tp, 8) / per_token


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("name", ["generic", "vllm", "sglang", "trtllm"])
def test_capacity_by_the_frameworks_rule(name, tp, fp8):
    fw = {"generic": FRAMEWORK["generic"], "vllm": FRAMEWORK["vllm_v1"], "sglang": SGLANG,
          "trtllm": TRTLLM}[name]
    s = replace(specs(), model=QWEN3_32B_FP8 if fp8 else QWEN3_32B, partition=PartitionSpec(tp=tp),
                framework=fw)
    cap = kv_capacity(s, 1, fw.max_num_batched_tokens if name != "sglang" else 16384,
                      fw.max_num_seqs)
    assert cap.tokens == pytest.approx(_hand(name, fp8, tp), rel=1e-9)


def test_worked_figures_of_the_docstring():
    assert _hand("vllm", False, 1) == pytest.approx(9_334_799_424 / 262_144, rel=1e-12)
    assert int(_hand("vllm", False, 1)) == 35_609
    assert int(_hand("sglang", False, 1)) == 18_999 and int(_hand("sglang", False, 2)) == 286_667
    assert int(_hand("trtllm", False, 1)) == 52_223
    assert float(kvcache.sglang_mem_fraction_static(V, 8192, 160, 1, 1)) == 0.837
    # on the sheet's SI figure (a chip whose runtime total is not known) SGLang's own rule gives 0.826
    assert float(kvcache.sglang_mem_fraction_static(80e9, 8192, 160, 1, 1)) == 0.826


def test_both_engines_read_one_capacity():
    # the analytical footprint with the profile's rule gives the DES's KV room
    s = replace(specs(), model=QWEN3_32B, framework=SGLANG)
    cap = kv_capacity(s, 1, 16384, 1024)
    rule = kvcache.framework_rule(SGLANG, 16384)
    fp = kvcache.footprint(QWEN3_32B, 1024, 1152, 1, 1, 1, 1, 16384.0, V, 2e9, 0.9, 1, rule)
    assert float(fp["kv_capacity"]) / 1e9 == pytest.approx(cap.kv_capacity_gb, rel=1e-12)
    assert not bool(fp["fits"])          # 1024 x 1152 tokens do not fit in 18,999
    assert bool(kvcache.footprint(QWEN3_32B, 1, 1152, 1, 1, 1, 1, 16384.0, V, 2e9, 0.9, 1,
                                  rule)["fits"])


def test_user_settings_move_the_capacity():
    # framework.gpu_memory_utilization=0.95 adds 0.05 x V = 4.249e9 bytes = 16,210 tokens;
    # framework.mem_fraction_static=0.85 replaces 0.837: + 0.013 x (V - 0.7 GiB) = 1.095e9 B = 4,177 tokens
    base = replace(specs(), model=QWEN3_32B, framework=FRAMEWORK["vllm_v1"])
    more = replace(base, framework=replace(FRAMEWORK["vllm_v1"], gpu_memory_utilization=0.95))
    d = kv_capacity(more, 1, 8192, 1024).tokens - kv_capacity(base, 1, 8192, 1024).tokens
    assert d == pytest.approx(0.05 * V / 262_144, rel=1e-9)
    sg = replace(base, framework=SGLANG)
    sg85 = replace(base, framework=replace(SGLANG, mem_fraction_static=0.85))
    d = kv_capacity(sg85, 1, 16384, 1024).tokens - kv_capacity(sg, 1, 16384, 1024).tokens
    assert d == pytest.approx(0.013 * (V - 0.7 * 2 ** 30) / 262_144, rel=1e-9)
    with pytest.raises(SpecError, match="kv_rule"):
        FrameworkSpec(kv_rule="half")
    with pytest.raises(SpecError, match="new_token_ratio_min"):
        FrameworkSpec(new_token_ratio=0.1, new_token_ratio_min=0.2)


# ------------------------------------------------------------- SGLang's admission reserve
def _replica(ratio, pool, steps=0, n=3):
    """A replica of ``pool`` one-token pages, three requests of 100 + 100 tokens queued at 0,
    SGLang's reservation at a constant ratio (minimum = initial: no decay); 10 ms per mixed
    iteration, 5 ms per decode step."""
    fw = replace(SGLANG, new_token_ratio=ratio, new_token_ratio_min=ratio, retract_decode_steps=steps)
    st = State(RequestStream(arrival_s=np.zeros(n), prompt=np.full(n, 100), output=np.full(n, 100),
                             priority=np.ones(n, np.int8)))
    rep = Replica(0, st, DesSpec().resolve(fw), pool, lambda *a: 0.010,
                  lambda B, d, k: np.full(k, 0.005), None, 512)
    for r in range(n):
        rep.enqueue(r, 0.0)
    return rep, st


def _admitted_per_plan(rep, plans, runs=None):
    """Running sequences after each of ``plans`` plans (each run finished before the next);
    ``runs`` collects the planned runs."""
    out, t = [], 0.0
    for _ in range(plans):
        end = rep.plan(t)
        out.append(rep.n)
        if runs is not None:
            runs.append(rep.run)
        if end is None:
            break
        rep.finish(end)
        t = end
    return out


def test_reservation_decides_who_waits():
    """500 pages. First round: request 0 (idle replica) on the page test; request 1: 100 + 100 <
    500 - 100 pages held - 100 (request 0's output, admitted this round, whole) = 300: admitted;
    request 2: 200 < 300 - 100 - 100 = 100: waits. Second round (requests 0 and 1 running, 99
    output tokens left each, 300 pages free): 200 < 300 - r x 2 x 99, i.e. r < 0.505: r = 0.5
    admits it, r = 0.6 keeps it waiting until both finish (free pages only shrink while they
    decode). Without the reserve (ratio 0: vLLM's page test) all three enter the first round."""
    assert _admitted_per_plan(_replica(0.5, 500)[0], 2) == [2, 3]
    rep, st = _replica(0.6, 500)
    assert _admitted_per_plan(rep, 3) == [2, 2, 1]
    assert st.scheduled[2] == pytest.approx(st.completion[0])     # enters when the others leave
    assert _admitted_per_plan(_replica(0.0, 500)[0], 1) == [3]


def test_retraction_fewest_outputs_first_and_the_ratio_reestimated():
    """ratio 0.5, 500 pages, retract_decode_steps 20: three decode together from 200 free pages
    (requests 0 and 1 one token ahead): 66 steps fit (3 x 66 = 198 <= 200), leaving 33 outputs to
    each and 2 pages. The next step lacks pages: the retraction takes the request with the fewest
    outputs (67 each: tie), then the longest prompt (tie), then the newest: request 2, freeing its
    100 + 66 pages; the two left then have 20 steps of room. New ratio over them:
    (67 + 67 + 20 x 2) / (100 + 100) = 0.87."""
    rep, st = _replica(0.5, 500, steps=20)
    runs = []
    assert _admitted_per_plan(rep, 4, runs) == [2, 3, 3, 2]
    assert runs[2].k == 66 and runs[3].k == 33
    assert rep.preemptions == 1 and st.preemptions.tolist() == [0, 0, 1]
    assert rep.new_token_ratio() == pytest.approx(0.87)
