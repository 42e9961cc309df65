"""Every figure of KEY.md, recomputed from the written files alone (imports nothing of the
generator but the file-only replay in replay.py)."""
import os
import pickle

from replay import Replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"m01": "m01_fairseq_transformer_wmt16_ende_cpp.pickle", "m02": "m02_vitb16_soup_ckpt_sweep.pickle",
         "m03": "m03_npu_timesnet_ecl_card7.pkl", "m04": "m04_pbt_nanogpt_owt_2gpu.pickle",
         "m05": "m05_layoutlmv3_rvlcdip_2023.pickle", "m06": "m06_raytune_vits16_cifar100_trial.pickle",
         "m07": "m07_proteinmpnn_cath_ring.pickle", "m08": "m08_mask2former_r50_coco_lsj.pickle",
         "m09": "m09_pyannote_diarize_service_state.pickle", "m10": "m10_alphazero_go9_rtx3080.pickle"}
MiB = 1 << 20


def load(k):
    with open(os.path.join(ROOT, FILES[k]), "rb") as f:
        return pickle.load(f)


def has(fr, sub):
    return any(sub in f["filename"] or sub in f["name"] for f in fr or [])


def at(fr, file_end, line, name=None):
    return any(f["filename"].endswith(file_end) and f["line"] == line and (name is None or f["name"] == name) for f in fr or [])


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
    out["final_gap"] = R.final_reserved - R.final_allocated
    out["ooms"] = sum(1 for e in R.T if e["action"] == "oom")
    out["covered_segment_allocs"] = covered_segment_allocs(R)
    if R.problems:
        out["problems"] = list(R.problems)
    return out


def groups(R, pred, gap=10):
    idx = [i for i, e in enumerate(R.T) if pred(e)]
    out, last = [], -10 ** 9
    for i in idx:
        if i - last > gap:
            out.append(i)
        last = i
    return out


def step_stats(R, starts):
    bounds = list(starts) + [len(R.T)]
    lows, peaks = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        lows.append(R.alloc_curve[a - 1] if a > 0 else R.allocated_at_start)
        peaks.append(max(R.alloc_curve[a:b]))
    return lows, peaks


def bursts(R):
    """segment_free runs: index, count, bytes, whether empty_cache is on the stack, the request after."""
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
                            request=req["size"] if req else None, request_action=req["action"] if req else None,
                            us=(req["time_us"] - T[i - 1]["time_us"]) if (req is not None and "time_us" in T[i] and i > 0) else None,
                            reserved_before=R.res_curve[i - 1] if i > 0 else R.reserved_at_start,
                            allocated_before=R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start,
                            allocated_after=R.alloc_curve[j - 1],
                            empty_cache=has(T[i].get("frames"), "empty_cache"), top=py_top(T[i].get("frames")),
                            request_top=py_top(req.get("frames")) if req else None))
            i = j
        else:
            i += 1
    return out


def covered_segment_allocs(R):
    """segment_allocs made while reserved - allocated (requested bytes) already exceeded the new
    segment's size: cached memory existed but not in one piece big enough."""
    n = 0
    for i, e in enumerate(R.T):
        if e["action"] == "segment_alloc":
            res = R.res_curve[i - 1] if i > 0 else R.reserved_at_start
            al = R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start
            if res - al >= e["size"]:
                n += 1
    return n


def final_blocks(d, dev, pred=None, state="active_allocated"):
    return [b for s in d["segments"] if s["device"] == dev for b in s["blocks"]
            if b["state"] == state and (pred is None or pred(b["frames"]))]


def cat_at(R, idx, rules):
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


def alloc_sum(R, pred):
    ev = [e for e in R.T if e["action"] == "alloc" and pred(e.get("frames"))]
    return len(ev), sum(e["size"] for e in ev)


