"""Every figure of KEY.md, recomputed from the written files alone (imports nothing of the
generator but the file-only replay; m09's what-if replays the file's own request sequence
through the allocator model in sim.py with the default setting)."""
import os
import pickle

from replay import Replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"m01": "m01_llama32_1b_reward_hh_cpp.pickle", "m02": "m02_chatglm3_6b_lora_npu4.pkl",
         "m03": "m03_rwkv4_430m_pile_2023.pickle", "m04": "m04_sdxl_lora_textcache_ring.pickle",
         "m05": "m05_blip2_opt27b_split_2gpu.pickle", "m06": "m06_timesfm_forecast_service_state.pickle",
         "m07": "m07_upernet_convnext_ade20k_dice.pickle", "m08": "m08_wavlm_large_voxceleb_features.pickle",
         "m09": "m09_deformable_detr_coco_v100.pickle", "m10": "m10_qwen25_15b_faqbot_l4.pickle"}
MiB = 2 ** 20


def load(k):
    with open(os.path.join(ROOT, FILES[k]), "rb") as f:
        return pickle.load(f)


def has(fr, sub):
    return any(sub in f["filename"] or sub in f["name"] for f in fr or [])


def at(fr, file_end, line):
    return any(f["filename"].endswith(file_end) and f["line"] == line for f in fr or [])


def py_top(fr):
    """The innermost Python frame (skips C++ frames)."""
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
    if has(fr, "_init_group"):
        return "optimizer_state"
    if (fb is not None and has(fb, "zero_grad")) or (fb is None and not fr):
        return "gradients"
    return "activations_and_temporaries"


def zg_groups(R):
    """Indices where a run of zero_grad frees starts (one per optimizer step)."""
    zg = [i for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e.get("frames"), "zero_grad")]
    groups, last = [], -10
    for i in zg:
        if i - last > 10:
            groups.append(i)
        last = i
    return groups


def stalls(R):
    """segment_free / segment_unmap bursts, with the request that follows (alloc after the
    segment_alloc, or the oom)."""
    out = []
    T = R.T
    i = 0
    while i < len(T):
        if T[i]["action"] in ("segment_free", "segment_unmap"):
            j = i
            while j < len(T) and T[j]["action"] in ("segment_free", "segment_unmap"):
                j += 1
            nxt = T[j] if j < len(T) else None
            req = None
            if nxt is not None and nxt["action"] == "segment_alloc" and j + 1 < len(T) and T[j + 1]["action"] == "alloc":
                req = T[j + 1]["size"]
            elif nxt is not None and nxt["action"] == "oom":
                req = nxt["size"]
            out.append(dict(index=i, frees=j - i, released=sum(T[k]["size"] for k in range(i, j)), request=req,
                            sizes=[T[k]["size"] for k in range(i, j)],
                            us=(T[j]["time_us"] - T[i - 1]["time_us"]) if (nxt is not None and "time_us" in T[i] and i > 0) else None,
                            reserved_before=R.res_curve[i - 1] if i > 0 else R.reserved_at_start,
                            allocated=R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start,
                            empty_cache=has(T[i].get("frames"), "empty_cache")))
            i = j
        else:
            i += 1
    return out


def steps_from_ann(d, name_prefix="ProfilerStep#"):
    return sum(1 for a in d.get("external_annotations", []) if a["stage"] == "START" and a["name"].startswith(name_prefix))


def final_blocks(d, dev, pred=None):
    return [b for s in d["segments"] if s["device"] == dev for b in s["blocks"]
            if b["state"] == "active_allocated" and (pred is None or pred(b["frames"]))]


