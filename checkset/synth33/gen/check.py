"""Checks every file from the file alone, without the generator.

For each device trace: rebuilds the state before the first event by undoing the trace from the
final segments, replays it forwards (every alloc inside a live segment and not on a live block,
every free of a live block, free_requested followed by free_completed), and demands that the
blocks live at the end are exactly the final segments' active blocks (address and requested
size) and that the segments are exactly the final segments.  Then it recomputes every figure the
key states (peaks, reserved, what the peak is made of - classified by the allocation stacks and
the freeing stacks, stalls, the out-of-memory event, the leak) and compares them with the
generator's own figures (expected.json, from its bookkeeping), and checks that KEY.md carries the
recomputed figure tables.  Prints "all agree" or the disagreements.
"""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
problems = []


def bad(msg):
    problems.append(msg)


def fkey(fr):
    return (fr["filename"].rsplit("/", 1)[-1], fr["line"], fr["name"])


def category(frames, freed_by=None, alive_end=False):
    if not frames:
        if alive_end or (freed_by and any(f["name"] == "zero_grad" for f in freed_by)):
            return "grad"
        return "other"
    keys = [fkey(f) for f in frames]
    names = {k[2] for k in keys}
    if ("primitives.py", 240, "_attention") in keys or "softmax_no_cast" in names:
        return "attention"
    if "_init_group" in names or ("lion_pytorch.py", 73, "step") in keys or ("sgd.py", 412, "_multi_tensor_sgd") in keys:
        return "opt"
    if "convert" in names or "_load_state_dict_into_meta_model" in names:
        return "param"
    if "_ddp_init_helper" in names:
        return "ddp_bucket"
    if ("comm_hooks.py", 41, "fp16_compress_with_error_feedback") in keys:
        return "ef_residual"
    if ("cache_utils.py", 389, "update") in keys or ("cache_utils.py", 390, "update") in keys or "分配缓存" in names:
        return "kv_cache"
    if "__deepcopy__" in names:
        return "ema"
    return "other"


