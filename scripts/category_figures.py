#!/usr/bin/env python3
"""Category figures the fixture tests check, computed with Python's own pickle module,
independently of memsight's classifier:

    python3 scripts/category_figures.py ../shared/fixtures/snapshots

- Gradients kept from an earlier step (`cuda_modern_compilectx`): stackless blocks alive before
  the trace and never freed, by requested size; per size, how many blocks the first backward
  pass makes and frees in the pass, and how many it keeps. Where the sizes that come in even
  counts, with backward freeing one new block per pair, hold 90 % of the weights' bytes, half of
  each such size is gradients.
- Autocast weight copies (`cuda_ctx512_forward_mixed`): blocks alive at the peak allocated event
  whose stack holds `at::autocast::cached_cast` and whose size is half a weight's (fp32 → bf16).
- Attention written out by hand (`cuda_ctx512_forward_mixed`, `cuda_modern_compilectx`): blocks
  alive at the peak allocated event made under a frame of the program's own (not torch, not
  site-packages, not C++) whose name says attention, where some of them come from a softmax.
"""
import collections
import os
import pickle
import sys


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def requested(block):
    history = block.get("history")
    if history:
        return history[0].get("real_size", block["size"])
    return block.get("requested_size", block["size"])


def frames(block):
    history = block.get("history")
    return history[0].get("frames") if history else block.get("frames")


def untraced_weights(data):
    """Requested sizes of stackless blocks alive before the trace and never freed."""
    allocated = {e["addr"] for e in data["device_traces"][0] if e["action"] == "alloc"}
    sizes = collections.Counter()
    for segment in data["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and address not in allocated and not frames(block):
                sizes[requested(block)] += 1
            address += block["size"]
    return sizes


def first_backward_alloc(trace):
    for i, e in enumerate(trace):
        names = [f["name"] for f in e.get("frames", [])]
        if e["action"] == "alloc" and any(
            "Backward" in n or "autograd::Engine" in n or "_backward" in n or n == "backward" for n in names
        ):
            return i
    return None


def kept_gradients(path):
    data = load(path)
    trace = data["device_traces"][0]
    start = first_backward_alloc(trace)
    weights = untraced_weights(data)
    live, freed_in_backward, kept_from_backward = {}, collections.Counter(), collections.Counter()
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = (i, e["size"])
        elif e["action"] == "free_requested":
            made = live.pop(e["addr"], None)
            if made and start is not None and made[0] >= start:
                freed_in_backward[made[1]] += 1
    for i, size in live.values():
        if start is not None and i >= start:
            kept_from_backward[size] += 1
    print(f"{os.path.basename(path)}: first backward allocation at event {start}")
    gradient_bytes, paired_bytes = 0, 0
    for size, count in sorted(weights.items(), key=lambda kv: -kv[0] * kv[1]):
        print(f"  {size:>12} B x {count:>3}: backward made and freed {freed_in_backward[size]}, kept {kept_from_backward[size]}")
        if count % 2 == 0 and freed_in_backward[size] >= count // 2 and not kept_from_backward[size]:
            gradient_bytes += size * count // 2
            paired_bytes += size * count
    all_bytes = sum(size * count for size, count in weights.items())
    share = 100 * paired_bytes / all_bytes
    # One paired size is not the weights' pattern: it takes most of their bytes (90 %).
    verdict = f"gradients {gradient_bytes} B" if share >= 90 else "no gradients"
    print(f"  paired sizes hold {share:.1f} % of the weights' bytes: {verdict}")


def live_at_peak(trace):
    """The event where the trace's own allocations peak, and its blocks alive then (by address)."""
    live, allocated, peak, peak_event = {}, 0, 0, None
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = e
            allocated += e["size"]
        elif e["action"] == "free_requested" and e["addr"] in live:
            allocated -= live.pop(e["addr"])["size"]
        if allocated > peak:
            peak, peak_event = allocated, i
    live = {}
    for e in trace[: peak_event + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_requested":
            live.pop(e["addr"], None)
    return peak_event, live


def weight_copies(path):
    data = load(path)
    peak_event, live = live_at_peak(data["device_traces"][0])
    weights = untraced_weights(data)
    copies = collections.Counter()
    for e in live.values():
        names = [f["name"] for f in e.get("frames", [])]
        if any("autocast::cached_cast" in n for n in names) and weights[e["size"] * 2]:
            copies[e["size"]] += 1
    total = sum(size * count for size, count in copies.items())
    print(f"{os.path.basename(path)}: peak event {peak_event}; weight copies {dict(copies)} = {total} B")


def is_internal(filename):
    f = filename.replace("\\", "/")
    native = f.endswith((".cpp", ".cc", ".cu", ".h", ".hpp", ".c"))
    return (f in ("??", "") or native or f.startswith("<") or "/torch/" in f
            or f.startswith("torch/") or "site-packages/" in f or "/lib/python" in f)


def hand_attention(path):
    data = load(path)
    peak_event, live = live_at_peak(data["device_traces"][0])
    by_function = collections.defaultdict(lambda: [0, 0])
    for e in live.values():
        frames = e.get("frames", [])
        function = next((f"{f['name']} ({f['filename'].replace(chr(92), '/').split('/')[-1]})"
                         for f in frames
                         if ("attention" in f["name"].lower() or "attn" in f["name"].lower())
                         and not is_internal(f["filename"])), None)
        if function:
            by_function[function][0] += e["size"]
            if any("softmax" in f["name"] for f in frames):
                by_function[function][1] += e["size"]
    for function, (size, softmax) in by_function.items():
        print(f"{os.path.basename(path)}: peak event {peak_event}; {function}: {size} B, "
              f"{softmax} B by its softmax")


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "../shared/fixtures/snapshots"
    kept_gradients(os.path.join(folder, "cuda_modern_compilectx.pickle"))
    kept_gradients(os.path.join(folder, "cuda_2023_no_time.pickle"))
    weight_copies(os.path.join(folder, "cuda_ctx512_forward_mixed.pickle"))
    hand_attention(os.path.join(folder, "cuda_ctx512_forward_mixed.pickle"))
    hand_attention(os.path.join(folder, "cuda_modern_compilectx.pickle"))
