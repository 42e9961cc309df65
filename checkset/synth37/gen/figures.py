"""Every figure of KEY.md, recomputed from the written files alone (imports nothing of the
generator but the file-only replay in replay.py)."""
import os
import pickle

from replay import Replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"m01": "m01_hashemb_ctr_sparseadam_cpp.pickle", "m02": "m02_mengzi_t5_summ_bucket_npu5.pkl",
         "m03": "m03_kpn_burst_denoise_2023.pickle", "m04": "m04_xmem_vos_service_state.pickle",
         "m05": "m05_basicvsrpp_cctv_4streams_ring.pickle", "m06": "m06_grpo_qwen05b_vllm_2gpu.pickle",
         "m07": "m07_tinyllama_multilora_server.pickle", "m08": "m08_ast_audioset20k_a100.pickle",
         "m09": "m09_raft_things_a100.pickle", "m10": "m10_depth_anything_v2l_nyu.pickle"}


def load(k):
    with open(os.path.join(ROOT, FILES[k]), "rb") as f:
        return pickle.load(f)


def has(fr, sub):
    return any(sub in f["filename"] or sub in f["name"] for f in fr or [])


def at(fr, file_end, line):
    return any(f["filename"].endswith(file_end) and f["line"] == line for f in fr or [])


def py_top(fr):
    for f in fr or []:
        if f["filename"].endswith(".py"):
            return "%s:%d %s" % (f["filename"].rsplit("/", 1)[-1], f["line"], f["name"])
    return "(no stack)"


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


def groups(R, pred, gap=10):
    """Indices where a run of events matching pred starts."""
    idx = [i for i, e in enumerate(R.T) if pred(e)]
    out, last = [], -10 ** 9
    for i in idx:
        if i - last > gap:
            out.append(i)
        last = i
    return out


def step_stats(R, starts):
    """Per step (between consecutive starts): allocated at its first event, peak allocated."""
    bounds = list(starts) + [len(R.T)]
    lows, peaks = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        lows.append(R.alloc_curve[a - 1] if a > 0 else R.allocated_at_start)
        peaks.append(max(R.alloc_curve[a:b]))
    return lows, peaks


def live_at(R, idx, pred=None):
    return [(sz, fr, ai) for sz, fr, ai in R.live_blocks_at(idx) if pred is None or pred(fr)]


def bursts(R):
    """segment_free runs: index, count, bytes, frames of the first free, the request that follows."""
    T = R.T
    out = []
    i = 0
    while i < len(T):
        if T[i]["action"] == "segment_free":
            j = i
            while j < len(T) and T[j]["action"] == "segment_free":
                j += 1
            nxt = T[j] if j < len(T) else None
            req = None
            if nxt is not None and nxt["action"] == "segment_alloc" and j + 1 < len(T) and T[j + 1]["action"] == "alloc":
                req = T[j + 1]
            elif nxt is not None and nxt["action"] == "oom":
                req = nxt
            out.append(dict(index=i, frees=j - i, released=sum(T[k]["size"] for k in range(i, j)),
                            request=req["size"] if req else None, request_stream=req["stream"] if req else None,
                            freed_streams=sorted(set(T[k]["stream"] for k in range(i, j))),
                            us=(T[j + 1]["time_us"] - T[i - 1]["time_us"]) if (req is not None and "time_us" in T[i] and i > 0) else None,
                            reserved_before=R.res_curve[i - 1] if i > 0 else R.reserved_at_start,
                            allocated=R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start,
                            empty_cache=has(T[i].get("frames"), "empty_cache"), top=py_top(T[i].get("frames"))))
            i = j
        else:
            i += 1
    return out


def final_blocks(d, dev, pred=None):
    return [b for s in d["segments"] if s["device"] == dev for b in s["blocks"]
            if b["state"] == "active_allocated" and (pred is None or pred(b["frames"]))]


