"""Every figure of KEY.md, recomputed from the written files alone (no generator import)."""
import os
import pickle

from replay import Replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["m01_dreamerv3_atari100k_cpp.pickle", "m02_siglip_embed_service_graphs.pickle",
         "m03_din_ctr_rank5_npu5.pkl", "m04_electra_base_pretrain_2023.pickle",
         "m05_demucs_stems_service_state.pickle", "m06_pythia1b_resume_rank1_2gpu.pickle",
         "m07_bert4rec_ml20m_ring.pickle", "m08_mistral7b_kvquant_triage.pickle",
         "m09_svd_xt_img2vid_a6000.pickle", "m10_vqgan_f16_lightning.pickle"]


def names(fr):
    return [f["name"] for f in fr or []]


def has(fr, sub):
    return any(sub in f["filename"] or sub in f["name"] for f in fr or [])


def site(fr):
    """The innermost frame that is not torch/ or C++: file:line name."""
    for f in fr or []:
        fn = f["filename"]
        if not fn.endswith(".py") or "/torch/" in fn:
            continue
        return "%s:%d %s" % (fn.rsplit("/", 1)[-1], f["line"], f["name"])
    return "(no Python frame: autograd thread)"


def base(R):
    out = dict(events=len(R.T), allocated_at_start=R.allocated_at_start, blocks_at_start=R.blocks_at_start,
               reserved_at_start=R.reserved_at_start, peak_allocated=R.peak_allocated,
               peak_index=R.peak_index, reserved_at_peak=R.reserved_at_peak, max_reserved=R.max_reserved,
               final_allocated=R.final_allocated, final_reserved=R.final_reserved,
               segments=len(R.segs),
               segment_allocs=sum(1 for e in R.T if e["action"] == "segment_alloc"),
               segment_frees=sum(1 for e in R.T if e["action"] == "segment_free"))
    if R.peak_time_us is not None:
        out["peak_time_us"] = R.peak_time_us
    out["gap_at_peak"] = R.reserved_at_peak - R.peak_allocated
    if R.T:
        out["max_gap"] = max(r - a for r, a in zip(R.res_curve, R.alloc_curve))
        j = R.peak_index
        while j >= 0 and not (R.T[j]["action"] == "alloc" and site(R.T[j].get("frames")) != "(no Python frame: autograd thread)"):
            j -= 1
        out["last_python_site_before_peak"] = site(R.T[j]["frames"]) if j >= 0 else None
    if R.problems:
        out["problems"] = list(R.problems)
    return out


def freed_by(R):
    """alloc index -> frames of its free_requested."""
    out = {}
    for ai, fi in R.alloc_index.items():
        if fi is not None:
            out[ai] = R.T[fi].get("frames", [])
    return out


def breakdown(R, idx, classify):
    fb = freed_by(R)
    cats = {}
    for sz, fr, ai in R.live_blocks_at(idx):
        c = classify(sz, fr, ai, fb.get(ai))
        cats[c] = cats.get(c, 0) + sz
    return cats


def std_class(sz, fr, ai, fb):
    if ai < 0:
        return "before_trace"
    if has(fr, "_init_group"):
        return "optimizer_state"
    if fb is not None and has(fb, "zero_grad"):
        return "gradients"
    return "activations_and_temporaries"


def stalls(R):
    out = []
    T = R.T
    i = 0
    while i < len(T):
        if T[i]["action"] == "segment_free":
            j = i
            while j < len(T) and T[j]["action"] == "segment_free":
                j += 1
            released = sum(T[k]["size"] for k in range(i, j))
            nxt = T[j]["action"] if j < len(T) else None
            waiting = nxt in ("segment_alloc", "oom") and T[i].get("frames") and T[j].get("frames") == T[i].get("frames")
            out.append(dict(index=i, frees=j - i, released=released, request=(T[j + 1]["size"] if nxt == "segment_alloc" and j + 1 < len(T) else None),
                            waiting=bool(waiting),
                            us=(T[min(j, len(T) - 1)].get("time_us", 0) - T[i].get("time_us", 0)) if "time_us" in T[i] else None))
            i = j
        else:
            i += 1
    return out


def load(name):
    with open(os.path.join(ROOT, name), "rb") as f:
        return pickle.load(f)


