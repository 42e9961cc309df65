"""Training programs: m10 TimeSformer+Lion, m08 xLSTM (ring), m06 ViT-S DDP rank 1, m07 LLaVA
projector pre-training (2023 format), m01 ControlNet under a memory cap."""
import random

import sim
from sim import MB, GB, KB
from common import S, Lib, Run, write

BF, FP = 2, 4


def adamw_foreach(R, L, user, params, psize, grads, state, ver="2.4", cat_state="opt"):
    """torch.optim.AdamW(foreach) step: state made on first call, one list of sqrt temporaries."""
    if ver == "2.4":
        ig = L("torch/optim/adamw.py", 189, "step")
        base = [L("torch/optim/optimizer.py", 79, "_use_grad"),
                L("torch/optim/optimizer.py", 484, "wrapper")]
        st_a = S(L("torch/optim/adamw.py", 137, "_init_group"), ig, base, user)
        st_b = S(L("torch/optim/adamw.py", 141, "_init_group"), ig, base, user)
        st_t = S(L("torch/optim/adamw.py", 604, "_multi_tensor_adamw"),
                 L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 205, "step"),
                 base, user)
    else:  # 2.0
        ig = L("torch/optim/adamw.py", 171, "step")
        base = [L("torch/optim/optimizer.py", 33, "_use_grad"),
                L("torch/optim/optimizer.py", 280, "wrapper")]
        st_a = S(L("torch/optim/adamw.py", 120, "_init_group"), ig, base, user)
        st_b = S(L("torch/optim/adamw.py", 122, "_init_group"), ig, base, user)
        st_t = S(L("torch/optim/adamw.py", 485, "_multi_tensor_adamw"),
                 L("torch/optim/adamw.py", 322, "adamw"), L("torch/optim/adamw.py", 199, "step"),
                 base, user)
    if not state:
        for k in params:
            state[k] = (R.a(psize[k], st_a, cat_state), R.a(psize[k], st_b, cat_state))
    tmps = [R.a(psize[k], st_t, "tmp") for k in params]
    R.fl(tmps)


def zero_grad(R, L, user, params, grads, ver="2.4"):
    line = {"2.4": 952, "2.6": 1000, "2.0": 2372, "2.1": 2440}[ver]
    if ver == "2.0" or ver == "2.1":
        st = S(L("torch/nn/modules/module.py", line, "zero_grad"), user)
    else:
        st = S(L("torch/optim/optimizer.py", line, "zero_grad"),
               L("torch/_compile.py", 31, "inner"), user)
    for k in params:
        if grads.get(k) is not None:
            R.f(grads[k], st)
            grads[k] = None


def backward(R, layers_saved, bw_st, grads, gparams, psize):
    """Free each layer's saved tensors in reverse order, making an input-gradient temporary of
    the same size for each; weight gradients (AccumulateGrad) made where missing."""
    gin = None
    for saved, pkeys in reversed(list(zip(layers_saved, gparams))):
        for b in reversed(saved):
            if b.cat != "wcopy":
                g = R.a(b.req, bw_st, "tmp")
                if gin is not None:
                    R.f(gin, bw_st)
                gin = g
            R.f(b, bw_st)
        for k in pkeys:
            if grads.get(k) is None:
                grads[k] = R.a(psize[k], bw_st, "grad")
    if gin is not None:
        R.f(gin, bw_st)


def fwd(R, ops):
    """ops: list of (size, stack, kind); kind 'save' | 'tmp' | 'wcopy' (an autocast weight copy,
    saved for backward).  Temporaries die when the next op has allocated."""
    saved, tmp = [], []
    for size, st, kind in ops:
        b = R.a(size, st, "act" if kind == "save" else kind)
        for t in tmp:
            R.f(t)
        tmp = []
        (tmp if kind == "tmp" else saved).append(b)
    for t in tmp:
        R.f(t)
    return saved