def pool_at_end(d, dev):
    segs = [s for s in d["segments"] if s["device"] == dev]
    free = [b["size"] for s in segs for b in s["blocks"] if b["state"] == "inactive"]
    return dict(reserved=sum(s["total_size"] for s in segs), free_cached=sum(free), largest_free=max(free) if free else 0,
                free_blocks=len(free), segments=len(segs),
                allocated_rounded=sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated"),
                requested=sum(b["requested_size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated"),
                free_segments=sum(1 for s in segs if all(b["state"] == "inactive" for b in s["blocks"])),
                largest_segment=max((s["total_size"] for s in segs), default=0))


def largest_gap_from_live(d, dev):
    """Independent of the block states: the largest contiguous span of a segment not covered by an
    active block (rounded sizes)."""
    best = 0
    for s in d["segments"]:
        if s["device"] != dev:
            continue
        cur = s["address"]
        for b in s["blocks"]:
            if b["state"] != "inactive":
                best = max(best, b["address"] - cur)
                cur = b["address"] + b["size"]
        best = max(best, s["address"] + s["total_size"] - cur)
    return best


# ----------------------------------------------------------------------------------- files
def m01(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    starts = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "_prepare_sample"), gap=20)
    F["steps"] = len(starts)
    lows, peaks = step_stats(R, starts)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["low_step0"], F["low_step1"], F["low_last"] = lows[0], lows[1], lows[-1]
    F["low_creep"] = lows[-1] - lows[1]
    F["low_step2"] = lows[2]
    F["first_step_rise"] = lows[1] - lows[0]
    F["peak_step"] = max(i for i, s in enumerate(starts) if s <= R.peak_index)
    F["peak_min"], F["peak_max"] = min(peaks), max(peaks)
    src = [T[s]["size"] // 8 for s in starts]
    F["src_tokens"] = src
    F["peak_src_tokens"] = src[F["peak_step"]]
    n, b = alloc_sum(R, lambda fr: at(fr, "fairseq/optim/adam.py", 208) or at(fr, "fairseq/optim/adam.py", 210))
    F["opt_blocks"], F["opt_bytes"] = n, b
    F["param_bytes"] = R.allocated_at_start
    F["param_blocks"] = R.blocks_at_start
    gb = final_blocks(d, 0, lambda fr: has(fr, "AccumulateGrad::apply"))
    F["final_grad_blocks"], F["final_grad_bytes"] = len(gb), sum(x["requested_size"] for x in gb)
    lp = [i for i, e in enumerate(T) if e["action"] == "alloc" and has(e.get("frames"), "fairseq/utils.py") and has(e["frames"], "log_softmax")]
    F["lprobs_sizes"] = [T[i]["size"] for i in lp]
    pk_lp = max(i for i in lp if i <= R.peak_index)
    F["peak_lprobs"] = T[pk_lp]["size"]
    ins = [i for i in range(starts[F["peak_step"]], len(T)) if T[i]["action"] == "alloc" and has(T[i].get("frames"), "_prepare_sample")][:4]
    F["peak_tgt_tokens"] = T[ins[2]]["size"] // 8
    F["vocab"] = T[pk_lp]["size"] // 4 // F["peak_tgt_tokens"]
    F["peak_top"] = py_top(T[R.peak_index].get("frames"))
    F["peak_node"] = next((f["name"].split("::")[3].split("::")[0] for f in T[R.peak_index]["frames"] if "autograd::generated::" in f["name"]), "none")
    rules = [("parameters", lambda fr, ai: ai < 0),
             ("optimizer_state", lambda fr, ai: at(fr, "fairseq/optim/adam.py", 208) or at(fr, "fairseq/optim/adam.py", 210)),
             ("gradients", lambda fr, ai: has(fr, "AccumulateGrad::apply")),
             ("lprobs", lambda fr, ai: has(fr, "fairseq/utils.py") and has(fr, "log_softmax") and not has(fr, "LogSoftmaxBackward0")),
             ("loss_grads", lambda fr, ai: has(fr, "GatherBackward0") or has(fr, "SumBackward1") or has(fr, "LogSoftmaxBackward0"))]
    F["at_peak"] = cat_at(R, R.peak_index, rules)
    F["lprobs_and_grads"] = F["at_peak"]["lprobs"] + F["at_peak"]["loss_grads"]
    F["cpp_events"] = sum(1 for e in T if e.get("frames") and any(f["filename"] == "??" for f in e["frames"]))
    fm = [i for i, e in enumerate(T) if e["action"] == "alloc" and has(e.get("frames"), "buffered_future_mask")]
    F["future_mask_allocs"] = len(fm)
    F["future_mask_final"] = T[fm[-1]]["size"]
    F["future_mask_growth"] = sum(T[i]["size"] for i in fm[1:]) - sum(T[i]["size"] for i in fm[:-1]) if len(fm) > 1 else 0
    F["reserved_step_ends"] = [R.res_curve[s - 1] for s in starts[1:]] + [R.final_reserved]
    F["reserved_after_step"] = {str(i): r for i, r in enumerate(F["reserved_step_ends"])}
    F["step_of_max_reserved_first"] = next(i for i, r in enumerate(F["reserved_step_ends"]) if r == max(F["reserved_step_ends"]))
    F["bursts"] = len(bursts(R))
    return F


def m02(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    loads = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "torch/serialization.py"), gap=20)
    F["checkpoints"] = len(loads)
    n, b = alloc_sum(R, lambda fr: has(fr, "torch/serialization.py"))
    F["load_bytes_total"] = b
    F["param_bytes"] = b // len(loads)
    F["param_tensors"] = n // len(loads)
    kept = [i for i, e in enumerate(T) if e["action"] == "alloc" and R.alloc_index.get(i) is None and not has(e.get("frames"), "torch/serialization.py")]
    F["kept_blocks"] = len(kept)
    F["kept_bytes"] = sum(T[i]["size"] for i in kept)
    F["kept_sites"] = sorted(set(py_top(T[i]["frames"]) for i in kept))
    F["kept_linear"] = sum(T[i]["size"] for i in kept if has(T[i]["frames"], "torch/nn/modules/linear.py"))
    F["kept_conv"] = sum(T[i]["size"] for i in kept if has(T[i]["frames"], "torch/nn/modules/conv.py"))
    per = []
    for a, bnd in zip(loads, loads[1:] + [len(T)]):
        per.append(sum(T[i]["size"] for i in kept if a <= i < bnd))
    F["kept_per_ckpt"] = per
    F["kept_per_ckpt_equal"] = len(set(per)) == 1
    F["kept_one_ckpt"] = per[0]
    F["kept_blocks_per_ckpt"] = len(kept) // len(loads)
    imgs = [i for i, e in enumerate(T) if e["action"] == "alloc" and at(e.get("frames"), "soup_sweep.py", 66)]
    ok = True
    for k_, a in enumerate(loads):
        bnd = loads[k_ + 1] if k_ + 1 < len(loads) else len(T)
        second = [i for i in imgs if a <= i < bnd][1]
        ok = ok and all(i < second for i in kept if a <= i < bnd)
    F["kept_first_forward_only"] = ok
    lows = [R.alloc_curve[s - 1] if s > 0 else R.allocated_at_start for s in loads]
    F["lows_at_load"] = lows
    F["low_growth"] = [b_ - a_ for a_, b_ in zip(lows, lows[1:])]
    F["low_first_load"], F["low_last_load"] = lows[1], lows[-1]
    # the kept blocks are exactly half the size of parameters (fp16 copies of fp32 weights)
    psizes = sorted(e["size"] for e in T[loads[0]:loads[1]] if e["action"] == "alloc" and has(e.get("frames"), "torch/serialization.py"))
    F["kept_are_half_params"] = all(T[i]["size"] * 2 in set(psizes) for i in kept)
    rules = [("parameters", lambda fr, ai: has(fr, "torch/serialization.py") or has(fr, "convert")),
             ("kept_casts", lambda fr, ai: ai >= 0 and R.alloc_index.get(ai) is None)]
    F["at_peak"] = cat_at(R, R.peak_index, rules)
    F["peak_ckpt"] = max(k for k, s in enumerate(loads) if s <= R.peak_index)
    return F