# ----------------------------------------------------------------------------- per file
def m01(d):
    R = Replay(d, 0)
    o = base(R)
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    opt = [(i, e["size"]) for i, e in enumerate(R.T) if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    o["opt_blocks"] = len(opt)
    o["opt_bytes"] = sum(s for _, s in opt)
    # the three optimizers' first steps: runs of _init_group allocations
    runs, last = [], None
    for i, s in opt:
        if last is None or i - last > 50:
            runs.append(0)
        runs[-1] += s
        last = i
    o["opt_runs"] = runs
    o["cpp_frames"] = sum(1 for e in R.T[:2000] if e.get("frames") and e["frames"][0]["name"] == "torch::unwind::unwind()")
    ann = d.get("external_annotations", [])
    o["adam_steps"] = sum(1 for a in ann if a["name"] == "Optimizer.step#Adam.step" and a["stage"] == "START")
    o["zero_grads"] = sum(1 for a in ann if a["name"].startswith("Optimizer.zero_grad") and a["stage"] == "START")
    # low points: allocated right before each world-model batch is preprocessed (models.py:115)
    lows = [R.alloc_curve[i - 1] for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and any(f["name"] == "preprocess" and f["line"] == 181 for f in e["frames"]) and any(f["line"] == 115 for f in e["frames"] if f["name"] == "_train")]
    wm_starts = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and any(f["name"] == "preprocess" and f["line"] == 181 for f in e["frames"]) and any(f["line"] == 115 for f in e["frames"] if f["name"] == "_train")]
    o["peak_train_call"] = sum(1 for i in wm_starts if i <= R.peak_index)
    j = R.peak_index
    while not (R.T[j]["action"] == "alloc" and has(R.T[j]["frames"], "models.py")):
        j -= 1
    mf = [f for f in R.T[j]["frames"] if f["filename"].endswith("models.py")][0]
    o["peak_after_program_site"] = "models.py:%d %s" % (mf["line"], mf["name"])
    o["wm_batch_lows"] = lows
    o["first_wm_low"] = lows[0]
    o["later_wm_low"] = lows[-1]
    o["param_bytes"] = R.allocated_at_start
    big = max((e["size"], i) for i, e in enumerate(R.T) if e["action"] == "alloc")
    o["largest_alloc"] = big[0]
    o["largest_alloc_site"] = site(R.T[big[1]]["frames"])
    return o


def m02(d):
    R = Replay(d, 0)
    o = base(R)
    pools = {}
    for s in R.segs:
        pid = tuple(s["segment_pool_id"])
        p = pools.setdefault(pid, dict(reserved=0, allocated=0, segments=0))
        p["reserved"] += s["total_size"]
        p["segments"] += 1
        p["allocated"] += sum(b["requested_size"] for b in s["blocks"] if b["state"] != "inactive")
    priv = {k: v for k, v in pools.items() if k != (0, 0)}
    o["private_pools"] = len(priv)
    o["private_reserved"] = sum(v["reserved"] for v in priv.values())
    o["private_allocated"] = sum(v["allocated"] for v in priv.values())
    o["default_reserved"] = pools[(0, 0)]["reserved"]
    o["default_allocated"] = pools[(0, 0)]["allocated"]
    o["largest_pool"] = max(v["reserved"] for v in priv.values())
    o["smallest_pool"] = min(v["reserved"] for v in priv.values())
    st = stalls(R)
    o["free_bursts"] = len(st)
    o["free_bursts_waiting"] = sum(1 for s in st if s["waiting"])
    o["free_burst_released"] = sum(s["released"] for s in st)
    o["streams"] = sorted({e["stream"] for e in R.T})
    # captures: allocations on the capture stream, grouped by pool; the batch sizes come from the
    # static input allocated just before each capture (graph_runner.py:55): b x 3 x 384 x 384 bf16
    caps = [e["size"] // (3 * 384 * 384 * 2) for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 55 and e["frames"][0]["name"] == "_capture"]
    o["captures"] = len(caps)
    o["capture_batches"] = caps
    o["last_capture_index"] = max(i for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "_capture")
    o["largest_pool_batch"] = caps[max(priv, key=lambda k: priv[k]["reserved"])[0] - 1]
    o["smallest_pool_batch"] = caps[min(priv, key=lambda k: priv[k]["reserved"])[0] - 1]
    o["peak_stream"] = R.T[R.peak_index]["stream"]
    o["peak_capture_batch"] = [e["size"] // (3 * 384 * 384 * 2) for e in R.T[:R.peak_index] if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 55 and e["frames"][0]["name"] == "_capture"][-1]
    o["batches_served"] = sum(1 for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 34 and e["frames"][0]["name"] == "to_device_batch")
    return o


def m03(d):
    R = Replay(d, 5)
    o = base(R)
    o["device_lists"] = len(d["device_traces"])
    o["stream"] = R.T[0]["stream"]
    # steps: one data transfer of 7 tensors per step at 数据/加载.py:58; first of each step
    starts = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "搬到设备"]
    step_starts = starts[::7]
    o["steps"] = len(step_starts)
    lows = [R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start for i in step_starts]
    o["low_first"] = lows[1]
    o["low_last"] = lows[-1]
    o["low_growth_per_step"] = (lows[-1] - lows[1]) / (len(lows) - 2)
    # blocks allocated in the trace and still live at the end, grouped by call site
    live = {}
    for addr, (sz, ai) in R.live_end.items():
        if ai < 0:
            continue
        k = site(R.T[ai]["frames"])
        n, b = live.get(k, (0, 0))
        live[k] = (n + 1, b + sz)
    o["live_sites"] = dict(sorted(live.items(), key=lambda kv: -kv[1][1]))
    leak_sites = [k for k in live if "异步汇总" in k or k.startswith("din.py:97")]
    o["leak_blocks"] = sum(live[k][0] for k in leak_sites)
    o["leak_bytes"] = sum(live[k][1] for k in leak_sites)
    o["leak_per_step"] = o["leak_bytes"] // o["steps"]
    o["leak_per_5000_steps"] = o["leak_per_step"] * 5000
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb: "leak_metric_handles" if ai >= 0 and (has(fr, "异步汇总") or (fr and fr[0]["line"] == 97 and fr[0]["filename"].endswith("din.py"))) and R.alloc_index.get(ai) is None else std_class(sz, fr, ai, fb))
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    return o


