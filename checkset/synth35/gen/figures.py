"""Every figure of KEY.md, recomputed from the written files alone (imports nothing of the
generator but the file-only replay)."""
import os
import pickle

from replay import Replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"m01": "m01_fno3d_navierstokes_cpp.pickle", "m02": "m02_clip_vitb16_gradcache_2023.pickle",
         "m03": "m03_npu_dsv2lite_moe_serve_card6.pkl", "m04": "m04_encodec24k_msstftd_ring.pickle",
         "m05": "m05_rag_marco_llama3_2gpu.pickle", "m06": "m06_pointnet2_msg_scannet.pickle",
         "m07": "m07_videomae_vitb_k400_clipcache.pickle", "m08": "m08_gpt13b_te_fp8_h100.pickle",
         "m09": "m09_vit22b_tp8_rank3_state.pickle", "m10": "m10_informer_traffic_prefetch.pickle"}


def load(k):
    with open(os.path.join(ROOT, FILES[k]), "rb") as f:
        return pickle.load(f)


def has(fr, sub):
    return any(sub in f["filename"] or sub in f["name"] for f in fr or [])


def at(fr, file_end, line):
    return any(f["filename"].endswith(file_end) and f["line"] == line for f in fr or [])


def base(R):
    out = dict(events=len(R.T), allocated_at_start=R.allocated_at_start, blocks_at_start=R.blocks_at_start,
               reserved_at_start=R.reserved_at_start, peak_allocated=R.peak_allocated, peak_index=R.peak_index,
               reserved_at_peak=R.reserved_at_peak, max_reserved=R.max_reserved, final_allocated=R.final_allocated,
               final_reserved=R.final_reserved, segments=len(R.segs),
               segment_allocs=sum(1 for e in R.T if e["action"] == "segment_alloc"),
               segment_frees=sum(1 for e in R.T if e["action"] == "segment_free"))
    out["peak_time_us"] = R.peak_time_us
    out["gap_at_peak"] = R.reserved_at_peak - R.peak_allocated
    if R.problems:
        out["problems"] = list(R.problems)
    return out


def freed_by(R):
    return {ai: R.T[fi].get("frames", []) for ai, fi in R.alloc_index.items() if fi is not None}


def breakdown(R, idx, classify):
    fb = freed_by(R)
    cats = {}
    for sz, fr, ai in R.live_blocks_at(idx):
        c = classify(sz, fr, ai, fb.get(ai))
        cats[c] = cats.get(c, 0) + sz
    return cats


def std_class(sz, fr, ai, fb):
    if ai < 0:
        return "parameters"
    if has(fr, "_init_group") or has(fr, "_initialize_state"):
        return "optimizer_state"
    if has(fr, "AccumulateGrad") or (fb is not None and has(fb, "zero_grad")) or (fb is None and not fr):
        return "gradients"
    return "activations_and_temporaries"


def stalls(R):
    """segment_free bursts; 'waiting' when the burst carries the stack of the allocation that follows it."""
    out = []
    T = R.T
    i = 0
    while i < len(T):
        if T[i]["action"] == "segment_free":
            j = i
            while j < len(T) and T[j]["action"] == "segment_free":
                j += 1
            nxt = T[j] if j < len(T) else None
            waiting = bool(nxt is not None and nxt["action"] in ("segment_alloc", "oom") and T[i].get("frames") and nxt.get("frames") is T[i].get("frames"))
            req = None
            if nxt is not None and nxt["action"] == "segment_alloc" and j + 1 < len(T) and T[j + 1]["action"] == "alloc":
                req = T[j + 1]["size"]
            elif nxt is not None and nxt["action"] == "oom":
                req = nxt["size"]
            fn = [f["name"] for f in T[i].get("frames") or []]
            out.append(dict(index=i, frees=j - i, released=sum(T[k]["size"] for k in range(i, j)), waiting=waiting,
                            request=req, us=(T[j]["time_us"] - T[i]["time_us"]) if (nxt is not None and "time_us" in T[i]) else None,
                            empty_cache=("empty_cache" in fn)))
            i = j
        else:
            i += 1
    return out


def steps_from_ann(d, name_prefix="ProfilerStep#"):
    return sum(1 for a in d.get("external_annotations", []) if a["stage"] == "START" and a["name"].startswith(name_prefix))