def analyse_device(d, dev):
    T = d["device_traces"][dev] if dev < len(d["device_traces"]) else []
    segs = [s for s in d["segments"] if s["device"] == dev]
    fin_blocks = {}
    for s in segs:
        a = s["address"]
        for b in s["blocks"]:
            if b["address"] != a:
                bad("dev %d: blocks do not tile segment %x" % (dev, s["address"]))
            a += b["size"]
            if b["state"] != "inactive":
                fin_blocks[b["address"]] = b
        if a != s["address"] + s["total_size"]:
            bad("dev %d: blocks do not fill segment %x" % (dev, s["address"]))
        if s["allocated_size"] != sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated"):
            bad("dev %d: allocated_size of segment %x" % (dev, s["address"]))
    # segments before the trace
    seg0 = {s["address"]: s["total_size"] for s in segs}
    for e in reversed(T):
        if e["action"] in ("segment_alloc", "segment_map"):
            if e["addr"] not in seg0:
                bad("dev %d: segment_alloc of a segment missing at the end" % dev)
            seg0.pop(e["addr"], None)
        elif e["action"] in ("segment_free", "segment_unmap"):
            seg0[e["addr"]] = e["size"]
    # blocks before the trace (ghosts), and the future free stacks of every allocation
    live, ghosts = {}, {}
    freed_by = {}
    reqd = set()
    for i, e in enumerate(T):
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = i
        elif a == "free_requested":
            reqd.add(e["addr"])
            if e["addr"] in live:
                freed_by[live.pop(e["addr"])] = e.get("frames", [])
            elif e["addr"] not in ghosts:
                ghosts[e["addr"]] = (e["size"], None, e.get("frames", []))
        elif a == "free_completed":
            if e["addr"] in reqd:
                reqd.discard(e["addr"])
            elif e["addr"] not in live and e["addr"] not in ghosts and i == 0:
                # ring buffer: its free_requested fell out of the window (already not allocated)
                pass
    for addr, b in fin_blocks.items():
        if addr not in live:
            ghosts[addr] = (b["requested_size"], b["frames"], None)
    # forward replay
    seg = dict(seg0)
    cur = {}
    for addr, (sz, fr, fb) in ghosts.items():
        cat = category(fr, None, True) if fr is not None else category([], fb, False) if fb == [] else "other"
        if fr is None and fb:
            cat = "other"
        cur[addr] = (sz, cat, None)
    alloc_b = sum(v[0] for v in cur.values())
    res = sum(seg.values())
    out = dict(events=len(T), allocated_at_start=alloc_b, blocks_at_start=len(cur), reserved_at_start=res)
    cats = {}
    for v in cur.values():
        cats[v[1]] = cats.get(v[1], 0) + v[0]
    pending = set()
    pk = None
    mres = res
    stalls = []
    oom = None
    i = 0
    nT = len(T)
    while i < nT:
        e = T[i]
        a = e["action"]
        if a == "alloc":
            if e["addr"] in cur:
                bad("dev %d ev %d: alloc on a live block" % (dev, i))
            if not any(sa <= e["addr"] < sa + sz for sa, sz in seg.items()):
                bad("dev %d ev %d: alloc outside every segment" % (dev, i))
            fb = freed_by.get(i)
            cat = category(e.get("frames", []), fb, fb is None)
            cur[e["addr"]] = (e["size"], cat, i)
            alloc_b += e["size"]
            cats[cat] = cats.get(cat, 0) + e["size"]
        elif a == "free_requested":
            if e["addr"] not in cur:
                bad("dev %d ev %d: free of no live block" % (dev, i))
            else:
                sz, cat, _ = cur.pop(e["addr"])
                if sz != e["size"]:
                    bad("dev %d ev %d: free size %d != %d" % (dev, i, e["size"], sz))
                alloc_b -= sz
                cats[cat] -= sz
                pending.add(e["addr"])
        elif a == "free_completed":
            if e["addr"] in pending:
                pending.discard(e["addr"])
            elif e["addr"] in cur and i == 0:
                pass
            elif e["addr"] in cur:
                sz, cat, _ = cur.pop(e["addr"])
                alloc_b -= sz
                cats[cat] -= sz
        elif a == "segment_alloc":
            seg[e["addr"]] = e["size"]
            res += e["size"]
        elif a == "segment_free":
            if seg.pop(e["addr"], None) is None:
                bad("dev %d ev %d: segment_free of unknown segment" % (dev, i))
            res -= e["size"]
            # a run of segment_free followed by the request's segment_alloc / oom = a stall
            if i == 0 or T[i - 1]["action"] != "segment_free":
                j = i
                while j < nT and T[j]["action"] == "segment_free":
                    j += 1
                if j < nT and T[j]["action"] in ("segment_alloc", "oom") and T[j].get("frames") == e.get("frames") and e.get("frames"):
                    stalls.append(dict(index=i, segment_frees=j - i, released=sum(T[k]["size"] for k in range(i, j)),
                                       request=T[j + 1]["size"] if T[j]["action"] == "segment_alloc" else T[j]["size"]))
        elif a == "oom":
            oom = dict(size=e["size"], free=e["device_free"], allocated=alloc_b, reserved=res, index=i)
        mres = max(mres, res)
        if pk is None or alloc_b > pk["peak_allocated"]:
            pk = dict(peak_allocated=alloc_b, peak_index=i, reserved_at_peak=res, peak_time_us=e.get("time_us"),
                      at_peak={k: v for k, v in sorted(cats.items()) if v})
        i += 1
    if pending:
        bad("dev %d: %d free_requested without free_completed" % (dev, len(pending)))
    end = {k: v[0] for k, v in cur.items()}
    fin = {k: b["requested_size"] for k, b in fin_blocks.items()}
    if end != fin:
        bad("dev %d: live blocks at the end (%d) differ from the final segments' (%d)" % (dev, len(end), len(fin)))
    if seg != {s["address"]: s["total_size"] for s in segs}:
        bad("dev %d: segments after replay differ from the final segments" % dev)
    out.update(final_allocated=alloc_b, final_reserved=res,
               final_by_cat={k: v for k, v in sorted(cats.items()) if v})
    if T:
        out.update(pk)
        out["max_reserved"] = mres
    out["stalls"] = stalls
    return out, oom, cur, T


