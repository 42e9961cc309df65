"""Checks every file from the file alone and recomputes every figure of KEY.md.

1. Replays each device trace onto its final segments (replay.Replay: the state before the first
   event is rebuilt by undoing the trace; every alloc inside a live segment and not on a live
   block, every free of a live block with its size, free_requested followed by free_completed,
   the blocks live at the end exactly the final segments' active blocks, the segments exactly
   the final segments).
2. Recomputes the figures (figures.py) and compares the ones the generator also knows
   (expected.json, from its own bookkeeping).
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
for k, v in F.items():
    for dev in ("", "dev0", "dev1"):
        vv = v.get(dev, v) if dev else v
        for p in vv.get("problems", []) if isinstance(vv, dict) else []:
            problems.append("%s %s" % (k, p))
exp = json.load(open(os.path.join(HERE, "expected.json")))


def same(label, a, b):
    if a != b:
        problems.append("%s: file %r != generator %r" % (label, a, b))


for name, e in exp.items():
    k = name[:3]
    f = F[k]
    devs = e["devices"]
    if k == "m06":
        same("m06 dev0 final allocated", f["dev0"]["final_allocated"], devs["0"]["final_allocated"])
        same("m06 dev1 final allocated", f["dev1"]["final_allocated"], devs["1"]["final_allocated"])
        same("m06 dev0 final reserved", f["dev0"]["final_reserved"], devs["0"]["final_reserved"])
        same("m06 oom size", f["oom"]["size"], e["info"]["oom"]["size"])
        same("m06 oom free", f["oom"]["device_free"], e["info"]["oom"]["free"])
        same("m06 loaded bytes", f["dev0_bytes_from_torch_load"], e["info"]["loaded_bytes"])
        same("m06 buckets", f["dev1_bucket_bytes"], e["info"]["bucket_bytes"])
        continue
    dv = list(devs.values())[0]
    if k == "m05":
        same("m05 allocated", f["allocated"], dv["final_allocated"])
        same("m05 reserved", f["reserved"], dv["final_reserved"])
        same("m05 weights", f["weights_bytes"], e["info"]["param_bytes"])
        continue
    same(k + " final allocated", f["final_allocated"], dv["final_allocated"])
    same(k + " final reserved", f["final_reserved"], dv["final_reserved"])
    if k in ("m01", "m02", "m04", "m08", "m09", "m10"):
        same(k + " bytes before the trace (weights)", f["allocated_at_start"], e["info"]["param_bytes"])
    if k == "m03":
        same("m03 leak per step", f["leak_per_step"], e["info"]["leak_bytes_per_step"])
        same("m03 steps", f["steps"], e["info"]["steps"])
    if k == "m02":
        same("m02 captures", f["captures"], len(e["info"]["captures"]))
        same("m02 private pools reserved", f["private_reserved"], sum(c["reserved"] for c in e["info"]["captures"]))
    if k == "m08":
        same("m08 stalls", [[s["index"] + 0, s["frees"], s["released"], s["request"]] for s in f["stalls"]],
             [[s[0], s[1], s[2], s[3]] for s in dv["stalls"]])
text = keymd.render(F)
key_path = os.path.join(os.path.dirname(HERE), "KEY.md")
if not os.path.exists(key_path) or open(key_path, encoding="utf-8").read() != text:
    problems.append("KEY.md differs from the key rendered from the recomputed figures (run gen/keymd.py)")
if problems:
    for p in problems:
        print("DISAGREE:", p)
    sys.exit(1)
print("all agree")