def m03(d):
    R = Replay(d, 7)
    F = base(R)
    T = R.T
    F["device"] = 7
    F["device_lists"] = len(d["device_traces"])
    F["other_lists_empty"] = all(not t for i, t in enumerate(d["device_traces"]) if i != 7)
    F["streams"] = sorted(set(e["stream"] for e in T))
    F["no_time"] = all("time_us" not in e for e in T)
    F["has_settings"] = "allocator_settings" in d
    tr = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "训练一轮") and at(e["frames"], "models/TimesNet.py", 160), gap=1)
    va = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "验证") and at(e["frames"], "models/TimesNet.py", 160), gap=1)
    F["train_steps"], F["val_batches"] = len(tr), len(va)
    lows, peaks = step_stats(R, tr)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["first_step_rise"] = lows[1] - lows[0]
    F["low_step1"] = lows[1]
    F["lows_after_1_equal"] = len(set(lows[1:])) == 1
    F["peak_min"], F["peak_max"] = min(peaks), max(peaks)
    F["peak_spread"] = max(peaks) - min(peaks)
    F["flat_steps"] = len(lows) - 1
    n, b = alloc_sum(R, lambda fr: has(fr, "_init_group"))
    F["opt_blocks"], F["opt_bytes"] = n, b
    F["weights"] = b // 2
    F["param_bytes"] = R.allocated_at_start
    bs = bursts(R)
    F["bursts"] = len(bs)
    bb = bs[0]
    F["ec_index"], F["ec_frees"], F["ec_released"], F["ec_empty_cache"] = bb["index"], bb["frees"], bb["released"], bb["empty_cache"]
    F["ec_reserved_before"], F["ec_allocated"] = bb["reserved_before"], bb["allocated_before"]
    F["ec_reserved_after"] = R.res_curve[bb["index"] + bb["frees"] - 1]
    F["ec_followed_by_request"] = bb["request"] is not None
    F["ec_after_val"] = va[-1] < bb["index"] < tr[30]
    F["ec_top"] = bb["top"]
    F["fft_sizes"] = sorted(set(e["size"] for e in T if e["action"] == "alloc" and at(e.get("frames"), "models/TimesNet.py", 48)))
    F["pad_shapes"] = len(F["fft_sizes"])
    F["reserved_after_ec_end"] = R.final_reserved
    return F