# ====================================================================================== m10
def m10_timesformer():
    rng = random.Random(1010)
    clk = sim.Clock(1733402113000000, rng)
    A = sim.Allocator(device=0, capacity=40 * GB, other_usage=520 * MB, clock=clk,
                      extra_keys=True, base=0x7F3C40000000)
    R = Run(A)
    L = Lib("/opt/conda/lib/python3.11/site-packages/", "2.4")
    TS = "/workspace/TimeSformer/timesformer/models/vit.py"
    USER = "/workspace/TimeSformer/tools/train_k400.py"
    u_main = [(USER, 402, "main"), (USER, 411, "<module>")]
    u_ep = [(USER, 236, "train_epoch")] + u_main
    D, NB, B, T, Fr = 768, 12, 4, 1568, 8
    # ---- parameters (before recording)
    psize, pst = {}, {}
    st_p = S(L("torch/nn/modules/module.py", 1318, "convert"),
             L("torch/nn/modules/module.py", 900, "_apply"), L("torch/nn/modules/module.py", 927, "_apply"),
             L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"),
             (USER, 371, "main"), (USER, 411, "<module>"))
    plist = [("patch_embed", 768 * 3 * 256 * FP), ("patch_embed.b", 768 * FP),
             ("cls", 768 * FP), ("pos", 197 * 768 * FP), ("time", 8 * 768 * FP)]
    blk_params = [("tn", 768 * FP), ("tnb", 768 * FP), ("tqkv", 2304 * 768 * FP), ("tqkvb", 2304 * FP),
                  ("tproj", 768 * 768 * FP), ("tprojb", 768 * FP), ("tfc", 768 * 768 * FP), ("tfcb", 768 * FP),
                  ("n1", 768 * FP), ("n1b", 768 * FP), ("qkv", 2304 * 768 * FP), ("qkvb", 2304 * FP),
                  ("proj", 768 * 768 * FP), ("projb", 768 * FP), ("n2", 768 * FP), ("n2b", 768 * FP),
                  ("fc1", 3072 * 768 * FP), ("fc1b", 3072 * FP), ("fc2", 768 * 3072 * FP), ("fc2b", 768 * FP)]
    gparams = [[k for k, _ in plist]]
    for i in range(NB):
        ks = []
        for k, s in blk_params:
            plist.append(("b%d.%s" % (i, k), s))
            ks.append("b%d.%s" % (i, k))
        gparams.append(ks)
    plist += [("norm", 768 * FP), ("normb", 768 * FP), ("head", 400 * 768 * FP), ("headb", 400 * FP)]
    gparams.append(["norm", "normb", "head", "headb"])
    pblk = {}
    for k, s in plist:
        psize[k] = s
        pblk[k] = R.a(s, st_p, "param")
    keys = [k for k, _ in plist]
    clk.wait(4_000_000)
    R.record()
    # ---- stacks
    def blk(line):
        return [(TS, line, "forward")] + L.call()
    lin = L("torch/nn/modules/linear.py", 117, "forward")
    ln = [L("torch/nn/functional.py", 2576, "layer_norm"), L("torch/nn/modules/normalization.py", 202, "forward")] + L.call()
    gelu = [L("torch/nn/modules/activation.py", 734, "forward")] + L.call()
    att = lambda line: [(TS, line, "forward")] + L.call()
    def build_ops(caller):
        model_fwd = [(TS, 355, "forward_features"), (TS, 375, "forward")] + L.call() + \
            [(TS, 520, "forward")] + L.call() + caller
        in_blocks = [(TS, 349, "forward_features")] + model_fwd[1:]

        def bs(*inner):
            return S(list(inner), in_blocks)
        ops_blk = []
        tok = B * T * D
        # temporal attention
        ops_blk += [
            (tok * FP, bs(ln, (TS, 267, "forward")), "save"),
            (2304 * 768 * BF, bs(lin, L.call(), att(80), (TS, 268, "forward")), "wcopy"),
            (3 * tok * BF, bs(lin, L.call(), att(80), (TS, 268, "forward")), "save"),
            (B * 196 * 12 * 8 * 8 * BF, bs(att(83), (TS, 268, "forward")), "tmp"),
            (B * 196 * 12 * 8 * 8 * BF, bs(att(84), (TS, 268, "forward")), "save"),
            (tok * BF, bs(att(87), (TS, 268, "forward")), "save"),
            (768 * 768 * BF, bs(lin, L.call(), att(88), (TS, 268, "forward")), "wcopy"),
            (tok * BF, bs(lin, L.call(), att(88), (TS, 268, "forward")), "save"),
            (768 * 768 * BF, bs(lin, L.call(), (TS, 270, "forward")), "wcopy"),
            (tok * BF, bs(lin, L.call(), (TS, 270, "forward")), "save"),
            (tok * FP, bs((TS, 271, "forward")), "save"),
        ]
        # spatial attention
        sp = B * Fr
        ops_blk += [
            (tok * FP, bs(ln, (TS, 283, "forward")), "save"),
            (2304 * 768 * BF, bs(lin, L.call(), att(80), (TS, 283, "forward")), "wcopy"),
            (3 * tok * BF, bs(lin, L.call(), att(80), (TS, 283, "forward")), "save"),
            (sp * 12 * 197 * 197 * BF, bs(att(83), (TS, 283, "forward")), "tmp"),
            (sp * 12 * 197 * 197 * BF, bs(att(84), (TS, 283, "forward")), "save"),
            (tok * BF, bs(att(87), (TS, 283, "forward")), "save"),
            (768 * 768 * BF, bs(lin, L.call(), att(88), (TS, 283, "forward")), "wcopy"),
            (tok * BF, bs(lin, L.call(), att(88), (TS, 283, "forward")), "save"),
            (tok * FP, bs((TS, 297, "forward")), "save"),
            (tok * FP, bs(ln, (TS, 298, "forward")), "save"),
            (3072 * 768 * BF, bs(lin, L.call(), (TS, 56, "forward"), L.call(), (TS, 298, "forward")), "wcopy"),
            (B * T * 3072 * BF, bs(lin, L.call(), (TS, 56, "forward"), L.call(), (TS, 298, "forward")), "save"),
            (B * T * 3072 * BF, bs(gelu, (TS, 57, "forward"), L.call(), (TS, 298, "forward")), "save"),
            (768 * 3072 * BF, bs(lin, L.call(), (TS, 59, "forward"), L.call(), (TS, 298, "forward")), "wcopy"),
            (tok * BF, bs(lin, L.call(), (TS, 59, "forward"), L.call(), (TS, 298, "forward")), "save"),
            (tok * FP, bs((TS, 298, "forward")), "save"),
        ]
        return ops_blk, model_fwd

    tok = B * T * D
    ops_blk, model_fwd = build_ops([(USER, 118, "train_step")] + u_ep)
    ops_val, _ = build_ops([(USER, 296, "validate"), (USER, 405, "main"), (USER, 411, "<module>")])
    # fix the blocks' own call frames
    ops_blk = [(s, st, k) for s, st, k in ops_blk]
    st_in = S((USER, 109, "train_step"), u_ep)
    st_emb = [
        (768 * 3 * 256 * BF, S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(), (TS, 199, "forward"), L.call(), (TS, 331, "forward_features"), model_fwd[1:]), "wcopy"),
        (B * Fr * 196 * 768 * BF, S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(), (TS, 199, "forward"), L.call(), (TS, 331, "forward_features"), model_fwd[1:]), "save"),
        (B * Fr * 197 * 768 * FP, S((TS, 334, "forward_features"), model_fwd[1:]), "save"),
        (B * Fr * 197 * 768 * FP, S((TS, 343, "forward_features"), model_fwd[1:]), "save"),
        (tok * FP, S((TS, 347, "forward_features"), model_fwd[1:]), "save"),
    ]
    st_head = [
        (B * 768 * FP, S(ln, (TS, 356, "forward_features"), model_fwd[1:]), "save"),
        (400 * 768 * BF, S(lin, L.call(), (TS, 376, "forward"), model_fwd[2:]), "wcopy"),
        (B * 400 * BF, S(lin, L.call(), (TS, 376, "forward"), model_fwd[2:]), "save"),
        (B * 400 * FP, S(L("torch/nn/functional.py", 3104, "cross_entropy"), L("torch/nn/modules/loss.py", 1188, "forward"), L.call(), (USER, 119, "train_step"), u_ep), "save"),
        (512, S(L("torch/nn/functional.py", 3104, "cross_entropy"), L("torch/nn/modules/loss.py", 1188, "forward"), L.call(), (USER, 119, "train_step"), u_ep), "save"),
    ]
    bw_st = []
    # Lion
    LP = L("lion_pytorch/lion_pytorch.py", 0, "")[0]
    lion_user = [(LP, 0, "")]
    u_opt = [(USER, 124, "train_step")] + u_ep
    opt_base = [L("torch/optim/optimizer.py", 79, "_use_grad"), L("torch/optim/optimizer.py", 484, "wrapper")] + u_opt
    st_state = S((LP, 73, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context"), opt_base[1:])
    st_clone = S((LP, 27, "update_fn"), (LP, 82, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context"), opt_base[1:])
    st_add = S((LP, 27, "update_fn"), (LP, 82, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context"), opt_base[1:])
    st_zg = S(L("torch/optim/optimizer.py", 952, "zero_grad"), L("torch/_compile.py", 31, "inner"), (USER, 105, "train_step"), u_ep)
    grads, state = {}, {}
    ann = []
    x = None
    xin = None
    ev_val = S((USER, 298, "validate"), (USER, 405, "main"), (USER, 411, "<module>"))
    ev_ec = S(L("torch/cuda/memory.py", 192, "empty_cache"), (USER, 289, "validate"), (USER, 405, "main"), (USER, 411, "<module>"))

    def step(n):
        nonlocal xin
        ann.append({"name": "ProfilerStep#%d" % n, "stage": "START", "device": 0, "time_us": clk.tick()})
        # zero_grad(set_to_none=True)
        a0 = clk.tick()
        ann.append({"name": "Optimizer.zero_grad#Lion.zero_grad", "stage": "START", "device": 0, "time_us": a0})
        for k in keys:
            if grads.get(k) is not None:
                R.f(grads[k], st_zg)
                grads[k] = None
        ann.append({"name": "Optimizer.zero_grad#Lion.zero_grad", "stage": "END", "device": 0, "time_us": clk.tick()})
        new = R.a(B * 3 * Fr * 224 * 224 * FP, st_in, "input")
        if xin is not None:
            R.f(xin, st_in)
        xin = new
        saved = [fwd(R, st_emb)]
        for i in range(NB):
            saved.append(fwd(R, ops_blk))
        saved.append(fwd(R, st_head))
        clk.wait(90_000)
        backward(R, saved, bw_st, grads, gparams, psize)
        clk.wait(160_000)
        ann.append({"name": "Optimizer.step#Lion.step", "stage": "START", "device": 0, "time_us": clk.tick()})
        for k in keys:
            if k not in state:
                state[k] = R.a(psize[k], st_state, "opt")
            c = R.a(psize[k], st_clone, "tmp")
            u = R.a(psize[k], st_add, "tmp")
            R.f(c, st_add)
            R.f(u, st_clone)
        ann.append({"name": "Optimizer.step#Lion.step", "stage": "END", "device": 0, "time_us": clk.tick()})
        ann.append({"name": "ProfilerStep#%d" % n, "stage": "END", "device": 0, "time_us": clk.tick()})
        clk.wait(30_000)

    for n in range(4):
        step(n)
    # validation: user frees the cache first, then evaluates 2 clips under no_grad
    A.empty_cache(ev_ec)
    for v in range(2):
        xv = R.a(8 * 3 * Fr * 224 * 224 * FP, S((USER, 292, "validate"), (USER, 405, "main"), (USER, 411, "<module>")), "input")
        h = None
        for i in range(NB):
            for s, st, k in ops_val:
                if k == "wcopy":
                    continue
                nb = R.a(s * 2, st, "tmp")
                if h is not None:
                    R.f(h)
                h = nb
        lg = R.a(8 * 400 * FP, ev_val, "tmp")
        R.f(h)
        R.f(lg)
        R.f(xv)
        clk.wait(200_000)
    for n in range(4, 6):
        step(n)
    return dict(name="m10_timesformer_k400_lion.pickle",
                data=write([A], "cuda", rec=R.rec, annotations=ann), allocs=[A], rec=R.rec)


# ====================================================================================== m08
def m08_xlstm():
    rng = random.Random(808)
    clk = sim.Clock(1733655012000000, rng)
    A = sim.Allocator(device=0, capacity=40 * GB, other_usage=610 * MB, clock=clk,
                      extra_keys=True, base=0x7F0E20000000)
    R = Run(A)
    L = Lib("/home/ubuntu/.venv/lib/python3.11/site-packages/", "2.4")
    XB = L("xlstm/blocks/mlstm/layer.py", 0, "")[0]
    XK = L("xlstm/blocks/mlstm/backends.py", 0, "")[0]
    XC = L("xlstm/blocks/mlstm/cell.py", 0, "")[0]
    XS = L("xlstm/xlstm_block_stack.py", 0, "")[0]
    XM = L("xlstm/xlstm_lm_model.py", 0, "")[0]
    XBL = L("xlstm/blocks/xlstm_block.py", 0, "")[0]
    USER = "/home/ubuntu/xlstm-pile/train.py"
    u_main = [(USER, 188, "train"), (USER, 240, "<module>")]
    NB, B, Sq, D, DI, NH, V = 24, 2, 2048, 1024, 2048, 4, 50304
    psize = {}
    st_p = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
             L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"),
             (USER, 121, "train"), (USER, 240, "<module>"))
    plist = [("emb", V * D * FP)]
    gparams = [["emb"]]
    for i in range(NB):
        ks = []
        for k, s in [("norm", D * FP), ("up", 2 * DI * D * FP), ("conv", DI * 4 * FP), ("convb", DI * FP),
                     ("q", DI * 4 * FP), ("k", DI * 4 * FP), ("v", DI * 4 * FP), ("ig", NH * 3 * DI * FP),
                     ("igb", NH * FP), ("fg", NH * 3 * DI * FP), ("fgb", NH * FP), ("onorm", DI * FP),
                     ("skip", DI * FP), ("down", D * DI * FP)]:
            plist.append(("b%d.%s" % (i, k), s))
            ks.append("b%d.%s" % (i, k))
        gparams.append(ks)
    plist.append(("postnorm", D * FP))
    gparams.append(["postnorm"])
    keys = [k for k, _ in plist]
    for k, s in plist:
        psize[k] = s
        R.a(s, st_p, "param")
    u_step = [(USER, 152, "train")] + [(USER, 240, "<module>")]
    model = [(XM, 37, "forward")] + L.call() + u_step
    inb = [(XS, 123, "forward")] + L.call() + [(XM, 35, "forward")] + L.call() + u_step
    blk = [(XBL, 82, "forward")] + L.call() + inb
    lay = [(XB, 0, "")]
    mk = lambda *x: S(list(x), blk)
    lin = L("torch/nn/modules/linear.py", 117, "forward")
    ln = [L("torch/nn/functional.py", 2576, "layer_norm"), (XBL[0:0] + L("xlstm/components/ln.py", 38, "forward")[0], 38, "forward")] + L.call()
    mlay = lambda line: [(XB, line, "forward")] + L.call() + [(XBL, 81, "forward")] + L.call()
    cell = lambda line: [(XC, line, "forward")] + L.call() + [(XB, 119, "forward")] + L.call() + [(XBL, 81, "forward")] + L.call()
    back = lambda line: [(XK, line, "parallel_stabilized_simple"), (XC, 96, "forward")] + L.call() + [(XB, 119, "forward")] + L.call() + [(XBL, 81, "forward")] + L.call()
    tok = B * Sq
    SS = B * NH * Sq * Sq
    ops = [
        (tok * D * FP, mk(ln, (XBL, 80, "forward")), "save"),
        (2 * DI * D * BF, mk(lin, L.call(), mlay(104)), "wcopy"),
        (tok * 2 * DI * BF, mk(lin, L.call(), mlay(104)), "save"),
        (tok * DI * BF, mk(L("torch/nn/modules/conv.py", 308, "_conv_forward"), L("torch/nn/modules/conv.py", 312, "forward"), L.call(), (L("xlstm/components/conv.py", 0, "")[0], 136, "forward"), L.call(), mlay(108)), "save"),
        (tok * DI * BF, mk(L("torch/nn/functional.py", 2102, "silu"), mlay(109)), "save"),
        (tok * DI * BF, mk((L("xlstm/components/linear_headwise.py", 0, "")[0], 87, "forward"), L.call(), mlay(111)), "save"),
        (tok * DI * BF, mk((L("xlstm/components/linear_headwise.py", 0, "")[0], 87, "forward"), L.call(), mlay(112)), "save"),
        (tok * DI * BF, mk((L("xlstm/components/linear_headwise.py", 0, "")[0], 87, "forward"), L.call(), mlay(113)), "save"),
        (tok * NH * FP, mk(lin, L.call(), cell(88)), "save"),
        (tok * NH * FP, mk(lin, L.call(), cell(90)), "save"),
        (Sq * Sq, mk(back(34)), "tmp"),
        (SS * FP, mk(back(38)), "tmp"),
        (SS * FP, mk(back(41)), "tmp"),
        (SS * FP, mk(back(46)), "save"),
        (SS * BF, mk(back(54)), "save"),
        (SS * FP, mk(back(57)), "save"),
        (B * NH * Sq * FP, mk(back(58)), "save"),
        (SS * FP, mk(back(60)), "save"),
        (tok * DI * BF, mk(back(63)), "save"),
        (tok * DI * FP, mk(L("torch/nn/functional.py", 2617, "group_norm"), (L("xlstm/components/ln.py", 0, "")[0], 70, "forward"), L.call(), cell(101)), "save"),
        (tok * DI * BF, mk(mlay(121)), "save"),
        (tok * DI * BF, mk(mlay(123)), "save"),
        (D * DI * BF, mk(lin, L.call(), mlay(125)), "wcopy"),
        (tok * D * BF, mk(lin, L.call(), mlay(125)), "save"),
        (tok * D * FP, mk((XBL, 81, "forward")), "save"),
    ]
    st_in = S((USER, 147, "train"), (USER, 240, "<module>"))
    emb = [(tok * D * FP, S(L("torch/nn/functional.py", 2264, "embedding"), L("torch/nn/modules/sparse.py", 164, "forward"), L.call(), (XM, 34, "forward"), L.call(), u_step), "save")]
    head = [
        (tok * D * FP, S(ln, (XS, 125, "forward"), L.call(), (XM, 35, "forward"), L.call(), u_step), "save"),
        (V * D * BF, S(lin, L.call(), model), "wcopy"),
        (tok * V * BF, S(lin, L.call(), model), "save"),
        (tok * V * FP, S(L("torch/nn/functional.py", 3104, "cross_entropy"), (USER, 153, "train"), (USER, 240, "<module>")), "save"),
        (512, S(L("torch/nn/functional.py", 3104, "cross_entropy"), (USER, 153, "train"), (USER, 240, "<module>")), "save"),
    ]
    u_opt = [(USER, 161, "train"), (USER, 240, "<module>")]
    st_clip = S(L("torch/nn/utils/clip_grad.py", 83, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper"), (USER, 159, "train"), (USER, 240, "<module>"))
    st_zg = S(L("torch/optim/optimizer.py", 967, "zero_grad"), L("torch/_compile.py", 31, "inner"), (USER, 163, "train"), (USER, 240, "<module>"))
    grads, state = {}, {}
    xin = None
    for n in range(16):
        new = R.a(tok * 8, st_in, "input")
        if xin is not None:
            R.f(xin, st_in)
        xin = new
        saved = [fwd(R, emb)] + [fwd(R, ops) for _ in range(NB)] + [fwd(R, head)]
        clk.wait(400_000)
        backward(R, saved, [], grads, gparams, psize)
        clk.wait(700_000)
        norms = [R.a(4, st_clip, "tmp") for _ in range(len(keys))]
        tot = R.a(4, st_clip, "tmp")
        R.fl(norms, st_clip)
        R.f(tot, st_clip)
        adamw_foreach(R, L, u_opt, keys, psize, grads, state)
        # zero_grad(set_to_none=False): gradients stay allocated and are zeroed in place
        clk.wait(50_000)
    me = 40000
    return dict(name="m08_xlstm_mlstm24_pile_ring.pickle",
                data=write([A], "cuda", rec=R.rec, max_entries=me), allocs=[A], rec=R.rec, max_entries=me)


# ====================================================================================== m06
def m06_vit_ddp():
    rng = random.Random(606)
    clk = sim.Clock(1733871400000000, rng)
    A = sim.Allocator(device=1, capacity=40 * GB, other_usage=900 * MB, clock=clk,
                      extra_keys=True, base=0x7F9B60000000)
    R = Run(A)
    L = Lib("/opt/conda/lib/python3.11/site-packages/", "2.4")
    TM = L("timm/models/vision_transformer.py", 0, "")[0]
    USER = "/workspace/vitdist/train_vit_ddp.py"
    HOOK = "/workspace/vitdist/comm_hooks.py"
    NB, B, T, D = 12, 128, 197, 384
    u_main = [(USER, 263, "main"), (USER, 301, "<module>")]
    st_p = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
             L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"),
             (USER, 198, "main"), (USER, 301, "<module>"))
    plist = [("pe", D * 3 * 256 * FP), ("peb", D * FP), ("cls", D * FP), ("pos", T * D * FP)]
    gparams = [["pe", "peb", "cls", "pos"]]
    for i in range(NB):
        ks = []
        for k, s in [("n1", D * FP), ("n1b", D * FP), ("qkv", 3 * D * D * FP), ("qkvb", 3 * D * FP),
                     ("proj", D * D * FP), ("projb", D * FP), ("n2", D * FP), ("n2b", D * FP),
                     ("fc1", 4 * D * D * FP), ("fc1b", 4 * D * FP), ("fc2", 4 * D * D * FP), ("fc2b", D * FP)]:
            plist.append(("b%d.%s" % (i, k), s))
            ks.append("b%d.%s" % (i, k))
        gparams.append(ks)
    plist += [("norm", D * FP), ("normb", D * FP), ("head", 1000 * D * FP), ("headb", 1000 * FP)]
    gparams.append(["norm", "normb", "head", "headb"])
    psize = dict(plist)
    keys = [k for k, _ in plist]
    for k in keys:
        R.a(psize[k], st_p, "param")
    # DDP reducer buckets (25 MiB cap, reverse order), made in DDP.__init__
    st_bk = S(L("torch/nn/parallel/distributed.py", 1211, "_ddp_init_helper"),
              L("torch/nn/parallel/distributed.py", 1047, "__init__"), (USER, 205, "main"), (USER, 301, "<module>"))
    buckets, cur = [], 0
    for k in reversed(keys):
        cur += psize[k]
        if cur >= 25 * MB:
            buckets.append(cur)
            cur = 0
    if cur:
        buckets.append(cur)
    # the first bucket is small (1 MiB cap)
    for bsz in buckets:
        R.a(bsz, st_bk, "ddp_bucket")
    clk.wait(3_000_000)
    R.record()
    u_step = [(USER, 141, "train_one_epoch"), (USER, 271, "main"), (USER, 301, "<module>")]
    ddp = [L("torch/nn/parallel/distributed.py", 1593, "_run_ddp_forward"),
           L("torch/nn/parallel/distributed.py", 1657, "forward")] + L.call() + \
        [L("torch/amp/autocast_mode.py", 44, "decorate_autocast")]
    model = [(TM, 854, "forward")] + L.call() + ddp + u_step
    blocks = [(TM, 830, "forward_features")] + model
    blk = lambda line, sub=None: [(TM, line, "forward")] + L.call() + [L("torch/nn/modules/container.py", 219, "forward")] + L.call() + blocks
    lin = L("torch/nn/modules/linear.py", 117, "forward")
    ln = [L("torch/nn/functional.py", 2576, "layer_norm"), L("torch/nn/modules/normalization.py", 202, "forward")] + L.call()
    att = lambda line: [(TM, line, "forward")] + L.call() + blk(164)
    mlp = lambda line: [L("timm/layers/mlp.py", line, "forward")] + L.call() + blk(165)
    tok = B * T * D
    ops = [
        (tok * FP, S(ln, blk(164)), "save"),
        (3 * D * D * BF, S(lin, L.call(), att(90)), "wcopy"),
        (3 * tok * BF, S(lin, L.call(), att(90)), "save"),
        (B * 6 * T * T * BF, S(att(96)), "tmp"),
        (B * 6 * T * T * BF, S(att(97)), "save"),
        (tok * BF, S(att(101)), "save"),
        (D * D * BF, S(lin, L.call(), att(103)), "wcopy"),
        (tok * BF, S(lin, L.call(), att(103)), "save"),
        (tok * FP, S(blk(164)), "save"),
        (tok * FP, S(ln, blk(165)), "save"),
        (4 * D * D * BF, S(lin, L.call(), mlp(42)), "wcopy"),
        (4 * tok * BF, S(lin, L.call(), mlp(42)), "save"),
        (4 * tok * BF, S(L("torch/nn/modules/activation.py", 734, "forward"), L.call(), mlp(43)), "save"),
        (4 * D * D * BF, S(lin, L.call(), mlp(46)), "wcopy"),
        (tok * BF, S(lin, L.call(), mlp(46)), "save"),
        (tok * FP, S(blk(165)), "save"),
    ]
    conv = [L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward")] + L.call() + \
        [L("timm/layers/patch_embed.py", 131, "forward")] + L.call() + [(TM, 825, "forward_features")] + model
    emb = [(D * 3 * 256 * BF, S(conv), "wcopy"), (B * 196 * D * BF, S(conv), "save"),
           (tok * FP, S(L("timm/models/vision_transformer.py", 0, "")[0] and (TM, 754, "_pos_embed"), (TM, 826, "forward_features"), model), "save")]
    head = [(B * D * FP, S(ln, (TM, 831, "forward_features"), model), "save"),
            (1000 * D * BF, S(lin, L.call(), (TM, 845, "forward_head"), (TM, 855, "forward"), L.call(), ddp, u_step), "wcopy"),
            (B * 1000 * BF, S(lin, L.call(), (TM, 845, "forward_head"), (TM, 855, "forward"), L.call(), ddp, u_step), "save"),
            (B * 1000 * FP, S(L("torch/nn/functional.py", 3104, "cross_entropy"), L("timm/loss/cross_entropy.py", 35, "forward"), L.call(), (USER, 143, "train_one_epoch"), u_step[1:]), "save"),
            (512, S(L("torch/nn/functional.py", 3104, "cross_entropy"), L("timm/loss/cross_entropy.py", 35, "forward"), L.call(), (USER, 143, "train_one_epoch"), u_step[1:]), "save")]
    st_in = S((USER, 136, "train_one_epoch"), u_step[1:])
    st_cmp = S((HOOK, 37, "fp16_compress_with_error_feedback"))
    st_dec = S((HOOK, 40, "fp16_compress_with_error_feedback"))
    st_res = S((HOOK, 41, "fp16_compress_with_error_feedback"))
    u_opt = [(USER, 151, "train_one_epoch")] + u_step[1:]
    u_zg = [(USER, 134, "train_one_epoch")] + u_step[1:]
    grads, state = {}, {}
    residuals = []
    xin = None
    # bucket readiness: bucket j is ready after the layers holding its parameters have gradients
    for n in range(10):
        zero_grad(R, L, u_zg, keys, grads)
        new = R.a(B * 3 * 224 * 224 * FP, st_in, "input")
        if xin is not None:
            R.f(xin, st_in)
        xin = new
        saved = [fwd(R, emb)] + [fwd(R, ops) for _ in range(NB)] + [fwd(R, head)]
        clk.wait(60_000)
        # backward with the comm hook firing per bucket as gradients become ready
        gin = None
        acc, bi, pending = 0, 0, []
        for saved_l, pkeys in reversed(list(zip(saved, gparams))):
            for b in reversed(saved_l):
                if b.cat != "wcopy":
                    g = R.a(b.req, [], "tmp")
                    if gin is not None:
                        R.f(gin, [])
                    gin = g
                R.f(b, [])
            for k in reversed(pkeys):
                if grads.get(k) is None:
                    grads[k] = R.a(psize[k], [], "grad")
                acc += psize[k]
                if bi < len(buckets) and acc >= buckets[bi]:
                    c = R.a(buckets[bi] // 2, st_cmp, "comm")
                    d = R.a(buckets[bi], st_dec, "tmp")
                    r = R.a(buckets[bi], st_res, "ef_residual")
                    R.f(d, st_res)
                    residuals.append(r)
                    pending.append(c)
                    acc -= buckets[bi]
                    bi += 1
                    if len(pending) > 1:
                        R.f(pending.pop(0), [])
        if gin is not None:
            R.f(gin, [])
        for c in pending:
            R.f(c, [])
        clk.wait(90_000)
        adamw_foreach(R, L, u_opt, keys, psize, grads, state)
        clk.wait(20_000)
    return dict(name="m06_vits16_ddp_fp16hook_rank1.pickle",
                data=write([A], "cuda", rec=R.rec, n_dev_lists=2), allocs=[A], rec=R.rec,
                info=dict(buckets=buckets))


# ====================================================================================== m07
def m07_llava():
    """2023 format: no time_us, no allocator_settings; Python frames only (torch 2.0)."""
    rng = random.Random(707)
    A = sim.Allocator(device=0, capacity=80 * GB, other_usage=700 * MB, time_us=False,
                      base=0x7F5D00000000, seg_frames=False)
    R = Run(A)
    L = Lib("/home/hliu/miniconda3/envs/llava/lib/python3.10/site-packages/", "2.0")
    LL = L("transformers/models/llama/modeling_llama.py", 0, "")[0]
    CL = L("transformers/models/clip/modeling_clip.py", 0, "")[0]
    LV = "/home/hliu/LLaVA/llava/"
    TR = L("transformers/trainer.py", 0, "")[0]
    u_train = [(TR, 1809, "_inner_training_loop"), (TR, 1539, "train"), (LV + "train/train.py", 933, "train"),
               (LV + "train/train_mem.py", 13, "<module>")]
    st_load = S(L("torch/nn/modules/module.py", 1143, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
                L("torch/nn/modules/module.py", 820, "_apply"), L("torch/nn/modules/module.py", 820, "_apply"),
                L("torch/nn/modules/module.py", 1145, "to"), (LV + "train/train.py", 827, "train"),
                (LV + "train/train_mem.py", 13, "<module>"))
    st_vt = S(L("torch/nn/modules/module.py", 1143, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch/nn/modules/module.py", 820, "_apply"), L("torch/nn/modules/module.py", 1145, "to"),
              (LV + "train/train.py", 845, "train"), (LV + "train/train_mem.py", 13, "<module>"))
    st_pj = S(L("torch/nn/modules/module.py", 1143, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch/nn/modules/module.py", 820, "_apply"), L("torch/nn/modules/module.py", 1145, "to"),
              (LV + "train/train.py", 851, "train"), (LV + "train/train_mem.py", 13, "<module>"))
    D, FF, NL, V = 4096, 11008, 32, 32000
    # frozen LLM (fp16) and vision tower (fp16): made before recording
    R.a(V * D * BF, st_load, "param")
    for i in range(NL):
        for s in (D * D * BF, D * D * BF, D * D * BF, D * D * BF, FF * D * BF, FF * D * BF, FF * D * BF, D * BF, D * BF):
            R.a(s, st_load, "param")
    R.a(D * BF, st_load, "param")
    R.a(V * D * BF, st_load, "param")
    R.a(1024 * 3 * 14 * 14 * BF, st_vt, "param")
    R.a(577 * 1024 * BF, st_vt, "param")
    for i in range(24):
        for s in (1024 * 1024 * BF,) * 4 + (1024 * BF,) * 8 + (4096 * 1024 * BF, 4096 * BF, 1024 * 4096 * BF, 1024 * BF):
            R.a(s, st_vt, "param")
    psize = {"p0w": 4096 * 1024 * FP, "p0b": 4096 * FP, "p2w": 4096 * 4096 * FP, "p2b": 4096 * FP}
    pkeys = list(psize)
    for k in pkeys:
        R.a(psize[k], st_pj, "param")
    R.record()
    ts = [(TR, 2654, "training_step"), (TR, 1835, "_inner_training_loop")] + u_train[1:]
    cm = [(TR, 2679, "compute_loss"), (TR, 2654, "training_step")] + u_train[:0] + [(TR, 1835, "_inner_training_loop")] + u_train[1:]
    fw = [(LV + "model/language_model/llava_llama.py", 79, "forward")] + L.call() + cm
    prep = [(LV + "model/llava_arch.py", 141, "encode_images"), (LV + "model/llava_arch.py", 148, "prepare_inputs_labels_for_multimodal"),
            (LV + "model/language_model/llava_llama.py", 68, "forward")] + L.call() + cm
    clipf = [(LV + "model/multimodal_encoder/clip_encoder.py", 50, "forward"), L("torch/utils/_contextlib.py", 115, "decorate_context")] + L.call() + prep
    enc = lambda line: [(CL, line, "forward")] + L.call() + [(CL, 889, "forward")] + L.call() + [(CL, 941, "forward")] + L.call() + clipf
    lin = L("torch/nn/modules/linear.py", 114, "forward")
    B = 16
    NV = 577
    vtok = B * NV * 1024
    st_img = S((TR, 2651, "training_step"), (TR, 1835, "_inner_training_loop"), u_train[1:])
    grads, state = {}, {}
    lm = [(LL, 693, "forward")] + L.call() + fw
    ckpt = [L("torch/utils/checkpoint.py", 107, "forward"), L("torch/autograd/function.py", 506, "apply"),
            L("torch/utils/checkpoint.py", 249, "checkpoint"), (LL, 685, "forward")] + L.call() + fw
    rec = [(LL, 682, "custom_forward"), L("torch/utils/checkpoint.py", 107, "forward")]
    dl = lambda line, outer: [(LL, line, "forward")] + L.call() + outer
    att = lambda line, outer: [(LL, line, "forward")] + L.call() + dl(408, outer)
    mlpf = lambda outer: [(LL, 221, "forward")] + L.call() + dl(420, outer)
    rms = lambda line, outer: [(LL, 88, "forward")] + L.call() + dl(line, outer)
    st_zg = S(L("torch/nn/modules/module.py", 2372, "zero_grad"), (TR, 1912, "_inner_training_loop"), u_train[1:])
    u_opt = [L("accelerate/optimizer.py", 145, "step"), (TR, 1882, "_inner_training_loop")] + u_train[1:]
    u_bw = [L("torch/_tensor.py", 487, "backward"), L("accelerate/accelerator.py", 1853, "backward"), (TR, 2673, "training_step"), (TR, 1835, "_inner_training_loop")] + u_train[1:]
    for n in range(4):
        Sq = 652  # 576 image tokens + the prompt, padded to a multiple of 4 by the collator
        tok = B * Sq
        img = R.a(B * 3 * 336 * 336 * BF, st_img, "input")
        ids = R.a(B * (Sq - 575) * 8, st_img, "input")
        lab = R.a(B * (Sq - 575) * 8, st_img, "input")
        # vision tower under no_grad with output_hidden_states=True: 25 hidden states kept until select
        hs = [R.a(vtok * BF, S((CL, 196, "forward"), L.call(), (CL, 937, "forward"), L.call(), clipf), "tmp")]
        for i in range(24):
            t1 = R.a(vtok * BF, S(L("torch/nn/functional.py", 2515, "layer_norm"), L("torch/nn/modules/normalization.py", 190, "forward"), L.call(), enc(380)), "tmp")
            q = R.a(vtok * BF, S(lin, L.call(), (CL, 268, "forward"), L.call(), enc(381)), "tmp")
            k = R.a(vtok * BF, S(lin, L.call(), (CL, 269, "forward"), L.call(), enc(381)), "tmp")
            v = R.a(vtok * BF, S(lin, L.call(), (CL, 270, "forward"), L.call(), enc(381)), "tmp")
            aw = R.a(B * 16 * NV * NV * BF, S((CL, 280, "forward"), L.call(), enc(381)), "tmp")
            sm = R.a(B * 16 * NV * NV * BF, S(L("torch/nn/functional.py", 1843, "softmax"), (CL, 306, "forward"), L.call(), enc(381)), "tmp")
            R.fl([aw, q, k])
            ao = R.a(vtok * BF, S((CL, 315, "forward"), L.call(), enc(381)), "tmp")
            R.fl([sm, v])
            o = R.a(vtok * BF, S(lin, L.call(), (CL, 326, "forward"), L.call(), enc(381)), "tmp")
            R.fl([ao, t1])
            r1 = R.a(vtok * BF, S(enc(388)), "tmp")
            R.f(o)
            t2 = R.a(vtok * BF, S(L("torch/nn/functional.py", 2515, "layer_norm"), L("torch/nn/modules/normalization.py", 190, "forward"), L.call(), enc(391)), "tmp")
            f1 = R.a(B * NV * 4096 * BF, S(lin, L.call(), (CL, 346, "forward"), L.call(), enc(392)), "tmp")
            R.f(t2)
            f2 = R.a(B * NV * 4096 * BF, S(L("transformers/activations.py", 79, "forward"), L.call(), (CL, 347, "forward"), L.call(), enc(392)), "tmp")
            R.f(f1)
            f3 = R.a(vtok * BF, S(lin, L.call(), (CL, 348, "forward"), L.call(), enc(392)), "tmp")
            R.f(f2)
            h = R.a(vtok * BF, S(enc(393)), "tmp")
            R.fl([f3, r1])
            hs.append(h)
        # feature_select: hidden_states[-2][:, 1:] ; the others are dropped
        feat = hs[-2]
        R.fl([h for h in hs if h is not feat], S((LV + "model/multimodal_encoder/clip_encoder.py", 51, "forward"), L("torch/utils/_contextlib.py", 115, "decorate_context"), L.call(), prep))
        # projector (trainable, fp32 weights under bf16 autocast)
        pj = [(LV + "model/llava_arch.py", 142, "encode_images"), (LV + "model/llava_arch.py", 148, "prepare_inputs_labels_for_multimodal"),
              (LV + "model/language_model/llava_llama.py", 68, "forward")] + L.call() + cm
        ctn = [L("torch/nn/modules/container.py", 217, "forward")] + L.call() + pj
        f32 = R.a(B * 576 * 1024 * FP, S(pj), "act")
        p1 = R.a(B * 576 * 4096 * FP, S(lin, L.call(), ctn), "act")
        p2 = R.a(B * 576 * 4096 * FP, S(L("torch/nn/modules/activation.py", 684, "forward"), L.call(), ctn), "act")
        p3 = R.a(B * 576 * 4096 * FP, S(lin, L.call(), ctn), "act")
        R.f(feat, S(pj))
        # embeddings + concatenation into inputs_embeds
        pe = [(LV + "model/llava_arch.py", 205, "prepare_inputs_labels_for_multimodal"), (LV + "model/language_model/llava_llama.py", 68, "forward")] + L.call() + cm
        te = R.a(B * (Sq - 576) * D * BF, S(L("torch/nn/functional.py", 2210, "embedding"), L("torch/nn/modules/sparse.py", 162, "forward"), L.call(), pe), "tmp")
        p3h = R.a(B * 576 * D * BF, S(pe), "act")
        emb = R.a(tok * D * BF, S([(LV + "model/llava_arch.py", 231, "prepare_inputs_labels_for_multimodal")] + pe[1:]), "act")
        R.f(te, S(pe))
        # checkpointed decoder layers: keep only each layer's input
        xs = [emb]
        for i in range(NL):
            t = [R.a(tok * D * BF, S(rms(406, ckpt), ), "tmp"),
                 R.a(tok * D * BF, S(lin, L.call(), att(290, ckpt)), "tmp"),
                 R.a(tok * D * BF, S(lin, L.call(), att(291, ckpt)), "tmp"),
                 R.a(tok * D * BF, S(lin, L.call(), att(292, ckpt)), "tmp"),
                 R.a(B * 32 * Sq * Sq * BF, S(att(350, ckpt)), "tmp")]
            t.append(R.a(B * 32 * Sq * Sq * FP, S(L("torch/nn/functional.py", 1845, "softmax"), att(362, ckpt)), "tmp"))
            R.f(t[4])
            t.append(R.a(B * 32 * Sq * Sq * BF, S(att(362, ckpt)), "tmp"))
            R.f(t[5])
            t.append(R.a(tok * D * BF, S(att(363, ckpt)), "tmp"))
            R.fl([t[1], t[2], t[3], t[6]])
            o = R.a(tok * D * BF, S(lin, L.call(), att(383, ckpt)), "tmp")
            R.fl([t[7], t[0]])
            h1 = R.a(tok * D * BF, S(dl(414, ckpt)), "tmp")
            R.f(o)
            n2 = R.a(tok * D * BF, S(rms(419, ckpt)), "tmp")
            g = R.a(tok * FF * BF, S(lin, L.call(), mlpf(ckpt)), "tmp")
            a_ = R.a(tok * FF * BF, S(L("torch/nn/modules/activation.py", 396, "forward"), L.call(), mlpf(ckpt)), "tmp")
            R.f(g)
            u = R.a(tok * FF * BF, S(lin, L.call(), mlpf(ckpt)), "tmp")
            m = R.a(tok * FF * BF, S(mlpf(ckpt)), "tmp")
            R.fl([a_, u, n2])
            dn = R.a(tok * D * BF, S(lin, L.call(), mlpf(ckpt)), "tmp")
            R.f(m)
            out = R.a(tok * D * BF, S(dl(421, ckpt)), "act")
            R.fl([dn, h1])
            xs.append(out)
        hn = R.a(tok * D * BF, S([(LL, 88, "forward")] + L.call() + [(LL, 712, "forward")] + L.call() + fw), "act")
        lg = R.a(tok * V * BF, S(lin, L.call(), [(LL, 820, "forward")] + L.call() + fw), "act")
        lf = R.a(tok * V * FP, S([(LL, 822, "forward")] + L.call() + fw), "act")
        R.f(lg, S([(LL, 822, "forward")] + L.call() + fw))
        sl = R.a(B * (Sq - 1) * V * FP, S([(LL, 827, "forward")] + L.call() + fw), "tmp")
        ce = R.a(B * (Sq - 1) * V * FP, S(L("torch/nn/functional.py", 3029, "cross_entropy"), L("torch/nn/modules/loss.py", 1174, "forward"), L.call(), [(LL, 832, "forward")] + L.call() + fw), "act")
        R.f(sl, S([(LL, 832, "forward")] + L.call() + fw))
        loss = R.a(512, S(L("torch/nn/functional.py", 3029, "cross_entropy"), L("torch/nn/modules/loss.py", 1174, "forward"), L.call(), [(LL, 832, "forward")] + L.call() + fw), "act")
        # backward (autograd thread: no Python frames)
        g = R.a(B * (Sq - 1) * V * FP, [], "tmp")
        R.f(ce, [])
        R.f(loss, [])
        g2 = R.a(tok * V * FP, [], "tmp")
        R.f(g, [])
        R.f(lf, [])
        g3 = R.a(tok * V * BF, [], "tmp")
        R.f(g2, [])
        gh = R.a(tok * D * BF, [], "tmp")
        R.f(g3, [])
        R.f(hn, [])
        for i in range(NL - 1, -1, -1):
            # recompute layer i with autograd on, then backward through it
            sv = []
            for s in (tok * D * BF, tok * D * BF, tok * D * BF, tok * D * BF, B * 32 * Sq * Sq * BF, tok * D * BF, tok * D * BF,
                      tok * D * BF, tok * FF * BF, tok * FF * BF, tok * FF * BF, tok * FF * BF, tok * D * BF):
                sv.append(R.a(s, [], "act"))
            gi = None
            for b in reversed(sv):
                gg = R.a(b.req, [], "tmp")
                if gi is not None:
                    R.f(gi, [])
                gi = gg
                R.f(b, [])
            R.f(gh, [])
            gh = gi
            R.f(xs[i + 1], [])
        # projector backward
        gp = R.a(B * 576 * D * BF, [], "tmp")
        R.f(gh, [])
        R.f(p3h, [])
        R.f(emb, [])
        for k, b in (("p2b", None), ("p2w", p3), ("p0b", p2), ("p0w", p1)):
            if grads.get(k) is None:
                grads[k] = R.a(psize[k], [], "grad")
            if b is not None:
                t = R.a(b.req, [], "tmp")
                R.f(b, [])
                R.f(t, [])
        R.f(gp, [])
        R.f(f32, [])
        adamw_foreach(R, L, u_opt, pkeys, psize, grads, state, ver="2.0")
        for k in pkeys:
            R.f(grads[k], st_zg)
            grads[k] = None
        R.fl([img, ids, lab], st_img)
    return dict(name="m07_llava15_7b_pretrain_2023.pickle",
                data=write([A], "cuda", rec=R.rec, settings=False), allocs=[A], rec=R.rec)


# ====================================================================================== m01
def m01_controlnet(cap_frac=0.5):
    rng = random.Random(101)
    clk = sim.Clock(1734012800000000, rng)
    total = 23_609_475_072            # A10G: torch.cuda.get_device_properties(0).total_memory
    A = sim.Allocator(device=0, capacity=total, other_usage=480 * MB, clock=clk, extra_keys=True,
                      mem_limit=int(total * cap_frac), base=0x7F61A0000000)
    R = Run(A)
    L = Lib("/opt/conda/envs/diffusers/lib/python3.10/site-packages/", "2.4")
    DF = lambda rel: L("diffusers/" + rel, 0, "")[0]
    USER = "/home/ubuntu/diffusers/examples/controlnet/train_controlnet.py"
    u_main = [(USER, 1178, "main"), (USER, 1185, "<module>")]
    st_load = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
                L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"), (USER, 905, "main"), (USER, 1185, "<module>"))
    st_cn = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
              L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"), L("accelerate/accelerator.py", 1334, "prepare_model"),
              L("accelerate/accelerator.py", 1213, "_prepare_one"), L("accelerate/accelerator.py", 1239, "prepare"), (USER, 968, "main"), (USER, 1185, "<module>"))
    # frozen fp16 UNet (860M), VAE (84M), CLIP text (123M); trainable fp32 ControlNet (361M)
    unet_chunks = [3_276_800, 6_553_600, 13_107_200, 26_214_400, 29_491_200]
    tot = 0
    i = 0
    while tot < 1_719_000_000:
        s = unet_chunks[i % 5] * BF // 2 * 2
        R.a(s, st_load, "param")
        tot += s
        i += 1
    for s in [167_000_000 // 40] * 40 + [246_000_000 // 30] * 30:
        R.a(s // 512 * 512, st_load, "param")
    cn = []
    ctot = 0
    sizes = [1_638_400, 3_276_800, 6_553_600, 14_745_600, 26_214_400, 58_982_400, 2_560, 5_120, 1_280 * 4]
    psize = {}
    j = 0
    while ctot < 1_445_000_000:
        s = sizes[j % len(sizes)] * FP // 4 * 4
        k = "cn%d" % j
        psize[k] = s
        R.a(s, st_cn, "param")
        cn.append(k)
        ctot += s
        j += 1
    clk.wait(2_000_000)
    R.record()
    u_step = [(USER, 1062, "main"), (USER, 1185, "<module>")]
    B, H = 4, 64
    vae = [DF("models/autoencoders/vae.py"), DF("models/autoencoders/autoencoder_kl.py")]
    enc = lambda line: S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(),
                         (DF("models/resnet.py"), 370, "forward"), L.call(), (vae[0], line, "forward"), L.call(),
                         (vae[1], 256, "_encode"), (vae[1], 282, "encode"), L("diffusers/utils/accelerate_utils.py", 46, "wrapper"), (USER, 1062, "main"), (USER, 1185, "<module>"))
    cnm = lambda line, sub: S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(),
                              (DF("models/resnet.py"), sub, "forward"), L.call(), (DF("models/controlnet.py"), line, "forward"), L.call(),
                              L("accelerate/utils/operations.py", 820, "forward"), L("accelerate/utils/operations.py", 832, "__call__"),
                              L("torch/amp/autocast_mode.py", 44, "decorate_autocast"), (USER, 1095, "main"), (USER, 1185, "<module>"))
    unm = lambda line, sub: S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(),
                              (DF("models/resnet.py"), sub, "forward"), L.call(), (DF("models/unets/unet_2d_condition.py"), line, "forward"), L.call(),
                              (USER, 1103, "main"), (USER, 1185, "<module>"))
    atn = lambda who, line: S(L("torch/nn/functional.py", 0, "")[0:0] and [] or [(DF("models/attention_processor.py"), 2315, "__call__"), (DF("models/attention_processor.py"), 559, "forward")] + L.call() +
                              [(DF("models/attention.py"), 366, "forward")] + L.call() + [(DF("models/transformers/transformer_2d.py"), 440, "forward")] + L.call() +
                              [(DF("models/unets/unet_2d_blocks.py"), 1288, "forward")] + L.call() + ([(DF("models/controlnet.py"), line, "forward")] + L.call() + [L("accelerate/utils/operations.py", 820, "forward"), L("accelerate/utils/operations.py", 832, "__call__"), L("torch/amp/autocast_mode.py", 44, "decorate_autocast"), (USER, 1095, "main"), (USER, 1185, "<module>")]
                                  if who == "cn" else [(DF("models/unets/unet_2d_condition.py"), line, "forward")] + L.call() + [(USER, 1103, "main"), (USER, 1185, "<module>")]))
    # activation shapes per resolution level (channels, spatial) at latent 64x64
    levels = [(320, 64), (320, 64), (640, 32), (640, 32), (1280, 16), (1280, 16), (1280, 8)]
    grads, state = {}, {}
    st_in = S((USER, 1060, "main"), (USER, 1185, "<module>"))
    u_opt = [L("accelerate/optimizer.py", 170, "step"), (USER, 1126, "main"), (USER, 1185, "<module>")]
    u_zg = [L("accelerate/optimizer.py", 119, "zero_grad"), (USER, 1128, "main"), (USER, 1185, "<module>")]
    pix = hint = None
    PL = DF("pipelines/controlnet/pipeline_controlnet.py")
    u_val = [(USER, 166, "log_validation"), (USER, 1145, "main"), (USER, 1185, "<module>")]

    vsizes = [(80, 80), (88, 88), (96, 88), (96, 96), (104, 96)]

    def validation(n):
        clk.wait(500_000)
        vh, vw = vsizes[(n // 2) % len(vsizes)]
        pst = lambda line, *inner: S(list(inner), (PL, line, "__call__"), L("torch/utils/_contextlib.py", 116, "decorate_context"), u_val)
        img = R.a(3 * vh * vw * 64 * BF, pst(1097), "tmp")
        cimg = R.a(2 * 3 * vh * vw * 64 * BF, pst(1110), "tmp")
        lat = R.a(4 * vh * vw * BF, pst(1170), "tmp")
        pe = R.a(2 * 77 * 768 * BF, pst(1080), "tmp")
        vlev = [(ch, rr * vh // 64, rr * vw // 64) for ch, rr in levels]
        for t in range(10):
            li = R.a(2 * 4 * vh * vw * BF, pst(1226), "tmp")
            res = []
            for ch, rh, rw in vlev:
                rr = rh
                x = R.a(2 * ch * rh * rw * BF, pst(1244, [(DF("models/controlnet.py"), 802, "forward")] + L.call()), "tmp")
                if rr >= 48:
                    at = R.a(2 * 8 * (rh * rw) * (rh * rw) * BF, pst(1244, [(DF("models/attention_processor.py"), 2315, "__call__"), (DF("models/attention_processor.py"), 559, "forward")] + L.call(), (DF("models/controlnet.py"), 802, "forward"), L.call()), "tmp")
                    R.f(at)
                res.append(x)
            h = None
            for ch, rh, rw in vlev + list(reversed(vlev)):
                rr = rh
                x = R.a(2 * ch * rh * rw * BF, pst(1258, [(DF("models/unets/unet_2d_condition.py"), 1216, "forward")] + L.call()), "tmp")
                if rr >= 48:
                    at = R.a(2 * 8 * (rh * rw) * (rh * rw) * BF, pst(1258, [(DF("models/attention_processor.py"), 2315, "__call__"), (DF("models/attention_processor.py"), 559, "forward")] + L.call(), (DF("models/unets/unet_2d_condition.py"), 1216, "forward"), L.call()), "tmp")
                    R.f(at)
                if h is not None:
                    R.f(h)
                h = x
            R.fl(res)
            np_ = R.a(2 * 4 * vh * vw * BF, pst(1283), "tmp")
            R.f(h)
            R.f(li)
            nl = R.a(4 * vh * vw * BF, pst(1292), "tmp")
            R.f(np_)
            R.f(lat)
            lat = nl
        h = None
        vae_l = R.a(4 * vh * vw * BF, pst(1318), "tmp")
        for ch, f in ((512, 1), (512, 2), (512, 2), (512, 4), (256, 4), (256, 8), (128, 8), (128, 8)):
            x = R.a(ch * vh * vw * f * f * BF, pst(1318, [L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward")] + L.call() + [(vae[0], 292, "forward")] + L.call() + [(vae[1], 304, "_decode"), (vae[1], 325, "decode"), L("diffusers/utils/accelerate_utils.py", 46, "wrapper")]), "tmp")
            if h is not None:
                R.f(h)
            h = x
        R.fl([h, vae_l, lat, pe, cimg, img])
        clk.wait(300_000)

    for n in range(10):
        new = R.a(B * 3 * 512 * 512 * FP, st_in, "input")
        nh = R.a(B * 3 * 512 * 512 * FP, st_in, "input")
        if pix is not None:
            R.f(pix, st_in)
            R.f(hint, st_in)
        pix, hint = new, nh
        # VAE encode under no_grad (fp16): big transient activations
        h = None
        for ch, res, line in ((128, 512, 141), (128, 512, 141), (256, 256, 141), (256, 256, 141), (512, 128, 141), (512, 64, 141), (512, 64, 150)):
            for r in range(2):
                t = R.a(B * ch * res * res * BF, enc(line), "tmp")
                if h is not None:
                    R.f(h)
                h = t
        lat = R.a(B * 4 * H * H * BF, S((USER, 1063, "main"), (USER, 1185, "<module>")), "act")
        R.f(h)
        te = []
        for r in range(12):
            te.append(R.a(B * 77 * 768 * BF, S(L("transformers/models/clip/modeling_clip.py", 393, "forward"), L.call(), (USER, 1080, "main"), (USER, 1185, "<module>")), "tmp"))
        enc_h = te.pop()
        R.fl(te)
        saved_cn, saved_un = [], []
        # ControlNet cond embedding at 512^2 (fp16 autocast)
        for ch, res in ((16, 512), (16, 512), (32, 256), (32, 256), (96, 128), (96, 128), (256, 64), (320, 64)):
            saved_cn.append(R.a(B * ch * res * res * BF, cnm(781, 0) if False else S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(), (DF("models/controlnet.py"), 92, "forward"), L.call(), (DF("models/controlnet.py"), 781, "forward"), L.call(), L("accelerate/utils/operations.py", 820, "forward"), L("accelerate/utils/operations.py", 832, "__call__"), L("torch/amp/autocast_mode.py", 44, "decorate_autocast"), (USER, 1095, "main"), (USER, 1185, "<module>")), "act"))
        for li, (ch, res) in enumerate(levels):
            for r in range(6):
                saved_cn.append(R.a(B * ch * res * res * BF, cnm(802, 377), "act"))
            if res <= 32:
                tt = R.a(B * 8 * (res * res) * (res * res) * BF, atn("cn", 802), "tmp")
                saved_cn.append(R.a(B * 8 * (res * res) * (res * res) * BF, atn("cn", 802), "act"))
                R.f(tt)
            else:
                tt = R.a(B * 8 * (res * res) * (res * res) * BF, atn("cn", 802), "tmp")
                R.f(tt)
            saved_cn.append(R.a(B * ch * res * res * BF, cnm(830, 377), "act"))
        # frozen UNet forward with the residuals (activations kept: gradients flow to ControlNet)
        for li, (ch, res) in enumerate(levels + list(reversed(levels))):
            for r in range(5):
                saved_un.append(R.a(B * ch * res * res * BF, unm(1216 if li < 7 else 1281, 377), "act"))
            if res <= 32:
                saved_un.append(R.a(B * 8 * (res * res) * (res * res) * BF, atn("un", 1216 if li < 7 else 1281), "act"))
        out = R.a(B * 4 * H * H * FP, S(L("torch/nn/functional.py", 3383, "mse_loss"), (USER, 1111, "main"), (USER, 1185, "<module>")), "act")
        clk.wait(150_000)
        # backward
        gin = None
        for b in reversed(saved_un + saved_cn):
            g = R.a(b.req, [], "tmp")
            if gin is not None:
                R.f(gin, [])
            gin = g
            R.f(b, [])
            if b is saved_cn[len(saved_cn) // 2]:
                for k in cn:
                    if grads.get(k) is None:
                        grads[k] = R.a(psize[k], [], "grad")
        R.f(gin, [])
        R.f(out, [])
        R.f(lat, [])
        R.f(enc_h, [])
        clk.wait(200_000)
        adamw_foreach(R, L, u_opt, cn, psize, grads, state)
        zero_grad(R, L, u_zg, cn, grads)
        clk.wait(40_000)
        if n % 2 == 1:
            validation(n)
    return dict(name="m01_controlnet_canny_sd15_a10g.pickle",
                data=write([A], "cuda", rec=R.rec), allocs=[A], rec=R.rec,
                info=dict(limit=A.limit, total=total))