def m04(d):
    R = Replay(d, 0)
    o = base(R)
    o["keys"] = sorted(d.keys())
    o["has_time"] = any("time_us" in e for e in R.T)
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["micro_batches"] = sum(1 for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 262 and e["frames"][0]["name"] == "train_step") // 2
    o["optimizer_steps"] = len({i for i, e in enumerate(R.T) if e["action"] == "free_requested" and has(e["frames"], "zero_grad") and (i == 0 or not (R.T[i - 2]["action"] == "free_requested" and has(R.T[i - 2]["frames"], "zero_grad")))})
    o["opt_bytes"] = sum(e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group"))
    mstarts = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 262 and e["frames"][0]["name"] == "train_step"][::2]
    o["peak_micro_batch"] = sum(1 for i in mstarts if i <= R.peak_index)
    grads_alive = [fi for ai, fi in R.alloc_index.items() if fi is not None and has(R.T[fi]["frames"], "zero_grad")]
    o["grad_blocks"] = len(grads_alive)
    o["grad_bytes_per_step"] = sum(R.T[fi]["size"] for fi in grads_alive) // max(1, o["optimizer_steps"])
    big = max((e["size"], i) for i, e in enumerate(R.T) if e["action"] == "alloc")
    o["largest_alloc"] = big[0]
    o["largest_alloc_site"] = site(R.T[big[1]]["frames"])
    return o


def m05(d):
    segs = [s for s in d["segments"] if s["device"] == 0]
    o = dict(events=sum(len(t) for t in d["device_traces"]), segments=len(segs),
             reserved=sum(s["total_size"] for s in segs))
    act = [b for s in segs for b in s["blocks"] if b["state"] != "inactive"]
    ina = [b for s in segs for b in s["blocks"] if b["state"] == "inactive"]
    o["allocated"] = sum(b["requested_size"] for b in act)
    o["active_blocks"] = len(act)
    o["active_with_frames"] = sum(1 for b in act if b["frames"])
    o["inactive_bytes"] = sum(b["size"] for b in ina)
    o["largest_inactive"] = max(b["size"] for b in ina)
    o["fully_free_segments"] = sum(1 for s in segs if all(b["state"] == "inactive" for b in s["blocks"]))
    cats = {}
    for b in act:
        fr = b["frames"]
        if has(fr, "create_app"):
            c = "weights (%s)" % site([f for f in fr if f["name"] == "create_app"])
        elif has(fr, "demucs/apply.py") and not has(fr, "htdemucs.py"):
            c = "apply_model buffers"
        elif has(fr, "stemsplit/engine.py") and not has(fr, "demucs/"):
            c = "job input"
        else:
            c = "chunk forward"
        n, s = cats.get(c, (0, 0))
        cats[c] = (n + 1, s + b["requested_size"])
    o["by_kind"] = dict(sorted(cats.items()))
    o["weights_bytes"] = sum(v[1] for k, v in cats.items() if k.startswith("weights"))
    o["weights_blocks"] = sum(v[0] for k, v in cats.items() if k.startswith("weights"))
    o["ft_bag_bytes"] = cats["weights (app.py:33 create_app)"][1]
    o["apply_buffers_bytes"] = cats["apply_model buffers"][1]
    o["apply_buffers_blocks"] = cats["apply_model buffers"][0]
    o["job_input_bytes"] = cats["job input"][1]
    o["chunk_bytes"] = cats["chunk forward"][1]
    o["largest_live"] = max(b["requested_size"] for b in act)
    o["largest_live_site"] = site(max(act, key=lambda b: b["requested_size"])["frames"])
    return o