def m04(d):
    F = {}
    for dev in (0, 1):
        R = Replay(d, dev)
        G = base(R)
        T = R.T
        G["stalls"] = [b for b in bursts(R)]
        G["replacements"] = len(groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "pbt.py", 104), gap=2))
        G["rounds_started"] = len(groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "eval_member"), gap=5000))
        if G["ooms"]:
            oi = next(i for i, e in enumerate(T) if e["action"] == "oom")
            e = T[oi]
            G["oom_index"], G["oom_size"], G["oom_device_free"] = oi, e["size"], e["device_free"]
            G["oom_is_last"] = oi == len(T) - 1
            G["oom_reserved"], G["oom_allocated"] = R.res_curve[oi], R.alloc_curve[oi]
            G["oom_frames"] = len(e.get("frames") or [])
            G["oom_time_us"] = e["time_us"]
            prev_alloc = next(T[j] for j in range(oi - 1, -1, -1) if T[j]["action"] == "alloc")
            G["prev_alloc_same_size"] = prev_alloc["size"] == e["size"]
            P = pool_at_end(d, dev)
            G.update({"pool_" + k: v for k, v in P.items()})
            G["free_over_request"] = P["free_cached"] / e["size"]
            G["free_over_request_str"] = "%.2f" % G["free_over_request"]
            G["alloc_plus_request"] = R.alloc_curve[oi] + e["size"]
            G["reserved_plus_device_free"] = R.res_curve[oi] + e["device_free"]
            G["largest_gap_live"] = largest_gap_from_live(d, dev)
            G["free_plus_device_free"] = P["free_cached"] + e["device_free"]
            rb = G["stalls"][-1]
            G["retry_frees"], G["retry_released"] = rb["frees"], rb["released"]
            G["retry_before_oom"] = rb["request_action"] == "oom"
            big = sorted((b["size"] for s in d["segments"] if s["device"] == dev for b in s["blocks"] if b["state"] == "inactive"), reverse=True)
            G["free_top5"] = big[:5]
            G["free_ge_64mib"] = sum(x for x in big if x >= 64 * MiB)
            G["segments_with_free_and_live"] = sum(1 for s in d["segments"] if s["device"] == dev and any(b["state"] == "inactive" for b in s["blocks"]) and any(b["state"] != "inactive" for b in s["blocks"]))
        F["dev%d" % dev] = G
    F["device_lists"] = len(d["device_traces"])
    return F