def ann_index(d, R, name):
    """Event index of the first event after the annotation's START."""
    t = [a["time_us"] for a in d.get("external_annotations", []) if a["name"] == name and a["stage"] == "START"][0]
    return next(i for i, e in enumerate(R.T) if e["time_us"] > t)


def cat_at(R, idx, rules):
    """Bytes live at idx by the first matching rule (name, predicate on (frames, alloc index))."""
    out = {n: 0 for n, _ in rules}
    out["other"] = 0
    for sz, fr, ai in R.live_blocks_at(idx):
        for n, p in rules:
            if p(fr, ai):
                out[n] += sz
                break
        else:
            out["other"] += sz
    return out


# ----------------------------------------------------------------------------------- files
def m01(d):
    R = Replay(d, 0)
    F = base(R)
    starts = [ann_index(d, R, "ProfilerStep#%d" % s) for s in range(30)]
    F["steps"] = sum(1 for a in d["external_annotations"] if a["stage"] == "START" and a["name"].startswith("ProfilerStep#"))
    lows, peaks = step_stats(R, starts)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["low_step1"], F["low_last"] = lows[1], lows[-1]
    F["first_step_rise"] = lows[1] - lows[0]
    F["peak_step"] = max(i for i, s in enumerate(starts) if s <= R.peak_index)
    F["peak_site"] = py_top(R.T[R.peak_index]["frames"])
    F["peak_node"] = next((f["name"].split("::")[3] for f in R.T[R.peak_index]["frames"] if "autograd::generated::" in f["name"]), "none")
    F["later_peak_max"] = max(peaks[1:])
    F["later_peak_min"] = min(peaks[1:])
    T = R.T
    sst = [e for e in T if e["action"] == "alloc" and at(e["frames"], "sparse_adam.py", 124) or e["action"] == "alloc" and at(e["frames"], "sparse_adam.py", 126)]
    F["sparse_state_blocks"], F["sparse_state_bytes"] = len(sst), sum(e["size"] for e in sst)
    dst = [e for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    F["dense_state_blocks"], F["dense_state_bytes"] = len(dst), sum(e["size"] for e in dst)
    sg = [e for e in T if e["action"] == "alloc" and has(e["frames"], "EmbeddingBagBackward0")]
    F["sparse_grad_allocs"] = len(sg)
    F["sparse_grad_bytes_max"] = max(e["size"] for e in sg)
    F["sparse_grads_freed_by_zero_grad"] = all(has(T[R.alloc_index[i]]["frames"], "zero_grad") for i, e in enumerate(T) if e["action"] == "alloc" and has(e["frames"], "EmbeddingBagBackward0") and R.alloc_index.get(i) is not None)
    F["cpp_events"] = sum(1 for e in T if e.get("frames") and any(f["filename"] == "??" for f in e["frames"]))
    F["table_block"] = max(b["requested_size"] for b in final_blocks(d, 0))
    rules = [("parameters", lambda fr, ai: ai < 0),
             ("optimizer_state", lambda fr, ai: has(fr, "sparse_adam.py") and (at(fr, "sparse_adam.py", 124) or at(fr, "sparse_adam.py", 126)) or has(fr, "_init_group")),
             ("gradients", lambda fr, ai: has(fr, "AccumulateGrad") or has(fr, "Backward0") and not has(fr, "ReluBackward0") and not has(fr, "BinaryCross") and R.alloc_index.get(ai) is not None and has(T[R.alloc_index[ai]]["frames"], "zero_grad")),
             ("optimizer_temporaries", lambda fr, ai: has(fr, "sparse_adam") or has(fr, "_multi_tensor_adam"))]
    F["at_peak"] = cat_at(R, R.peak_index, rules)
    return F


def m02(d):
    R = Replay(d, 5)
    F = base(R)
    T = R.T
    F["device"] = 5
    F["device_lists"] = len(d["device_traces"])
    F["streams"] = sorted(set(e["stream"] for e in T))
    zg = groups(R, lambda e: e["action"] == "free_requested" and has(e.get("frames"), "zero_grad"))
    F["steps"] = len(zg)
    fwd = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "train_summ.py", 163), gap=1)
    F["step_starts"] = fwd
    lows, peaks = step_stats(R, fwd)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["low_min_after1"], F["low_max_after1"] = min(lows[1:]), max(lows[1:])
    F["first_step_rise"] = lows[1] - lows[0]
    F["src_len"] = [T[i]["size"] // (16 * 8) for i in fwd]
    F["peak_step"] = max(k for k, s in enumerate(fwd) if s <= R.peak_index)
    F["peak_src_len"] = F["src_len"][F["peak_step"]]
    ost = [e for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    F["opt_blocks"], F["opt_bytes"] = len(ost), sum(e["size"] for e in ost)
    bs = bursts(R)
    F["bursts"] = len(bs)
    b = bs[0]
    F["ec_index"], F["ec_frees"], F["ec_released"], F["ec_is_empty_cache"] = b["index"], b["frees"], b["released"], b["empty_cache"]
    F["ec_reserved_before"] = b["reserved_before"]
    F["ec_reserved_after"] = R.res_curve[b["index"] + b["frees"] - 1]
    F["ec_allocated"] = b["allocated"]
    F["ec_next_is_request"] = b["request"] is not None
    # reserved when each bucket first appears
    first = {}
    for k, s in enumerate(fwd):
        L_ = F["src_len"][k]
        if L_ not in first:
            first[L_] = k
    F["first_seen_step"] = first
    F["reserved_after_step"] = [R.res_curve[(fwd[k + 1] - 1) if k + 1 < len(fwd) else len(T) - 1] for k in range(len(fwd))]
    F["val_batches"] = sum(1 for i, e in enumerate(T) if e["action"] == "alloc" and at(e["frames"], "train_summ.py", 188))
    F["no_time"] = all("time_us" not in e for e in T)
    return F


def m03(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    o = R.oom
    F["oom"] = o
    F["oom_site"] = py_top(T[o["index"]]["frames"])
    F["oom_gb"] = o["size"]
    lv = R.live_blocks_at(o["index"])
    lv.sort(key=lambda x: -x[0])
    F["oom_live_allocated"] = sum(x[0] for x in lv)
    F["oom_top"] = [(x[0], py_top(x[1])) for x in lv[:4]]
    F["unfold_live"] = sum(x[0] for x in lv if has(x[1], "unfold"))
    F["kernels_live"] = sum(x[0] for x in lv if at(x[1], "kpn/model.py", 98))
    F["oom_free"] = o["device_free"]
    F["reserved_at_oom"] = o["reserved"]
    bs = bursts(R)
    F["pre_oom_burst"] = [b for b in bs if b["request"] is not None and b["index"] < o["index"]][-1] if bs else None
    F["pre_oom_frees"] = F["pre_oom_burst"]["frees"]
    F["pre_oom_released"] = F["pre_oom_burst"]["released"]
    zg = groups(R, lambda e: e["action"] == "free_requested" and has(e.get("frames"), "zero_grad"))
    F["train_steps"] = len(zg)
    vs = next(i for i, e in enumerate(T) if e["action"] == "alloc" and has(e["frames"], "validate"))
    F["val_start"] = vs
    F["train_peak"] = max(R.alloc_curve[:vs])
    F["opt_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    F["param_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "convert"))
    F["has_time"] = any("time_us" in e for e in T)
    F["has_settings"] = "allocator_settings" in d
    F["unfold_factor"] = F["unfold_live"] // (8 * 3 * 2048 * 3072 * 4)
    return F


def m04(d):
    segs = [s for s in d["segments"] if s["device"] == 0]
    F = dict(events=sum(len(t) for t in d["device_traces"]), segments=len(segs))
    F["reserved"] = sum(s["total_size"] for s in segs)
    blocks = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
    F["allocated"] = sum(b["requested_size"] for b in blocks)
    F["blocks"] = len(blocks)
    free_segs = [s for s in segs if s["allocated_size"] == 0]
    F["free_segments"], F["free_segment_bytes"] = len(free_segs), sum(s["total_size"] for s in free_segs)
    part = [s for s in segs if 0 < s["allocated_size"] < s["total_size"]]
    F["partial_free"] = sum(b["size"] for s in part for b in s["blocks"] if b["state"] == "inactive")
    F["largest_free"] = max(b["size"] for s in segs for b in s["blocks"] if b["state"] == "inactive")
    F["largest_segment"] = max(s["total_size"] for s in segs)
    F["large_free_segments_over_100mib"] = sum(1 for s in free_segs if s["total_size"] > 100 * 2 ** 20)
    mem = [b for b in blocks if has(b["frames"], "kv_memory_store.py")]
    F["memory_blocks"], F["memory_bytes"] = len(mem), sum(b["requested_size"] for b in mem)
    lt = [b for b in mem if at(b["frames"], "kv_memory_store.py", 129) or at(b["frames"], "kv_memory_store.py", 135)]
    F["longterm_blocks"], F["longterm_bytes"] = len(lt), sum(b["requested_size"] for b in lt)
    F["longterm_key_elems"] = sorted(b["requested_size"] // 256 for b in lt if at(b["frames"], "kv_memory_store.py", 129))
    masks = [b for b in blocks if has(b["frames"], "store_mask")]
    F["mask_blocks"], F["mask_bytes"] = len(masks), sum(b["requested_size"] for b in masks)
    F["mask_size"] = masks[0]["requested_size"]
    prm = [b for b in blocks if has(b["frames"], "load_xmem")]
    F["param_blocks"], F["param_bytes"] = len(prm), sum(b["requested_size"] for b in prm)
    sens = [b for b in blocks if has(b["frames"], "create_hidden_state") or at(b["frames"], "model/modules.py", 189)]
    F["sensory_blocks"], F["sensory_bytes"] = len(sens), sum(b["requested_size"] for b in sens)
    F["other_bytes"] = F["allocated"] - F["memory_bytes"] - F["mask_bytes"] - F["param_bytes"] - F["sensory_bytes"]
    F["blocks_with_frames"] = sum(1 for b in blocks if b["frames"])
    F["segments_with_frames"] = sum(1 for s in segs if s["frames"])
    F["idle"] = F["reserved"] - F["allocated"]
    return F


def m05(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    F["first_action"] = T[0]["action"]
    F["frees_without_alloc"] = sum(1 for i, e in enumerate(T) if e["action"] == "free_requested" and i not in R.free_of)
    F["streams"] = sorted(set(e["stream"] for e in T))
    F["n_streams"] = len([s for s in F["streams"] if s != 0])
    bs = bursts(R)
    st = [b for b in bs if b["request"] is not None and not b["empty_cache"]]
    F["stalls"] = [dict(index=b["index"], frees=b["frees"], released=b["released"], request=b["request"],
                        us=b["us"], reserved_before=b["reserved_before"], allocated=b["allocated"],
                        own_stream_frees=sum(1 for k in range(b["index"], b["index"] + b["frees"]) if T[k]["stream"] == b["request_stream"]),
                        other_stream_frees=sum(1 for k in range(b["index"], b["index"] + b["frees"]) if T[k]["stream"] != b["request_stream"]),
                        site=py_top(T[b["index"] + b["frees"] + 1]["frames"]))
                   for b in st]
    F["n_stalls"] = len(st)
    F["stall_us_total"] = sum(s["us"] for s in F["stalls"])
    F["bursts_total"] = len(bs)
    F["empty_cache_calls"] = sum(1 for b in bs if b["empty_cache"])
    segs = [s for s in d["segments"] if s["device"] == 0]
    F["reserved_by_stream"] = {str(k): sum(s["total_size"] for s in segs if s["stream"] == k) for k in sorted(set(s["stream"] for s in segs))}
    F["free_by_stream"] = {str(k): sum(b["size"] for s in segs if s["stream"] == k for b in s["blocks"] if b["state"] == "inactive") for k in sorted(set(s["stream"] for s in segs))}
    ks = sorted(F["reserved_by_stream"], key=int)
    F["reserved_by_stream_txt"] = ", ".join("%.2f GiB" % (F["reserved_by_stream"][k] / 2 ** 30) for k in ks)
    F["free_by_stream_txt"] = ", ".join("%.2f GiB" % (F["free_by_stream"][k] / 2 ** 30) for k in ks)
    F["ring_full"] = len(T) == 40000
    F["max_reserved_gib"] = R.max_reserved
    return F


def m06(d):
    out = {}
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    zg = groups(R, lambda e: e["action"] == "free_requested" and has(e.get("frames"), "zero_grad"))
    F["steps"] = len(zg)
    st = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "grpo_trainer.py", 252), gap=1)
    lows, peaks = step_stats(R, st)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["low_growth_per_step"] = [b - a for a, b in zip(lows[:-1], lows[1:])]
    F["low_growth_steady"] = F["low_growth_per_step"][-1]
    F["step_lows_txt"] = ", ".join("%.2f" % (x / 2 ** 30) for x in lows)
    F["low_growth_txt"] = ", ".join("%.2f" % (x / 2 ** 30) for x in F["low_growth_per_step"])
    F["step_peaks_txt"] = ", ".join("%.2f" % (x / 2 ** 30) for x in peaks)
    F["opt_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    kept = final_blocks(d, 0, lambda fr: has(fr, "torch/distributions"))
    F["kept_blocks"], F["kept_bytes"] = len(kept), sum(b["requested_size"] for b in kept)
    F["kept_sites"] = ", ".join("`%s`" % x for x in sorted(set(py_top(b["frames"]) for b in kept)))
    F["kept_block_size"] = kept[0]["requested_size"]
    ent = final_blocks(d, 0, lambda fr: at(fr, "grpo_trainer.py", 270))
    F["entropy_log_blocks"], F["entropy_log_bytes"] = len(ent), sum(b["requested_size"] for b in ent)
    F["kept_per_step"] = F["kept_bytes"] // F["steps"] + F["entropy_log_bytes"] // F["steps"]
    F["user_line"] = "grpo_trainer.py:212 _policy_logps"
    # distributions allocations made in the trace and never freed, vs freed ones at the same frames
    da = [(i, e) for i, e in enumerate(T) if e["action"] == "alloc" and has(e["frames"], "torch/distributions")]
    F["dist_allocs"] = len(da)
    F["dist_allocs_freed"] = sum(1 for i, e in da if R.alloc_index.get(i) is not None)
    F["dist_allocs_kept"] = F["dist_allocs"] - F["dist_allocs_freed"]
    F["final_minus_start"] = R.final_allocated - R.allocated_at_start
    F["params"] = R.allocated_at_start
    F["at_peak_kept"] = sum(sz for sz, fr, ai in R.live_blocks_at(R.peak_index) if has(fr, "torch/distributions") or at(fr, "grpo_trainer.py", 270))
    out["dev0"] = F
    R1 = Replay(d, 1)
    G = base(R1)
    kvb = [b for b in final_blocks(d, 1) if b["requested_size"] > 500 * 2 ** 20]
    G["kv_blocks"], G["kv_bytes"] = len(kvb), sum(b["requested_size"] for b in kvb)
    G["range_allocated"] = max(R1.alloc_curve) - min(R1.alloc_curve)
    G["final_minus_start"] = R1.final_allocated - R1.allocated_at_start
    out["dev1"] = G
    out["device_lists"] = len(d["device_traces"])
    return out


def m07(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    ad = final_blocks(d, 0, lambda fr: has(fr, "pack_adapter"))
    F["adapters"], F["adapter_bytes"] = len(ad), sum(b["requested_size"] for b in ad)
    F["adapter_min"], F["adapter_max"] = min(b["requested_size"] for b in ad), max(b["requested_size"] for b in ad)
    px = final_blocks(d, 0, lambda fr: has(fr, "prefix_cache.py"))
    F["prefix_entries"], F["prefix_bytes"] = len(px), sum(b["requested_size"] for b in px)
    kv = final_blocks(d, 0, lambda fr: has(fr, "kv.py"))
    F["kv_live"], F["kv_bytes"] = len(kv), sum(b["requested_size"] for b in kv)
    F["adapter_loads"] = sum(1 for e in T if e["action"] == "alloc" and has(e["frames"], "pack_adapter"))
    F["adapter_evictions"] = sum(1 for e in T if e["action"] == "free_requested" and at(e["frames"], "adapters.py", 47))
    F["prefix_inserts"] = sum(1 for e in T if e["action"] == "alloc" and has(e["frames"], "prefix_cache.py"))
    F["prefix_evictions"] = sum(1 for e in T if e["action"] == "free_requested" and at(e["frames"], "prefix_cache.py", 44))
    F["first_adapter_eviction"] = next(i for i, e in enumerate(T) if e["action"] == "free_requested" and at(e["frames"], "adapters.py", 47))
    F["first_prefix_eviction"] = next(i for i, e in enumerate(T) if e["action"] == "free_requested" and at(e["frames"], "prefix_cache.py", 44))
    F["requests"] = sum(1 for e in T if e["action"] == "alloc" and has(e["frames"], "kv.py"))
    F["requests_finished"] = sum(1 for e in T if e["action"] == "free_requested" and has(e["frames"], "finish"))
    F["weights"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "load_base"))
    F["workspace_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "alloc_workspace"))
    n = len(T)
    F["allocated_at_prefix_cap"] = R.alloc_curve[F["first_prefix_eviction"]]
    F["max_alloc_second_half"] = max(R.alloc_curve[n // 2:])
    F["min_alloc_second_half"] = min(R.alloc_curve[n // 2:])
    F["res_second_half_growth"] = R.res_curve[-1] - R.res_curve[n // 2]
    i = max(range(n), key=lambda k: (R.res_curve[k], -k))
    F["max_res_index"], F["alloc_at_max_res"] = i, R.alloc_curve[i]
    F["gap_at_max_res"] = R.res_curve[i] - R.alloc_curve[i]
    F["cache_caps_bytes"] = F["adapter_bytes"] + F["prefix_bytes"]
    return F


def m08(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    zg = groups(R, lambda e: e["action"] == "free_requested" and has(e.get("frames"), "zero_grad"))
    F["steps"] = len(zg)
    st = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "train.py", 168), gap=1)
    lows, peaks = step_stats(R, st)
    F["step_peaks"] = peaks
    F["peak_site"] = py_top(T[R.peak_index]["frames"])
    attn = lambda fr: any(f["name"] == "multi_head_attention_forward" and f["line"] in (5497, 5499, 5501) for f in fr or [])
    lv = R.live_blocks_at(R.peak_index)
    F["attn_at_peak"] = sum(sz for sz, fr, ai in lv if attn(fr))
    F["attn_blocks_at_peak"] = sum(1 for sz, fr, ai in lv if attn(fr))
    F["attn_share"] = F["attn_at_peak"] / R.peak_allocated
    F["attn_layers_at_peak"] = sum(1 for sz, fr, ai in lv if any(f["name"] == "multi_head_attention_forward" and f["line"] == 5497 for f in fr or []))
    F["softmax_block"] = max(sz for sz, fr, ai in lv if attn(fr))
    F["avg_weights_allocs"] = sum(1 for e in T if e["action"] == "alloc" and any(f["name"] == "multi_head_attention_forward" and f["line"] == 5509 for f in e["frames"]))
    F["avg_weights_size"] = next(e["size"] for e in T if e["action"] == "alloc" and any(f["name"] == "multi_head_attention_forward" and f["line"] == 5509 for f in e["frames"]))
    F["peak_without_attn"] = R.peak_allocated - F["attn_at_peak"]
    F["param_bytes"] = R.allocated_at_start
    F["opt_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    F["sdpa_calls"] = sum(1 for e in T if e.get("frames") and has(e["frames"], "scaled_dot_product_attention"))
    return F


def m09(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    st = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "train.py", 166), gap=1)
    F["steps"] = len(st)
    lows, peaks = step_stats(R, st)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["first_step_rise"] = lows[1] - lows[0]
    F["low_after_step1"], F["low_last"] = lows[1], lows[-1]
    F["zero_grad_frees"] = sum(1 for e in T if e["action"] == "free_requested" and has(e.get("frames"), "zero_grad"))
    fb = final_blocks(d, 0, lambda fr: not fr)
    F["grad_blocks"] = sum(1 for i, e in enumerate(T) if e["action"] == "alloc" and not e["frames"] and R.alloc_index.get(i) is None)
    F["grad_bytes"] = sum(e["size"] for i, e in enumerate(T) if e["action"] == "alloc" and not e["frames"] and R.alloc_index.get(i) is None)
    F["opt_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    corr = [e["size"] for e in T if e["action"] == "alloc" and at(e["frames"], "core/corr.py", 59)]
    F["corr_size"], F["corr_allocs"] = corr[0], len(corr)
    F["largest_alloc"] = max(e["size"] for e in T if e["action"] == "alloc")
    F["peak_site"] = py_top(T[R.peak_index]["frames"])
    lv = R.live_blocks_at(R.peak_index)
    F["preds_at_peak"] = sum(sz for sz, fr, ai in lv if at(fr, "core/raft.py", 96))
    F["iter_at_peak"] = sum(sz for sz, fr, ai in lv if has(fr, "core/update.py") or has(fr, "core/corr.py") and not at(fr, "core/corr.py", 59) or has(fr, "upsample_flow"))
    F["corr_at_peak"] = sum(sz for sz, fr, ai in lv if has(fr, "core/corr.py") and has(fr, "__init__"))
    F["enc_at_peak"] = sum(sz for sz, fr, ai in lv if has(fr, "core/extractor.py"))
    F["params"] = R.allocated_at_start
    F["final_expect"] = F["params"] + F["grad_bytes"] + F["opt_bytes"]
    return F


def m10(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    F["steps"] = sum(1 for a in d["external_annotations"] if a["stage"] == "START" and a["name"].startswith("ProfilerStep#"))
    starts = [ann_index(d, R, "ProfilerStep#%d" % s) for s in range(F["steps"])]
    lows, peaks = step_stats(R, starts)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["first_step_rise"] = lows[1] - lows[0]
    F["peak_step"] = max(i for i, s in enumerate(starts) if s <= R.peak_index)
    F["opt_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    bs = bursts(R)
    F["bursts"] = len(bs)
    b = bs[0]
    F["ec_index"], F["ec_frees"], F["ec_released"], F["ec_is_empty_cache"] = b["index"], b["frees"], b["released"], b["empty_cache"]
    F["ec_followed_by_request"] = b["request"] is not None
    F["ec_reserved_before"], F["ec_allocated"] = b["reserved_before"], b["allocated"]
    F["ec_reserved_after"] = R.res_curve[b["index"] + b["frees"] - 1]
    vi = ann_index(d, R, "validation")
    F["val_peak"] = max(R.alloc_curve[vi:b["index"]])
    F["params"] = R.allocated_at_start
    return F


def all_figures():
    out = {}
    for k in FILES:
        out[k] = globals()[k](load(k))
    return out


if __name__ == "__main__":
    import json
    F = all_figures()
    for k, v in F.items():
        s = json.dumps(v, default=str)
        print(k, s[:3000])