def leak_m06(d, cur, T):
    steps = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and fkey(e["frames"][0]) == ("train_vit_ddp.py", 136, "train_one_epoch"))
    res = [(a, v) for a, v in cur.items() if v[1] == "ef_residual"]
    total = sum(v[0] for a, v in res)
    by_step = {}
    for a, v in res:
        by_step.setdefault(v[0], 0)
    return dict(steps=steps, blocks=len(res), bytes=total, per_step=total // steps if steps else 0)


def fmt(n):
    return "{:,}".format(n)


def main():
    exp = json.load(open(os.path.join(HERE, "expected.json")))
    tables = []
    for name in sorted(exp):
        path = os.path.join(ROOT, name)
        with open(path, "rb") as f:
            d = pickle.load(f)
        E = exp[name]
        for dev_s, ed in sorted(E["devices"].items()):
            dev = int(dev_s)
            got, oom, cur, T = analyse_device(d, dev)
            for k, v in ed.items():
                if k in ("blocks_at_start",) and not T:
                    continue
                if got.get(k) != v:
                    bad("%s dev %d: %s file=%r generator=%r" % (name, dev, k, got.get(k), v))
            row = "| %s | %d | %s | %s | %s | %s | %s |" % (
                name, dev, fmt(got["events"]), fmt(got.get("peak_allocated", got["final_allocated"])),
                got.get("peak_index", "-"), fmt(got.get("reserved_at_peak", got["final_reserved"])),
                ", ".join("%s %s" % (k, fmt(v)) for k, v in (got.get("at_peak") or got["final_by_cat"]).items()))
            tables.append(row)
            extra = "| %s | %d | start: %s B in %d blocks, reserved %s | end: allocated %s, reserved %s | max reserved %s | peak time_us %s | stalls %s |" % (
                name, dev, fmt(got["allocated_at_start"]), got["blocks_at_start"], fmt(got["reserved_at_start"]),
                fmt(got["final_allocated"]), fmt(got["final_reserved"]), fmt(got.get("max_reserved", got["final_reserved"])), got.get("peak_time_us"),
                "; ".join("ev %d: %d segment_free, %s B released, request %s B" % (s["index"], s["segment_frees"], fmt(s["released"]), fmt(s["request"])) for s in got["stalls"]) or "none")
            tables.append(extra)
            if "oom" in E:
                eo = E["oom"]
                if oom is None:
                    bad("%s: no oom event" % name)
                else:
                    for k in ("size", "free", "allocated", "reserved"):
                        if oom[k] != eo[k]:
                            bad("%s: oom %s file=%r generator=%r" % (name, k, oom[k], eo[k]))
                    tables.append("| %s | %d | oom at event %d: request %s B, device_free %s B, allocated %s B, reserved %s B |" % (
                        name, dev, oom["index"], fmt(oom["size"]), fmt(oom["free"]), fmt(oom["allocated"]), fmt(oom["reserved"])))
            if "leak" in E:
                lk = leak_m06(d, cur, T)
                if lk["per_step"] != E["leak"]["per_step"] or lk["steps"] != E["leak"]["steps"] or lk["blocks"] != 4 * E["leak"]["steps"]:
                    bad("%s: leak file=%r generator=%r" % (name, lk, E["leak"]))
                tables.append("| %s | %d | leak: %d blocks, %s B alive at the end from comm_hooks.py:41, %d steps, %s B per step |" % (
                    name, dev, lk["blocks"], fmt(lk["bytes"]), lk["steps"], fmt(lk["per_step"])))
    key = os.path.join(ROOT, "KEY.md")
    text = open(key).read() if os.path.exists(key) else ""
    missing = [t for t in tables if t not in text]
    if "--table" in sys.argv:
        print("\n".join(tables))
        return
    if missing:
        bad("KEY.md lacks %d recomputed figure rows (run check.py --table)" % len(missing))
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("all agree")


if __name__ == "__main__":
    main()
