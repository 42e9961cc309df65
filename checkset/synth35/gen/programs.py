"""The ten workloads.  Each build_mNN() runs one program through sim.Allocator and returns
dict(name, data (the snapshot dict), devs, info (the generator's own bookkeeping))."""
import random

import sim
import cpp
from common import S, Lib, Dev, Tape, op, backward, write, NOSTACK, Ann, MB, GB, KB, start_recording

MiB = MB


def fr(prefix):
    return lambda f, line, name: (prefix + f, line, name)


# ============================================================================ m01
def build_m01():
    """FNO-3D on 2-D Navier-Stokes (nu=1e-4), 64x64 grid x 40 time steps padded to 48, width 32,
    modes 8, 4 Fourier layers, batch 16, fp32, Adam (lr 1e-3), 8 steps; torch 2.5 recorded with
    stacks="all" (C++ frames).  Healthy."""
    rng = random.Random(101)
    clock = sim.Clock(1767225600000000 + 3 * 3600 * 10 ** 6, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, extra_keys=False, base=0x7F1E40000000)
    dv = Dev(A)
    ann = Ann(clock)
    L = Lib("/opt/conda/envs/neuralop/lib/python3.11/site-packages/", "2.5")
    app = fr("/home/researcher/fno-ns/")
    B, X, Y, TT, TP, W, C_IN = 16, 64, 64, 40, 48, 32, 13
    N = B * X * Y * TP
    NU = B * X * Y * TT
    act = N * W * 4
    cpl = B * X * Y * (TP // 2 + 1) * W * 8
    corner = B * 8 * 8 * 8 * W * 8
    TRAIN = [app("train_fno3d.py", 141, "train_epoch"), app("train_fno3d.py", 198, "main"), app("train_fno3d.py", 214, "<module>")]
    MODEL = [app("train_fno3d.py", 126, "train_epoch")] + TRAIN[1:]
    call = [L("torch/nn/modules/module.py", 1747, "_call_impl"), L("torch/nn/modules/module.py", 1736, "_wrapped_call_impl")]

    def fno(line):
        return [app("models/fno3d.py", line, "forward")] + call + MODEL

    def spec(line, layer):
        return [app("models/fno3d.py", line, "forward")] + call + [app("models/fno3d.py", 96 + layer, "forward")] + call + MODEL

    # parameters (before recording: model.cuda())
    TO = cpp.fwd("copy", [L("torch/nn/modules/module.py", 1326, "convert"), L("torch/nn/modules/module.py", 942, "_apply"),
                          L("torch/nn/modules/module.py", 915, "_apply"), L("torch/nn/modules/module.py", 1329, "to"),
                          app("train_fno3d.py", 176, "main"), app("train_fno3d.py", 214, "<module>")])
    psz = {"fc0.weight": 32 * C_IN * 4, "fc0.bias": 32 * 4}
    for l in range(4):
        for c in range(4):
            psz["conv%d.weights%d" % (l, c + 1)] = W * W * 8 * 8 * 8 * 8
        psz["w%d.weight" % l] = W * W * 4
        psz["w%d.bias" % l] = W * 4
    psz.update({"fc1.weight": 128 * W * 4, "fc1.bias": 128 * 4, "fc2.weight": 128 * 4, "fc2.bias": 4})
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)
    AG = cpp.accumulate_grad()
    grads, state = {}, []
    info = dict(param_bytes=sum(psz.values()), steps=8, batch=B)

    for step in range(8):
        ann.start("ProfilerStep#%d" % step)
        ZG = [L("torch/optim/optimizer.py", 985, "zero_grad"), L("torch/_compile.py", 32, "inner"),
              app("train_fno3d.py", 124, "train_epoch")] + TRAIN[1:]
        if grads:
            ann.start("Optimizer.zero_grad#Adam.zero_grad")
            # set_to_none=True: the previous step's gradients go now, at the start of this step
            for k in list(grads):
                dv.f(grads.pop(k), S(ZG))
            ann.end("Optimizer.zero_grad#Adam.zero_grad")
        tape = Tape()
        LD = [app("train_fno3d.py", 122, "train_epoch")] + TRAIN[1:]
        xin = dv.a(B * X * Y * TT * C_IN * 4, cpp.fwd("copy", LD), "input")
        yt = dv.a(NU * 4, cpp.fwd("copy", [app("train_fno3d.py", 123, "train_epoch")] + TRAIN[1:]), "input")
        # lift: fc0 (13 -> 32), permute, pad the time axis 40 -> 48
        tape.param("fc0.weight", psz["fc0.weight"], AG)
        tape.param("fc0.bias", psz["fc0.bias"], AG)
        h0 = op(dv, tape, NU * W * 4, cpp.fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + call + [app("models/fno3d.py", 88, "forward")] + call + MODEL), False)
        x = op(dv, tape, act, cpp.fwd("pad", [L("torch/nn/functional.py", 5096, "pad"), app("models/fno3d.py", 90, "forward")] + call + MODEL), True,
               bst=cpp.bwd("pad", "ConstantPadNdBackward0"))
        dv.f(h0)
        for l in range(4):
            # SpectralConv3d: rfftn -> 4 corner einsums -> irfftn
            ws = dv.a(96 * MiB + 1024 * 256, cpp.fwd("fft_ws_r2c", [app("models/fno3d.py", 51, "forward")] + call + [app("models/fno3d.py", 96 + 2 * l, "forward")] + call + MODEL), "tmp")
            xft = op(dv, tape, cpl, cpp.fwd("fft_r2c", spec(51, 2 * l)), True, bst=cpp.bwd("fft_c2r", "FftR2CBackward0"))
            dv.f(ws)
            out_ft = dv.a(cpl, cpp.fwd("zeros", spec(54, 2 * l)), "act")
            for c in range(4):
                tape.param("conv%d.weights%d" % (l, c + 1), psz["conv%d.weights%d" % (l, c + 1)], AG)
                e = dv.a(corner, cpp.fwd("bmm", [app("models/fno3d.py", 40, "compl_mul3d"), app("models/fno3d.py", 56 + c, "forward")] + call + [app("models/fno3d.py", 96 + 2 * l, "forward")] + call + MODEL), "tmp")
                dv.f(e)
            ws = dv.a(96 * MiB + 1024 * 256, cpp.fwd("fft_ws_c2r", spec(63, 2 * l)), "tmp")
            x1 = dv.a(act, cpp.fwd("fft_c2r", spec(63, 2 * l)), "act")
            dv.f(ws)
            dv.f(out_ft)
            tape.param("w%d.weight" % l, psz["w%d.weight" % l], AG)
            tape.param("w%d.bias" % l, psz["w%d.bias" % l], AG)
            x2 = dv.a(act, cpp.fwd("conv", [L("torch/nn/modules/conv.py", 720, "_conv_forward"), L("torch/nn/modules/conv.py", 725, "forward")] + call + [app("models/fno3d.py", 97 + 2 * l, "forward")] + call + MODEL), "act")
            s = op(dv, tape, act, cpp.fwd("add", fno(98 + 2 * l)), l < 3, bst=cpp.bwd("conv", "ConvolutionBackward0"))
            dv.f(x1)
            dv.f(x2)
            if l < 3:
                x = op(dv, tape, act, cpp.fwd("gelu", [L("torch/nn/functional.py", 1785, "gelu"), app("models/fno3d.py", 99 + 2 * l, "forward")] + call + MODEL), True,
                       bst=cpp.bwd("gelu", "GeluBackward0"))
            else:
                x = s
        # projection: unpad, permute, fc1 (32 -> 128), gelu, fc2 (128 -> 1)
        xu = op(dv, tape, NU * W * 4, cpp.fwd("copy", fno(108)), True, bst=cpp.bwd("copy", "CloneBackward0"))
        dv.f(x)
        tape.param("fc1.weight", psz["fc1.weight"], AG)
        tape.param("fc1.bias", psz["fc1.bias"], AG)
        h1 = op(dv, tape, NU * 128 * 4, cpp.fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + call + [app("models/fno3d.py", 110, "forward")] + call + MODEL), True,
                bst=cpp.bwd("addmm", "AddmmBackward0"))
        g1 = op(dv, tape, NU * 128 * 4, cpp.fwd("gelu", [L("torch/nn/functional.py", 1785, "gelu"), app("models/fno3d.py", 111, "forward")] + call + MODEL), True,
                bst=cpp.bwd("gelu", "GeluBackward0"))
        tape.param("fc2.weight", psz["fc2.weight"], AG)
        tape.param("fc2.bias", psz["fc2.bias"], AG)
        out = op(dv, tape, NU * 4, cpp.fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + call + [app("models/fno3d.py", 112, "forward")] + call + MODEL), True,
                 bst=cpp.bwd("addmm", "AddmmBackward0"))
        # LpLoss (relative L2 over each sample)
        LS = [app("utils/losses.py", 47, "rel"), app("utils/losses.py", 61, "__call__"), app("train_fno3d.py", 128, "train_epoch")] + TRAIN[1:]
        diff = op(dv, tape, NU * 4, cpp.fwd("sub", LS), True, bst=cpp.bwd("sub", "SubBackward0"))
        nrm = dv.a(B * 4, cpp.fwd("norm", LS), "tmp")
        loss = dv.a(4, cpp.fwd("mul", [app("utils/losses.py", 50, "rel")] + LS[1:]), "tmp")
        dv.wait(rng.randint(2000, 4000))
        # backward
        backward(dv, tape, grads, default_bst=cpp.bwd("addmm", "AddmmBackward0"))
        dv.fl([nrm, loss, xin, yt])
        dv.wait(rng.randint(60000, 90000))
        # Adam (foreach); state made lazily at the first step
        ann.start("Optimizer.step#Adam.step")
        OPT = [L("torch/optim/optimizer.py", 487, "wrapper"), app("train_fno3d.py", 131, "train_epoch")] + TRAIN[1:]
        if not state:
            for k, v in psz.items():
                for ln in (431, 434):
                    state.append(dv.a(v, cpp.fwd("zeros_like", [L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 219, "step"), L("torch/optim/optimizer.py", 79, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adam.py", 563, "_multi_tensor_adam"), L("torch/optim/adam.py", 847, "adam"), L("torch/optim/adam.py", 230, "step"), L("torch/optim/optimizer.py", 79, "_use_grad")] + OPT
        tmp = [dv.a(v, cpp.fwd("foreach", FE), "tmp") for v in psz.values()]
        dv.fl(tmp)
        ann.end("Optimizer.step#Adam.step")
        ann.end("ProfilerStep#%d" % step)
        dv.wait(rng.randint(5000, 9000))
    # dumped after the 8th step (gradients of the last step still set)
    d = write([A], annotations=ann.items)
    return dict(name="m01_fno3d_navierstokes_cpp.pickle", data=d, devs=[A], info=info)


# ============================================================================ m02
def build_m02():
    """open_clip ViT-B/16 contrastive training with GradCache: global batch 2048 per GPU split
    into 16 chunks of 128 (image and text), fp16 autocast, AdamW (lr 5e-4, wd 0.2), 3 steps on one
    A100-40GB; torch 2.0, recorded in the 2023 format (no time_us, no allocator_settings, Python
    stacks only).  Healthy."""
    rng = random.Random(202)
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), time_us=False, seg_frames=False, base=0x7F0B12000000)
    dv = Dev(A)
    L = Lib("/usr/local/lib/python3.10/dist-packages/", "2.0")
    app = fr("/mnt/work/clip-gc/")
    OC = "open_clip/"
    GC = "grad_cache/grad_cache.py"
    BATCH, CH = 2048, 128
    NCH = BATCH // CH
    MAIN = [app("train_gc.py", 233, "main"), app("train_gc.py", 301, "<module>")]
    STEP = [app("train_gc.py", 172, "train_one_epoch")] + MAIN
    # ---- parameters
    psz = {}

    def P(k, n):
        psz[k] = n * 4
    P("visual.conv1", 768 * 3 * 16 * 16); P("visual.class_embedding", 768); P("visual.positional_embedding", 197 * 768)
    P("visual.ln_pre.w", 768); P("visual.ln_pre.b", 768)
    towers = (("visual", 768, 3072, 197), ("text", 512, 2048, 77))
    for tw, Wd, I, _ in towers:
        for l in range(12):
            p = "%s.transformer.resblocks.%d." % (tw, l)
            P(p + "ln_1.w", Wd); P(p + "ln_1.b", Wd)
            P(p + "attn.in_proj_weight", 3 * Wd * Wd); P(p + "attn.in_proj_bias", 3 * Wd)
            P(p + "attn.out_proj.weight", Wd * Wd); P(p + "attn.out_proj.bias", Wd)
            P(p + "ln_2.w", Wd); P(p + "ln_2.b", Wd)
            P(p + "mlp.c_fc.weight", I * Wd); P(p + "mlp.c_fc.bias", I)
            P(p + "mlp.c_proj.weight", Wd * I); P(p + "mlp.c_proj.bias", Wd)
    P("visual.ln_post.w", 768); P("visual.ln_post.b", 768); P("visual.proj", 768 * 512)
    P("token_embedding", 49408 * 512); P("positional_embedding", 77 * 512)
    P("ln_final.w", 512); P("ln_final.b", 512); P("text_projection", 512 * 512); P("logit_scale", 1)
    TO = S(L.convert() + [app("train_gc.py", 201, "main"), MAIN[1]])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)
    info = dict(param_bytes=sum(psz.values()), steps=3, chunks=NCH, batch=BATCH, chunk=CH)
    grads, state = {}, []

    def tower(tw, chunk_i, with_grad, outer):
        """One chunk through one tower under autocast; returns (reps block, tape)."""
        Wd, I, Tk = (768, 3072, 197) if tw == "visual" else (512, 2048, 77)
        ntok = CH * Tk
        tape = Tape() if with_grad else None
        enc = [app(OC + "model.py", 255 if tw == "visual" else 265, "encode_image" if tw == "visual" else "encode_text")]
        top = enc + [app(OC + "model.py", 294, "forward")] + L.call() + outer
        if tw == "visual":
            VT = [app(OC + "transformer.py", 0, "forward")]
            base = [app(OC + "transformer.py", 481, "forward")] + L.call() + top
        else:
            base = top
        casts = []

        def cast(key, n, st):
            b = dv.a(n * 2, st, "autocast_weight")
            casts.append(b)
            if with_grad:
                tape.save(b, 0)
        keep = with_grad
        pending = []

        def o(size, st):
            b = dv.a(size, st, "act" if with_grad else "tmp")
            if with_grad:
                tape.save(b)
            return b

        if tw == "visual":
            STEM = S(L.conv2d() + [app(OC + "transformer.py", 457, "forward")] + L.call() + top)
            cast("conv1", 768 * 3 * 256, STEM)
            if with_grad:
                for n in ("visual.conv1", "visual.class_embedding", "visual.positional_embedding", "visual.ln_pre.w", "visual.ln_pre.b"):
                    tape.param(n, psz[n])
            xi = dv.a(CH * 3 * 224 * 224 * 2, S([app(OC + "transformer.py", 457, "forward")] + L.call() + top), "tmp")
            pe = o(CH * 768 * 196 * 2, STEM)
            x0 = dv.a(ntok * Wd * 4, S([app(OC + "transformer.py", 468, "forward")] + L.call() + top), "tmp")
            x1 = dv.a(ntok * Wd * 4, S([app(OC + "transformer.py", 469, "forward")] + L.call() + top), "tmp")
            dv.f(x0)
            xres = o(ntok * Wd * 4, S([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + [app(OC + "transformer.py", 477, "forward")] + L.call() + top))
            dv.f(x1)
            dv.f(xi)
            if not with_grad:
                dv.f(pe)
        else:
            if with_grad:
                for n in ("token_embedding", "positional_embedding"):
                    tape.param(n, psz[n])
            TE = [app(OC + "model.py", 262, "encode_text"), app(OC + "model.py", 294, "forward")] + L.call() + outer
            x0 = dv.a(ntok * Wd * 4, S([L("torch/nn/functional.py", 2210, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + TE), "tmp")
            xres = o(ntok * Wd * 4, S([app(OC + "model.py", 263, "encode_text")] + TE[1:]))
            dv.f(x0)
        TR = [app(OC + "transformer.py", 363, "forward")] + L.call() + (base if tw == "visual" else [app(OC + "model.py", 264, "encode_text"), app(OC + "model.py", 294, "forward")] + L.call() + outer)
        for l in range(12):
            p = "%s.transformer.resblocks.%d." % (tw, l)
            blk = lambda line: [app(OC + "transformer.py", line, "forward")] + L.call() + TR
            attn = lambda line: [app(OC + "transformer.py", line, "attention"), app(OC + "transformer.py", 263, "forward")] + L.call() + TR
            LN = lambda line: S([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + [app(OC + "transformer.py", 25, "forward")] + L.call() + blk(line))
            MHA = [L("torch/nn/functional.py", 5179, "multi_head_attention_forward"), L("torch/nn/modules/activation.py", 1205, "forward")] + L.call() + attn(250)
            MLP = [L("torch/nn/modules/container.py", 217, "forward")] + L.call() + blk(264)
            if with_grad:
                for n in ("ln_1.w", "ln_1.b", "attn.in_proj_weight", "attn.in_proj_bias"):
                    tape.param(p + n, psz[p + n])
            ln1 = dv.a(ntok * Wd * 4, LN(263), "tmp")
            cast(p + "in", 3 * Wd * Wd, S([L("torch/nn/functional.py", 4823, "_in_projection_packed")] + MHA))
            xin = o(ntok * Wd * 2, S([L("torch/nn/functional.py", 4822, "_in_projection_packed")] + MHA))
            dv.f(ln1)
            qkv = o(ntok * 3 * Wd * 2, S([L("torch/nn/functional.py", 4823, "_in_projection_packed")] + MHA))
            ao = o(ntok * Wd * 2, S([L("torch/nn/functional.py", 5335, "multi_head_attention_forward")] + MHA[1:]))
            lse = o(CH * (Wd // 64) * Tk * 4, S([L("torch/nn/functional.py", 5335, "multi_head_attention_forward")] + MHA[1:]))
            cast(p + "out", Wd * Wd, S([L("torch/nn/functional.py", 5339, "multi_head_attention_forward")] + MHA[1:]))
            if with_grad:
                tape.param(p + "attn.out_proj.weight", psz[p + "attn.out_proj.weight"])
                tape.param(p + "attn.out_proj.bias", psz[p + "attn.out_proj.bias"])
            po = dv.a(ntok * Wd * 2, S([L("torch/nn/functional.py", 5339, "multi_head_attention_forward")] + MHA[1:]), "tmp")
            x2 = o(ntok * Wd * 4, S(blk(263)))
            dv.f(po)
            if not with_grad:
                dv.fl([xin, qkv, ao, lse] + ([xres] if xres else []))
            if with_grad:
                for n in ("ln_2.w", "ln_2.b", "mlp.c_fc.weight", "mlp.c_fc.bias"):
                    tape.param(p + n, psz[p + n])
            ln2 = dv.a(ntok * Wd * 4, LN(264), "tmp")
            cast(p + "fc", I * Wd, S(L.linear() + MLP))
            hin = o(ntok * Wd * 2, S(L.linear() + MLP))
            dv.f(ln2)
            h1 = o(ntok * I * 2, S(L.linear() + MLP))
            h2 = o(ntok * I * 2, S(L.gelu() + MLP))
            if not with_grad:
                dv.fl([hin, h1])
            cast(p + "proj", I * Wd, S(L.linear() + MLP))
            if with_grad:
                tape.param(p + "mlp.c_proj.weight", psz[p + "mlp.c_proj.weight"]); tape.param(p + "mlp.c_proj.bias", psz[p + "mlp.c_proj.bias"])
            h3 = dv.a(ntok * Wd * 2, S(L.linear() + MLP), "tmp")
            if not with_grad:
                dv.f(h2)
            xres = o(ntok * Wd * 4, S(blk(264)))
            dv.f(h3)
            if not with_grad:
                dv.f(x2)
        if with_grad:
            tape.param("visual.proj" if tw == "visual" else "text_projection", psz["visual.proj" if tw == "visual" else "text_projection"])
        PL = top if tw == "visual" else [app(OC + "model.py", 267, "encode_text"), app(OC + "model.py", 294, "forward")] + L.call() + outer
        pooled = o(CH * Wd * 4, S([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + PL))
        reps = dv.a(CH * 512 * 4, S([app(OC + "transformer.py", 491, "forward")] + L.call() + top if tw == "visual" else [app(OC + "model.py", 269, "encode_text"), app(OC + "model.py", 294, "forward")] + L.call() + outer), "reps")
        if with_grad:
            tape.save(reps)
        else:
            dv.fl([pooled, xres])
        if not with_grad:
            dv.fl(casts)          # autocast cache cleared when the context exits
        return reps, tape

    for step in range(3):
        SS = [app(GC, 268, "cache_step"), app(GC, 70, "__call__"), app("train_gc.py", 176, "train_one_epoch")] + MAIN
        batch = [dv.a(BATCH * 3 * 224 * 224 * 2, S([app("train_gc.py", 168, "train_one_epoch")] + MAIN), "input"),
                 dv.a(BATCH * 77 * 8, S([app("train_gc.py", 169, "train_one_epoch")] + MAIN), "input")]
        # 1. forward without grad, chunk by chunk, keeping only the representations
        NG = [app(GC, 168, "forward_no_grad")] + SS
        MC = [app(GC, 144, "model_call"), app(GC, 169, "forward_no_grad")] + SS
        reps = {"visual": [], "text": []}
        for tw in ("visual", "text"):
            for c in range(NCH):
                r, _ = tower(tw, c, False, MC)
                reps[tw].append(r)
        # 2. loss on the full batch of representations, grads of the reps are the cache
        BC = [app(GC, 189, "build_cache")] + SS
        cat = {tw: dv.a(BATCH * 512 * 4, S([app(GC, 185, "build_cache")] + SS), "reps") for tw in reps}
        for tw in reps:
            dv.fl(reps[tw])
        LF = [app(OC + "loss.py", 118, "forward")] + L.call() + [app(GC, 187, "compute_loss"), app(GC, 188, "build_cache")] + SS
        li = dv.a(BATCH * BATCH * 4, S([app(OC + "loss.py", 96, "get_logits"), app(OC + "loss.py", 112, "forward")] + L.call() + LF[2:]), "tmp")
        lt = dv.a(BATCH * BATCH * 4, S([app(OC + "loss.py", 97, "get_logits"), app(OC + "loss.py", 112, "forward")] + L.call() + LF[2:]), "tmp")
        lab = dv.a(BATCH * 8, S([app(OC + "loss.py", 84, "get_ground_truth"), app(OC + "loss.py", 114, "forward")] + L.call() + LF[2:]), "tmp")
        ls1 = dv.a(BATCH * BATCH * 4, S([L("torch/nn/functional.py", 3029, "cross_entropy"), app(OC + "loss.py", 118, "forward")] + L.call() + LF[2:]), "tmp")
        ls2 = dv.a(BATCH * BATCH * 4, S([L("torch/nn/functional.py", 3029, "cross_entropy"), app(OC + "loss.py", 119, "forward")] + L.call() + LF[2:]), "tmp")
        loss = dv.a(4, S([app(OC + "loss.py", 120, "forward")] + L.call() + LF[2:]), "tmp")
        g1 = dv.a(BATCH * BATCH * 4, NOSTACK, "tmp")
        dv.fl([ls1, ls2])
        g2 = dv.a(BATCH * BATCH * 4, NOSTACK, "tmp")
        gcache = {tw: dv.a(BATCH * 512 * 4, NOSTACK, "grad_cache") for tw in reps}
        dv.fl([g1, g2, li, lt, lab])
        if "logit_scale" not in grads:
            grads["logit_scale"] = dv.a(4, NOSTACK, "grad")
        # 3. chunk by chunk: forward with grad and backward with the cached gradient
        FB = [app(GC, 246, "forward_backward")] + SS
        for tw in ("visual", "text"):
            for c in range(NCH):
                r, tape = tower(tw, c, True, [app(GC, 144, "model_call"), app(GC, 237, "forward_backward")] + SS)
                sur = dv.a(4, S([app(GC, 243, "forward_backward")] + SS), "tmp")
                dv.wait(0)
                backward(dv, tape, grads)
                dv.f(sur, NOSTACK)
        dv.fl(list(cat.values()) + list(gcache.values()))
        dv.fl(batch)
        # 4. AdamW (foreach); state made at the first step
        OPT = [L("torch/optim/optimizer.py", 280, "wrapper"), app("train_gc.py", 179, "train_one_epoch")] + MAIN
        if not state:
            for k, v in psz.items():
                state.append(dv.a(v, S([L("torch/optim/adamw.py", 120, "_init_group"), L("torch/optim/adamw.py", 171, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
                state.append(dv.a(v, S([L("torch/optim/adamw.py", 124, "_init_group"), L("torch/optim/adamw.py", 171, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adamw.py", 522, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 312, "adamw"), L("torch/optim/adamw.py", 199, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in psz.values()]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 246, "zero_grad"), app("train_gc.py", 180, "train_one_epoch")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
    d = write([A], settings=False)
    return dict(name="m02_clip_vitb16_gradcache_2023.pickle", data=d, devs=[A], info=info)


# ============================================================================ m03
def build_m03():
    """torch_npu serving of a DeepSeek-V2-Lite-style MoE (15.7B, 27 layers, MLA attention, 64 routed
    experts top-6 + 2 shared, bf16) on card 6 of an Atlas 800T A2 (64 GB): weights loaded before
    recording, a static compressed-KV cache (32 x 8192 x 27 x 576, bf16) made when the engine
    starts, then 6 request batches (prefill of 2.3k-6.1k tokens, 8 decode steps each) with
    npu_moe_init_routing / grouped matmul token dispatch.  Healthy."""
    rng = random.Random(303)
    STREAM = 2317651168
    A = sim.Allocator(device=6, stream=STREAM, npu=True, capacity=int(60.96 * GB), time_us=False,
                      base=0x12C4C0000000)
    dv = Dev(A)
    HOME = "/home/张伟/"
    L = Lib(HOME + "miniconda3/envs/npu_infer/lib/python3.10/site-packages/", "2.1")
    app = fr(HOME + "推理服务/moe_serve/")
    MD = HOME + ".cache/huggingface/modules/transformers_modules/DeepSeek-V2-Lite-Chat/modeling_deepseek.py"
    mdl = lambda line, name: (MD, line, name)
    H, NL, NE, TOPK, IE, ISH = 2048, 27, 64, 6, 1408, 2816
    # ---- weights (before recording)
    LOAD = S([L("torch_npu/utils/_module.py", 76, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch/nn/modules/module.py", 797, "_apply"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch_npu/utils/_module.py", 78, "to"), app("引擎/加载.py", 88, "加载权重"), app("服务.py", 61, "启动引擎"), app("服务.py", 233, "<module>")])
    wsz = [102400 * H * 2, 102400 * H * 2, H * 2]
    for l in range(NL):
        wsz += [H * 3072 * 2, H * 576 * 2, 512 * 2, 512 * 4096 * 2, H * H * 2, H * 2, H * 2]
        if l == 0:
            wsz += [H * 10944 * 2] * 3
        else:
            wsz += [H * NE * 4, NE * H * 2 * IE * 2, NE * IE * H * 2, H * ISH * 2 * 2, ISH * H * 2]
    weights = [dv.a(s, LOAD, "param") for s in wsz]
    start_recording(A)
    info = dict(param_bytes=sum(wsz))
    SRV = [app("服务.py", 142, "服务主循环"), app("服务.py", 236, "<module>")]
    KV = S([app("引擎/缓存.py", 37, "__init__"), app("引擎/引擎.py", 52, "__init__"), app("服务.py", 71, "启动引擎"), app("服务.py", 234, "<module>")])
    kv = [dv.a(32 * 8192 * 576 * 2, KV, "kv_cache") for _ in range(NL)]
    info["kv_bytes"] = sum(b.req for b in kv)
    call = L.call()

    def forward(T, nseq, prefill, outer):
        """One forward of T tokens (prefill: all prompt tokens; decode: one token per sequence)."""
        MF = [mdl(1577, "forward")] + call + [mdl(1780, "forward")] + call + outer
        LAY = lambda l: [mdl(1244, "forward")] + call + [mdl(1582, "forward")] + call + MF[1:]
        ids = dv.a(T * 8, S([app("引擎/引擎.py", 118, "准备输入")] + outer), "tmp")
        pos = dv.a(T * 8, S([app("引擎/引擎.py", 121, "准备输入")] + outer), "tmp")
        h = dv.a(T * H * 2, S([L("torch/nn/functional.py", 2233, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + [mdl(1561, "forward")] + call + MF[1:]), "act")
        mask = dv.a(2048 * 2048, S([app("引擎/注意力.py", 29, "生成掩码")] + outer), "tmp") if prefill else None
        for l in range(NL):
            LY = LAY(l)
            ATT = [mdl(820 if prefill else 842, "forward")] + call + [mdl(1229, "forward")] + call + LY[1:]
            n1 = dv.a(T * H * 2, S([L("torch_npu/contrib/function/npu_rms_norm.py", 0, "npu_rms_norm")] if False else [app("模型/融合算子.py", 22, "rms归一化"), mdl(104, "forward")] + call + [mdl(1226, "forward")] + call + LY[1:]), "tmp")
            q = dv.a(T * 16 * 192 * 2, S(L.linear() + ATT), "tmp")
            ckv = dv.a(T * 576 * 2, S(L.linear() + [mdl(824 if prefill else 846, "forward")] + ATT[1:]), "tmp")
            if prefill:
                kvx = dv.a(T * 16 * 256 * 2, S(L.linear() + [mdl(831, "forward")] + ATT[1:]), "tmp")
                ks = dv.a(T * 16 * 192 * 2, S([mdl(838, "forward")] + ATT[1:]), "tmp")
                ao = dv.a(T * 16 * 128 * 2, S([app("模型/融合算子.py", 57, "闪存注意力"), mdl(851, "forward")] + ATT[1:]), "tmp")
                sm = dv.a(16 * T * 8 * 4, S([app("模型/融合算子.py", 57, "闪存注意力"), mdl(851, "forward")] + ATT[1:]), "tmp")
                dv.fl([kvx, ks, sm])
            else:
                qa = dv.a(T * 16 * 512 * 2, S([mdl(858, "forward")] + ATT[1:]), "tmp")
                sc = dv.a(nseq * 16 * ctx_len[0] * 4, S([app("模型/融合算子.py", 81, "增量注意力"), mdl(866, "forward")] + ATT[1:]), "tmp")
                ao = dv.a(T * 16 * 128 * 2, S([app("模型/融合算子.py", 83, "增量注意力"), mdl(866, "forward")] + ATT[1:]), "tmp")
                dv.fl([qa, sc])
            dv.fl([q, ckv, n1])
            o = dv.a(T * H * 2, S(L.linear() + [mdl(874, "forward")] + ATT[1:]), "tmp")
            dv.f(ao)
            h2 = dv.a(T * H * 2, S([mdl(1230, "forward")] + call + LY[1:]), "act")
            dv.fl([o])
            n2 = dv.a(T * H * 2, S([app("模型/融合算子.py", 22, "rms归一化"), mdl(104, "forward")] + call + [mdl(1236, "forward")] + call + LY[1:]), "tmp")
            if l == 0:
                MLP = [mdl(389, "forward")] + call + [mdl(1237, "forward")] + call + LY[1:]
                g = dv.a(T * 10944 * 2, S(L.linear() + MLP), "tmp")
                u = dv.a(T * 10944 * 2, S(L.linear() + MLP), "tmp")
                a = dv.a(T * 10944 * 2, S([mdl(389, "forward")] + MLP[1:]), "tmp")
                dv.fl([g, u])
                d = dv.a(T * H * 2, S(L.linear() + MLP), "tmp")
                dv.f(a)
            else:
                MOE = [mdl(541, "forward")] + call + [mdl(1237, "forward")] + call + LY[1:]
                R = [app("模型/专家路由.py", 0, "")]
                RT = lambda line, nm: S([app("模型/专家路由.py", line, nm), mdl(531, "forward")] + call + [mdl(541, "forward")] + MOE[1:])
                logits = dv.a(T * NE * 4, RT(41, "门控打分"), "tmp")
                sc = dv.a(T * NE * 4, RT(43, "门控打分"), "tmp")
                tw = dv.a(T * TOPK * 4, RT(45, "门控打分"), "tmp")
                ti = dv.a(T * TOPK * 8, RT(45, "门控打分"), "tmp")
                dv.fl([logits, sc])
                DS = lambda line, nm: S([app("模型/专家分发.py", line, nm), mdl(547, "moe_infer_npu"), mdl(543, "forward")] + MOE[1:])
                ex = dv.a(T * TOPK * H * 2, DS(64, "令牌重排"), "tmp")
                rix = dv.a(T * TOPK * 4, DS(64, "令牌重排"), "tmp")
                eix = dv.a(T * TOPK * 4, DS(64, "令牌重排"), "tmp")
                cnt = dv.a(NE * 8, DS(66, "令牌重排"), "tmp")
                gu = dv.a(T * TOPK * 2 * IE * 2, DS(92, "分组矩阵乘"), "tmp")
                dv.f(ex)
                act = dv.a(T * TOPK * IE * 2, DS(94, "分组矩阵乘"), "tmp")
                dv.f(gu)
                dn = dv.a(T * TOPK * H * 2, DS(96, "分组矩阵乘"), "tmp")
                dv.f(act)
                d = dv.a(T * H * 2, DS(118, "令牌还原"), "tmp")
                dv.fl([dn, rix, eix, cnt, tw, ti])
                SH = [mdl(389, "forward")] + call + [mdl(552, "forward")] + MOE[1:]
                sg = dv.a(T * ISH * 2 * 2, S(L.linear() + SH), "tmp")
                sa = dv.a(T * ISH * 2, S([mdl(389, "forward")] + SH[1:]), "tmp")
                dv.f(sg)
                so = dv.a(T * H * 2, S(L.linear() + SH), "tmp")
                dv.f(sa)
                s2 = dv.a(T * H * 2, S([mdl(552, "forward")] + MOE[1:]), "tmp")
                dv.fl([so, d])
                d = s2
            dv.f(n2)
            h3 = dv.a(T * H * 2, S([mdl(1238, "forward")] + call + LY[1:]), "act")
            dv.fl([d, h2, h])
            h = h3
        nf = dv.a(nseq * H * 2, S([app("模型/融合算子.py", 22, "rms归一化"), mdl(104, "forward")] + call + [mdl(1613, "forward")] + call + MF[1:]), "tmp")
        lg = dv.a(nseq * 102400 * 4, S([mdl(1786, "forward")] + call + outer), "tmp")
        nxt = dv.a(nseq * 8, S([app("引擎/采样.py", 31, "采样")] + outer), "tmp")
        dv.fl([h, nf, lg, ids, pos] + ([mask] if mask else []))
        return nxt

    ctx_len = [0]
    prompts = []
    for bi in range(6):
        nseq = rng.choice([8, 12, 16, 24])
        lens = [rng.randint(96, 420) for _ in range(nseq)]
        T = sum(lens)
        prompts.append(T)
        OUT = [app("服务.py", 118, "预填充"), app("服务.py", 151, "处理请求批次")] + SRV
        nxt = forward(T, nseq, True, OUT)
        toks = [nxt]
        ctx_len[0] = max(lens)
        for k in range(8):
            ctx_len[0] += 1
            OUT = [app("服务.py", 127, "解码一步"), app("服务.py", 156, "处理请求批次")] + SRV
            toks.append(forward(nseq, nseq, False, OUT))
        dv.fl(toks)
    info["prefill_tokens"] = prompts
    d = write([A], kind="npu", n_dev_lists=8)
    return dict(name="m03_npu_dsv2lite_moe_serve_card6.pkl", data=d, devs=[A], info=info)


# ============================================================================ m04
def build_m04():
    """EnCodec-24kHz-style codec training (SEANet encoder/decoder, 32-codebook RVQ, LSTM; 14.9M
    parameters) with a 5-scale MS-STFT discriminator, batch 32 x 1 s, fp32, two Adam optimizers,
    on one A100-40GB; torch 2.3, _record_memory_history(max_entries=200000), dumped after step 400:
    the ring keeps the last ~68 steps.  Every 10 steps the trainer appends a detached clone of the
    generator's state_dict (parameters and RVQ codebook buffers) to a list for 'last-k checkpoint
    averaging' and never trims it.  Problem: leak (one state_dict copy every 10 steps)."""
    rng = random.Random(404)
    clock = sim.Clock(1772150400000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, extra_keys=False, base=0x7F6A80000000)
    dv = Dev(A)
    L = Lib("/home/kim/.venv/lib/python3.11/site-packages/", "2.3")
    app = fr("/home/kim/codec/")
    B, NS = 32, 24000
    MAIN = [app("train.py", 288, "fit"), app("train.py", 331, "main"), app("train.py", 340, "<module>")]
    ST = lambda line: [app("train.py", line, "train_step")] + MAIN
    # generator parameters: 80 tensors, 14.9M; discriminator 5 x 11 tensors
    gsz = []
    chans = [32, 64, 128, 256, 512]
    for i, c in enumerate(chans):
        cin = 1 if i == 0 else chans[i - 1]
        gsz += [c * cin * 7 * 4 if i == 0 else c * cin * 2 * (2 * [2, 4, 5, 8][i - 1]) * 4, c * 4, c * 4]      # conv (weight_v, g, bias)
        if i < 4:
            gsz += [c // 2 * c * 3 * 4, c // 2 * 4, c // 2 * 4, c * c // 2 * 4, c * 4, c * 4]            # residual unit
    gsz += [4 * 512 * 512 * 4 * 2 + 4 * 512 * 8] * 2                                                 # LSTM layers
    nbuf0 = len(gsz)
    gsz += [32 * 1024 * 128 * 4, 32 * 1024 * 4, 32 * 1024 * 128 * 4]                                # RVQ codebooks, cluster sizes, embed_avg (buffers)
    BUF = {nbuf0, nbuf0 + 1, nbuf0 + 2}
    for i, c in enumerate(reversed(chans)):
        cout = 1 if i == 4 else list(reversed(chans))[i + 1]
        gsz += [c * cout * 2 * (2 * [8, 5, 4, 2, 1][i]) * 4 if i < 4 else cout * c * 7 * 4, cout * 4, cout * 4]
        if i < 4:
            gsz += [cout // 2 * cout * 3 * 4, cout // 2 * 4, cout // 2 * 4, cout * cout // 2 * 4, cout * 4, cout * 4]
    while sum(gsz) < 59400000:
        gsz.append(512 * 512 * 4 if 59400000 - sum(gsz) > 512 * 512 * 4 else 59400000 - sum(gsz))
    dsz = []
    for s in range(5):
        dsz += [32 * 2 * 3 * 9 * 4, 32 * 4] + [32 * 32 * 3 * 9 * 4, 32 * 4] * 3 + [32 * 32 * 3 * 3 * 4, 32 * 4, 32 * 3 * 3 * 4, 4, 32 * 4]
    TO = S(L.convert() + [app("train.py", 301, "main"), app("train.py", 340, "<module>")])
    gp = [dv.a(s, TO, "param") for s in gsz]
    dp = [dv.a(s, TO, "param") for s in dsz]
    info = dict(param_bytes=sum(gsz) + sum(dsz), gen_param_bytes=sum(gsz), disc_param_bytes=sum(dsz), steps=400, every=10, gen_buffer_bytes=sum(gsz[k] for k in BUF))
    gg, dg, gstate, dstate = {}, {}, [], []
    snaps = []
    call = L.call()
    GEN = lambda f, line: [app("encodec/modules/" + f, line, "forward")] + call
    GTOP = [app("encodec/model.py", 143, "forward")] + call + ST(97)

    def conv(line_file, size, saved, tape, grad_bst=None):
        return op(dv, tape, size, S(L.conv2d()[:0] + [L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + line_file), saved)

    def gen_forward(tape):
        ENC = GEN("seanet.py", 152)[:1] + call + [app("encodec/model.py", 121, "encode")] + GTOP
        acts = []
        x = dv.a(B * NS * 4, S([app("data/audio.py", 77, "to_device")] + ST(94)), "input")
        for k in range(len(gp)):
            if k not in BUF:
                tape.param(("g", k), gsz[k])
        T = NS
        for i, c in enumerate(chans):
            blk = [app("encodec/modules/seanet.py", 152, "forward")] + call + [L("torch/nn/modules/container.py", 217, "forward")] + call + ENC
            op(dv, tape, B * c * T * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + [app("encodec/modules/conv.py", 201, "forward")] + call + blk), True)
            if i < 4:
                op(dv, tape, B * c * T * 4, S([L("torch/nn/modules/activation.py", 796, "forward")] + call + [app("encodec/modules/seanet.py", 59, "forward")] + call + blk), True)
                op(dv, tape, B * c // 2 * T * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + [app("encodec/modules/conv.py", 201, "forward")] + call + [app("encodec/modules/seanet.py", 59, "forward")] + call + blk), True)
                op(dv, tape, B * c // 2 * T * 4, S([L("torch/nn/modules/activation.py", 796, "forward")] + call + [app("encodec/modules/seanet.py", 59, "forward")] + call + blk), True)
                op(dv, tape, B * c * T * 4, S([app("encodec/modules/seanet.py", 60, "forward")] + call + blk), True)
                T //= [2, 4, 5, 8][i]
        # LSTM (cuDNN): workspace + reserve
        LS = [L("torch/nn/modules/rnn.py", 878, "forward")] + call + [app("encodec/modules/lstm.py", 25, "forward")] + call + ENC
        op(dv, tape, B * T * 512 * 4 * 2 * 10, S(LS), True)
        op(dv, tape, B * T * 512 * 4, S(LS), True)
        # residual vector quantizer: 32 codebooks
        Q = [app("encodec/quantization/core_vq.py", 355, "forward"), app("encodec/quantization/vq.py", 102, "forward")] + call + [app("encodec/model.py", 124, "encode")] + GTOP
        for q in range(32):
            d = dv.a(B * T * 1024 * 4, S([app("encodec/quantization/core_vq.py", 163, "quantize"), app("encodec/quantization/core_vq.py", 190, "encode"), app("encodec/quantization/core_vq.py", 218, "forward")] + call + [app("encodec/quantization/core_vq.py", 301, "forward")] + call + Q), "tmp")
            op(dv, tape, B * T * 8, S([app("encodec/quantization/core_vq.py", 164, "quantize"), app("encodec/quantization/core_vq.py", 190, "encode"), app("encodec/quantization/core_vq.py", 218, "forward")] + call + [app("encodec/quantization/core_vq.py", 301, "forward")] + call + Q), True)
            dv.f(d)
            op(dv, tape, B * T * 128 * 4, S([app("encodec/quantization/core_vq.py", 304, "forward")] + call + Q), True)
        DEC = [app("encodec/modules/seanet.py", 290, "forward")] + call + [app("encodec/model.py", 133, "decode")] + GTOP
        for i, c in enumerate(reversed(chans)):
            blk = [L("torch/nn/modules/container.py", 217, "forward")] + call + DEC
            if i > 0:
                T *= [8, 5, 4, 2][i - 1]
            op(dv, tape, B * c * T * 4, S([L("torch/nn/modules/conv.py", 948, "forward")] + call + [app("encodec/modules/conv.py", 254, "forward")] + call + blk), True)
            op(dv, tape, B * c * T * 4, S([L("torch/nn/modules/activation.py", 796, "forward")] + call + blk), True)
            if i < 4:
                op(dv, tape, B * c // 2 * T * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + [app("encodec/modules/conv.py", 201, "forward")] + call + [app("encodec/modules/seanet.py", 59, "forward")] + call + blk), True)
                op(dv, tape, B * c * T * 4, S([app("encodec/modules/seanet.py", 60, "forward")] + call + blk), True)
        y = op(dv, tape, B * NS * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + [app("encodec/modules/conv.py", 201, "forward")] + call + DEC), True)
        return x, y

    def disc_forward(tape, which, st_line, params_grad):
        MS = [app("encodec/msstftd.py", 127, "forward")] + call + ST(st_line)
        outs = []
        for s, nfft in enumerate((2048, 1024, 512, 256, 128)):
            hop = nfft // 4
            F = nfft // 2 + 1
            fr_ = NS // hop + 1
            D = [app("encodec/msstftd.py", 95, "forward")] + call + MS
            if params_grad:
                for k in range(11):
                    tape.param(("d", s * 11 + k), dsz[s * 11 + k])
            spec = op(dv, tape, B * 2 * F * fr_ * 4, S([L("torchaudio/transforms/_transforms.py", 110, "forward")] + call + [app("encodec/msstftd.py", 87, "forward")] + call + MS), True)
            f = fr_
            for k, st in enumerate((1, 2, 2, 2, 1)):
                f2 = F // (2 ** min(k, 3))
                op(dv, tape, B * 32 * f * f2 * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + [app("encodec/modules/conv.py", 136, "forward")] + call + D), True)
                op(dv, tape, B * 32 * f * f2 * 4, S([L("torch/nn/modules/activation.py", 796, "forward")] + call + D), True)
            outs.append(op(dv, tape, B * f * f2 * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + [app("encodec/modules/conv.py", 136, "forward")] + call + [app("encodec/msstftd.py", 99, "forward")] + call + MS), True))
        return outs

    def adam(params, sizes, grads, state, line, name):
        OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), app("train.py", line, "train_step")] + MAIN
        if not state:
            for v in sizes:
                for ln in (168, 170):
                    state.append(dv.a(v, S([L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 157, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adam.py", 535, "_multi_tensor_adam"), L("torch/optim/adam.py", 326, "adam"), L("torch/optim/adam.py", 168, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in sizes]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 826, "zero_grad"), app("train.py", line + 1, "train_step")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)

    for step in range(400):
        tape = Tape()
        x, y = gen_forward(tape)
        # discriminator update on (real, fake.detach())
        dt = Tape()
        fake_det = dv.a(B * NS * 4, S([app("train.py", 101, "train_step")] + MAIN), "tmp")
        o1 = disc_forward(dt, "real", 102, True)
        o2 = disc_forward(dt, "fake", 103, False)
        dl = dv.a(4, S([app("encodec/losses.py", 44, "hinge_d"), app("train.py", 104, "train_step")] + MAIN), "tmp")
        backward(dv, dt, dg)
        dv.f(dl, NOSTACK)
        dv.f(fake_det)
        adam(dp, dsz, dg, dstate, 106, "disc")
        # generator update: adversarial + feature matching + L1 + multi-scale mel
        gt = Tape()
        o3 = disc_forward(gt, "fake", 110, True)
        mel = []
        for w in (64, 128, 256, 512, 1024, 2048):
            ML = [L("torchaudio/transforms/_transforms.py", 110, "forward")] + call + [app("encodec/losses.py", 71, "mel_loss"), app("train.py", 112, "train_step")] + MAIN
            mel.append(op(dv, tape, B * 64 * (NS // (w // 4) + 1) * 4, S(ML), True))
            mel.append(op(dv, tape, B * 64 * (NS // (w // 4) + 1) * 4, S(ML), True))
        gl = dv.a(4, S([app("train.py", 115, "train_step")] + MAIN), "tmp")
        dv.wait(rng.randint(20000, 30000))
        backward(dv, gt, dg)            # through the discriminator: grads of D params are dropped by zero_grad
        backward(dv, tape, gg)
        dv.f(gl, NOSTACK)
        adam(gp, [v for k, v in enumerate(gsz) if k not in BUF], gg, gstate, 118, "gen")
        for k in list(dg):
            dv.f(dg.pop(k), S([L("torch/optim/optimizer.py", 826, "zero_grad"), app("train.py", 100, "train_step")] + MAIN))
        dv.f(x)
        dv.wait(rng.randint(180000, 240000))
        if step % 10 == 9:
            SN = [app("train.py", 126, "<dictcomp>"), app("train.py", 126, "train_step")] + MAIN
            snaps.append([dv.a(v, S(SN), "snapshot") for v in gsz])
    info["snapshots"] = len(snaps)
    info["snapshot_bytes"] = sum(gsz)
    info["max_entries"] = 200000
    d = write([A], max_entries=200000)
    return dict(name="m04_encodec24k_msstftd_ring.pickle", data=d, devs=[A], info=info)


# ============================================================================ m05
def build_m05():
    """A retrieval-augmented QA service on two L40S (48 GB): cuda:0 runs a Llama-3-8B-Instruct
    generator (bf16, HF generate with a DynamicCache), cuda:1 the retriever: a bge-base query
    encoder (fp16) and the MS MARCO passage index kept on the GPU as one fp16 tensor
    (8,841,823 x 768, 13.6 GB).  The search code does q.float() @ index.float().T, so every query
    batch makes a 27.2 GB fp32 copy of the index; interactive batches of 8-32 queries fit, a
    512-query batch from an offline evaluation client asks for an 18.1 GB score matrix and fails.
    Dumped by the service's exception handler; torch 2.7.  Problem: OOM on cuda:1."""
    rng = random.Random(505)
    clock = sim.Clock(1773993600000000, rng, (2, 9))
    A0 = sim.Allocator(device=0, capacity=int(44.42 * GB), other_usage=int(0.52 * GB), clock=clock, extra_keys=True, base=0x7F2C00000000)
    A1 = sim.Allocator(device=1, capacity=int(44.42 * GB), other_usage=int(0.52 * GB), clock=clock, extra_keys=True, base=0x7EF000000000)
    d0, d1 = Dev(A0), Dev(A1)
    L = Lib("/srv/rag/.venv/lib/python3.11/site-packages/", "2.7")
    app = fr("/srv/rag/app/")
    call = L.call()
    NDOC, DIM = 8841823, 768
    # ---- before recording: generator weights on cuda:0, encoder + index on cuda:1
    TO0 = S(L.convert() + [L("transformers/modeling_utils.py", 2905, "to"), app("generator.py", 41, "__init__"), app("server.py", 58, "lifespan")])
    H, I, V, NL = 4096, 14336, 128256, 32
    w0 = [V * H * 2, V * H * 2, H * 2]
    for l in range(NL):
        w0 += [H * H * 2, 1024 * H * 2, 1024 * H * 2, H * H * 2, I * H * 2, I * H * 2, H * I * 2, H * 2, H * 2]
    gw = [d0.a(s, TO0, "param") for s in w0]
    TO1 = S(L.convert() + [app("retriever.py", 38, "__init__"), app("server.py", 61, "lifespan")])
    w1 = [30522 * 768 * 2, 512 * 768 * 2, 2 * 768 * 2, 768 * 2 * 2]
    for l in range(12):
        w1 += [768 * 768 * 2, 768 * 2] * 4 + [3072 * 768 * 2, 3072 * 2, 768 * 3072 * 2, 768 * 2, 768 * 2 * 2, 768 * 2 * 2]
    ew = [d1.a(s, TO1, "param") for s in w1]
    IDX = S([L("torch/serialization.py", 1090, "load") if False else app("index/gpu_index.py", 27, "load"), app("retriever.py", 44, "__init__"), app("server.py", 61, "lifespan")])
    index = d1.a(NDOC * DIM * 2, IDX, "index")
    start_recording(A0)
    start_recording(A1)
    info = dict(gen_param_bytes=sum(w0), enc_param_bytes=sum(w1), index_bytes=index.req)
    REQ = lambda line, name: [app("server.py", line, name), L("starlette/routing.py", 74, "app"), L("fastapi/routing.py", 301, "app")]

    def encode(Q, outer):
        E = [L("transformers/models/bert/modeling_bert.py", 1141, "forward")] + call + [app("retriever.py", 71, "encode")] + outer
        tok = [d1.a(Q * 64 * 8, S([app("retriever.py", 68, "encode")] + outer), "tmp") for _ in range(2)]
        ntok = Q * 64
        h = d1.a(ntok * 768 * 2, S([L("transformers/models/bert/modeling_bert.py", 238, "forward")] + call + E), "tmp")
        for l in range(12):
            LY = [L("transformers/models/bert/modeling_bert.py", 585, "forward")] + call + [L("transformers/models/bert/modeling_bert.py", 675, "forward")] + call + E
            t = [d1.a(ntok * 768 * 2 * 3, S(L.linear() + LY), "tmp"),
                 d1.a(ntok * 768 * 2, S([L("transformers/models/bert/modeling_bert.py", 437, "forward")] + call + LY), "tmp")]
            f1 = d1.a(ntok * 3072 * 2, S(L.linear() + LY), "tmp")
            f2 = d1.a(ntok * 768 * 2, S(L.linear() + LY), "tmp")
            d1.fl(t + [f1])
            h2 = d1.a(ntok * 768 * 2, S(L.layer_norm() + LY), "tmp")
            d1.fl([f2, h])
            h = h2
        q = d1.a(Q * 768 * 2, S([app("retriever.py", 74, "encode")] + outer), "tmp")
        d1.fl([h] + tok)
        return q

    def search(Q, outer):
        SR = [app("index/gpu_index.py", 52, "search"), app("retriever.py", 88, "retrieve")] + outer
        q = encode(Q, [app("retriever.py", 86, "retrieve")] + outer)
        qf = d1.a(Q * 768 * 4, S(SR), "tmp")
        idf = d1.a(NDOC * DIM * 4, S(SR), "search_tmp")
        try:
            sc = d1.a(Q * NDOC * 4, S(SR), "search_tmp")
        except sim.OOMError as e:
            d1.fl([idf, qf, q], S(SR))
            raise
        d1.fl([idf])
        tv = d1.a(Q * 100 * 4, S([app("index/gpu_index.py", 53, "search")] + SR[1:]), "tmp")
        ti = d1.a(Q * 100 * 8, S([app("index/gpu_index.py", 53, "search")] + SR[1:]), "tmp")
        d1.fl([sc, qf, q, tv, ti])
        clock.wait(rng.randint(3000, 9000))

    def generate(T, ntoks, outer):
        GN = [L("transformers/generation/utils.py", 2983, "_sample"), L("transformers/generation/utils.py", 2024, "generate"),
              L("torch/utils/_contextlib.py", 116, "decorate_context"), app("generator.py", 77, "answer")] + outer
        MD = "transformers/models/llama/modeling_llama.py"
        kv = [None] * (2 * NL)
        seq = T
        for stp in range(ntoks + 1):
            n = T if stp == 0 else 1
            M = [L(MD, 1189, "forward")] + call + GN
            BASE = [L(MD, 1001, "forward")] + call + M
            ids = d0.a(n * 8, S([L("transformers/generation/utils.py", 2975, "_sample")] + GN[1:]), "tmp")
            h = d0.a(n * H * 2, S(L.embedding() + [L(MD, 945, "forward")] + call + M), "tmp")
            cs = [d0.a(n * 128 * 4, S([L(MD, 153, "forward")] + call + [L(MD, 966, "forward")] + call + M), "tmp") for _ in range(2)]
            for l in range(NL):
                LY = [L(MD, 734, "forward")] + call + BASE
                AT = [L(MD, 648, "forward")] + call + LY
                n1 = d0.a(n * H * 2, S([L(MD, 73, "forward")] + call + [L(MD, 717, "forward")] + call + BASE), "tmp")
                qkv = [d0.a(n * H * 2, S(L.linear() + AT), "tmp"), d0.a(n * 1024 * 2, S(L.linear() + AT), "tmp"), d0.a(n * 1024 * 2, S(L.linear() + AT), "tmp")]
                rq = d0.a(n * H * 2, S([L(MD, 221, "apply_rotary_pos_emb"), L(MD, 656, "forward")] + call + LY), "tmp")
                rk = d0.a(n * 1024 * 2, S([L(MD, 222, "apply_rotary_pos_emb"), L(MD, 656, "forward")] + call + LY), "tmp")
                CU = [L("transformers/cache_utils.py", 449, "update"), L(MD, 661, "forward")] + call + LY
                for j, src in ((0, rk), (1, qkv[2])):
                    nb = d0.a(seq * 1024 * 2, S(CU), "kv")
                    if kv[2 * l + j] is not None:
                        d0.f(kv[2 * l + j])
                    kv[2 * l + j] = nb
                d0.fl(qkv + [rk, n1])
                ao = d0.a(n * H * 2, S([L("torch/nn/functional.py", 5560, "scaled_dot_product_attention") if False else L(MD, 674, "forward")] + call + LY), "tmp")
                d0.f(rq)
                o = d0.a(n * H * 2, S(L.linear() + AT), "tmp")
                d0.f(ao)
                h2 = d0.a(n * H * 2, S([L(MD, 750, "forward")] + call + BASE), "tmp")
                d0.fl([o, h])
                MLP = [L(MD, 312, "forward")] + call + [L(MD, 753, "forward")] + call + BASE
                n2 = d0.a(n * H * 2, S([L(MD, 73, "forward")] + call + [L(MD, 752, "forward")] + call + BASE), "tmp")
                g = d0.a(n * I * 2, S(L.linear() + MLP), "tmp")
                u = d0.a(n * I * 2, S(L.linear() + MLP), "tmp")
                a = d0.a(n * I * 2, S([L(MD, 312, "forward")] + MLP[1:]), "tmp")
                d0.fl([g, u])
                dn = d0.a(n * H * 2, S(L.linear() + MLP), "tmp")
                d0.fl([a, n2])
                h = d0.a(n * H * 2, S([L(MD, 754, "forward")] + call + BASE), "tmp")
                d0.fl([dn, h2])
            lg = d0.a(V * 2, S(L.linear() + [L(MD, 1213, "forward")] + call + GN), "tmp")
            lf = d0.a(V * 4, S([L(MD, 1214, "forward")] + call + GN), "tmp")
            pr = d0.a(V * 4, S([L("transformers/generation/utils.py", 3013, "_sample")] + GN[1:]), "tmp")
            d0.fl([h, ids, lg] + cs)
            d0.fl([lf, pr])
            seq += 1
            clock.wait(rng.randint(18000, 26000))
        d0.fl([b for b in kv if b is not None])

    served = []
    try:
        for r in range(7):
            Q = rng.choice([8, 16, 32]) if r < 6 else 512
            outer = REQ(112 if r < 6 else 131, "ask" if r < 6 else "batch_search")
            search(Q, outer)
            served.append(Q)
            if r < 6:
                generate(rng.randint(1400, 2300), 10, [app("server.py", 117, "ask")] + outer[1:])
    except sim.OOMError as e:
        info["oom_request"] = e.size
        info["oom_free"] = e.free
    info["served_query_batches"] = served
    d = write([A0, A1])
    return dict(name="m05_rag_marco_llama3_2gpu.pickle", data=d, devs=[A0, A1], info=info)


# ============================================================================ m06
def build_m06():
    """PointNet++ MSG semantic segmentation (the widely copied pure-PyTorch implementation) on
    ScanNet: batch 32 x 8192 points x 9 features, 21 classes, fp32, Adam, 6 steps on an
    A100-40GB; torch 2.4.  query_ball_point builds a full [B, S, N] int64 index, a [B, S, N]
    distance matrix and sorts the whole thing to keep 16-32 neighbours; the feature propagation
    layer sorts a full [B, N, S] distance matrix to keep 3.  Problem: a wasteful peak."""
    rng = random.Random(606)
    clock = sim.Clock(1769904000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, extra_keys=False, base=0x7F5D40000000)
    dv = Dev(A)
    ann = Ann(clock)
    L = Lib("/opt/conda/lib/python3.10/site-packages/", "2.4")
    app = fr("/data/chen/Pointnet_Pointnet2_pytorch/")
    call = L.call()
    B, N, NC = 32, 8192, 21
    U = "models/pointnet2_utils.py"
    MAIN = [app("train_semseg.py", 292, "main"), app("train_semseg.py", 339, "<module>")]
    FW = [app("models/pointnet2_sem_seg_msg.py", 0, "forward")]
    MF = lambda line: [app("models/pointnet2_sem_seg_msg.py", line, "forward")] + call + [app("train_semseg.py", 190, "main")] + MAIN[1:]
    SA = [(1024, 8192, (0.05, 0.1), (16, 32), 9, ((16, 16, 32), (32, 32, 64)), 31),
          (256, 1024, (0.1, 0.2), (16, 32), 96, ((64, 64, 128), (64, 96, 128)), 32),
          (64, 256, (0.2, 0.4), (16, 32), 256, ((128, 196, 256), (128, 196, 256)), 33),
          (16, 64, (0.4, 0.8), (16, 32), 512, ((256, 256, 512), (256, 384, 512)), 34)]
    FP = [(64, 16, 512 + 512, (256, 256), 36), (256, 64, 256 + 256, (256, 256), 37), (1024, 256, 96 + 256, (256, 128), 38), (8192, 1024, 128, (128, 128, 128), 39)]
    psz = []
    for S_, Nin, rad, ns, Cin, mlps, _ in SA:
        for m in mlps:
            c = Cin + 3
            for o in m:
                psz += [o * c * 4, o * 4, o * 4, o * 4]
                c = o
    for Nf, Sc, Cin, mlp, _ in FP:
        c = Cin
        for o in mlp:
            psz += [o * c * 4, o * 4, o * 4, o * 4]
            c = o
    psz += [128 * 128 * 4, 128 * 4, 128 * 4, 128 * 4, NC * 128 * 4, NC * 4]
    TO = S(L.convert() + [app("train_semseg.py", 131, "main"), MAIN[1]])
    params = [dv.a(v, TO, "param") for v in psz]
    start_recording(A)
    info = dict(param_bytes=sum(psz), steps=6, batch=B, points=N)
    grads, state = {}, []

    def conv_bn_relu(tape, nout, elems, stack_mod):
        c = op(dv, tape, nout * elems * 4, S([L("torch/nn/modules/conv.py", 549 if False else 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + stack_mod), True)
        b = op(dv, tape, nout * elems * 4, S([L("torch/nn/functional.py", 2509, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 176) + stack_mod), True)
        r = op(dv, tape, nout * elems * 4, S([L("torch/nn/functional.py", 1500, "relu"), stack_mod[0]] + stack_mod[1:]), True)
        return r

    for step in range(6):
        ann.start("ProfilerStep#%d" % step)
        tape = Tape()
        pts = dv.a(B * N * 9 * 4, S([app("train_semseg.py", 185, "main")] + MAIN[1:]), "input")
        tgt = dv.a(B * N * 8, S([app("train_semseg.py", 186, "main")] + MAIN[1:]), "input")
        pi = 0
        keep = []
        Nin_prev = N
        for li, (Sn, Nin, rad, ns, Cin, mlps, mline) in enumerate(SA):
            M = [app(U, 0, "forward")] + call + MF(mline)
            SAF = lambda line, name="forward": [app(U, line, name)] + call + MF(mline) if name == "forward" else [app(U, line, name), app(U, 224, "forward")] + call + MF(mline)
            # farthest point sampling and the sampled centroids
            fps_d = dv.a(B * Nin * 4, S([app(U, 82, "farthest_point_sample"), app(U, 224, "forward")] + call + MF(mline)), "tmp")
            cen = dv.a(B * Sn * 8, S([app(U, 81, "farthest_point_sample"), app(U, 224, "forward")] + call + MF(mline)), "tmp")
            dv.f(fps_d)
            nx = op(dv, tape, B * Sn * 3 * 4, S([app(U, 62, "index_points"), app(U, 224, "forward")] + call + MF(mline)), True)
            dv.f(cen)
            branches = []
            for (r, k, mlp) in zip(rad, ns, mlps):
                QB = lambda line: S([app(U, line, "query_ball_point"), app(U, 228, "forward")] + call + MF(mline))
                E = B * Sn * Nin
                gi = dv.a(E * 8, QB(100), "qbp_tmp")
                sq = dv.a(E * 4, S([app(U, 43, "square_distance"), app(U, 101, "query_ball_point"), app(U, 228, "forward")] + call + MF(mline)), "qbp_tmp")
                s2 = dv.a(B * Sn * 4, S([app(U, 44, "square_distance"), app(U, 101, "query_ball_point"), app(U, 228, "forward")] + call + MF(mline)), "tmp")
                s3 = dv.a(B * Nin * 4, S([app(U, 45, "square_distance"), app(U, 101, "query_ball_point"), app(U, 228, "forward")] + call + MF(mline)), "tmp")
                dv.fl([s2, s3])
                mk = dv.a(E, QB(102), "qbp_tmp")
                dv.f(mk)
                sv = dv.a(E * 8, QB(103), "qbp_tmp")
                si = dv.a(E * 8, QB(103), "qbp_tmp")
                dv.f(si)
                dv.f(gi)
                gf = dv.a(B * Sn * k * 8, QB(104), "tmp")
                m2 = dv.a(B * Sn * k, QB(105), "tmp")
                dv.fl([m2])
                dv.f(sq)
                # the sorted [B, S, N] values stay alive through the slice view until the function returns
                gidx = dv.a(B * Sn * k * 8, QB(106), "tmp")
                dv.fl([sv, gf])
                gx = op(dv, tape, B * Sn * k * 3 * 4, S([app(U, 62, "index_points"), app(U, 229, "forward")] + call + MF(mline)), True)
                gx2 = dv.a(B * Sn * k * 3 * 4, S([app(U, 230, "forward")] + call + MF(mline)), "tmp")
                gp = dv.a(B * Sn * k * Cin * 4, S([app(U, 62, "index_points"), app(U, 232, "forward")] + call + MF(mline)), "tmp")
                cat = op(dv, tape, B * Sn * k * (Cin + 3) * 4, S([app(U, 233, "forward")] + call + MF(mline)), True)
                dv.fl([gx2, gp, gidx])
                for li2, o in enumerate(mlp):
                    x = conv_bn_relu(tape, o, B * Sn * k, [app(U, 241, "forward")] + call + MF(mline))
                mx = op(dv, tape, B * mlp[-1] * Sn * 4, S([app(U, 242, "forward")] + call + MF(mline)), True)
                mi = op(dv, tape, B * mlp[-1] * Sn * 8, S([app(U, 242, "forward")] + call + MF(mline)), True)
                branches.append(mx)
            cat = op(dv, tape, B * sum(m[-1] for m in mlps) * Sn * 4, S([app(U, 245, "forward")] + call + MF(mline)), True)
        for (Nf, Sc, Cin, mlp, mline) in FP:
            FPL = lambda line: S([app(U, line, "forward")] + call + MF(mline))
            E = B * Nf * Sc
            dd = dv.a(E * 4, S([app(U, 43, "square_distance"), app(U, 296, "forward")] + call + MF(mline)), "fp_tmp")
            sv = dv.a(E * 4, FPL(297), "fp_tmp")
            si = dv.a(E * 8, FPL(297), "fp_tmp")
            dv.f(dd)
            rc = op(dv, tape, B * Nf * 3 * 4, FPL(300), True)
            nm = dv.a(B * Nf * 4, FPL(301), "tmp")
            wt = op(dv, tape, B * Nf * 3 * 4, FPL(302), True)
            dv.f(nm)
            gp = op(dv, tape, B * Nf * 3 * (Cin - (Cin // 2 if False else 0)) * 4 // 2, S([app(U, 62, "index_points"), app(U, 303, "forward")] + call + MF(mline)), True)
            it = op(dv, tape, B * Nf * Cin * 4 // 2, FPL(303), True)
            dv.fl([sv, si])
            cat = op(dv, tape, B * Nf * Cin * 4, FPL(308), True)
            for o in mlp:
                x = conv_bn_relu(tape, o, B * Nf, [app(U, 316, "forward")] + call + MF(mline))
        h = conv_bn_relu(tape, 128, B * N, MF(41))
        dr = op(dv, tape, B * 128 * N * 4, S(L.dropout() + MF(41)), True)
        lo = op(dv, tape, B * NC * N * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + MF(42)), True)
        ls = op(dv, tape, B * NC * N * 4, S([L("torch/nn/functional.py", 2121, "log_softmax"), app("models/pointnet2_sem_seg_msg.py", 43, "forward")] + call + [app("train_semseg.py", 190, "main")] + MAIN[1:]), True)
        LOSS = [L("torch/nn/functional.py", 2782, "nll_loss"), app("models/pointnet2_sem_seg_msg.py", 54, "forward")] + call + [app("train_semseg.py", 193, "main")] + MAIN[1:]
        loss = dv.a(4, S(LOSS), "tmp")
        dv.wait(rng.randint(120000, 160000))
        for k in range(len(psz)):
            tape.param(k, psz[k])
        backward(dv, tape, grads)
        dv.fl([loss, pts, tgt])
        dv.wait(rng.randint(150000, 200000))
        ann.start("Optimizer.step#Adam.step")
        OPT = [L("torch/optim/optimizer.py", 484, "wrapper"), app("train_semseg.py", 196, "main")] + MAIN[1:]
        if not state:
            for v in psz:
                for ln in (166, 168):
                    state.append(dv.a(v, S([L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 216, "step"), L("torch/optim/optimizer.py", 79, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adam.py", 590, "_multi_tensor_adam"), L("torch/optim/adam.py", 773, "adam"), L("torch/optim/adam.py", 227, "step"), L("torch/optim/optimizer.py", 79, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in psz]
        dv.fl(tmp)
        ann.end("Optimizer.step#Adam.step")
        ZG = S([L("torch/optim/optimizer.py", 954, "zero_grad"), app("train_semseg.py", 182, "main")] + MAIN[1:])
        ann.start("Optimizer.zero_grad#Adam.zero_grad")
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        ann.end("Optimizer.zero_grad#Adam.zero_grad")
        ann.end("ProfilerStep#%d" % step)
    d = write([A], annotations=ann.items)
    return dict(name="m06_pointnet2_msg_scannet.pickle", data=d, devs=[A], info=info)


# ============================================================================ m07
def build_m07():
    """VideoMAE ViT-B/16 pre-training on Kinetics-400 with tube masking (90 %): 16 frames at 224,
    batch 24, encoder on the 157 visible tokens, 4-layer decoder on all 1568, fp16 autocast, AdamW,
    80 steps on an A100-80GB; torch 2.4.  The dataset decodes clips with NVDEC straight to the GPU
    and keeps decoded clips in an LRU cache capped at 600 clips (360p-720p, 3-44 MB each); the
    cache fills over the first ~45 steps and then evicts.  Healthy."""
    rng = random.Random(707)
    clock = sim.Clock(1770768000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, extra_keys=False, base=0x7FA0C0000000)
    dv = Dev(A)
    ann = Ann(clock)
    L = Lib("/opt/conda/lib/python3.10/site-packages/", "2.4")
    app = fr("/workspace/VideoMAE/")
    call = L.call()
    B, NV, NT, CAP = 24, 157, 1568, 600
    MAIN = [app("run_mae_pretraining.py", 338, "main"), app("run_mae_pretraining.py", 367, "<module>")]
    EP = [app("engine_for_pretraining.py", 0, "train_one_epoch")]
    ENG = lambda line: [app("engine_for_pretraining.py", line, "train_one_epoch")] + MAIN
    psz = {"patch_embed": 768 * 3 * 2 * 16 * 16 * 4 + 768 * 4}
    for l in range(12):
        for n, s in (("qkv", 3 * 768 * 768), ("qb", 768 * 2), ("proj", 768 * 768 + 768), ("fc1", 3072 * 768 + 3072), ("fc2", 768 * 3072 + 768), ("n1", 768 * 2), ("n2", 768 * 2)):
            psz["enc%d.%s" % (l, n)] = s * 4
    psz["enc2dec"] = 384 * 768 * 4
    psz["mask_token"] = 384 * 4
    for l in range(4):
        for n, s in (("qkv", 3 * 384 * 384), ("qb", 384 * 2), ("proj", 384 * 384 + 384), ("fc1", 1536 * 384 + 1536), ("fc2", 384 * 1536 + 384), ("n1", 384 * 2), ("n2", 384 * 2)):
            psz["dec%d.%s" % (l, n)] = s * 4
    psz["head"] = 1536 * 384 * 4 + 1536 * 4
    TO = S(L.convert() + [app("run_mae_pretraining.py", 262, "main"), MAIN[1]])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)
    info = dict(param_bytes=sum(psz.values()), steps=80, batch=B, cache_cap=CAP)
    grads, state = {}, []
    cache = []
    RES = [(256, 340), (360, 640), (480, 854), (720, 1280), (320, 568)]
    DS = lambda line, name: [app("datasets/kinetics_gpu.py", line, name)]

    def tx(tape, pre, ntok, W, heads, seq, nl, MODL):
        for l in range(nl):
            p = "%s%d." % (pre, l)
            BL = [app("modeling_pretrain.py", 0, "forward")]
            blk = lambda line: [app("modeling_finetune.py", line, "forward")] + call + MODL
            at = lambda line: [app("modeling_finetune.py", line, "forward")] + call + blk(184)
            for n in ("n1", "qkv", "qb", "proj", "n2", "fc1", "fc2"):
                tape.param(p + n, psz[p + n])
            op(dv, tape, ntok * W * 4, S(L.layer_norm() + blk(184)), True)
            op(dv, tape, ntok * W * 2, S([L("torch/nn/functional.py", 0, "linear") if False else at(108)[0]] + at(108)[1:]), True)
            qkv = op(dv, tape, ntok * 3 * W * 2, S(at(108)), True)
            sc = dv.a(B * heads * seq * seq * 2, S(at(113)), "tmp")
            sm = op(dv, tape, B * heads * seq * seq * 4, S([L("torch/nn/functional.py", 1885, "softmax")] + at(114)), True)
            dv.f(sc)
            smh = op(dv, tape, B * heads * seq * seq * 2, S(at(117)), True)
            ao = op(dv, tape, ntok * W * 2, S(at(117)), True)
            pr = op(dv, tape, ntok * W * 2, S(L.linear() + at(119)), False)
            x2 = op(dv, tape, ntok * W * 4, S(blk(184)), True)
            dv.f(pr)
            n2 = op(dv, tape, ntok * W * 4, S(L.layer_norm() + blk(185)), True)
            MLP = [app("modeling_finetune.py", 0, "forward")]
            f1 = op(dv, tape, ntok * 4 * W * 2, S(L.linear() + [app("modeling_finetune.py", 65, "forward")] + call + blk(185)), True)
            g = op(dv, tape, ntok * 4 * W * 2, S(L.gelu() + [app("modeling_finetune.py", 66, "forward")] + call + blk(185)), True)
            f2 = op(dv, tape, ntok * W * 2, S(L.linear() + [app("modeling_finetune.py", 68, "forward")] + call + blk(185)), False)
            op(dv, tape, ntok * W * 4, S(blk(185)), True)
            dv.f(f2)

    for step in range(80):
        ann.start("ProfilerStep#%d" % step)
        # data: 24 clips, from the GPU cache or decoded now
        LD = ENG(52)
        frames = []
        for i in range(B):
            if len(cache) < 60 or rng.random() < 0.55:
                h, w = rng.choice(RES)
                c = dv.a(16 * h * w * 3, S(DS(88, "_decode_gpu") + DS(131, "__getitem__") + [L("torch/utils/data/_utils/fetch.py", 52, "<listcomp>"), L("torch/utils/data/_utils/fetch.py", 52, "fetch"), L("torch/utils/data/dataloader.py", 673, "_next_data"), L("torch/utils/data/dataloader.py", 631, "__next__")] + LD), "clip_cache")
                cache.append(c)
                if len(cache) > CAP:
                    ev = cache.pop(0)
                    dv.f(ev, S(DS(71, "_evict") + DS(92, "_decode_gpu") + DS(131, "__getitem__") + [L("torch/utils/data/_utils/fetch.py", 52, "<listcomp>"), L("torch/utils/data/_utils/fetch.py", 52, "fetch"), L("torch/utils/data/dataloader.py", 673, "_next_data"), L("torch/utils/data/dataloader.py", 631, "__next__")] + LD))
            else:
                j = rng.randrange(len(cache))
                cache.append(cache.pop(j))
            frames.append(dv.a(3 * 16 * 224 * 224 * 4, S(DS(104, "_augment") + DS(133, "__getitem__") + [L("torch/utils/data/_utils/fetch.py", 52, "<listcomp>"), L("torch/utils/data/_utils/fetch.py", 52, "fetch"), L("torch/utils/data/dataloader.py", 673, "_next_data"), L("torch/utils/data/dataloader.py", 631, "__next__")] + LD), "tmp"))
        vid = dv.a(B * 3 * 16 * 224 * 224 * 4, S([L("torch/utils/data/_utils/collate.py", 162, "collate_tensor_fn"), L("torch/utils/data/_utils/collate.py", 155, "collate"), L("torch/utils/data/_utils/fetch.py", 54, "fetch"), L("torch/utils/data/dataloader.py", 673, "_next_data"), L("torch/utils/data/dataloader.py", 631, "__next__")] + LD), "input")
        dv.fl(frames)
        mask = dv.a(B * NT, S(ENG(57)), "input")
        tape = Tape()
        MD = lambda line: [app("modeling_pretrain.py", line, "forward")] + call + ENG(71)
        norm = dv.a(B * 3 * 16 * 224 * 224 * 4, S(ENG(60)), "tmp")
        tgt = dv.a(B * NT * 1536 * 2, S(ENG(66)), "tmp")
        dv.f(norm)
        tape.param("patch_embed", psz["patch_embed"])
        pe = op(dv, tape, B * NT * 768 * 2, S(L.conv3d() + [app("modeling_finetune.py", 144, "forward")] + call + [app("modeling_pretrain.py", 95, "forward_features")] + MD(119)[0:0] + [app("modeling_pretrain.py", 112, "forward")] + call + MD(233)), True)
        vis = op(dv, tape, B * NV * 768 * 4, S([app("modeling_pretrain.py", 100, "forward_features"), app("modeling_pretrain.py", 112, "forward")] + call + MD(233)), True)
        tx(tape, "enc", B * NV, 768, 12, NV, 12, [app("modeling_pretrain.py", 103, "forward_features"), app("modeling_pretrain.py", 112, "forward")] + call + MD(233))
        tape.param("enc2dec", psz["enc2dec"])
        op(dv, tape, B * NV * 384 * 2, S(L.linear() + MD(234)), True)
        tape.param("mask_token", psz["mask_token"])
        full = op(dv, tape, B * NT * 384 * 4, S(MD(245)), True)
        tx(tape, "dec", B * NT, 384, 6, NT, 4, [app("modeling_pretrain.py", 189, "forward")] + call + MD(246))
        tape.param("head", psz["head"])
        out = op(dv, tape, B * (NT - NV) * 1536 * 2, S(L.linear() + [app("modeling_pretrain.py", 193, "forward")] + call + MD(246)), True)
        LS = [L("torch/nn/functional.py", 3365, "mse_loss")] + L.mod("torch/nn/modules/loss.py", 535) + ENG(73)
        loss = dv.a(4, S(LS), "tmp")
        dv.wait(rng.randint(150000, 200000))
        backward(dv, tape, grads)
        dv.fl([loss, tgt, vid, mask])
        dv.wait(rng.randint(250000, 320000))
        ann.start("Optimizer.step#AdamW.step")
        OPT = [L("torch/optim/optimizer.py", 385, "wrapper"), L("torch/cuda/amp/grad_scaler.py", 377, "_maybe_opt_step"), L("torch/cuda/amp/grad_scaler.py", 451, "step"),
               app("utils.py", 402, "__call__"), app("engine_for_pretraining.py", 85, "train_one_epoch")] + MAIN
        if not state:
            for k, v in psz.items():
                for ln in (132, 136):
                    state.append(dv.a(v, S([L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adamw.py", 578, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in psz.values()]
        dv.fl(tmp)
        ann.end("Optimizer.step#AdamW.step")
        ZG = S([L("torch/optim/optimizer.py", 817, "zero_grad"), app("engine_for_pretraining.py", 90, "train_one_epoch")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        ann.end("ProfilerStep#%d" % step)
    info["cached_clips_end"] = len(cache)
    info["cache_bytes_end"] = sum(b.req for b in cache)
    d = write([A], annotations=ann.items)
    return dict(name="m07_videomae_vitb_k400_clipcache.pickle", data=d, devs=[A], info=info)


# ============================================================================ m08
def build_m08():
    """GPT-1.3B (24 layers, d=2048, seq 2048, vocab 50304) pre-training with Transformer Engine FP8
    (delayed scaling, amax_history_len=1024), fp32 master weights and gradients, TE FusedAdam,
    micro-batch 11, on one H100-80GB; torch 2.4.  Every 20 steps a diagnostics callback computes
    the gradient-to-weight ratio from torch.cat of every gradient and every parameter (two
    5.3 GB flat copies) while the cache holds the step's activation segments; every 20 steps
    (offset by 10) the checkpoint code calls torch.cuda.empty_cache() after saving.  60 steps.
    Problem: allocator stalls (free-all-and-retry) at each diagnostics step."""
    rng = random.Random(808)
    clock = sim.Clock(1774857600000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(79.11 * GB), other_usage=int(0.61 * GB), clock=clock, extra_keys=False, base=0x7F9E00000000)
    A.free_us_per_gb = 20000
    dv = Dev(A)
    ann = Ann(clock)
    L = Lib("/usr/local/lib/python3.10/dist-packages/", "2.4")
    app = fr("/workspace/gpt-fp8/")
    call = L.call()
    NL, H, SEQ, MBS, V = 24, 2048, 2048, 11, 50304
    TOK = SEQ * MBS
    TE = "transformer_engine/pytorch/"
    MAIN = [app("pretrain.py", 264, "train"), app("pretrain.py", 318, "main"), app("pretrain.py", 322, "<module>")]
    psz = {"wte": V * H * 4, "wpe": SEQ * H * 4}
    for l in range(NL):
        for n, s in (("ln1.w", H), ("ln1.b", H), ("qkv.w", 3 * H * H), ("qkv.b", 3 * H), ("proj.w", H * H), ("proj.b", H),
                     ("ln2.w", H), ("ln2.b", H), ("fc1.w", 4 * H * H), ("fc1.b", 4 * H), ("fc2.w", 4 * H * H), ("fc2.b", H)):
            psz["h%d.%s" % (l, n)] = s * 4
    psz["lnf.w"] = H * 4
    psz["lnf.b"] = H * 4
    TO = S(L.convert() + [app("pretrain.py", 221, "main"), MAIN[2]])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)
    info = dict(param_bytes=sum(psz.values()), steps=60, every=20, micro_batch=MBS)
    grads, state = {}, []
    fp8w = {}
    meta = []

    def te_mod(tape, l, kind, line_mod, nout, fp8_in=True, saved=True, MOD=None):
        """A TE module: cast the input to FP8 (saved), FP8 weight (+ transpose) cached once, GEMM."""
        if kind not in fp8w.setdefault(l, {}):
            WS = S([L(TE + "module/base.py", 923, "get_weight_workspace"), L(TE + "module/%s" % line_mod[0], line_mod[1], "forward")] + call + MOD)
            nw = {"qkv": 3 * H * H, "proj": H * H, "fc1": 4 * H * H, "fc2": 4 * H * H}[kind]
            fp8w[l][kind] = [dv.a(nw, WS, "fp8_weight"), dv.a(nw, WS, "fp8_weight")]
            MS = S([L(TE + "module/base.py", 256, "set_meta_tensor"), L(TE + "module/base.py", 280, "init_fp8_meta_tensors"), L(TE + "module/base.py", 604, "prepare_forward"), L(TE + "module/%s" % line_mod[0], line_mod[1] - 20, "forward")] + call + MOD)
            for _ in range(2):
                meta.append(dv.a(1024 * 3 * 4, MS, "fp8_meta"))
                meta.append(dv.a(3 * 4, MS, "fp8_meta"))
                meta.append(dv.a(3 * 4, MS, "fp8_meta"))
        FN = [L(TE + "module/%s" % line_mod[0], line_mod[2], "forward"), L("torch/autograd/function.py", 598, "apply"), L(TE + "module/%s" % line_mod[0], line_mod[1], "forward")] + call + MOD
        if fp8_in:
            op(dv, tape, TOK * (H if kind != "fc2" else 4 * H), S([L(TE + "cpp_extensions/cast.py", 42, "cast_to_fp8")] + FN), True)
        return op(dv, tape, TOK * nout * 2, S([L(TE + "cpp_extensions/gemm.py", 131, "fp8_gemm")] + FN), saved)

    def flat_cat(which, line):
        st = S([app("callbacks/diagnostics.py", line, "update_ratio"), app("callbacks/diagnostics.py", 58, "on_after_backward"), app("pretrain.py", 251, "train")] + MAIN)
        return dv.a(sum(psz.values()), st, "diag_tmp")

    stall_steps = []
    for step in range(60):
        ann.start("ProfilerStep#%d" % step)
        tape = Tape()
        ids = dv.a(TOK * 8, S([app("pretrain.py", 236, "train")] + MAIN), "input")
        lab = dv.a(TOK * 8, S([app("pretrain.py", 237, "train")] + MAIN), "input")
        GP = [app("model/gpt.py", 0, "forward")]
        MODEL = [app("model/gpt.py", 141, "forward")] + call + [L("transformer_engine/pytorch/fp8.py", 0, "fp8_autocast") if False else app("pretrain.py", 241, "train")] + MAIN
        tape.param("wte", psz["wte"]); tape.param("wpe", psz["wpe"])
        x = op(dv, tape, TOK * H * 2, S(L.embedding() + [app("model/gpt.py", 133, "forward")] + call + MODEL[2:]), False)
        for l in range(NL):
            for n in ("ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b", "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"):
                tape.param("h%d.%s" % (l, n), psz["h%d.%s" % (l, n)])
            TL = [L(TE + "transformer.py", 0, "forward")]
            LAYER = [L(TE + "transformer.py", 661, "forward")] + call + [app("model/gpt.py", 139, "forward")] + call + MODEL[2:]
            ATT = [L(TE + "attention.py", 7876, "forward")] + call + LAYER
            ln = op(dv, tape, TOK * H * 2, S([L(TE + "module/layernorm_linear.py", 112, "forward"), L("torch/autograd/function.py", 598, "apply"), L(TE + "module/layernorm_linear.py", 1137, "forward")] + call + ATT), True)
            qkv = te_mod(tape, l, "qkv", ("layernorm_linear.py", 1137, 175), 3 * H, True, True, ATT)
            ao = op(dv, tape, TOK * H * 2, S([L("flash_attn/flash_attn_interface.py", 90, "_flash_attn_forward"), L(TE + "attention.py", 4917, "forward")] + call + [L(TE + "attention.py", 7960, "forward")] + call + ATT), True)
            lse = op(dv, tape, MBS * 16 * SEQ * 4, S([L("flash_attn/flash_attn_interface.py", 90, "_flash_attn_forward"), L(TE + "attention.py", 4917, "forward")] + call + [L(TE + "attention.py", 7960, "forward")] + call + ATT), True)
            pr = te_mod(tape, l, "proj", ("linear.py", 1015, 152), H, True, False, ATT)
            r1 = op(dv, tape, TOK * H * 2, S([L(TE + "transformer.py", 702, "forward")] + call + [app("model/gpt.py", 139, "forward")] + call + MODEL[2:]), True)
            dv.f(pr)
            if x is not None and x.state == "active_allocated" and l == 0:
                dv.f(x)
            MLP = [L(TE + "module/layernorm_mlp.py", 1493, "forward")] + call + LAYER
            ln2 = op(dv, tape, TOK * H * 2, S([L(TE + "module/layernorm_mlp.py", 188, "forward"), L("torch/autograd/function.py", 598, "apply")] + MLP), True)
            f1 = te_mod(tape, l, "fc1", ("layernorm_mlp.py", 1493, 236), 4 * H, True, True, LAYER)
            ge = op(dv, tape, TOK * 4 * H * 2, S([L(TE + "module/layernorm_mlp.py", 268, "forward"), L("torch/autograd/function.py", 598, "apply")] + MLP), True)
            f2 = te_mod(tape, l, "fc2", ("layernorm_mlp.py", 1493, 290), H, True, False, LAYER)
            x = op(dv, tape, TOK * H * 2, S([L(TE + "transformer.py", 731, "forward")] + call + [app("model/gpt.py", 139, "forward")] + call + MODEL[2:]), True)
            dv.f(f2)
        tape.param("lnf.w", psz["lnf.w"]); tape.param("lnf.b", psz["lnf.b"])
        lnf = op(dv, tape, TOK * H * 2, S(L.layer_norm() + [app("model/gpt.py", 143, "forward")] + call + MODEL[2:]), True)
        lg = op(dv, tape, TOK * V * 2, S([L("torch/nn/functional.py", 0, "linear") if False else app("model/gpt.py", 144, "forward")] + call + MODEL[2:]), True)
        LS = [L("torch/nn/functional.py", 3104, "cross_entropy"), app("model/gpt.py", 147, "forward")] + call + MODEL[2:]
        lf = dv.a(TOK * V * 4, S([app("model/gpt.py", 146, "forward")] + call + MODEL[2:]), "tmp")
        lsm = op(dv, tape, TOK * V * 4, S(LS), True)
        dv.f(lf)
        loss = dv.a(4, S(LS), "tmp")
        dv.wait(rng.randint(400000, 500000))
        backward(dv, tape, grads)
        dv.fl([loss, ids, lab])
        dv.wait(rng.randint(800000, 900000))
        if step % 20 == 19:
            n0 = len(A.stalls)
            g = flat_cat("grads", 33)
            w = flat_cat("params", 34)
            nr = [dv.a(4, S([app("callbacks/diagnostics.py", 35, "update_ratio"), app("callbacks/diagnostics.py", 58, "on_after_backward"), app("pretrain.py", 251, "train")] + MAIN), "tmp") for _ in range(3)]
            dv.fl([g, w] + nr)
            stall_steps.append((step, len(A.stalls) - n0))
        ann.start("Optimizer.step#FusedAdam.step")
        OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), app("pretrain.py", 254, "train")] + MAIN
        if not state:
            for k, v in psz.items():
                for ln in (151, 153):
                    state.append(dv.a(v, S([L(TE + "optimizers/fused_adam.py", ln, "_initialize_state"), L(TE + "optimizers/fused_adam.py", 262, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        ann.end("Optimizer.step#FusedAdam.step")
        ZG = S([L("torch/optim/optimizer.py", 826, "zero_grad"), app("pretrain.py", 257, "train")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        if step % 20 == 9:
            # checkpoint: torch.save of the state dicts, then torch.cuda.empty_cache()
            A.empty_cache(S([L("torch/cuda/memory.py", 170, "empty_cache"), app("utils/checkpointing.py", 88, "save_checkpoint"), app("pretrain.py", 259, "train")] + MAIN))
            dv.wait(rng.randint(4000000, 6000000))
        ann.end("ProfilerStep#%d" % step)
    info["stall_steps"] = stall_steps
    d = write([A], annotations=ann.items)
    return dict(name="m08_gpt13b_te_fp8_h100.pickle", data=d, devs=[A], info=info)


# ============================================================================ m09
def build_m09():
    """A ViT-22B-style model (48 parallel attention+MLP blocks, d=6144, MLP 24576, 48 heads, qk
    LayerNorm) trained with Megatron-Core tensor parallelism 8: rank 3 on cuda:3 of an 8 x H100
    node.  bf16 parameters and gradients, fp32 master weights, Adam moments in fp32 (no
    distributed optimizer); micro-batch 16 x 256 patches (+ sequence parallel activations).
    _record_memory_history(enabled="state") at start; the dump was taken by a hang watchdog
    between steps 212 and 213 (after optimizer.step and zero_grad).  State only.  Healthy."""
    rng = random.Random(909)
    A = sim.Allocator(device=3, capacity=int(79.11 * GB), other_usage=int(1.9 * GB), time_us=False, base=0x7E7C00000000)
    dv = Dev(A)
    L = Lib("/usr/local/lib/python3.10/dist-packages/", "2.4")
    app = fr("/lustre/vit22b/")
    call = L.call()
    NL, D, FF, TP = 48, 6144, 24576, 8
    MC = "megatron/core/"
    MAIN = [app("pretrain_vit.py", 402, "main"), app("pretrain_vit.py", 431, "<module>")]
    SETUP = [app("megatron/training/training.py", 517, "get_model"), app("megatron/training/training.py", 583, "setup_model_and_optimizer"), app("pretrain_vit.py", 388, "main")] + MAIN[1:]
    shapes = [("patch_embed.w", D * 14 * 14 * 3 // TP), ("patch_embed.b", D // TP), ("pos_embed", 256 * D)]
    for l in range(NL):
        shapes += [("l%d.ln.w" % l, D), ("l%d.ln.b" % l, D), ("l%d.qkv.w" % l, 3 * D * D // TP), ("l%d.qkv.b" % l, 3 * D // TP),
                   ("l%d.qn.w" % l, 128), ("l%d.kn.w" % l, 128), ("l%d.proj.w" % l, D * D // TP), ("l%d.fc1.w" % l, D * FF // TP),
                   ("l%d.fc1.b" % l, FF // TP), ("l%d.fc2.w" % l, D * FF // TP), ("l%d.out.b" % l, D)]
    shapes += [("final_ln.w", D), ("final_ln.b", D), ("head.w", 1000 * D // TP)]

    def init_stack(name):
        if name.endswith("w") and ("qkv" in name or "fc1" in name):
            return S([app(MC + "tensor_parallel/layers.py", 765, "__init__"), app(MC + "extensions/transformer_engine.py", 161, "__init__"), app(MC + "transformer/spec_utils.py", 98, "build_module"), app(MC + "transformer/transformer_layer.py", 120, "__init__")] + SETUP)
        if name.endswith("w") and ("proj" in name or "fc2" in name):
            return S([app(MC + "tensor_parallel/layers.py", 1046, "__init__"), app(MC + "extensions/transformer_engine.py", 213, "__init__"), app(MC + "transformer/spec_utils.py", 98, "build_module"), app(MC + "transformer/transformer_layer.py", 134, "__init__")] + SETUP)
        return S([L("torch/nn/modules/module.py", 1159, "_apply") if False else app(MC + "transformer/transformer_block.py", 191, "_build_layers"), app(MC + "transformer/transformer_block.py", 174, "__init__")] + SETUP)
    params = [dv.a(n * 2, init_stack(k), "param") for k, n in shapes]
    # one training step's worth of activations and grads, to shape the pool (iterations before the dump)
    STEP = [app("megatron/training/training.py", 1004, "train_step"), app("megatron/training/training.py", 1332, "train"), app("pretrain_vit.py", 397, "main")] + MAIN[1:]
    FWD = [app(MC + "pipeline_parallel/schedules.py", 214, "forward_step"), app(MC + "pipeline_parallel/schedules.py", 461, "forward_backward_no_pipelining")] + STEP
    OPTS = [app(MC + "optimizer/optimizer.py", 480, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context"), app("megatron/training/training.py", 1035, "train_step"), app("megatron/training/training.py", 1332, "train"), app("pretrain_vit.py", 397, "main")] + MAIN[1:]
    MSTK = S([app(MC + "optimizer/optimizer.py", 589, "__init__"), app(MC + "optimizer/__init__.py", 224, "_get_megatron_optimizer_based_on_param_groups"), app(MC + "optimizer/__init__.py", 396, "get_megatron_optimizer"), app("megatron/training/training.py", 594, "setup_model_and_optimizer"), app("pretrain_vit.py", 388, "main")] + MAIN[1:])
    master = [dv.a(n * 4, MSTK, "master") for k, n in shapes]
    MB_, SEQ = 16, 257
    tok = MB_ * SEQ
    state = []
    for it in range(2):
        acts = []
        for l in range(NL):
            LY = [app(MC + "transformer/transformer_layer.py", 0, "forward")]
            st = S([app(MC + "transformer/transformer_layer.py", 366, "forward")] + call + [app(MC + "transformer/transformer_block.py", 495, "forward")] + call + [app("models/vit22b.py", 141, "forward")] + call + FWD)
            for n in (tok * D * 2, tok * 3 * D // TP * 2, tok * D // TP * 2, tok * FF // TP * 2, tok * FF // TP * 2, tok * D * 2 // TP):
                acts.append(dv.a(n, st, "act"))
        grads = [dv.a(n * 2, NOSTACK, "grad") for k, n in shapes]
        for b in reversed(acts):
            dv.f(b)
        if not state:
            for k, n in shapes:
                for ln in (142, 144):
                    state.append(dv.a(n * 4, S([L("apex/optimizers/fused_adam.py", ln, "step"), L("torch/optim/optimizer.py", 391, "wrapper")] + OPTS), "opt"))
        tmp = [dv.a(n * 4, S([app(MC + "optimizer/optimizer.py", 445, "_copy_model_grads_to_main_grads")] + OPTS[1:]), "tmp") for k, n in shapes[:40]]
        dv.fl(tmp)
        dv.fl(grads)
    info = dict(param_bytes=sum(n * 2 for k, n in shapes), master_bytes=sum(n * 4 for k, n in shapes), opt_bytes=sum(b.req for b in state),
                n_params=sum(n for k, n in shapes))
    d = write([A], state_only=True, n_dev_lists=8)
    return dict(name="m09_vit22b_tp8_rank3_state.pickle", data=d, devs=[A], info=info)


# ============================================================================ m10
def build_m10():
    """Informer (ProbSparse attention, 2 encoder layers with distilling, 1 decoder layer, d=512)
    on the Traffic data set (862 series; seq 96, label 48, horizon 24), batch 32, fp32, Adam,
    120 steps on an RTX A5000 (24 GB); torch 2.4.  Batches are copied by a CUDA prefetcher on a
    side stream (non_blocking copies from pinned memory, record_stream on the compute stream),
    one batch ahead; dumped at the end of step 120.  Healthy."""
    rng = random.Random(1010)
    clock = sim.Clock(1768478400000000, rng, (2, 7))
    A = sim.Allocator(device=0, capacity=int(23.68 * GB), other_usage=int(0.3 * GB), clock=clock, extra_keys=False, base=0x7F3A10000000)
    SIDE = 94211306843712
    dv = Dev(A)
    L = Lib("/home/liu/miniconda3/envs/tsf/lib/python3.9/site-packages/", "2.4")
    app = fr("/home/liu/Informer2020/")
    call = L.call()
    B, SEQ, LAB, PRED, C, D, FF = 32, 96, 48, 24, 862, 512, 2048
    DEC = LAB + PRED
    MAIN = [app("exp/exp_informer.py", 171, "train"), app("main_informer.py", 108, "<module>")]
    PF = lambda line: [app("utils/prefetch.py", line, "preload"), app("utils/prefetch.py", 41, "next"), app("exp/exp_informer.py", 158, "train")] + MAIN
    psz = [C * D * 3 * 4, 4 * D * 4, D * 4 * 3]                                    # token conv, time features, positional
    for l in range(2):
        psz += [D * D * 4, D * 4] * 4 + [FF * D * 4, FF * 4, D * FF * 4, D * 4, D * 4, D * 4, D * 4, D * 4]
    psz += [D * D * 3 * 4, D * 4, D * 4, D * 4]                                      # distil conv + norm
    psz += [D * 4, D * 4]
    psz += [C * D * 3 * 4, 4 * D * 4]
    psz += ([D * D * 4, D * 4] * 4) * 2 + [FF * D * 4, FF * 4, D * FF * 4, D * 4] + [D * 4] * 6
    psz += [D * 4, D * 4, C * D * 4, C * 4]
    TO = S(L.convert() + [app("exp/exp_informer.py", 34, "_build_model"), app("exp/exp_basic.py", 13, "__init__"), app("exp/exp_informer.py", 25, "__init__"), app("main_informer.py", 101, "<module>")])
    params = [dv.a(v, TO, "param") for v in psz]
    start_recording(A)
    info = dict(param_bytes=sum(psz), steps=120, batch=B, side_stream=SIDE)
    grads, state = {}, []

    def preload():
        A.stream = SIDE
        b = [dv.a(B * SEQ * C * 4, S(PF(27)), "batch"), dv.a(B * DEC * C * 4, S(PF(28)), "batch"),
             dv.a(B * SEQ * 4 * 4, S(PF(29)), "batch"), dv.a(B * DEC * 4 * 4, S(PF(30)), "batch")]
        A.stream = 0
        return b

    nxt = preload()
    pend = []
    for step in range(120):
        cur = nxt
        # next(): wait_stream, record_stream(current) for each tensor, then preload the next batch
        nxt = preload()
        tape = Tape()
        M = lambda f, line: [app("models/" + f, line, "forward")] + call
        MODEL = M("model.py", 0)[:0]
        TOP = [app("models/model.py", 0, "forward")]
        MF = lambda line: [app("models/model.py", line, "forward")] + call + [app("exp/exp_informer.py", 260, "_process_one_batch"), app("exp/exp_informer.py", 163, "train")] + MAIN
        dec_in = dv.a(B * DEC * C * 4, S([app("exp/exp_informer.py", 250, "_process_one_batch"), app("exp/exp_informer.py", 163, "train")] + MAIN), "tmp")
        for k in range(3):
            tape.param(k, psz[k])
        e = op(dv, tape, B * SEQ * D * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + M("embed.py", 43) + M("embed.py", 117) + MF(72)), True)
        Lq = SEQ
        pi = 3
        for l in range(2):
            for k in range(16):
                tape.param(pi + k, psz[pi + k])
            pi += 16
            tok = B * Lq
            AT = M("attn.py", 156) + M("encoder.py", 50) + M("encoder.py", 95) + MF(73)
            q = op(dv, tape, tok * D * 4, S(L.linear() + AT), True)
            k_ = op(dv, tape, tok * D * 4, S(L.linear() + AT), True)
            v = op(dv, tape, tok * D * 4, S(L.linear() + AT), True)
            sk = 5 * 5 if Lq > 48 else 5 * 4
            ks = op(dv, tape, B * 8 * Lq * sk * 64 * 4, S([app("models/attn.py", 54, "_prob_QK"), app("models/attn.py", 118, "forward")] + call + AT), True)
            qks = dv.a(B * 8 * Lq * sk * 4, S([app("models/attn.py", 55, "_prob_QK"), app("models/attn.py", 118, "forward")] + call + AT), "tmp")
            mm = dv.a(B * 8 * Lq * 4, S([app("models/attn.py", 58, "_prob_QK"), app("models/attn.py", 118, "forward")] + call + AT), "tmp")
            dv.fl([qks])
            top = op(dv, tape, B * 8 * sk * Lq * 4, S([app("models/attn.py", 65, "_prob_QK"), app("models/attn.py", 118, "forward")] + call + AT), True)
            dv.f(mm)
            ctx = op(dv, tape, tok * D * 4, S([app("models/attn.py", 78, "_get_initial_context"), app("models/attn.py", 124, "forward")] + call + AT), True)
            ao = op(dv, tape, tok * D * 4, S(L.linear() + AT), True)
            x2 = op(dv, tape, tok * D * 4, S(L.layer_norm() + M("encoder.py", 53) + M("encoder.py", 95) + MF(73)), True)
            y1 = op(dv, tape, tok * FF * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + M("encoder.py", 54) + M("encoder.py", 95) + MF(73)), True)
            y2 = op(dv, tape, tok * FF * 4, S([L("torch/nn/functional.py", 1473, "gelu") if False else app("models/encoder.py", 54, "forward")] + call + M("encoder.py", 95) + MF(73)), True)
            y3 = op(dv, tape, tok * D * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + M("encoder.py", 55) + M("encoder.py", 95) + MF(73)), True)
            x3 = op(dv, tape, tok * D * 4, S(L.layer_norm() + M("encoder.py", 57) + M("encoder.py", 95) + MF(73)), True)
            if l == 0:
                for k in range(4):
                    tape.param(pi + k, psz[pi + k])
                pi += 4
                DC = M("encoder.py", 24) + M("encoder.py", 96) + MF(73)
                c1 = op(dv, tape, tok * D * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + DC), True)
                bn = op(dv, tape, tok * D * 4, S([L("torch/nn/functional.py", 2450, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 171) + DC), True)
                el = op(dv, tape, tok * D * 4, S([L("torch/nn/functional.py", 1594, "elu")] + L.mod("torch/nn/modules/activation.py", 422) + DC), True)
                Lq = Lq // 2
                mp = op(dv, tape, B * Lq * D * 4, S([L("torch/nn/functional.py", 796, "_max_pool1d")] + L.mod("torch/nn/modules/pooling.py", 92) + DC), True)
        tape.param(pi, psz[pi]); tape.param(pi + 1, psz[pi + 1])
        pi += 2
        enc = op(dv, tape, B * Lq * D * 4, S(L.layer_norm() + M("encoder.py", 104) + MF(73)), True)
        for k in range(pi, len(psz)):
            tape.param(k, psz[k])
        de = op(dv, tape, B * DEC * D * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + M("embed.py", 43) + M("embed.py", 117) + MF(75)), True)
        DL = M("decoder.py", 31) + M("decoder.py", 56) + MF(76)
        for n in (B * DEC * D, B * DEC * D, B * DEC * D, B * 8 * DEC * DEC, B * DEC * D, B * DEC * D, B * Lq * D, B * Lq * D, B * 8 * DEC * Lq, B * DEC * D, B * DEC * D, B * DEC * FF, B * DEC * FF, B * DEC * D, B * DEC * D):
            op(dv, tape, n * 4, S(L.linear() + DL), True)
        out = op(dv, tape, B * DEC * C * 4, S(L.linear() + MF(79)), True)
        LS = [L("torch/nn/functional.py", 3338, "mse_loss")] + L.mod("torch/nn/modules/loss.py", 535) + [app("exp/exp_informer.py", 165, "train")] + MAIN
        loss = dv.a(4, S(LS), "tmp")
        clock.wait(rng.randint(9000, 12000))
        backward(dv, tape, grads)
        dv.fl([loss, dec_in])
        clock.wait(rng.randint(15000, 20000))
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), app("exp/exp_informer.py", 176, "train")] + MAIN
        if not state:
            for v in psz:
                for ln in (163, 165):
                    state.append(dv.a(v, S([L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 146, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adam.py", 538, "_multi_tensor_adam"), L("torch/optim/adam.py", 281, "adam"), L("torch/optim/adam.py", 166, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in psz]
        dv.fl(tmp)
        # the previous batch's blocks come back once the compute stream has passed their recorded event
        for b in pend:
            A.complete_pending(b, NOSTACK)
        # this batch goes out of scope: record_stream keeps its blocks until the compute stream is done with them
        FR = S([app("exp/exp_informer.py", 156, "train")] + MAIN)
        for b in cur:
            A.free(b, FR, pending=True)
        pend = cur
        ZG = S([L("torch/optim/optimizer.py", 825, "zero_grad"), app("exp/exp_informer.py", 160, "train")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        clock.wait(rng.randint(2000, 4000))
    info["pending_at_dump"] = len(pend)
    info["prefetched_at_dump"] = len(nxt)
    d = write([A])
    return dict(name="m10_informer_traffic_prefetch.pickle", data=d, devs=[A], info=info)