# ----------------------------------------------------------------------------------- files
def m01(d):
    R = Replay(d, 0)
    o = base(R)
    o["steps"] = steps_from_ann(d)
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["cpp_frames"] = sum(1 for e in R.T if e.get("frames") and e["frames"][0]["filename"] == "??")
    ws = [e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_exec_fft")]
    o["fft_workspaces"] = len(ws)
    o["fft_workspace_size"] = max(ws)
    opt = [e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    o["opt_bytes"] = sum(opt)
    o["opt_blocks"] = len(opt)
    o["grad_bytes_end"] = sum(sz for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "AccumulateGrad"))
    # the largest activation blocks at the peak
    big = sorted([(sz, ai) for sz, fr, ai in R.live_blocks_at(R.peak_index) if ai >= 0], reverse=True)
    o["largest_at_peak"] = big[0][0]
    starts = [a["time_us"] for a in d["external_annotations"] if a["stage"] == "START" and a["name"].startswith("ProfilerStep#")]
    o["peak_step"] = sum(1 for s in starts if s <= R.peak_time_us) - 1
    return o


def m02(d):
    R = Replay(d, 0)
    o = base(R)
    o["has_time"] = any("time_us" in e for e in R.T)
    o["has_settings"] = "allocator_settings" in d

    def cls(sz, fr, ai, fb):
        if ai < 0:
            return "parameters"
        if has(fr, "_init_group"):
            return "optimizer_state"
        if fb is not None and has(fb, "zero_grad"):
            return "gradients"
        if has(fr, "build_cache") or (not fr and sz == 2048 * 512 * 4):
            return "gradcache_reps_and_grads"
        return "activations_and_temporaries"
    o["at_peak"] = breakdown(R, R.peak_index, cls)
    o["steps"] = sum(1 for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e["frames"], "zero_grad") and R.T[i - 2]["action"] != "free_requested" if i >= 2) or 0
    zg = [i for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e["frames"], "zero_grad")]
    groups = 0
    last = -10
    for i in zg:
        if i - last > 10:
            groups += 1
        last = i
    o["steps"] = groups
    o["chunk_forwards_with_grad"] = sum(1 for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "forward"
                                        and e["frames"][0]["line"] == 491 and has(e["frames"], "forward_backward"))
    o["chunk_forwards_no_grad"] = sum(1 for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 491 and has(e["frames"], "forward_no_grad"))
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["grad_bytes_per_step"] = sum(e["size"] for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e["frames"], "zero_grad")) // max(groups, 1)
    o["gradcache_bytes_per_step"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "build_cache") and e["size"] == 2048 * 512 * 4) // max(groups, 1)
    o["logits_block"] = 2048 * 2048 * 4
    j = R.peak_index
    while not (R.T[j]["action"] == "alloc" and R.T[j].get("frames")):
        j -= 1
    o["peak_has_stack"] = bool(R.T[R.peak_index].get("frames"))
    o["last_stacked_alloc_before_peak_in_image_tower"] = has(R.T[j]["frames"], "encode_image")
    o["last_stacked_alloc_before_peak_in_forward_backward"] = has(R.T[j]["frames"], "forward_backward")
    o["peak_step"] = 1 + sum(1 for i, e in enumerate(R.T[:R.peak_index]) if e["action"] == "free_requested" and has(e["frames"], "zero_grad") and not (R.T[i - 2]["action"] == "free_requested" and has(R.T[i - 2]["frames"], "zero_grad")))
    return o


def m03(d):
    R = Replay(d, 6)
    o = base(R)
    o["device"] = 6
    o["n_device_lists"] = len(d["device_traces"])
    o["streams"] = sorted({e["stream"] for e in R.T})
    o["kv_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "缓存.py"))
    o["kv_blocks"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "缓存.py"))
    baseline = R.allocated_at_start + o["kv_bytes"]
    o["baseline"] = baseline
    # allocated between request batches (just before each prefill's first allocation)
    lows = []
    for i, e in enumerate(R.T):
        if e["action"] == "alloc" and e["frames"][0]["name"] == "准备输入" and e["frames"][0]["line"] == 118 and has(e["frames"], "预填充"):
            lows.append(R.alloc_curve[i - 1])
    o["between_batches"] = lows
    o["batches"] = len(lows)
    o["moe_dispatch_max"] = max(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "分组矩阵乘"))
    o["at_peak"] = dict(weights=R.allocated_at_start, kv_cache=o["kv_bytes"], transient=R.peak_allocated - baseline)
    return o


