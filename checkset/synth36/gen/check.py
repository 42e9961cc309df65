"""Checks every file from the file alone and recomputes every figure of KEY.md.

1. Replays each device trace onto its final segments (replay.Replay: the state before the first
   event rebuilt by undoing the trace; every alloc inside a live segment and not on a live block,
   every free of a live block with its size, free_requested followed by free_completed, the live
   blocks at the end exactly the final segments' allocated blocks, the segments exactly the final
   segments).
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
        for dv in ("0", "1"):
            same("m05 dev%s final allocated" % dv, f["dev" + dv]["final_allocated"], devs[dv]["final_allocated"])
            same("m05 dev%s final reserved" % dv, f["dev" + dv]["final_reserved"], devs[dv]["final_reserved"])
        same("m05 dev0 weights", f["dev0"]["allocated_at_start"], info["dev0_weights"])
        same("m05 dev1 weights", f["dev1"]["allocated_at_start"], info["dev1_weights"])
        same("m05 steps", f["steps"], info["steps"])
        same("m05 AdamW state", f["dev0"]["opt_bytes"], info["opt_bytes"])
        continue
    if k == "m06":
        dv = devs["0"]
        same("m06 allocated", f["allocated"], dv["final_allocated"])
        same("m06 reserved", f["reserved"], dv["final_reserved"])
        same("m06 weights", f["weights"], info["param_bytes"])
        same("m06 cache entries", f["cache_blocks"], info["cache_entries"])
        same("m06 cache bytes", f["cache_bytes"], info["cache_bytes"])
        continue
    dv = list(devs.values())[0]
    same(k + " final allocated", f["final_allocated"], dv["final_allocated"])
    same(k + " final reserved", f["final_reserved"], dv["final_reserved"])
    if k in ("m01", "m02", "m03", "m08", "m09", "m10"):
        same(k + " bytes before the trace (weights)", f["allocated_at_start"], info["param_bytes"])
    if k in ("m01", "m02", "m03", "m09"):
        same(k + " steps", f["steps"], info["steps"])
    if k == "m01":
        same("m01 logits bytes per step", f["logits_bf16_size"] + f["logits_fp32_size"], info["logits_bytes_per_step"])
    if k in ("m02", "m03"):
        same(k + " optimizer state", f["opt_bytes"], info["opt_bytes"])
    if k == "m04":
        same("m04 caption cache bytes", f["text_cache_bytes"], info["text_cache_bytes"])
        same("m04 caption cache blocks", f["text_cache_blocks"], 2 * info["text_cache_entries"])
        same("m04 UNet bytes", f["unet_bytes"], info["unet_bytes"])
        same("m04 LoRA bytes", f["lora_bytes"], info["lora_bytes"])
        same("m04 AdamW state", f["opt_bytes_final"], info["opt_bytes"])
        same("m04 ring entries", f["ring_entries"], info["max_entries"])
    if k == "m07":
        same("m07 oom size", f["oom"]["size"], info["oom_request"])
        same("m07 oom free", f["oom"]["device_free"], info["oom_free"])
        same("m07 parameters", f["params_in_trace"], info["param_bytes"])
    if k == "m08":
        same("m08 kept bytes", f["kept_bytes"], info["kept_bytes"])
        same("m08 kept blocks", f["kept_blocks"], info["kept_blocks"])
        same("m08 batches", f["batches"], info["batches"])
    if k == "m09":
        same("m09 stalls", [[s["index"], s["frees"], s["released"], s["request"]] for s in f["stalls"]],
             [[s[0], s[1], s[2], s[3]] for s in dv["stalls"]])
        same("m09 max_split_size", f["max_split_size"], info["max_split"])
    if k == "m10":
        same("m10 cache bytes at the end", f["kv_final_bytes"], info["cache_bytes_end"])
        same("m10 cache tokens at the end", f["cache_tokens_end"], info["cache_tokens_end"])
        same("m10 requests", f["requests"], info["requests"])
        same("m10 prefix tokens", f["prefix_tokens"], info["prefix_tokens"])
        same("m10 tokens per request", [g // f["kv_bytes_per_token"] for g in f["growth_per_request"]], info["tokens_per_request"])
text = keymd.render(F)
key_path = os.path.join(os.path.dirname(HERE), "KEY.md")
if not os.path.exists(key_path) or open(key_path, encoding="utf-8").read() != text:
    problems.append("KEY.md differs from the key rendered from the recomputed figures (run gen/keymd.py)")
if problems:
    for p in problems:
        print("DISAGREE:", p)
    sys.exit(1)
print("all agree")