def m06(d):
    o = {}
    for dev in (0, 1):
        R = Replay(d, dev)
        o["dev%d" % dev] = base(R)
        if dev == 0:
            o["oom"] = R.oom
            o["oom_site"] = site(R.T[R.oom["index"]]["frames"])
            o["dev0_blocks_from_torch_load"] = sum(1 for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "_cuda_deserialize"))
            o["dev0_bytes_from_torch_load"] = sum(sz for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "_cuda_deserialize"))
            o["dev0_other_bytes"] = R.final_allocated - o["dev0_bytes_from_torch_load"]
            o["dev0_tensors_before_oom"] = sum(1 for e in R.T if e["action"] == "alloc")
            o["free_plus_own_reserved"] = R.oom["device_free"] + R.oom["reserved"]
        else:
            o["dev1_param_bytes"] = sum(sz for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "convert"))
            o["dev1_bucket_bytes"] = sum(sz for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "_ddp_init_helper"))
    o["device_lists"] = len(d["device_traces"])
    return o


def m07(d):
    R = Replay(d, 0)
    o = base(R)
    T = R.T
    o["first_action"] = T[0]["action"]
    o["frees_without_alloc"] = sum(1 for i, e in enumerate(T) if e["action"] == "free_requested" and i not in R.free_of)
    o["ghost_blocks_live_at_end"] = sum(1 for a, (sz, ai) in R.live_end.items() if ai < 0)
    o["ghost_bytes_live_at_end"] = sum(sz for a, (sz, ai) in R.live_end.items() if ai < 0)
    o["allocs_in_window_live_at_end"] = sum(1 for a, (sz, ai) in R.live_end.items() if ai >= 0)
    o["steps_in_window"] = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "<listcomp>" and e["frames"][0]["line"] == 84) // 2
    o["eval_batches_in_window"] = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "validate")
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    o["peak_site"] = site(T[R.peak_index]["frames"]) if T[R.peak_index]["action"] == "alloc" else T[R.peak_index]["action"]
    lows = [R.alloc_curve[i - 1] for i, e in enumerate(T) if i > 0 and e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "<listcomp>" and e["frames"][0]["line"] == 84]
    lows = lows[::2]
    o["step_low_min"] = min(lows)
    o["step_low_max"] = max(lows)
    return o


def m08(d):
    R = Replay(d, 0)
    o = base(R)
    T = R.T
    # reserved minus the bytes of live blocks (each rounded to 512 B) = cached free bytes
    live = {}
    act = R.allocated_at_start  # approximate ghosts by requested size rounded
    rnd = lambda s: max(512, (s + 511) // 512 * 512)
    cur = {}
    for addr, (sz, fr) in R.ghosts.items():
        cur[addr] = rnd(sz)
    active = sum(cur.values())
    res = R.reserved_at_start
    covered = n_large = 0
    best = None
    for i, e in enumerate(T):
        a = e["action"]
        if a == "alloc":
            cur[e["addr"]] = rnd(e["size"])
            active += cur[e["addr"]]
        elif a == "free_completed":
            if e["addr"] in cur:
                active -= cur.pop(e["addr"])
        elif a == "segment_alloc":
            if e["size"] > 2 * 1024 * 1024 and i + 1 < len(T) and T[i + 1]["action"] == "alloc":
                n_large += 1
                if res - active >= rnd(T[i + 1]["size"]):
                    covered += 1
            res += e["size"]
        elif a == "segment_free":
            res -= e["size"]
        if best is None or res > best[0]:
            best = (res, i, R.alloc_curve[i], res - active)
    o["large_segment_allocs"] = n_large
    o["large_segment_allocs_covered_by_cache"] = covered
    o["max_reserved_index"] = best[1]
    o["allocated_at_max_reserved"] = best[2]
    o["gap_at_max_reserved"] = best[0] - best[2]
    o["cached_free_at_max_reserved"] = best[3]
    o["gap_at_peak"] = R.reserved_at_peak - R.peak_allocated
    st = [s for s in stalls(R)]
    o["stalls"] = [s for s in st if s["waiting"]]
    o["stall_index"] = o["stalls"][0]["index"]
    o["stall_frees"] = o["stalls"][0]["frees"]
    o["stall_released"] = o["stalls"][0]["released"]
    o["stall_request"] = o["stalls"][0]["request"]
    o["other_free_bursts"] = len([s for s in st if not s["waiting"]])
    gstarts = [i for i, e in enumerate(T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "to" and e["frames"][1]["line"] == 70][::2]
    o["stall_generate_call"] = sum(1 for i in gstarts if i <= o["stall_index"])
    o["peak_generate_call"] = sum(1 for i in gstarts if i <= R.peak_index)
    o["generate_calls"] = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "to" and e["frames"][1]["line"] == 70) // 2
    kv = lambda fr: has(fr, "_quantize") or (fr and fr[0]["name"] == "update" and fr[0]["line"] in (839, 840, 856, 857))
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb: "weights (before trace)" if ai < 0 else ("quantized kv cache" if kv(fr) else "temporaries"))
    o["peak_site"] = site(T[R.peak_index]["frames"])
    return o