def m05(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    F["no_time"] = all("time_us" not in e for e in T)
    F["has_settings"] = "allocator_settings" in d
    starts = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "send_to_device"), gap=10)
    F["steps"] = len(starts)
    lows, peaks = step_stats(R, starts)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["first_step_rise"] = lows[1] - lows[0]
    F["lows_after_1_equal"] = len(set(lows[1:])) == 1
    F["low_step1"] = lows[1]
    F["peak_step"] = max(i for i, s in enumerate(starts) if s <= R.peak_index)
    F["peak_min_later"], F["peak_max_later"] = min(peaks[1:]), max(peaks[1:])
    n, b = alloc_sum(R, lambda fr: has(fr, "_init_group"))
    F["opt_blocks"], F["opt_bytes"] = n, b
    F["param_bytes"] = R.allocated_at_start
    F["param_blocks"] = R.blocks_at_start
    zg = [i for i, e in enumerate(T) if e["action"] == "free_requested" and at(e.get("frames"), "torch/nn/modules/module.py", 2403, "zero_grad")]
    F["zero_grad_frees"] = len(zg)
    F["zero_grad_bytes_per_step"] = sum(T[i]["size"] for i in zg) // len(starts)
    # autocast weight copies of step 2: half-size copies of the linear/conv weights, freed in backward
    a, b2 = starts[1], starts[2]
    wsz = {768 * 768 * 2, 768 * 2, 3072 * 768 * 2, 3072 * 2, 16 * 768 * 2, 16 * 2}
    casts = [i for i in range(a, b2) if T[i]["action"] == "alloc" and T[i]["size"] in wsz and
             (has(T[i]["frames"], "torch/nn/modules/linear.py") or has(T[i]["frames"], "torch/nn/modules/conv.py"))]
    F["cast_blocks_step"] = len(casts)
    F["cast_bytes_step"] = sum(T[i]["size"] for i in casts)
    F["casts_freed_in_step"] = all(R.alloc_index.get(i) is not None and R.alloc_index[i] < b2 for i in casts)
    sc = max(e["size"] for e in T if e["action"] == "alloc" and has(e.get("frames"), "cogview_attention"))
    F["score_block"] = sc
    F["score_blocks_at_peak"] = sum(1 for sz, fr, ai in R.live_blocks_at(R.peak_index) if sz == sc)
    rules = [("parameters", lambda fr, ai: ai < 0),
             ("optimizer_state", lambda fr, ai: has(fr, "_init_group")),
             ("gradients", lambda fr, ai: ai >= 0 and not fr),
             ("attention_probs_fp32", lambda fr, ai: has(fr, "cogview_attention") or has(fr, "torch/nn/functional.py") and has(fr, "dropout") and at(fr, "modeling_layoutlmv3.py", 372)),
             ("weight_casts", lambda fr, ai: ai >= 0 and (has(fr, "torch/nn/modules/linear.py") or has(fr, "torch/nn/modules/conv.py")) and R.T[ai]["size"] in wsz)]
    F["at_peak"] = cat_at(R, R.peak_index, rules)
    F["peak_top"] = py_top(T[R.peak_index].get("frames"))
    return F