def m04(d):
    R = Replay(d, 0)
    o = base(R)
    SN = lambda fr: at(fr, "codec/train.py", 126)
    ins = [(i, e["size"]) for i, e in enumerate(R.T) if e["action"] == "alloc" and SN(e["frames"])]
    o["first_event"] = R.T[0]["action"]
    o["snapshot_allocs_in_trace"] = len(ins)
    o["snapshot_bytes_in_trace"] = sum(s for _, s in ins)
    # runs of snapshot allocations (one per state_dict copy)
    runs = []
    last = None
    for i, s in ins:
        if last is None or i - last > 5:
            runs.append([i, 0, 0])
        runs[-1][1] += 1
        runs[-1][2] += s
        last = i
    o["copies_in_trace"] = len(runs)
    o["copy_bytes"] = runs[0][2] if runs else 0
    o["copy_blocks"] = runs[0][1] if runs else 0
    o["copy_indices"] = [r[0] for r in runs]
    # final pool: every block from that call site, including the ones made before the window
    blocks = [b for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated" and SN(b["frames"])]
    o["final_site_blocks"] = len(blocks)
    o["final_site_bytes"] = sum(b["requested_size"] for b in blocks)
    o["copies_in_final_pool"] = o["final_site_bytes"] // o["copy_bytes"] if o["copy_bytes"] else 0
    never = [i for i, _ in ins if R.alloc_index.get(i) is None]
    o["snapshot_allocs_never_freed"] = len(never)
    # steps in the window: the generator's optimizer zero_grad after its step (train.py:119)
    zg = [i for i, e in enumerate(R.T) if e["action"] == "free_requested" and at(e["frames"], "codec/train.py", 119)]
    groups, last = [], -10
    for i in zg:
        if i - last > 10:
            groups.append(i)
        last = i
    o["steps_in_window"] = len(groups)
    o["leak_per_step"] = o["copy_bytes"] // 10
    o["ghost_bytes"] = R.allocated_at_start
    o["ghost_site_bytes"] = o["final_site_bytes"] - o["snapshot_bytes_in_trace"]
    # low point of allocated at the generator's zero_grad in the first and last step of the window
    o["low_first"] = R.alloc_curve[groups[0]]
    o["low_last"] = R.alloc_curve[groups[-1]]
    o["window_us"] = R.T[-1]["time_us"] - R.T[0]["time_us"]
    return o


def m05(d):
    o = {}
    R0, R1 = Replay(d, 0), Replay(d, 1)
    o["dev0"] = base(R0)
    o["dev1"] = base(R1)
    o["n_devices"] = len(d["device_traces"])
    oom = R1.oom
    o["oom"] = dict(index=oom["index"], size=oom["size"], device_free=oom["device_free"], allocated=oom["allocated"],
                    reserved=oom["reserved"], time_us=R1.T[oom["index"]]["time_us"])
    live = sorted(R1.live_blocks_at(oom["index"]), key=lambda x: -x[0])
    o["oom_largest"] = [dict(size=sz, site="%s:%d" % (fr[0]["filename"].rsplit("/", 1)[-1], fr[0]["line"]) if fr else "(before the trace)",
                             before_trace=(ai < 0)) for sz, fr, ai in live[:3]]
    o["index_bytes"] = max(sz for sz, fr, ai in live if ai < 0)
    casts = [e["size"] for e in R1.T if e["action"] == "alloc" and at(e["frames"], "index/gpu_index.py", 52) and e["size"] > 2 ** 30]
    o["fp32_copies"] = len([c for c in casts if c == max(casts)])
    o["fp32_copy_size"] = max(casts)
    sc = [e["size"] for e in R1.T if e["action"] == "alloc" and at(e["frames"], "index/gpu_index.py", 52) and e["size"] not in (max(casts),) and e["size"] > 100 * 2 ** 20]
    o["score_sizes_served"] = sc
    st = stalls(R1)
    o["dev1_release_bursts"] = st
    o["oom_time_after_last_generate_us"] = None
    return o


def m06(d):
    R = Replay(d, 0)
    o = base(R)
    o["steps"] = steps_from_ann(d)
    fb = freed_by(R)

    def cls(sz, fr, ai, f):
        if ai < 0:
            return "parameters"
        if has(fr, "query_ball_point"):
            return "query_ball_point_temporaries"
        if has(fr, "_init_group"):
            return "optimizer_state"
        if f is not None and has(f, "zero_grad"):
            return "gradients"
        if at(fr, "pointnet2_utils.py", 297) or at(fr, "pointnet2_utils.py", 296):
            return "fp_sort_temporaries"
        return "activations_and_other_temporaries"
    o["at_peak"] = breakdown(R, R.peak_index, cls)
    pk = R.T[R.peak_index]
    o["peak_site"] = "%s:%d %s" % (pk["frames"][0]["filename"].rsplit("/", 1)[-1], pk["frames"][0]["line"], pk["frames"][0]["name"])
    qb = [e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "query_ball_point")]
    o["qbp_largest"] = max(qb)
    fp = [e["size"] for e in R.T if e["action"] == "alloc" and at(e["frames"], "pointnet2_utils.py", 297)]
    o["fp_sort_largest"] = max(fp)
    # the same step's allocated just before SA1's first query_ball_point allocation
    # the highest allocated while query_ball_point temporaries are live, in the peak's step
    qi = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and has(e["frames"], "query_ball_point") and e["size"] >= 2 ** 30 and 0 < R.peak_index - i < 2000]
    j = max(range(qi[0], qi[-1] + 1), key=lambda i: R.alloc_curve[i])
    o["qbp_local_max"] = R.alloc_curve[j]
    o["qbp_local_max_index"] = j
    o["qbp_at_local_max"] = breakdown(R, j, cls).get("query_ball_point_temporaries", 0)
    o["peak_without_fp_sort"] = R.peak_allocated - o["at_peak"].get("fp_sort_temporaries", 0)
    o["qbp_local_max_without"] = o["qbp_local_max"] - o["qbp_at_local_max"]
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    return o