def m09(d):
    R = Replay(d, 0)
    o = base(R)
    T = R.T
    dec = next(i for i, e in enumerate(T) if e["action"] == "alloc" and has(e["frames"], "decode_latents"))
    o["decode_start"] = dec
    o["max_alloc_before_decode"] = max(R.alloc_curve[:dec])
    o["max_reserved_before_decode"] = max(R.res_curve[:dec])
    o["at_peak"] = breakdown(R, R.peak_index, lambda sz, fr, ai, fb: "weights (before trace)" if ai < 0 else ("vae temporal decoder" if has(fr, "autoencoder_kl_temporal_decoder.py") else "other"))
    big = max((e["size"], i) for i, e in enumerate(T) if e["action"] == "alloc")
    o["largest_alloc"] = big[0]
    o["largest_alloc_site"] = site(T[big[1]]["frames"])
    o["peak_site"] = site(T[R.peak_index]["frames"])
    o["peak_share_of_reserved_before_decode"] = round(R.peak_allocated / o["max_alloc_before_decode"], 2)
    o["unet_calls"] = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "__call__" and e["frames"][0]["line"] == 500)
    o["vae_decode_calls"] = sum(1 for e in T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["line"] == 244 and e["frames"][0]["name"] == "decode_latents")
    return o


def m10(d):
    R = Replay(d, 0)
    o = base(R)
    o["at_peak"] = breakdown(R, R.peak_index, std_class)
    ann = d.get("external_annotations", [])
    o["adam_steps"] = sum(1 for a in ann if a["name"] == "Optimizer.step#Adam.step" and a["stage"] == "START")
    opt = [e["size"] for e in R.T if e["action"] == "alloc" and has(e["frames"], "_init_group")]
    o["opt_bytes"] = sum(opt)
    o["opt_blocks"] = len(opt)
    o["log_state_blocks"] = sum(1 for a, (sz, ai) in R.live_end.items() if ai >= 0 and has(R.T[ai]["frames"], "log_dict"))
    o["batches"] = sum(1 for e in R.T if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "get_input")
    bstarts = [i for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "get_input"]
    o["peak_batch"] = sum(1 for i in bstarts if i <= R.peak_index)
    lows = [R.alloc_curve[i - 1] if i > 0 else R.allocated_at_start for i, e in enumerate(R.T) if e["action"] == "alloc" and e["frames"] and e["frames"][0]["name"] == "apply_to_collection"]
    o["first_batch_low"] = lows[0]
    o["later_batch_low"] = lows[-1]
    o["batch_lows"] = lows
    big = max((e["size"], i) for i, e in enumerate(R.T) if e["action"] == "alloc")
    o["largest_alloc"] = big[0]
    o["largest_alloc_site"] = site(R.T[big[1]]["frames"])
    return o


FUNCS = [m01, m02, m03, m04, m05, m06, m07, m08, m09, m10]


def all_figures():
    out = {}
    for name, fn in zip(FILES, FUNCS):
        out[name[:3]] = fn(load(name))
        out[name[:3]]["file"] = name
        out[name[:3]]["file_bytes"] = os.path.getsize(os.path.join(ROOT, name))
    return out