def pool_stats(d, dev):
    segs = [s for s in d["segments"] if s["device"] == dev]
    large = [s for s in segs if s["segment_type"] == "large"]
    part = [s for s in large if 0 < s["allocated_size"] < s["total_size"]]
    full_free = [s for s in segs if s["allocated_size"] == 0 and s["active_size"] == 0]
    frees = [b["size"] for s in segs for b in s["blocks"] if b["state"] == "inactive"]
    return dict(segments=len(segs), large_segments=len(large), partly_used_large=len(part),
                partly_used_large_free=sum(s["total_size"] - s["active_size"] for s in part),
                partly_used_large_bytes=sum(s["total_size"] for s in part),
                free_segments=len(full_free), free_segment_bytes=sum(s["total_size"] for s in full_free),
                cached_free=sum(frees), largest_free_block=max(frees) if frees else 0,
                reserved=sum(s["total_size"] for s in segs))


# ----------------------------------------------------------------------------------- files
def m01(d):
    R = Replay(d, 0)
    o = base(R)
    o["steps"] = steps_from_ann(d)
    o["cpp_frames"] = sum(1 for e in R.T if e.get("frames") and e["frames"][0]["filename"] == "??")
    LG = lambda fr: at(fr, "modeling_llama.py", 1163) and has(fr, "wrapper_CUDA_mm")
    LF = lambda fr: at(fr, "modeling_llama.py", 1164)
    WC = lambda fr: has(fr, "at::native::to(") and has(fr, "torch/nn/modules/linear.py")

    def cls(sz, fr, ai, fb):
        if ai < 0:
            return "parameters"
        if has(fr, "_init_group"):
            return "optimizer_state"
        if fb is not None and has(fb, "zero_grad"):
            return "gradients"
        if LG(fr):
            return "logits_bf16"
        if LF(fr):
            return "logits_fp32"
        if WC(fr):
            return "autocast_weight_copies"
        return "activations_and_temporaries"
    o["at_peak"] = breakdown(R, R.peak_index, cls)
    o["logits_bf16_size"] = max(e["size"] for e in R.T if e["action"] == "alloc" and LG(e["frames"]))
    o["logits_fp32_size"] = max(e["size"] for e in R.T if e["action"] == "alloc" and LF(e["frames"]))
    o["logits_allocs"] = sum(1 for e in R.T if e["action"] == "alloc" and (LG(e["frames"]) or LF(e["frames"])))
    o["logits_at_peak"] = o["at_peak"].get("logits_bf16", 0) + o["at_peak"].get("logits_fp32", 0)
    o["peak_without_logits"] = R.peak_allocated - o["logits_at_peak"]
    # the whole run's peak if the logits were never made: allocated minus the logits alive, event by event
    live, cur, best, best_i = {}, 0, 0, 0
    for i, e in enumerate(R.T):
        if e["action"] == "alloc" and (LG(e["frames"]) or LF(e["frames"])):
            live[e["addr"]] = e["size"]
            cur += e["size"]
        elif e["action"] == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])
        v = R.alloc_curve[i] - cur
        if v > best:
            best, best_i = v, i
    o["run_peak_without_logits"] = best
    o["run_peak_without_logits_index"] = best_i
    o["run_peak_without_logits_site"] = py_top(R.T[best_i].get("frames")) if R.T[best_i].get("frames") and any(f["filename"].endswith(".py") for f in R.T[best_i]["frames"]) else "autograd thread"
    o["saving"] = R.peak_allocated - best
    # the fp32 logits are freed before the backward pass begins (nothing reads them)
    lf_idx = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and LF(e["frames"])]
    first_bwd = [next(i for i in range(a, len(R.T)) if R.T[i]["action"] == "alloc" and has(R.T[i]["frames"], "torch::autograd::Engine::thread_main")) for a in lf_idx]
    o["logits_fp32_freed_before_backward"] = all(R.alloc_index[a] is not None and R.alloc_index[a] < b for a, b in zip(lf_idx, first_bwd))
    pk = R.T[R.peak_index]
    o["peak_site"] = py_top(pk["frames"])
    starts = [a["time_us"] for a in d["external_annotations"] if a["stage"] == "START" and a["name"].startswith("ProfilerStep#")]
    o["peak_step"] = sum(1 for s in starts if s <= R.peak_time_us) - 1
    opt = [e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    o["opt_bytes"] = sum(opt)
    o["opt_blocks"] = len(opt)
    o["grad_bytes_per_step"] = sum(e["size"] for e in R.T if e["action"] == "free_requested" and has(e["frames"], "zero_grad")) // o["steps"]
    o["wcopy_bytes_per_step"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and WC(e["frames"]) and not has(e["frames"], "PyNode")) // o["steps"]
    o["per_step_peaks"] = []
    bounds = [a["time_us"] for a in d["external_annotations"] if a["name"].startswith("ProfilerStep#")]
    for s in range(o["steps"]):
        t0, t1 = bounds[2 * s], bounds[2 * s + 1]
        idx = [i for i, e in enumerate(R.T) if t0 <= e["time_us"] <= t1]
        o["per_step_peaks"].append(max(R.alloc_curve[i] for i in idx))
    return o


def m02(d):
    R = Replay(d, 4)
    o = base(R)
    o["device"] = 4
    o["n_device_lists"] = len(d["device_traces"])
    o["streams"] = sorted({e["stream"] for e in R.T})
    o["has_time"] = any("time_us" in e for e in R.T)
    o["has_settings"] = "allocator_settings" in d
    fb = final_blocks(d, 4)
    o["base_weight_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "加载模型") and not has(b["frames"], "peft"))
    o["lora_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "update_layer"))
    o["lora_blocks"] = sum(1 for b in fb if has(b["frames"], "update_layer"))
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["steps"] = len(zg_groups(R))
    LG = lambda fr: has(fr, "modeling_chatglm.py") and (at(fr, "modeling_chatglm.py", 944) or at(fr, "modeling_chatglm.py", 945) or at(fr, "modeling_chatglm.py", 952) or has(fr, "cross_entropy"))

    def cls(sz, fr, ai, f):
        if ai < 0:
            return "weights_and_lora"
        if has(fr, "_init_group"):
            return "optimizer_state"
        if f is not None and has(f, "zero_grad"):
            return "lora_gradients"
        if LG(fr):
            return "logits_and_loss"
        if not fr:
            return "backward_temporaries"
        return "activations_and_recompute"
    o["at_peak"] = breakdown(R, R.peak_index, cls)
    o["logits_fp16"] = max(e["size"] for e in R.T if e["action"] == "alloc" and at(e["frames"], "modeling_chatglm.py", 944))
    o["logits_fp32"] = max(e["size"] for e in R.T if e["action"] == "alloc" and at(e["frames"], "modeling_chatglm.py", 945))
    o["ckpt_saved_inputs"] = sum(1 for e in R.T if e["action"] == "alloc" and at(e["frames"], "modeling_chatglm.py", 572) and has(e["frames"], "checkpoint.py") and not has(e["frames"], "backward")) // max(o["steps"], 1)
    o["recompute_allocs"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "checkpoint.py") and any(f["name"] == "backward" for f in e["frames"]))
    lows = [R.alloc_curve[i] for i in zg_groups(R)]
    o["low_points"] = lows
    o["peak_site"] = py_top(R.T[R.peak_index]["frames"])
    return o


def m03(d):
    R = Replay(d, 0)
    o = base(R)
    o["has_time"] = any("time_us" in e for e in R.T)
    o["has_settings"] = "allocator_settings" in d
    o["steps"] = len(zg_groups(R))
    o["no_stack_allocs"] = sum(1 for e in R.T if e["action"] == "alloc" and not e.get("frames"))
    o["segment_frames_empty"] = all(not s["frames"] for s in d["segments"])
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["opt_blocks"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["logits"] = max(e["size"] for e in R.T if e["action"] == "alloc" and at(e["frames"], "src/model.py", 343))
    o["ce_fp32"] = max(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "cross_entropy"))
    o["wkv_saved_per_step"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "RUN_CUDA")) // o["steps"]
    o["grad_bytes_per_step"] = sum(e["size"] for e in R.T if e["action"] == "free_requested" and has(e["frames"], "zero_grad")) // o["steps"]
    o["low_points"] = [R.alloc_curve[i] for i in zg_groups(R)]
    pk = R.peak_index
    o["peak_step"] = sum(1 for i in zg_groups(R) if i < pk) + 1
    return o


def m04(d):
    R = Replay(d, 0)
    o = base(R)
    o["first_event"] = R.T[0]["action"]
    o["first_event_size"] = R.T[0]["size"]
    o["ring_entries"] = len(R.T)
    o["window_us"] = R.T[-1]["time_us"] - R.T[0]["time_us"]
    fb = final_blocks(d, 0)
    TC = lambda fr: has(fr, "encode_prompt")
    o["text_cache_blocks"] = sum(1 for b in fb if TC(b["frames"]))
    o["text_cache_bytes"] = sum(b["requested_size"] for b in fb if TC(b["frames"]))
    o["text_cache_in_trace"] = sum(1 for e in R.T if e["action"] == "alloc" and TC(e["frames"]))
    o["unet_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "torch/nn/modules/module.py") and b["frames"][0]["name"] == "convert")
    o["lora_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "cast_training_params"))
    o["opt_bytes_final"] = sum(b["requested_size"] for b in fb if has(b["frames"], "_init_group"))
    o["opt_allocs_in_trace"] = sum(1 for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    g = zg_groups(R)
    o["steps_in_window"] = len(g)
    o["low_points"] = [R.alloc_curve[i - 1] for i in g]
    o["ghost_blocks"] = R.blocks_at_start
    o["frees_without_alloc"] = sum(1 for i, e in enumerate(R.T) if e["action"] == "free_requested" and i not in R.free_of)
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb_: "before_window" if ai < 0 else std_class(sz, fr, ai, fb_))
    o["peak_site"] = py_top(R.T[R.peak_index]["frames"])
    o["end_low"] = R.final_allocated
    return o


def m05(d):
    o = {}
    R0, R1 = Replay(d, 0), Replay(d, 1)
    o["dev0"] = base(R0)
    o["dev1"] = base(R1)
    o["n_devices"] = len(d["device_traces"])
    o["dev0"]["at_peak"] = breakdown(R0, R0.peak_index, std_class)
    o["dev1"]["at_peak"] = breakdown(R1, R1.peak_index, lambda sz, fr, ai, fb: "frozen_opt_weights" if ai < 0 else ("backward_temporaries" if not fr else "activations_and_logits"))
    o["dev0"]["opt_bytes"] = sum(e["size"] for e in R0.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["dev1"]["opt_allocs"] = sum(1 for e in R1.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["dev1"]["zero_grad_frees"] = sum(1 for e in R1.T if e["action"] == "free_requested" and has(e["frames"], "zero_grad"))
    o["steps"] = len(zg_groups(R0))
    o["dev0"]["grad_bytes_per_step"] = sum(e["size"] for e in R0.T if e["action"] == "free_requested" and has(e["frames"], "zero_grad")) // o["steps"]
    o["dev0"]["low_points"] = [R0.alloc_curve[i] for i in zg_groups(R0)]
    o["dev0"]["vit_transient_max"] = max(e["size"] for e in R0.T if e["action"] == "alloc" and has(e["frames"], "eva_vit.py"))
    o["dev1"]["logits_fp32"] = max(e["size"] for e in R1.T if e["action"] == "alloc" and at(e["frames"], "modeling_opt.py", 1163))
    o["dev1"]["peak_site"] = py_top(R1.T[R1.peak_index]["frames"])
    o["dev0"]["peak_site"] = py_top(R0.T[R0.peak_index]["frames"])
    o["dev1"]["low_points"] = []
    for i, e in enumerate(R1.T):
        if e["action"] == "alloc" and at(e["frames"], "train_split.py", 142):
            o["dev1"]["low_points"].append(R1.alloc_curve[i - 1] if i else R1.allocated_at_start)
    return o


def m06(d):
    o = {}
    o["events"] = sum(len(t) for t in d["device_traces"])
    o["devices"] = sorted({s["device"] for s in d["segments"]})
    ps = pool_stats(d, 0)
    o.update(ps)
    act = final_blocks(d, 0)
    o["allocated"] = sum(b["requested_size"] for b in act)
    o["live_blocks"] = len(act)
    o["blocks_with_frames"] = sum(1 for b in act if b["frames"])
    CA = lambda fr: has(fr, "context_cache.py")
    o["weights"] = sum(b["requested_size"] for b in act if has(b["frames"], "load_from_checkpoint"))
    o["weight_blocks"] = sum(1 for b in act if has(b["frames"], "load_from_checkpoint"))
    o["cache_blocks"] = sum(1 for b in act if CA(b["frames"]))
    o["cache_bytes"] = sum(b["requested_size"] for b in act if CA(b["frames"]))
    o["cache_entry_sizes"] = sorted({b["requested_size"] for b in act if CA(b["frames"])})
    o["other"] = o["allocated"] - o["weights"] - o["cache_bytes"]
    o["cache_small_segments"] = len({s["address"] for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated" and CA(b["frames"])})
    o["gap"] = o["reserved"] - o["allocated"]
    return o


def m07(d):
    R = Replay(d, 0)
    o = base(R)
    oom = R.oom
    o["oom"] = dict(index=oom["index"], size=oom["size"], device_free=oom["device_free"], allocated=oom["allocated"],
                    reserved=oom["reserved"], time_us=R.T[oom["index"]]["time_us"], site=py_top(R.T[oom["index"]]["frames"]),
                    last_event=(oom["index"] == len(R.T) - 1))
    o["oom_is_int64_onehot"] = oom["size"] == 16 * 512 * 512 * 151 * 8
    o["onehot_as_fp16"] = oom["size"] // 4
    o["onehot_as_uint8"] = oom["size"] // 8
    live = sorted(R.live_blocks_at(oom["index"]), key=lambda x: -x[0])
    o["oom_largest"] = [dict(size=sz, site=py_top(fr)) for sz, fr, ai in live[:6]]
    o["params"] = R.allocated_at_start
    o["params_in_trace"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "wrap_model"))
    o["segment_frees_before_oom"] = sum(1 for e in R.T[:oom["index"]] if e["action"] == "segment_free")
    o["cached_free_at_oom"] = oom["reserved"] - oom["allocated"]
    o["capacity_seen"] = oom["reserved"] + oom["device_free"]

    def cls(sz, fr, ai, fb):
        if has(fr, "wrap_model"):
            return "parameters"
        if has(fr, "dice_loss.py"):
            return "dice_loss"
        if has(fr, "cross_entropy"):
            return "ce_loss"
        if has(fr, "data_preprocessor.py") or has(fr, "stack_batch"):
            return "inputs"
        if has(fr, "loss_by_feat"):
            return "upsampled_logits"
        if has(fr, "convnext.py"):
            return "backbone_checkpoint_inputs"
        return "head_activations"
    o["at_oom"] = breakdown(R, oom["index"], cls)
    o["at_oom_without_dice"] = oom["allocated"] - o["at_oom"].get("dice_loss", 0)
    o["needed"] = oom["allocated"] + oom["size"]
    o["short_by"] = oom["size"] - oom["device_free"] - (oom["reserved"] - oom["allocated"])
    return o


def m08(d):
    R = Replay(d, 0)
    o = base(R)
    o["batches"] = sum(1 for e in R.T if e["action"] == "alloc" and at(e["frames"], "extract_wavlm.py", 62))
    ws = [e["size"] for e in R.T if e["action"] == "alloc" and at(e["frames"], "extract_wavlm.py", 62)]
    o["wave_first"], o["wave_last"] = ws[0], ws[-1]
    o["wave_ascending"] = all(b >= a for a, b in zip(ws, ws[1:]))
    ps = pool_stats(d, 0)
    o["pool"] = ps
    KEPT = lambda fr: at(fr, "extract_wavlm.py", 74) or at(fr, "extract_wavlm.py", 78) or at(fr, "extract_wavlm.py", 63)
    fb = final_blocks(d, 0)
    o["kept_bytes"] = sum(b["requested_size"] for b in fb if KEPT(b["frames"]))
    o["kept_blocks"] = sum(1 for b in fb if KEPT(b["frames"]))
    o["weights"] = R.allocated_at_start
    # segment_allocs of the large pool made while the cached free bytes (reserved - allocated) covered the request
    n = m = 0
    covered_big = []
    for i, e in enumerate(R.T):
        if e["action"] == "segment_alloc" and e["size"] > 2 * MiB:
            n += 1
            req = R.T[i + 1]["size"]
            free = R.res_curve[i - 1] - R.alloc_curve[i - 1]
            if free >= req:
                m += 1
                covered_big.append((i, req, free))
    o["large_segment_allocs"] = n
    o["large_segment_allocs_covered"] = m
    last = covered_big[-1]
    o["last_covered"] = dict(index=last[0], request=last[1], cached_free=last[2])
    o["gap_end"] = R.final_reserved - R.final_allocated
    o["ratio_end"] = round(R.final_reserved / R.final_allocated, 1)
    # the largest block of the last batch, against the largest free block in the final pool
    o["largest_request_last_batch"] = max(e["size"] for e in R.T[-3000:] if e["action"] == "alloc")
    o["segments_per_batch"] = round(n / o["batches"], 2)
    o["kept_in_partly_used"] = sum(1 for s in d["segments"] if 0 < s["allocated_size"] < s["total_size"] and s["segment_type"] == "large"
                                   and any(b["state"] == "active_allocated" and KEPT(b["frames"]) for b in s["blocks"]))
    o["reserved_first_batch_end"] = None
    firsts = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and at(e["frames"], "extract_wavlm.py", 62)]
    o["reserved_after_batch"] = {str(k): R.res_curve[firsts[k] - 1] for k in (1, 16, 32, 48) if k < len(firsts)}
    o["allocated_after_batch"] = {str(k): R.alloc_curve[firsts[k] - 1] for k in (1, 16, 32, 48) if k < len(firsts)}
    return o


def m09(d):
    R = Replay(d, 0)
    o = base(R)
    st = d["allocator_settings"]
    o["alloc_conf"] = st["PYTORCH_CUDA_ALLOC_CONF"]
    o["max_split_size"] = st["max_split_size"]
    o["expandable"] = st["expandable_segments"]
    o["steps"] = len(zg_groups(R))
    b = stalls(R)
    o["stalls"] = b
    o["n_stalls"] = len(b)
    o["stall_segment_frees"] = sum(s["frees"] for s in b)
    o["stall_released"] = sum(s["released"] for s in b)
    o["stall_us"] = sum(s["us"] for s in b)
    o["first_stall_index"] = b[0]["index"]
    o["first_stall_step"] = sum(1 for i in zg_groups(R) if i < b[0]["index"]) + 1
    o["stall_steps"] = sorted({sum(1 for i in zg_groups(R) if i < s["index"]) + 1 for s in b})
    o["freed_min_size"] = min(x for s in b for x in s["sizes"])
    o["all_freed_oversize"] = all(x >= o["max_split_size"] for s in b for x in s["sizes"])
    o["empty_cache_bursts"] = sum(1 for s in b if s["empty_cache"])
    o["reserved_before_first"] = b[0]["reserved_before"]
    o["allocated_at_first"] = b[0]["allocated"]
    ps = pool_stats(d, 0)
    o["pool"] = ps
    segs = [s for s in d["segments"] if s["device"] == 0]
    o["oversize_free_segments"] = sum(1 for s in segs if s["allocated_size"] == 0 and s["total_size"] >= o["max_split_size"])
    o["oversize_free_bytes"] = sum(s["total_size"] for s in segs if s["allocated_size"] == 0 and s["total_size"] >= o["max_split_size"])
    big = [e["size"] for e in R.T if e["action"] == "alloc" and e["size"] >= o["max_split_size"]]
    o["oversize_requests"] = len(big)
    o["oversize_distinct"] = len(set(big))
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    o["stall_requests"] = sorted({s["request"] for s in b})
    o["stall_requests_below_limit"] = all(s["request"] < o["max_split_size"] for s in b)
    o["last_stall_index"] = b[-1]["index"]
    o["whatif_default"] = whatif(R, None)
    o["whatif_same"] = whatif(R, o["max_split_size"])
    return o


def whatif(R, max_split):
    """Replays the file's own allocation and free sequence (sizes, order; streams all 0) through
    the allocator model, from the file's pre-trace state (no live blocks, the reserved segments
    replaced by nothing), with the given max_split_size; returns stalls and the highest reserved."""
    import sim
    cap = R.max_reserved
    A = sim.Allocator(device=0, capacity=cap, time_us=False, max_split=max_split)
    live = {}
    for sz, fr in R.ghosts.values():
        pass
    ghosts = [A.malloc(sz, []) for sz, fr in R.ghosts.values()]
    A.trace = []
    A.stalls = []
    top = A.reserved
    for i, e in enumerate(R.T):
        if e["action"] == "alloc":
            live[e["addr"]] = A.malloc(e["size"], [])
            top = max(top, A.reserved)
        elif e["action"] == "free_requested" and e["addr"] in live:
            A.free(live.pop(e["addr"]))
    return dict(stalls=len(A.stalls), max_reserved=top, capacity=cap)


def m10(d):
    R = Replay(d, 0)
    o = base(R)
    KV = lambda fr: has(fr, "cache_utils.py")
    fb = final_blocks(d, 0)
    o["kv_final_blocks"] = sum(1 for b in fb if KV(b["frames"]))
    o["kv_final_bytes"] = sum(b["requested_size"] for b in fb if KV(b["frames"]))
    o["kv_bytes_per_token"] = 28 * 2 * 256 * 2
    o["cache_tokens_end"] = o["kv_final_bytes"] // o["kv_bytes_per_token"]
    req = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and at(e["frames"], "engine.py", 91)]
    o["requests"] = len(req)
    lows = [R.alloc_curve[i - 1] for i in req] + [R.final_allocated]
    o["low_points"] = lows
    o["growth_per_request"] = [b - a for a, b in zip(lows, lows[1:])]
    o["growth_total"] = lows[-1] - lows[0]
    o["growth_mean"] = o["growth_total"] // len(req)
    o["growth_min"] = min(o["growth_per_request"])
    o["growth_max"] = max(o["growth_per_request"])
    o["tokens_added_min"] = o["growth_min"] // o["kv_bytes_per_token"]
    o["tokens_added_max"] = o["growth_max"] // o["kv_bytes_per_token"]
    o["low_first"] = lows[0]
    o["low_last"] = lows[-1]
    o["prefix_bytes"] = lows[0] - R.allocated_at_start
    o["prefix_tokens"] = o["prefix_bytes"] // o["kv_bytes_per_token"]
    o["weights"] = R.allocated_at_start
    o["kv_cat_allocs"] = sum(1 for e in R.T if e["action"] == "alloc" and KV(e["frames"]))
    o["kv_largest_block"] = max(b["requested_size"] for b in fb if KV(b["frames"]))
    o["kv_first_block"] = min(e["size"] for e in R.T if e["action"] == "alloc" and KV(e["frames"]))
    # blocks from the cache site alive across two requests: none (each is replaced by the next torch.cat)
    o["kv_blocks_surviving_2_requests"] = 0
    for i, e in enumerate(R.T):
        if e["action"] == "alloc" and KV(e["frames"]):
            fi = R.alloc_index[i]
            later = [r for r in req if r > i]
            if len(later) >= 2 and (fi is None or fi > later[1]):
                o["kv_blocks_surviving_2_requests"] += 1
    o["peak_site"] = py_top(R.T[R.peak_index]["frames"])
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, f: "weights" if ai < 0 else ("kv_cache" if KV(fr) else "temporaries"))
    return o


def all_figures():
    F = {}
    for k in sorted(FILES):
        F[k] = globals()[k](load(k))
    return F


if __name__ == "__main__":
    import json
    F = all_figures()
    print(json.dumps(F, indent=1, ensure_ascii=False, default=str)[:60000])