def m06(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    oi = next(i for i, e in enumerate(T) if e["action"] == "oom")
    e = T[oi]
    F["oom_index"], F["oom_size"], F["oom_device_free"], F["oom_is_last"] = oi, e["size"], e["device_free"], oi == len(T) - 1
    F["oom_reserved"], F["oom_allocated"] = R.res_curve[oi], R.alloc_curve[oi]
    F["oom_gap"] = R.res_curve[oi] - R.alloc_curve[oi]
    F["oom_top"] = py_top(e.get("frames"))
    F["visible_at_oom"] = R.res_curve[oi] + e["device_free"]
    mr = max(range(oi), key=lambda i: (R.res_curve[i], -i))
    F["max_reserved_before"], F["max_reserved_index"] = R.res_curve[mr], mr
    F["external_growth_min"] = R.res_curve[mr] - F["visible_at_oom"]
    bs = bursts(R)
    F["bursts"] = len(bs)
    ec = bs[0]
    F["ec_index"], F["ec_frees"], F["ec_released"], F["ec_empty_cache"], F["ec_top"] = ec["index"], ec["frees"], ec["released"], ec["empty_cache"], ec["top"]
    F["ec_reserved_after"] = R.res_curve[ec["index"] + ec["frees"] - 1]
    F["ec_allocated"] = ec["allocated_before"]
    rt = bs[-1]
    F["retry_frees"], F["retry_released"], F["retry_then_oom"] = rt["frees"], rt["released"], rt["request_action"] == "oom"
    starts = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "tune_vit.py", 96), gap=10)
    F["train_steps"] = len(starts)
    F["val_batches"] = len(groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "tune_vit.py", 118), gap=10))
    F["epoch2_step"] = sum(1 for s in starts if s > ec["index"])
    n, b = alloc_sum(R, lambda fr: has(fr, "_init_group"))
    F["opt_bytes"] = b
    n, b = alloc_sum(R, lambda fr: has(fr, "convert"))
    F["param_bytes"] = b
    F["first_step_peak"] = max(R.alloc_curve[starts[0]:starts[1]])
    F["reserved_epoch1_end"] = R.res_curve[ec["index"] - 1]
    F["time_empty_cache_to_oom_us"] = e["time_us"] - T[ec["index"]]["time_us"]
    return F


