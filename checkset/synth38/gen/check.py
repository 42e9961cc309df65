"""Checks every file from the file alone and recomputes every figure of KEY.md.

1. Replays each device trace onto its final segments (replay.Replay: the state before the first
   event rebuilt by undoing the trace; every alloc inside a live segment and not on a live block,
   every free of a live block with its size, free_requested followed by free_completed, the live
   blocks at the end exactly the final segments' allocated blocks, the segments exactly the final
   segments).  The state-only file is checked for tiling and allocated_size instead.
2. Recomputes the figures (figures.py) and compares those the generator also knows
   (expected.json, its own bookkeeping), and asserts the facts each verdict rests on (e.g. for the
   fragmentation file: free cached >= 1.5 x the request and the largest free block < the request).
3. Renders KEY.md from key_template.md with the recomputed figures and demands that it equals
   KEY.md byte for byte: every figure in the key comes from the files.
Prints "all agree" or the disagreements."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures  # noqa: E402
import keymd  # noqa: E402
from replay import Replay  # noqa: E402

problems = []
F = figures.all_figures()


def walk(k, v):
    if isinstance(v, dict):
        for kk, vv in v.items():
            if kk == "problems":
                problems.extend("%s %s" % (k, p) for p in vv)
            else:
                walk(k, vv)


for k, v in F.items():
    walk(k, v)
d9 = figures.load("m09")
R9 = Replay(d9, 0)
problems.extend("m09 " + p for p in R9.problems)
exp = json.load(open(os.path.join(HERE, "expected.json"), encoding="utf-8"))


def same(label, a, b):
    if a != b:
        problems.append("%s: file %r != generator %r" % (label, a, b))


def need(label, cond):
    if not cond:
        problems.append("verdict fact does not hold: " + label)


for name, e in exp.items():
    k = name[:3]
    f = F[k]
    info = e["info"]
    devs = e["devices"]
    if k == "m04":
        for dv in ("0", "1"):
            same("m04 dev%s final allocated" % dv, f["dev" + dv]["final_allocated"], devs[dv]["final_allocated"])
            same("m04 dev%s final reserved" % dv, f["dev" + dv]["final_reserved"], devs[dv]["final_reserved"])
        same("m04 oom request", f["dev1"]["oom_size"], info["oom"]["size"])
        same("m04 oom device_free", f["dev1"]["oom_device_free"], info["oom"]["free"])
        same("m04 replacements", f["dev0"]["replacements"] + f["dev1"]["replacements"], len(info["replaced"]))
        continue
    dv = list(devs.values())[0]
    if k == "m09":
        same("m09 allocated", f["requested"], dv["final_allocated"])
        same("m09 reserved", f["reserved"], dv["final_reserved"])
        same("m09 weights", f["weights"], info["param_bytes"])
        same("m09 bank", f["bank"], info["bank_bytes"])
        same("m09 LRU bytes", f["lru_bytes"], info["lru_bytes"])
        same("m09 LRU blocks", f["lru_blocks"], info["lru_blocks"])
        continue
    same(k + " final allocated", f["final_allocated"], dv["final_allocated"])
    same(k + " final reserved", f["final_reserved"], dv["final_reserved"])
    same(k + " stalls", [[b["index"], b["frees"], b["released"], b["request"]] for b in figures.bursts(Replay(figures.load(k), int(list(devs)[0]))) if not b["empty_cache"]],
         dv["stalls"] if k != "m07" else [])
    if k == "m01":
        same("m01 Adam state", f["opt_bytes"], info["opt_bytes"])
        same("m01 parameters", f["param_bytes"], info["param_bytes"])
        same("m01 updates", f["steps"], info["steps"])
        same("m01 vocabulary", f["vocab"], info["vocab"])
        same("m01 gradient blocks", f["final_grad_blocks"], info["n_params"])
    if k == "m02":
        same("m02 parameters", f["param_bytes"], info["param_bytes"])
        same("m02 checkpoints", f["checkpoints"], info["n_ckpt"])
        same("m02 casts per checkpoint", f["kept_one_ckpt"], info["cast_per_ckpt"])
        same("m02 kept bytes", f["kept_bytes"], info["kept_bytes"])
        same("m02 kept blocks", f["kept_blocks"], info["kept_blocks"])
    if k == "m03":
        same("m03 Adam state", f["opt_bytes"], info["opt_bytes"])
        same("m03 alive before", f["param_bytes"], info["param_bytes"])
        same("m03 steps", f["train_steps"], info["steps"])
    if k == "m05":
        same("m05 AdamW state", f["opt_bytes"], info["opt_bytes"])
        same("m05 parameters", f["param_bytes"], info["param_bytes"])
        same("m05 steps", f["steps"], info["steps"])
        same("m05 casts per step", f["cast_bytes_step"], info["cast_bytes"])
        same("m05 score block", f["score_block"], info["score_block"])
    if k == "m06":
        same("m06 oom request", f["oom_size"], info["oom"]["size"])
        same("m06 oom device_free", f["oom_device_free"], info["oom"]["free"])
        same("m06 parameters", f["param_bytes"], info["param_bytes"])
        same("m06 AdamW state", f["opt_bytes"], info["opt_bytes"])
    if k == "m07":
        same("m07 max_entries", f["max_entries"], info["max_entries"])
        same("m07 Adam state", f["opt_final_bytes"], info["opt_bytes"])
        same("m07 parameters", f["param_final_bytes"], info["param_bytes"])
        same("m07 tokens of the recorded steps", f["tokens"], info["tokens"][-f["steps_in_window"]:])
    if k == "m08":
        same("m08 iterations", f["steps"], info["steps"])
        same("m08 AdamW state", f["opt_bytes"], info["opt_bytes"])
        same("m08 parameters", f["param_bytes"], info["param_bytes"])
        same("m08 matched masks in the peak iteration", f["matched_masks"], sum(info["ninst"][f["peak_step"]]))
    if k == "m10":
        same("m10 alive before (network + buffer)", f["allocated_at_start"], info["param_bytes"] + info["buffer_bytes"])
        same("m10 cycles", f["selfplay_phases"], info["cycles"])

# the facts each verdict rests on
m = F["m01"]
need("m01 flat step lows after update 1", len(set(m["step_lows"][1:])) == 1 and m["ooms"] == 0 and m["segment_frees"] == 0)
m = F["m02"]
need("m02 same kept bytes per checkpoint, half-size copies of parameters", m["kept_per_ckpt_equal"] and m["kept_are_half_params"] and m["kept_first_forward_only"])
need("m02 lows rise by the kept bytes", set(m["low_growth"]) == {m["kept_one_ckpt"]})
m = F["m03"]
need("m03 flat lows, explicit empty_cache without a waiting request", m["lows_after_1_equal"] and m["ec_empty_cache"] and not m["ec_followed_by_request"] and m["bursts"] == 1)
m = F["m04"]["dev1"]
need("m04 oom is the last event of cuda:1", m["oom_is_last"])
need("m04 free cached >= 1.5 x request", m["pool_free_cached"] >= 1.5 * m["oom_size"])
need("m04 largest free block < request", m["pool_largest_free"] < m["oom_size"] and m["largest_gap_live"] < m["oom_size"])
need("m04 device_free < request", m["oom_device_free"] < m["oom_size"])
need("m04 pool at dump = pool at the oom", m["pool_reserved"] == m["oom_reserved"] and m["pool_requested"] == m["oom_allocated"])
need("m04 cuda:0 without oom or retry", F["m04"]["dev0"]["ooms"] == 0 and not F["m04"]["dev0"]["stalls"])
m = F["m05"]
need("m05 flat lows and casts freed every step", m["lows_after_1_equal"] and m["casts_freed_in_step"] and m["no_time"] and not m["has_settings"])
m = F["m06"]
need("m06 memory outside the process", m["external_growth_min"] > m["oom_size"] and m["oom_gap"] < m["oom_size"] and m["oom_is_last"])
m = F["m07"]
need("m07 flat lows in the window", m["lows_equal"] and m["segment_allocs"] == 0 and m["ghost_blocks"] > 0)
m = F["m08"]
need("m08 full-resolution loss tensors are most of the peak", 2 * m["at_peak_loss_masks"] > m["peak_allocated"] and m["ooms"] == 0 and m["bursts"] == 0)
m = F["m09"]
need("m09 state only", m["trace_empty"] and m["blocks_without_frames"] == 0)
m = F["m10"]
need("m10 stalls: request waiting, no empty_cache, allocated unchanged, no oom",
     m["all_followed_by_request"] and m["none_empty_cache"] and m["allocated_unchanged"] and m["oom"] == 0 and m["stall_in_selfplay"]
     and m["stall_first_call"] and m["selfplay_lows_after1_equal"] and m["peak_in_first_training"])

text = keymd.render(F)
key_path = os.path.join(os.path.dirname(HERE), "KEY.md")
if not os.path.exists(key_path) or open(key_path, encoding="utf-8").read() != text:
    problems.append("KEY.md differs from the key rendered from the recomputed figures (run gen/keymd.py)")
if problems:
    for p in problems:
        print("DISAGREE:", p)
    sys.exit(1)
print("all agree")
