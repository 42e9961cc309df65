"""Checks every file from the file alone and recomputes every figure of KEY.md.

1. Replays each device trace onto its final segments (replay.Replay: the state before the first
   event rebuilt by undoing the trace; every alloc inside a live segment and not on a live block,
   every free of a live block with its size, free_requested followed by free_completed, the live
   blocks at the end exactly the final segments' allocated blocks, the segments exactly the final
   segments).  The state-only file is checked for tiling and allocated_size instead.
2. Recomputes the figures (figures.py) and compares those the generator also knows
   (expected.json, its own bookkeeping).
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
# the state-only file: blocks tile their segments, allocated_size agrees, no trace
d4 = figures.load("m04")
R4 = Replay(d4, 0)
problems.extend("m04 " + p for p in R4.problems)
if any(d4["device_traces"]):
    problems.append("m04 has a trace")
exp = json.load(open(os.path.join(HERE, "expected.json")))


def same(label, a, b):
    if a != b:
        problems.append("%s: file %r != generator %r" % (label, a, b))


for name, e in exp.items():
    k = name[:3]
    f = F[k]
    info = e["info"]
    devs = e["devices"]
    if k == "m06":
        for dv in ("0", "1"):
            same("m06 dev%s final allocated" % dv, f["dev" + dv]["final_allocated"], devs[dv]["final_allocated"])
            same("m06 dev%s final reserved" % dv, f["dev" + dv]["final_reserved"], devs[dv]["final_reserved"])
        same("m06 policy + reference weights", f["dev0"]["allocated_at_start"], info["param_bytes"] + info["ref_bytes"])
        same("m06 steps", f["dev0"]["steps"], info["steps"])
        same("m06 kept per step", f["dev0"]["kept_per_step"], info["kept_per_step"])
        same("m06 kept block", f["dev0"]["kept_block_size"], info["entropy_tensor"])
        same("m06 AdamW state", f["dev0"]["opt_bytes"], info["opt_bytes"])
        same("m06 KV cache", f["dev1"]["kv_bytes"], info["kv_bytes"])
        continue
    dv = list(devs.values())[0]
    if k == "m04":
        same("m04 allocated", f["allocated"], dv["final_allocated"])
        same("m04 reserved", f["reserved"], dv["final_reserved"])
        same("m04 weights", f["param_bytes"], info["param_bytes"])
        continue
    same(k + " final allocated", f["final_allocated"], dv["final_allocated"])
    same(k + " final reserved", f["final_reserved"], dv["final_reserved"])
    if k in ("m01", "m02", "m08", "m09", "m10"):
        same(k + " bytes before the trace (weights)", f["allocated_at_start"], info["param_bytes"])
    if k in ("m01", "m02", "m08", "m09", "m10"):
        same(k + " steps", f["steps"], info["steps"])
    if k in ("m02", "m03", "m08", "m09", "m10"):
        same(k + " optimizer state", f["opt_bytes"], info["opt_bytes"])
    if k == "m01":
        same("m01 SparseAdam state", f["sparse_state_bytes"], info["sparse_state_bytes"])
        same("m01 Adam state", f["dense_state_bytes"], info["dense_state_bytes"])
        same("m01 table", f["table_block"], info["table_bytes"])
    if k == "m03":
        same("m03 oom size", f["oom"]["size"], info["oom_request"])
        same("m03 oom free", f["oom"]["device_free"], info["oom_free"])
        same("m03 unfold", f["unfold_live"], info["unfold_bytes"])
        same("m03 kernels", f["kernels_live"], info["kernels_bytes"])
        same("m03 parameters", f["param_bytes"], info["param_bytes"])
        same("m03 steps", f["train_steps"], info["steps"])
    if k == "m05":
        same("m05 stalls", [[s["index"], s["frees"], s["released"], s["request"]] for s in f["stalls"]], info["stalls_in_window"])
        same("m05 streams", f["streams"], sorted(info["streams"]))
    if k == "m07":
        same("m07 adapters", f["adapters"], info["adapters"])
        same("m07 adapter bytes", f["adapter_bytes"], info["adapter_bytes"])
        same("m07 requests finished", f["requests_finished"], info["requests_done"])
        same("m07 weights + workspaces", f["weights"] + f["workspace_bytes"], info["param_bytes"])
    if k == "m08":
        same("m08 softmax output per layer", f["softmax_block"], info["attn_per_layer"] * 4 // 11)
    if k == "m09":
        same("m09 kept gradients", f["grad_bytes"], info["grad_bytes"])
        same("m09 correlation volume", f["corr_size"], info["corr_bytes"])
text = keymd.render(F)
key_path = os.path.join(os.path.dirname(HERE), "KEY.md")
if not os.path.exists(key_path) or open(key_path, encoding="utf-8").read() != text:
    problems.append("KEY.md differs from the key rendered from the recomputed figures (run gen/keymd.py)")
if problems:
    for p in problems:
        print("DISAGREE:", p)
    sys.exit(1)
print("all agree")
