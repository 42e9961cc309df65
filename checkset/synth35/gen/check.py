"""Checks every file from the file alone and recomputes every figure of KEY.md.

1. Replays each device trace onto its final segments (replay.Replay: the state before the first
   event rebuilt by undoing the trace; every alloc inside a live segment and not on a live block,
   every free of a live block with its size, free_requested followed by free_completed unless the
   block is active_pending_free at the end, the live blocks at the end exactly the final segments'
   allocated blocks, the segments exactly the final segments).
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
exp = json.load(open(os.path.join(HERE, "expected.json")))


def same(label, a, b):
    if a != b:
        problems.append("%s: file %r != generator %r" % (label, a, b))


for name, e in exp.items():
    k = name[:3]
    f = F[k]
    info = e["info"]
    devs = e["devices"]
    if k == "m05":
        same("m05 dev0 final allocated", f["dev0"]["final_allocated"], devs["0"]["final_allocated"])
        same("m05 dev1 final allocated", f["dev1"]["final_allocated"], devs["1"]["final_allocated"])
        same("m05 dev1 final reserved", f["dev1"]["final_reserved"], devs["1"]["final_reserved"])
        same("m05 oom size", f["oom"]["size"], info["oom_request"])
        same("m05 oom free", f["oom"]["device_free"], info["oom_free"])
        same("m05 index bytes", f["index_bytes"], info["index_bytes"])
        same("m05 generator weights", f["dev0"]["allocated_at_start"], info["gen_param_bytes"])
        continue
    dv = list(devs.values())[0]
    if k == "m09":
        same("m09 allocated", f["allocated"], dv["final_allocated"])
        same("m09 reserved", f["reserved"], dv["final_reserved"])
        same("m09 bf16 params", f["by_category"]["bf16_parameters"], info["param_bytes"])
        same("m09 master", f["by_category"]["fp32_master_weights"], info["master_bytes"])
        same("m09 adam", f["by_category"]["adam_moments"], info["opt_bytes"])
        continue
    same(k + " final allocated", f["final_allocated"], dv["final_allocated"])
    same(k + " final reserved", f["final_reserved"], dv["final_reserved"])
    if k in ("m01", "m02", "m03", "m06", "m07", "m08", "m10"):
        same(k + " bytes before the trace (weights)", f["allocated_at_start"], info["param_bytes"])
    if k in ("m01", "m06", "m07", "m08"):
        same(k + " steps", f["steps"], info["steps"])
    if k == "m03":
        same("m03 kv cache", f["kv_bytes"], info["kv_bytes"])
    if k == "m04":
        same("m04 copy bytes", f["copy_bytes"], info["snapshot_bytes"])
        same("m04 copies in the final pool", f["copies_in_final_pool"], info["snapshots"])
    if k == "m07":
        same("m07 cache bytes at the end", f["cache_bytes_end"], info["cache_bytes_end"])
        same("m07 cache entries at the end", f["cache_blocks_end"], info["cached_clips_end"])
    if k == "m08":
        same("m08 stalls", [[s["index"], s["frees"], s["released"], s["request"]] for s in f["stalls"]],
             [[s[0], s[1], s[2], s[3]] for s in dv["stalls"]])
    if k == "m10":
        same("m10 pending blocks", f["pending_blocks"], info["pending_at_dump"])
        same("m10 prefetched blocks", f["prefetched_blocks"], info["prefetched_at_dump"])
text = keymd.render(F)
key_path = os.path.join(os.path.dirname(HERE), "KEY.md")
if not os.path.exists(key_path) or open(key_path, encoding="utf-8").read() != text:
    problems.append("KEY.md differs from the key rendered from the recomputed figures (run gen/keymd.py)")
if problems:
    for p in problems:
        print("DISAGREE:", p)
    sys.exit(1)
print("all agree")
