"""Shared helpers for the programs: interned frames and stacks, a run context, a layer-wise
forward/backward model, optimizers, and writing a snapshot dict."""
import sim

_FR = {}
_ST = {}


def F(path, line, name):
    k = (path, line, name)
    d = _FR.get(k)
    if d is None:
        d = _FR[k] = {"name": name, "filename": path, "line": line}
    return d


def S(*parts):
    """A stack, innermost frame first; parts are (path, line, name) tuples or lists of them."""
    flat = []

    def add(x):
        if isinstance(x, list):
            for y in x:
                add(y)
        else:
            flat.append(x)
    add(list(parts))
    k = tuple(flat)
    s = _ST.get(k)
    if s is None:
        s = _ST[k] = [F(*t) for t in flat]
    return s


class Lib:
    """Builds library frames under one site-packages prefix."""

    def __init__(self, prefix, torch_ver="2.4"):
        self.p = prefix
        self.v = torch_ver
        if torch_ver == "2.4":
            self.ci, self.wci = 1562, 1553
        elif torch_ver == "2.6":
            self.ci, self.wci = 1750, 1739
        elif torch_ver == "2.1":
            self.ci, self.wci = 1527, 1518
        else:
            self.ci, self.wci = 1501, None

    def __call__(self, rel, line, name):
        return (self.p + rel, line, name)

    def call(self):
        """_call_impl / _wrapped_call_impl pair (innermost first)."""
        out = [self("torch/nn/modules/module.py", self.ci, "_call_impl")]
        if self.wci:
            out.append(self("torch/nn/modules/module.py", self.wci, "_wrapped_call_impl"))
        return out

    def mod(self, rel, line, name="forward"):
        """A module's forward frame followed by the call machinery."""
        return [self(rel, line, name)] + self.call()


class Run:
    def __init__(self, A):
        self.A = A if isinstance(A, list) else [A]
        self.cur = 0
        self.rec = [0] * len(self.A)

    @property
    def al(self):
        return self.A[self.cur]

    def a(self, size, st, cat="act"):
        return self.al.malloc(size, st, cat=cat)

    def f(self, b, st=None):
        self.al.free(b, st)

    def fl(self, bs, st=None):
        for b in bs:
            self.al.free(b, st)

    def record(self):
        self.rec = [len(A.trace) for A in self.A]


def train_layers(R, layers, bw_st, grads, gcat="grad", keep_out=None):
    """Forward through layers then backward.  layers: list of dicts with 'params' (list of keys)
    and 'fwd' (list of (size, stack, kind)) where kind is 'save' (kept for backward) or 'tmp'
    (freed after the next op).  grads: dict param-key -> Block or None; created on first use
    (AccumulateGrad) with stack bw_st, then accumulated in place.  Returns nothing."""
    saved_all = []
    for L in layers:
        saved = []
        tmp = []
        for size, st, kind in L["fwd"]:
            b = R.a(size, st, "act" if kind == "save" else "tmp")
            for t in tmp:
                R.f(t)
            tmp = []
            if kind == "save":
                saved.append(b)
            else:
                tmp.append(b)
        for t in tmp:
            R.f(t)
        saved_all.append(saved)
    return saved_all


def backward_layers(R, layers, saved_all, bw_st, grads, psize, free_st=None):
    fs = bw_st if free_st is None else free_st
    gin = None
    for L, saved in zip(reversed(layers), reversed(saved_all)):
        for b in reversed(saved):
            g = R.a(b.req, bw_st, "tmp")
            if gin is not None:
                R.f(gin, fs)
            gin = g
            R.f(b, fs)
        for k in L["params"]:
            if grads.get(k) is None:
                grads[k] = R.a(psize[k], bw_st, "grad")
    if gin is not None:
        R.f(gin, fs)


def write(allocs, kind="cuda", max_entries=None, rec=None, n_dev_lists=None, settings=True,
          annotations=None, state_only=False):
    """Snapshot dict as _dump_snapshot writes it."""
    segs = []
    for A in allocs:
        segs.extend(A.segment_dicts())
    segs.sort(key=lambda s: (s["device"], s["address"]))
    ndev = n_dev_lists or (max(A.device for A in allocs) + 1)
    traces = [[] for _ in range(ndev)]
    for i, A in enumerate(allocs):
        t = A.trace[(rec[i] if rec else 0):]
        if max_entries:
            t = sim.ring(t, max_entries)
        traces[A.device] = [] if state_only else t
    d = {"segments": segs, "device_traces": traces}
    if kind == "cuda" and settings:
        d["allocator_settings"] = dict(sim.CUDA_SETTINGS)
    if annotations is not None:
        d["external_annotations"] = annotations
    return d
