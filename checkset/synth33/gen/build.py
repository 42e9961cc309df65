"""Builds the ten snapshot files into ../ and gen/expected.json (the generator's own figures:
categories known from its bookkeeping, not from frames).  Deterministic: fixed seeds, no clock."""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prog_train  # noqa: E402
import prog_infer  # noqa: E402

OUT = os.path.dirname(HERE)
PROGS = [prog_train.m01_controlnet, prog_infer.m02_swinunetr, prog_infer.m03_openfold,
         prog_infer.m04_specdec, prog_infer.m05_npu_qwen, prog_train.m06_vit_ddp,
         prog_train.m07_llava, prog_train.m08_xlstm, prog_infer.m09_yolov8_state,
         prog_train.m10_timesformer]

GCAT = {"param": "param", "buffer": "param", "grad": "grad", "opt": "opt", "ema": "ema",
        "kv_cache": "kv_cache", "ef_residual": "ef_residual", "ddp_bucket": "ddp_bucket",
        "attn_logits": "attention", "attn_probs": "attention"}


def gcat(c):
    return GCAT.get(c, "other")


def expected_device(A, written):
    full = A.trace
    start = len(full) - len(written)
    assert full[start:] == written or not written
    live = {}
    alloc = res = 0
    cats = {}
    pk = None
    mres = None
    for i, e in enumerate(full):
        a = e["action"]
        if a == "alloc":
            c = gcat(A.ev_cat[id(e)])
            live[e["addr"]] = (e["size"], c)
            alloc += e["size"]
            cats[c] = cats.get(c, 0) + e["size"]
        elif a == "free_requested":
            s, c = live.pop(e["addr"])
            alloc -= s
            cats[c] -= s
        elif a == "segment_alloc":
            res += e["size"]
        elif a == "segment_free":
            res -= e["size"]
        if i >= start and (mres is None or res > mres):
            mres = res
        if i >= start and (pk is None or alloc > pk["peak_allocated"]):
            pk = dict(peak_allocated=alloc, peak_index=i - start, reserved_at_peak=res,
                      peak_time_us=e.get("time_us"),
                      at_peak={k: v for k, v in sorted(cats.items()) if v})
        if i == start - 1:
            pass
    # state at the window start
    alloc0 = res0 = 0
    live0 = {}
    for e in full[:start]:
        a = e["action"]
        if a == "alloc":
            live0[e["addr"]] = e["size"]
        elif a == "free_requested":
            live0.pop(e["addr"])
        elif a == "segment_alloc":
            res0 += e["size"]
        elif a == "segment_free":
            res0 -= e["size"]
    out = dict(events=len(written), allocated_at_start=sum(live0.values()), blocks_at_start=len(live0),
               reserved_at_start=res0, final_allocated=alloc, final_reserved=res,
               final_by_cat={k: v for k, v in sorted(cats.items()) if v})
    if pk and written:
        out.update(pk)
        out["max_reserved"] = max(mres, res0)
    st = [s for s in A.stalls if s[0] >= start]
    out["stalls"] = [dict(index=s[0] - start, segment_frees=s[1], released=s[2], request=s[3]) for s in st]
    return out


def main():
    exp = {}
    for fn in PROGS:
        r = fn()
        d = r["data"]
        path = os.path.join(OUT, r["name"])
        with open(path, "wb") as f:
            pickle.dump(d, f, protocol=4)
        e = {"devices": {}}
        for A in r["allocs"]:
            e["devices"][str(A.device)] = expected_device(A, d["device_traces"][A.device])
        info = r.get("info") or {}
        if "oom" in info:
            e["oom"] = info["oom"]
        if r["name"].startswith("m06"):
            e["leak"] = dict(per_step=sum(info["buckets"]), buckets=info["buckets"], steps=10)
        exp[r["name"]] = e
        print("%-45s %9d bytes" % (r["name"], os.path.getsize(path)))
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