def m07(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    F["max_entries"] = len(T)
    F["first_action"] = T[0]["action"]
    F["first_is_orphan_free"] = T[0]["action"] in ("free_requested", "free_completed") and T[0]["addr"] in R.ghosts or T[0]["action"] == "alloc"
    F["ghost_blocks"] = len(R.ghosts)
    F["ghost_freed_in_window"] = sum(1 for a in R.ghosts if a not in R.final_blocks)
    starts = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "featurize"), gap=10)
    F["steps_in_window"] = len(starts)
    lows, peaks = step_stats(R, starts)
    F["step_lows"], F["step_peaks"] = lows, peaks
    F["lows_equal"] = len(set(lows)) == 1
    F["low"] = lows[0]
    F["peak_min"], F["peak_max"] = min(peaks), max(peaks)
    F["partial_step_peak"] = max(R.alloc_curve[:starts[0]])
    tokens = [T[s]["size"] // 48 for s in starts]
    F["tokens"] = tokens
    F["tokens_min"], F["tokens_max"] = min(tokens), max(tokens)
    F["peak_step_tokens"] = tokens[max(range(len(peaks)), key=lambda i: peaks[i])]
    fb = final_blocks(d, 0)
    F["final_blocks"] = len(fb)
    F["opt_final_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "_init_group"))
    F["param_final_bytes"] = sum(b["requested_size"] for b in fb if has(b["frames"], "convert"))
    F["opt_allocs_in_window"] = sum(1 for e in T if e["action"] == "alloc" and has(e.get("frames"), "_init_group"))
    F["edge_block"] = max(e["size"] for e in T if e["action"] == "alloc" and has(e.get("frames"), "cat_neighbors_nodes"))
    F["bursts"] = len(bursts(R))
    return F


def m08(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    starts = groups(R, lambda e: e["action"] == "alloc" and at(e.get("frames"), "maskformer_model.py", 188), gap=10)
    F["steps"] = len(starts)
    lows, peaks = step_stats(R, starts)
    F["step_peaks"] = peaks
    F["peak_step"] = max(i for i, s in enumerate(starts) if s <= R.peak_index)
    F["peak_min"], F["peak_max"] = min(peaks), max(peaks)
    full = lambda fr: has(fr, "loss_masks") or has(fr, "sigmoid_focal_loss") or has(fr, "dice_loss")
    match = lambda fr: has(fr, "matcher.py")
    live = R.live_blocks_at(R.peak_index)
    F["at_peak_loss_masks"] = sum(sz for sz, fr, ai in live if full(fr))
    F["at_peak_loss_masks_blocks"] = sum(1 for sz, fr, ai in live if full(fr))
    F["at_peak_matcher"] = sum(sz for sz, fr, ai in live if match(fr))
    F["at_peak_backbone_pixel"] = sum(sz for sz, fr, ai in live if has(fr, "resnet.py") or has(fr, "msdeformattn.py") or has(fr, "ms_deform_attn"))
    F["at_peak_params_opt"] = sum(sz for sz, fr, ai in live if ai < 0 or has(fr, "_init_group"))
    F["at_peak_fullres"] = F["at_peak_loss_masks"] + F["at_peak_matcher"]
    F["at_peak_other"] = R.peak_allocated - F["at_peak_fullres"] - F["at_peak_backbone_pixel"] - F["at_peak_params_opt"]
    F["peak_top"] = py_top(T[R.peak_index].get("frames"))
    # matched masks in the peak step: the upsampled matched masks are NM x 1024 x 1024 fp32
    us = [e["size"] for e in T[starts[F["peak_step"]]:] if e["action"] == "alloc" and at(e.get("frames"), "criterion.py", 136)]
    F["upsampled_block"] = us[0]
    F["matched_masks"] = us[0] // (1024 * 1024 * 4)
    F["quarter_res_block"] = max(e["size"] for e in T if e["action"] == "alloc" and at(e.get("frames"), "criterion.py", 125))
    mt = [e["size"] for e in T if e["action"] == "alloc" and at(e.get("frames"), "matcher.py", 162)]
    F["matcher_upsample_block"] = mt[0]
    F["matcher_calls"] = len(mt)
    F["points_equivalent"] = F["at_peak_loss_masks"] * 12544 // (1024 * 1024)
    F["points_saving"] = F["at_peak_loss_masks"] - F["points_equivalent"]
    F["bursts"] = len(bursts(R))
    n, b = alloc_sum(R, lambda fr: has(fr, "_init_group"))
    F["opt_bytes"] = b
    F["param_bytes"] = R.allocated_at_start
    return F


def m09(d):
    F = {}
    segs = [s for s in d["segments"] if s["device"] == 0]
    F["trace_lists"] = len(d["device_traces"])
    F["trace_empty"] = all(not t for t in d["device_traces"])
    P = pool_at_end(d, 0)
    F.update(P)
    act = final_blocks(d, 0)
    F["active_blocks"] = len(act)
    F["allocated"] = sum(b["requested_size"] for b in act)
    F["blocks_without_frames"] = sum(1 for b in act if not b["frames"])
    F["weights"] = sum(b["requested_size"] for b in act if has(b["frames"], "load_models") and not has(b["frames"], "voiceprints.py"))
    F["bank"] = sum(b["requested_size"] for b in act if has(b["frames"], "voiceprints.py"))
    lru = [b for b in act if has(b["frames"], "diarize_file")]
    F["lru_bytes"], F["lru_blocks"] = sum(b["requested_size"] for b in lru), len(lru)
    F["lru_seg_bytes"] = sum(b["requested_size"] for b in lru if has(b["frames"], "inference.py"))
    F["lru_emb_bytes"] = sum(b["requested_size"] for b in lru if has(b["frames"], "speaker_verification.py"))
    F["idle"] = F["reserved"] - F["allocated_rounded"]
    F["idle_pct"] = "%.1f" % (100.0 * F["idle"] / F["reserved"])
    F["large_free_segments"] = sum(1 for s in segs if s["segment_type"] == "large" and all(b["state"] == "inactive" for b in s["blocks"]))
    F["has_settings"] = "allocator_settings" in d
    return F


def m10(d):
    R = Replay(d, 0)
    F = base(R)
    T = R.T
    bs = bursts(R)
    F["stalls"] = bs
    F["n_stalls"] = len(bs)
    F["all_followed_by_request"] = all(b["request_action"] == "alloc" for b in bs)
    F["none_empty_cache"] = not any(b["empty_cache"] for b in bs)
    F["allocated_unchanged"] = all(b["allocated_before"] == b["allocated_after"] for b in bs)
    F["stall_us_total"] = sum(b["us"] for b in bs)
    F["stall_us_max"] = max(b["us"] for b in bs)
    F["stall_released_min"] = min(b["released"] for b in bs)
    F["stall_released_max"] = max(b["released"] for b in bs)
    F["stall_frees_min"] = min(b["frees"] for b in bs)
    F["stall_frees_max"] = max(b["frees"] for b in bs)
    F["stall_indexes"] = ", ".join(str(b["index"]) for b in bs)
    F["stall_request_min"] = min(b["request"] for b in bs)
    F["stall_request_max"] = max(b["request"] for b in bs)
    F["stall_reserved_before_max"] = max(b["reserved_before"] for b in bs)
    F["stall_requests"] = [b["request"] for b in bs]
    F["stall_leaves"] = [b["request"] // (128 * 81 * 4) for b in bs]
    F["stall_request_tops"] = sorted(set(b["request_top"] for b in bs))
    F["stall_in_selfplay"] = all(has(T[b["index"] + b["frees"] + 1].get("frames"), "evaluate_leaves") for b in bs)
    sp = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "encode_batch"), gap=2000)
    tr = groups(R, lambda e: e["action"] == "alloc" and has(e.get("frames"), "replay.py") and has(e["frames"], "sample"), gap=2000)
    F["selfplay_phases"], F["train_phases"] = len(sp), len(tr)
    F["stall_first_call"] = all(any(s <= b["index"] <= s + 200 for s in sp) for b in bs)
    F["leaves_per_phase"] = [T[s]["size"] // (17 * 81 * 4) for s in sp]
    F["train_block"] = max(e["size"] for e in T if e["action"] == "alloc" and has(e.get("frames"), "train_steps") and has(e["frames"], "conv.py"))
    F["leaves_first"], F["leaves_last"] = T[sp[0]]["size"] // (17 * 81 * 4), T[sp[-1]]["size"] // (17 * 81 * 4)
    F["train_batch"] = next(e["size"] for e in T if e["action"] == "alloc" and has(e.get("frames"), "replay.py") and at(e["frames"], "azgo/replay.py", 55)) // 8
    F["start_blocks_top3"] = sorted((sz for sz, fr in R.ghosts.values()), reverse=True)[:3]
    F["momentum_bytes"] = sum(e["size"] for e in T if e["action"] == "alloc" and at(e.get("frames"), "torch/optim/sgd.py", 406))
    F["train_reserved_max"] = max(R.res_curve)
    F["peak_in_first_training"] = tr[0] <= R.peak_index < sp[1]
    F["selfplay_lows"] = [R.alloc_curve[s - 1] for s in sp]
    F["selfplay_lows_after1_equal"] = len(set(F["selfplay_lows"][1:])) == 1
    F["selfplay_low"] = F["selfplay_lows"][-1]
    F["oom"] = F["ooms"]
    return F


def all_figures():
    out = {}
    for k in FILES:
        out[k] = globals()[k](load(k))
    return out


if __name__ == "__main__":
    import json
    F = all_figures()
    print(json.dumps(F, indent=1, default=str))