def m07(d):
    R = Replay(d, 0)
    o = base(R)
    o["steps"] = steps_from_ann(d)
    CA = lambda fr: has(fr, "_decode_gpu")
    ins = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and CA(e["frames"])]
    o["cache_inserts"] = len(ins)
    o["cache_evictions"] = sum(1 for e in R.T if e["action"] == "free_requested" and has(e["frames"], "_evict"))
    fin = [b for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated" and CA(b["frames"])]
    o["cache_blocks_end"] = len(fin)
    o["cache_bytes_end"] = sum(b["requested_size"] for b in fin)
    o["cache_entry_min"] = min(R.T[i]["size"] for i in ins)
    o["cache_entry_max"] = max(R.T[i]["size"] for i in ins)
    first_ev = next(i for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e["frames"], "_evict"))
    # step number (ProfilerStep) of the first eviction
    starts = [a["time_us"] for a in d["external_annotations"] if a["stage"] == "START" and a["name"].startswith("ProfilerStep#")]
    t = R.T[first_ev]["time_us"]
    o["first_eviction_step"] = sum(1 for s in starts if s <= t) - 1
    # cache bytes live at each step start: running count over the trace
    cur, per_step = 0, []
    si = 0
    stamps = starts + [10 ** 20]
    cache_live = {}
    for i, e in enumerate(R.T):
        while e.get("time_us", 0) >= stamps[si + 1] if si + 1 < len(stamps) else False:
            per_step.append(cur)
            si += 1
        if e["action"] == "alloc" and CA(e["frames"]):
            cache_live[e["addr"]] = e["size"]
            cur += e["size"]
        elif e["action"] == "free_requested" and e["addr"] in cache_live and has(e["frames"], "_evict"):
            cur -= cache_live.pop(e["addr"])
    o["cache_bytes_at_step"] = {str(k): per_step[k] for k in (10, 30, 50, 60, 70) if k < len(per_step)}
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb: "parameters" if ai < 0 else ("clip_cache" if CA(fr) else std_class(sz, fr, ai, fb)))
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    return o


