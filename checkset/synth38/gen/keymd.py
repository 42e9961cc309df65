"""Renders ../KEY.md from key_template.md and the figures recomputed from the files (figures.py).
Placeholders: {{m01.peak_allocated|gib}}; formats gib, mib, kib, gb (10^9), n, b, pct(a/b), raw.
Usage: python3 gen/keymd.py"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PAT = re.compile(r"\{\{([^}|]+)(?:\|(\w+))?\}\}")


def get(F, path):
    cur = F
    for part in path.split("."):
        cur = cur[int(part)] if isinstance(cur, (list, tuple)) else cur[part]
    return cur


def fmt(v, how):
    if how == "gib":
        return "%.2f GiB" % (v / 2 ** 30)
    if how == "mib":
        return "%.1f MiB" % (v / 2 ** 20)
    if how == "kib":
        return "%.1f KiB" % (v / 2 ** 10)
    if how == "gb":
        return "%.2f GB" % (v / 1e9)
    if how == "n":
        return "{:,}".format(v)
    if how == "b":
        return "{:,} B".format(v)
    if how == "s":
        return "%.2f s" % (v / 1e6)
    return str(v)


def render(F):
    src = open(os.path.join(HERE, "key_template.md"), encoding="utf-8").read()

    def sub(m):
        path, how = m.group(1).strip(), m.group(2) or "raw"
        if how == "pct":
            a, b = path.split("/")
            return "%.1f %%" % (100.0 * get(F, a) / get(F, b))
        return fmt(get(F, path), how)
    return PAT.sub(sub, src)


if __name__ == "__main__":
    import figures
    text = render(figures.all_figures())
    with open(os.path.join(os.path.dirname(HERE), "KEY.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print("KEY.md written")
