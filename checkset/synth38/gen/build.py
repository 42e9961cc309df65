"""Builds the ten snapshot files into ../ and gen/expected.json (the generator's own bookkeeping).
Deterministic: fixed seeds, no wall clock.  Usage: python3 gen/build.py"""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402

OUT = os.path.dirname(HERE)
BUILDERS = [programs.build_m01, programs.build_m02, programs.build_m03, programs.build_m04, programs.build_m05,
            programs.build_m06, programs.build_m07, programs.build_m08, programs.build_m09, programs.build_m10]
LIMITS = dict(min_bytes=100 * 1024, max_bytes=40 * 1024 * 1024, max_events=300000)
BANNED = ("leak", "bug", "oom", "healthy", "fragment", "stall", "waste")


def lint(d, name):
    """No verdict words in paths or function names; no empty function names; sizes as int."""
    seen = set()
    stacks = [e.get("frames") for t in d["device_traces"] for e in t]
    stacks += [s["frames"] for s in d["segments"]] + [b["frames"] for s in d["segments"] for b in s["blocks"]]
    for fr in stacks:
        if fr is None or id(fr) in seen:
            continue
        seen.add(id(fr))
        for f in fr:
            s = (f["filename"] + " " + f["name"]).lower()
            for w in BANNED:
                if w in s:
                    raise SystemExit("%s: banned word %r in frame %r" % (name, w, f))
            if not f["name"]:
                raise SystemExit("%s: empty function name %r" % (name, f))
    for w in BANNED:
        assert w not in name.lower(), name
    for t in d["device_traces"]:
        last = None
        for e in t:
            assert isinstance(e["size"], int)
            if "time_us" in e:
                assert last is None or e["time_us"] > last, (name, "time_us not increasing")
                last = e["time_us"]
        # every free_requested is followed by its free_completed (none pending in these programs)
        fr = set()
        for e in t:
            if e["action"] == "free_requested":
                fr.add(e["addr"])
            elif e["action"] == "free_completed":
                fr.discard(e["addr"])
        assert not fr, (name, "free_requested without free_completed")


def main():
    exp = {}
    for bld in BUILDERS:
        r = bld()
        d = r["data"]
        lint(d, r["name"])
        path = os.path.join(OUT, r["name"])
        with open(path, "wb") as f:
            pickle.dump(d, f, protocol=4)
        exp[r["name"]] = dict(info=r.get("info", {}),
                              devices={str(A.device): dict(final_allocated=A.allocated, final_reserved=A.reserved,
                                                           stalls=[list(s) for s in A.stalls])
                                       for A in r["devs"]})
        n = sum(len(t) for t in d["device_traces"])
        sz = os.path.getsize(path)
        assert LIMITS["min_bytes"] <= sz <= LIMITS["max_bytes"], (r["name"], sz)
        assert n <= LIMITS["max_events"], (r["name"], n)
        print("%-45s %10d bytes %7d events" % (r["name"], os.path.getsize(path), n))
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True, ensure_ascii=False)


if __name__ == "__main__":
    main()