def m08(d):
    R = Replay(d, 0)
    o = base(R)
    o["steps"] = steps_from_ann(d)
    st = stalls(R)
    o["stalls"] = [s for s in st if not s["empty_cache"]]
    o["empty_cache_bursts"] = [s for s in st if s["empty_cache"]]
    o["diag_allocs"] = [(i, e["size"]) for i, e in enumerate(R.T) if e["action"] == "alloc" and has(e["frames"], "update_ratio") and e["size"] > 2 ** 30]
    o["diag_size"] = o["diag_allocs"][0][1]
    o["fp8_weight_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "get_weight_workspace"))
    o["fp8_meta_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "set_meta_tensor"))
    o["fp8_meta_blocks"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "set_meta_tensor"))
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_initialize_state"))
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb: "parameters" if ai < 0 else ("fp8_weight_cache_and_meta" if has(fr, "get_weight_workspace") or has(fr, "set_meta_tensor") else std_class(sz, fr, ai, fb)))
    # segment_allocs in the step after each stall (the cache rebuilt)
    seg_after = []
    for s in o["stalls"]:
        j = s["index"] + s["frees"]
        n = 0
        k = j
        while k < len(R.T) and not (R.T[k]["action"] == "free_requested" and has(R.T[k]["frames"], "zero_grad")):
            k += 1
        # count from the end of this step to the end of the next
        k2 = k + 1
        while k2 < len(R.T) and not (R.T[k2]["action"] == "free_requested" and has(R.T[k2]["frames"], "zero_grad") and R.T[k2 - 1]["action"] != "free_completed" or False):
            k2 += 1
        seg_after.append(sum(1 for e in R.T[j:min(k2 + 2000, len(R.T))] if e["action"] == "segment_alloc"))
    o["stall_reserved_before"] = [R.res_curve[s["index"] - 1] for s in o["stalls"]]
    o["stall_allocated"] = [R.alloc_curve[s["index"] - 1] for s in o["stalls"]]
    return o


def m09(d):
    o = {}
    o["events"] = sum(len(t) for t in d["device_traces"])
    o["n_device_lists"] = len(d["device_traces"])
    segs = [s for s in d["segments"] if s["device"] == 3]
    o["devices"] = sorted({s["device"] for s in d["segments"]})
    o["segments"] = len(segs)
    o["reserved"] = sum(s["total_size"] for s in segs)
    blocks = [b for s in segs for b in s["blocks"]]
    act = [b for b in blocks if b["state"] == "active_allocated"]
    o["allocated"] = sum(b["requested_size"] for b in act)
    o["allocated_rounded"] = sum(b["size"] for b in act)
    o["live_blocks"] = len(act)
    o["blocks_with_frames"] = sum(1 for b in act if b["frames"])
    cats = {}
    for b in act:
        fr = b["frames"]
        c = ("adam_moments" if has(fr, "fused_adam") else
             "fp32_master_weights" if has(fr, "optimizer/optimizer.py") else
             "bf16_parameters" if has(fr, "__init__") else "other")
        cats[c] = cats.get(c, 0) + b["requested_size"]
    o["by_category"] = cats
    free = [b for b in blocks if b["state"] == "inactive"]
    o["cached_free"] = sum(b["size"] for b in free)
    o["largest_free"] = max(b["size"] for b in free)
    o["free_segments"] = sum(1 for s in segs if all(b["state"] == "inactive" for b in s["blocks"]))
    o["free_in_free_segments"] = sum(s["total_size"] for s in segs if all(b["state"] == "inactive" for b in s["blocks"]))
    return o


def m10(d):
    R = Replay(d, 0)
    o = base(R)
    o["streams"] = sorted({e["stream"] for e in R.T})
    side = [s for s in o["streams"] if s != 0][0]
    o["side_stream"] = side
    o["side_segments"] = sum(1 for s in d["segments"] if s["stream"] == side)
    o["side_reserved"] = sum(s["total_size"] for s in d["segments"] if s["stream"] == side)
    pend = [b for s in d["segments"] for b in s["blocks"] if b["state"] == "active_pending_free"]
    o["pending_blocks"] = len(pend)
    o["pending_bytes"] = sum(b["requested_size"] for b in pend)
    side_live = [b for s in d["segments"] if s["stream"] == side for b in s["blocks"] if b["state"] == "active_allocated"]
    o["prefetched_blocks"] = len(side_live)
    o["prefetched_bytes"] = sum(b["requested_size"] for b in side_live)
    # delay between free_requested and free_completed of the side-stream blocks
    fr = {}
    delays = []
    for i, e in enumerate(R.T):
        if e["stream"] == side and e["action"] == "free_requested":
            fr[e["addr"]] = i
        elif e["stream"] == side and e["action"] == "free_completed" and e["addr"] in fr:
            delays.append(i - fr.pop(e["addr"]))
    o["deferred_frees"] = len(delays)
    o["min_deferral_events"] = min(delays)
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["low_points"] = None
    return o


def all_figures():
    F = {}
    for k in sorted(FILES):
        F[k] = globals()[k](load(k))
    return F


if __name__ == "__main__":
    import json
    F = all_figures()
    print(json.dumps(F, indent=1, ensure_ascii=False, default=str)[:20000])
