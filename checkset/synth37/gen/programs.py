"""The ten workloads of batch 37.  Each build_mNN() runs one program through sim.Allocator and returns
dict(name, data (the snapshot dict), devs, info (the generator's own bookkeeping))."""
import random
from collections import OrderedDict

import sim
import cpp
from common import S, Lib, Dev, write, NOSTACK, Ann, MB, GB, KB, start_recording

MiB = MB


def fr(prefix):
    return lambda f, line, name: (prefix + f, line, name)


CPP_FREE = [("??", 0, "torch::unwind::unwind()"), ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
            ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
            ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)"),
            ("", 0, "c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)"),
            ("", 0, "c10::StorageImpl::~StorageImpl()"),
            ("", 0, "c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()"),
            ("??", 0, "c10::TensorImpl::~TensorImpl()"), ("TensorImpl.cpp", 0, "c10::TensorImpl::~TensorImpl() [clone .localalias]"),
            ("python_variable.cpp", 0, "THPVariable_clear(THPVariable*)"), ("??", 0, "THPVariable_subclass_dealloc(_object*)"),
            ("??", 0, "_Py_Dealloc")]


# ============================================================================ m01
def build_m01():
    """Click-through-rate model with the hashing trick: 26 categorical fields hashed into one shared
    nn.EmbeddingBag(2**23, 32, mode="sum", sparse=True) table (1 GiB fp32), 13 dense fields, an MLP
    845-1024-512-256-1, BCEWithLogits; SparseAdam for the table, Adam (foreach) for the MLP, batch
    16,384, fp32, A100-40GB, torch 2.4, _record_memory_history(stacks="all") after model.to(): C++
    frames.  30 steps with ProfilerStep annotations.  Healthy."""
    rng = random.Random(3701)
    clock = sim.Clock(1727160000000000 + 7 * 3600 * 10 ** 6, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, base=0x7F8C40000000)
    dv = Dev(A)
    ann = Ann(clock)
    SP = "/opt/conda/envs/ctr/lib/python3.10/site-packages/"
    L = Lib(SP, "2.4")
    app = fr("/mnt/work/hashctr/")
    call = L.call()
    B, NF, D, ND = 16384, 26, 32, 13
    ROWS = 1 << 23
    W = [(1024, NF * D + ND), (512, 1024), (256, 512), (1, 256)]
    MAIN = [app("train_ctr.py", 233, "main"), app("train_ctr.py", 262, "<module>")]
    STEP = lambda line: [app("train_ctr.py", line, "train_step"), app("train_ctr.py", 201, "train_epoch"), app("train_ctr.py", 228, "main")] + MAIN[1:]
    FWD = lambda line: [app("hashctr/model.py", line, "forward")] + call + STEP(152)
    # parameters, made before recording started
    TO = cpp.fwd("to", L.convert() + [app("train_ctr.py", 181, "main")] + MAIN[1:])
    table = dv.a(ROWS * D * 4, TO, "param")
    dense = []
    for o, i in W:
        dense.append((o * i * 4, dv.a(o * i * 4, TO, "param")))
        dense.append((o * 4, dv.a(o * 4, TO, "param")))
    start_recording(A)
    dstate, sstate = [], []
    grads = {}
    STEPS = 30
    uniq_frac = []
    for step in range(STEPS):
        ann.start("ProfilerStep#%d" % step)
        nnz = B * NF + rng.randint(150000, 190000)       # multi-hot fields
        U = int(nnz * rng.uniform(0.55, 0.62))            # distinct hashed rows in the batch
        uniq_frac.append(U)
        raw = dv.a(nnz * 8, cpp.fwd("to", [app("train_ctr.py", 141, "train_step")] + STEP(141)[1:]), "input")
        offs = dv.a(B * NF * 8, cpp.fwd("to", [app("train_ctr.py", 142, "train_step")] + STEP(142)[1:]), "input")
        dens = dv.a(B * ND * 4, cpp.fwd("to", [app("train_ctr.py", 143, "train_step")] + STEP(143)[1:]), "input")
        lab = dv.a(B * 4, cpp.fwd("to", [app("train_ctr.py", 144, "train_step")] + STEP(144)[1:]), "input")
        HS = lambda line: [app("hashctr/hashing.py", line, "hash_fields"), app("hashctr/model.py", 61, "forward")] + call + STEP(152)
        m1 = dv.a(nnz * 8, cpp.fwd("mul", HS(27)), "tmp")
        a1 = dv.a(nnz * 8, cpp.fwd("add", HS(27)), "tmp")
        dv.f(m1)
        ids = dv.a(nnz * 8, cpp.fwd("remainder", HS(28)), "act")
        dv.f(a1)
        EB = [L("torch/nn/functional.py", 2622, "embedding_bag")] + L.mod("torch/nn/modules/sparse.py", 390) + FWD(62)
        emb = dv.a(B * NF * D * 4, cpp.fwd("ebag", EB), "act")
        o2b = dv.a(nnz * 8, cpp.fwd("ebag", EB), "act")
        bsz = dv.a(B * NF * 8, cpp.fwd("ebag", EB), "act")
        mxi = dv.a(B * NF * 8, cpp.fwd("ebag", EB), "act")
        x = dv.a(B * (NF * D + ND) * 4, cpp.fwd("cat", FWD(64)), "act")
        acts = []
        h = x
        for li, (o, i) in enumerate(W):
            LIN = L.linear() + [L("torch/nn/modules/container.py", 219, "forward")] + call + FWD(65)
            z = dv.a(B * o * 4, cpp.fwd("addmm", LIN), "act")
            acts.append(z)
            if li < 3:
                r = dv.a(B * o * 4, cpp.fwd("relu", [L("torch/nn/functional.py", 1500, "relu")] + L.mod("torch/nn/modules/activation.py", 101) + [L("torch/nn/modules/container.py", 219, "forward")] + call + FWD(65)), "act")
                acts.append(r)
        LOSS = [L("torch/nn/functional.py", 3181, "binary_cross_entropy_with_logits")] + L.mod("torch/nn/modules/loss.py", 731) + STEP(153)
        lt = [dv.a(B * 4, cpp.fwd("bce", LOSS), "tmp") for _ in range(3)]
        loss = dv.a(4, cpp.fwd("bce", LOSS), "tmp")
        dv.fl(lt[:2])
        dv.wait(rng.randint(3000, 6000))
        # backward (autograd thread)
        g = dv.a(B * 4, cpp.bwd("bce", "BinaryCrossEntropyWithLogitsBackward0"), "tmp")
        dv.f(lt[2])
        widx = len(dense) - 2
        gin = g
        for li in reversed(range(4)):
            o, i = W[li]
            if li < 3:
                gr = dv.a(B * o * 4, cpp.bwd("threshold_bwd", "ReluBackward0"), "tmp")
                dv.f(gin)
                dv.f(acts.pop())
                gin = gr
            kw, kb = "w%d" % li, "b%d" % li
            if kb not in grads:
                grads[kb] = dv.a(o * 4, cpp.bwd("sum", "AddmmBackward0"), "grad")
            if kw not in grads:
                grads[kw] = dv.a(o * i * 4, cpp.bwd("mm", "AddmmBackward0"), "grad")
            gi = dv.a(B * i * 4, cpp.bwd("mm", "AddmmBackward0"), "tmp")
            dv.f(gin)
            dv.f(acts.pop())
            gin = gi
            widx -= 2
        dv.f(x)
        dv.f(emb)
        gv = dv.a(nnz * D * 4, cpp.bwd("ebag_bwd", "EmbeddingBagBackward0"), "grad")
        gi_ = dv.a(nnz * 8, cpp.bwd("ebag_bwd_idx", "EmbeddingBagBackward0"), "grad")
        grads["table_v"], grads["table_i"] = gv, gi_
        dv.f(gin)
        dv.fl([o2b, bsz, mxi, ids, loss])
        dv.wait(rng.randint(2000, 5000))
        # optimizers
        OPT = lambda opt: [L("torch/optim/optimizer.py", 484, "wrapper"), app("train_ctr.py", 158 if opt == "s" else 159, "train_step"), app("train_ctr.py", 201, "train_epoch"), app("train_ctr.py", 228, "main")] + MAIN[1:]
        ann.start("Optimizer.step#SparseAdam.step")
        if not sstate:
            for ln in (124, 126):
                sstate.append(dv.a(ROWS * D * 4, cpp.fwd("zeros_like", [L("torch/optim/sparse_adam.py", ln, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + OPT("s")), "opt"))
        SA = lambda line: [L("torch/optim/_functional.py", line, "sparse_adam"), L("torch/optim/sparse_adam.py", 136, "step"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + OPT("s")
        srt = dv.a(nnz * 8, cpp.fwd("coalesce", SA(37)), "tmp")
        perm = dv.a(nnz * 8, cpp.fwd("coalesce", SA(37)), "tmp")
        ci = dv.a(U * 8, cpp.fwd("coalesce", SA(37)), "tmp")
        cv = dv.a(U * D * 4, cpp.fwd("coalesce", SA(37)), "tmp")
        dv.fl([srt, perm])
        oa = dv.a(U * D * 4, cpp.fwd("sparse_mask", SA(54)), "tmp")
        ua = dv.a(U * D * 4, cpp.fwd("sub", SA(55)), "tmp")
        osq = dv.a(U * D * 4, cpp.fwd("sparse_mask", SA(57)), "tmp")
        usq = dv.a(U * D * 4, cpp.fwd("pow2", SA(58)), "tmp")
        upd = dv.a(U * D * 4, cpp.fwd("mul", SA(66)), "tmp")
        dv.fl([ua, usq, upd, oa, osq, cv, ci])
        ann.end("Optimizer.step#SparseAdam.step")
        ann.start("Optimizer.step#Adam.step")
        if not dstate:
            for sz, _ in dense:
                for ln in (120, 124):
                    dstate.append(dv.a(sz, cpp.fwd("zeros_like", [L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 214, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT("d")), "opt"))
        FE = [L("torch/optim/adam.py", 569, "_multi_tensor_adam"), L("torch/optim/adam.py", 774, "adam"), L("torch/optim/adam.py", 225, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT("d")
        tmp = [dv.a(sz, cpp.fwd("foreach", FE), "tmp") for sz, _ in dense]
        dv.fl(tmp)
        ann.end("Optimizer.step#Adam.step")
        ZG = S(CPP_FREE, cpp.interleave([L("torch/optim/optimizer.py", 996, "zero_grad"), L("torch/_compile.py", 31, "inner"), app("train_ctr.py", 161, "train_step"), app("train_ctr.py", 201, "train_epoch"), app("train_ctr.py", 228, "main")] + MAIN[1:]), cpp.MAIN_TAIL[1:])
        ann.start("Optimizer.zero_grad#SparseAdam.zero_grad")
        for k in ("table_v", "table_i"):
            dv.f(grads.pop(k), ZG)
        ann.end("Optimizer.zero_grad#SparseAdam.zero_grad")
        ann.start("Optimizer.zero_grad#Adam.zero_grad")
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        ann.end("Optimizer.zero_grad#Adam.zero_grad")
        dv.fl([raw, offs, dens, lab])
        dv.wait(rng.randint(20000, 40000))
        ann.end("ProfilerStep#%d" % step)
    info = dict(param_bytes=ROWS * D * 4 + sum(s for s, _ in dense), table_bytes=ROWS * D * 4, steps=STEPS,
                sparse_state_bytes=2 * ROWS * D * 4, dense_state_bytes=2 * sum(s for s, _ in dense))
    d = write([A], annotations=ann.items)
    return dict(name="m01_hashemb_ctr_sparseadam_cpp.pickle", data=d, devs=[A], info=info)


class Rec:
    """Forward-pass recorder: sv() saves an output for backward (freed by backward()), tmp() returns
    a temporary the caller frees, prm() marks where backward makes a parameter's gradient."""

    def __init__(self, dv, tape, grad=True):
        self.dv = dv
        self.tape = tape
        self.grad = grad
        self.nograd = []

    def sv(self, size, st, cat="act"):
        b = self.dv.a(size, st if isinstance(st, list) and st and isinstance(st[0], dict) else S(st), cat)
        if self.grad:
            self.tape.save(b)
        else:
            self.nograd.append(b)
        return b

    def tmp(self, size, st, cat="tmp"):
        return self.dv.a(size, st if isinstance(st, list) and st and isinstance(st[0], dict) else S(st), cat)

    def prm(self, key, size):
        if self.grad:
            self.tape.param(key, size)

    def drop(self, keep=()):
        """no_grad: outputs not saved are freed as soon as the next op has them (here: in bulk)."""
        ks = set(id(k) for k in keep)
        rest = [b for b in self.nograd if id(b) not in ks]
        self.nograd = [b for b in self.nograd if id(b) in ks]
        self.dv.fl(rest)


def fill_grads(dv, grads, psz):
    """Gradients of the parameters whose backward position the recorder did not mark (biases, norm
    weights, ...): made by AccumulateGrad at the end of backward (autograd thread, no stack)."""
    for k, v in psz.items():
        if k not in grads:
            grads[k] = dv.a(v, NOSTACK, "grad")


def adam_init(dv, sizes, st1, st2):
    out = []
    for sz in sizes:
        out.append(dv.a(sz, st1, "opt"))
        out.append(dv.a(sz, st2, "opt"))
    return out


# ============================================================================ m02
def build_m02():
    """torch_npu fine-tuning of mengzi-t5-base (12+12 layers, d=768, 12 heads, gated-GELU FFN 2048,
    vocabulary 32,128, untied lm_head; 247.6 M parameters, fp32) for Chinese news summarisation on an
    Ascend 910B, card 5 (ASCEND_RT_VISIBLE_DEVICES=5, 8 device lists).  Length-bucketed batches of 16:
    source 128/256/384/512 with target 64/96/128/160 tokens, drawn in shuffled bucket order; AdamW
    (foreach) made in the first step; zero_grad() sets grads to None.  After 16 steps a validation
    pass (4 batches of 32 at the 512 bucket, torch.no_grad) and torch.npu.empty_cache(), then 6 more
    steps.  Python stacks, no time_us (torch_npu).  Healthy."""
    rng = random.Random(3702)
    STREAM = 1869543552
    A = sim.Allocator(device=5, stream=STREAM, npu=True, capacity=int(60.96 * GB), time_us=False, base=0x12D400000000)
    dv = Dev(A)
    HOME = "/home/ma-user/"
    SP = HOME + "anaconda3/envs/PyTorch-2.1.0/lib/python3.9/site-packages/"
    L = Lib(SP, "2.1")
    app = fr(HOME + "work/新闻摘要/")
    call = L.call()
    TM = SP + "transformers/models/t5/modeling_t5.py"
    t5 = lambda line, name: (TM, line, name)
    NL, D, H, FF, V = 12, 768, 12, 2048, 32128
    RUN = [("<frozen runpy>", 88, "_run_code"), ("<frozen runpy>", 198, "_run_module_as_main")][:0]
    MAIN = [app("train_summ.py", 311, "main"), app("train_summ.py", 340, "<module>")]
    STEP = lambda line: [app("train_summ.py", line, "训练一步"), app("train_summ.py", 252, "训练"), app("train_summ.py", 305, "main")] + MAIN[1:]
    VAL = lambda line: [app("train_summ.py", line, "验证"), app("train_summ.py", 268, "训练"), app("train_summ.py", 305, "main")] + MAIN[1:]
    # ---- parameters (loaded before recording): torch_npu's Module.to
    TO = S([(SP + "torch_npu/utils/_module.py", 76, "convert"), L("torch/nn/modules/module.py", 825, "_apply"),
            L("torch/nn/modules/module.py", 802, "_apply"), L("torch/nn/modules/module.py", 802, "_apply"),
            (SP + "torch_npu/utils/_module.py", 78, "to"), app("train_summ.py", 214, "main")] + MAIN[1:])
    psz = OrderedDict()
    psz["shared"] = V * D * 4
    for side, n in (("enc", NL), ("dec", NL)):
        for l in range(n):
            p = "%s%d." % (side, l)
            for w in ("q", "k", "v", "o"):
                psz[p + "sa." + w] = D * D * 4
            if l == 0:
                psz[p + "sa.rel"] = 32 * H * 4
            psz[p + "ln0"] = D * 4
            if side == "dec":
                for w in ("q", "k", "v", "o"):
                    psz[p + "ca." + w] = D * D * 4
                psz[p + "ln1"] = D * 4
            psz[p + "wi0"] = FF * D * 4
            psz[p + "wi1"] = FF * D * 4
            psz[p + "wo"] = D * FF * 4
            psz[p + "lnf"] = D * 4
        psz[side + ".final_ln"] = D * 4
    psz["lm_head"] = V * D * 4
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    buckets = [(128, 64), (256, 96), (384, 128), (512, 160)]
    grads, state = {}, []

    def ln(R, N, where, line_in):
        NRM = lambda ln_: [t5(ln_, "forward")] + call + where
        p = R.tmp(N * D * 4, NRM(258))
        m = R.tmp(N * 4, NRM(258))
        R.dv.f(p)
        e = R.tmp(N * 4, NRM(259))
        r = R.sv(N * 4, NRM(259))
        R.dv.fl([m, e])
        x = R.sv(N * D * 4, NRM(259))
        R.prm(line_in, D * 4)
        return R.sv(N * D * 4, NRM(265))

    def attn(R, Bb, Lq, Lk, pre, where, kind, bias):
        N, Nk = Bb * Lq, Bb * Lk
        AT = lambda ln_: [t5(ln_, "forward")] + call + where
        LIN = lambda ln_: L.linear() + AT(ln_)
        for w in ("q", "k", "v"):
            R.prm(pre + w, D * D * 4)
        q = R.sv(N * D * 4, LIN(500))
        k = R.sv(Nk * D * 4, LIN(521 if kind == "self" else 522))
        v = R.sv(Nk * D * 4, LIN(525 if kind == "self" else 526))
        if not R.grad:
            pass
        sc = R.tmp(Bb * H * Lq * Lk * 4, AT(530))
        pr = R.sv(Bb * H * Lq * Lk * 4, [L("torch/nn/functional.py", 1858, "softmax")] + AT(563))
        R.dv.f(sc)
        if R.grad:
            R.sv(Bb * H * Lq * Lk, [L("torch/nn/functional.py", 1268, "dropout")] + L.mod("torch/nn/modules/dropout.py", 58) + AT(564), "act")
            R.sv(Bb * H * Lq * Lk * 4, [L("torch/nn/functional.py", 1268, "dropout")] + L.mod("torch/nn/modules/dropout.py", 58) + AT(564))
        c = R.tmp(N * D * 4, AT(571))
        u = R.sv(N * D * 4, [t5(552, "unshape")] + AT(571))
        R.dv.f(c)
        R.prm(pre + "o", D * D * 4)
        return R.sv(N * D * 4, LIN(572))

    def ffn(R, N, pre, where):
        FD = lambda ln_: [t5(ln_, "forward")] + call + [t5(339, "forward")] + call + where
        R.prm(pre + "wi0", FF * D * 4)
        a0 = R.sv(N * FF * 4, L.linear() + FD(314))
        G = [SP + "transformers/activations.py", 57, "forward"]
        g1 = R.tmp(N * FF * 4, [tuple(G)] + call + FD(314))
        g2 = R.tmp(N * FF * 4, [tuple(G)] + call + FD(314))
        R.dv.f(g1)
        g = R.sv(N * FF * 4, [tuple(G)] + call + FD(314))
        R.dv.f(g2)
        R.prm(pre + "wi1", FF * D * 4)
        a1 = R.sv(N * FF * 4, L.linear() + FD(315))
        m = R.sv(N * FF * 4, FD(316))
        if R.grad:
            R.sv(N * FF, [L("torch/nn/functional.py", 1268, "dropout")] + L.mod("torch/nn/modules/dropout.py", 58) + FD(317))
            R.sv(N * FF * 4, [L("torch/nn/functional.py", 1268, "dropout")] + L.mod("torch/nn/modules/dropout.py", 58) + FD(317))
        R.prm(pre + "wo", D * FF * 4)
        return R.sv(N * D * 4, L.linear() + FD(327))

    def forward(R, Bb, Ls, Lt, OUTER):
        """T5ForConditionalGeneration.forward(input_ids, attention_mask, labels)."""
        MODEL = lambda line: [t5(line, "forward")] + call + OUTER
        ENC = lambda line: [t5(line, "forward")] + call + MODEL(1709)
        DEC = lambda line: [t5(line, "forward")] + call + MODEL(1738)
        Ne, Nd = Bb * Ls, Bb * Lt
        R.prm("shared", V * D * 4)
        x = R.sv(Ne * D * 4, L.embedding() + ENC(1014))
        am = R.tmp(Bb * Ls * 4, [t5(1035, "forward")] + call + MODEL(1709))   # extended mask
        # relative position bias, computed by layer 0 and handed to every layer
        BIAS = [t5(432, "compute_bias"), t5(535, "forward")] + call + [t5(603, "forward")] + call + [t5(707, "forward")] + call + ENC(1100)
        rp = R.tmp(Ls * Ls * 8, BIAS)
        bk = R.tmp(Ls * Ls * 8, [t5(405, "_relative_position_bucket")] + BIAS)
        R.prm("enc0.sa.rel", 32 * H * 4)
        vals = R.sv(Ls * Ls * H * 4, L.embedding() + BIAS)
        R.dv.fl([rp, bk])
        pb = R.sv(Bb * H * Ls * Ls * 4, [t5(546, "forward")] + call + [t5(603, "forward")] + call + [t5(707, "forward")] + call + ENC(1100))
        hs = x
        for l in range(NL):
            BLK = lambda ln_: [t5(ln_, "forward")] + call + ENC(1100)
            SA = lambda ln_: [t5(ln_, "forward")] + call + BLK(707)
            p = "enc%d." % l
            h = ln(R, Ne, SA(601), p + "ln0")
            o = attn(R, Bb, Ls, Ls, p + "sa.", [t5(602, "forward")] + call + BLK(707), "self", pb)
            if R.grad:
                R.sv(Ne * D, [L("torch/nn/functional.py", 1268, "dropout")] + L.mod("torch/nn/modules/dropout.py", 58) + SA(605))
            hs = R.sv(Ne * D * 4, SA(605))
            FFL = lambda ln_: [t5(ln_, "forward")] + call + BLK(745)
            h2 = ln(R, Ne, FFL(343), p + "lnf")
            f = ffn(R, Ne, p, FFL(344))
            hs = R.sv(Ne * D * 4, FFL(345))
            if not R.grad:
                R.drop(keep=[hs, pb])
        R.prm("enc.final_ln", D * 4)
        enc = ln(R, Ne, ENC(1133), "enc.final_ln")
        if not R.grad:
            R.drop(keep=[enc])
        # decoder (teacher forcing), causal self-attention + cross-attention
        R.prm("shared", V * D * 4)
        y = R.sv(Nd * D * 4, L.embedding() + DEC(1014))
        cm = R.tmp(Bb * Lt * Lt * 4, [L("transformers/modeling_utils.py", 1004, "get_extended_attention_mask"), t5(1038, "forward")] + call + MODEL(1738))
        dpb = R.sv(Bb * H * Lt * Lt * 4, [t5(546, "forward")] + call + [t5(603, "forward")] + call + [t5(707, "forward")] + call + DEC(1100))
        for l in range(NL):
            BLK = lambda ln_: [t5(ln_, "forward")] + call + DEC(1100)
            p = "dec%d." % l
            SA = lambda ln_: [t5(ln_, "forward")] + call + BLK(707)
            h = ln(R, Nd, SA(601), p + "ln0")
            o = attn(R, Bb, Lt, Lt, p + "sa.", [t5(602, "forward")] + call + BLK(707), "self", dpb)
            hs = R.sv(Nd * D * 4, SA(605))
            CA = lambda ln_: [t5(ln_, "forward")] + call + BLK(733)
            h = ln(R, Nd, CA(636), p + "ln1")
            o = attn(R, Bb, Lt, Ls, p + "ca.", [t5(637, "forward")] + call + BLK(733), "cross", None)
            hs = R.sv(Nd * D * 4, CA(646))
            FFL = lambda ln_: [t5(ln_, "forward")] + call + BLK(745)
            h2 = ln(R, Nd, FFL(343), p + "lnf")
            f = ffn(R, Nd, p, FFL(344))
            hs = R.sv(Nd * D * 4, FFL(345))
            if not R.grad:
                R.drop(keep=[enc, hs, dpb])
        R.prm("dec.final_ln", D * 4)
        dec = ln(R, Nd, DEC(1133), "dec.final_ln")
        R.prm("lm_head", V * D * 4)
        logits = R.sv(Nd * V * 4, L.linear() + MODEL(1752))
        LS = [L("torch/nn/functional.py", 3053, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1179) + MODEL(1757)
        lsm = R.sv(Nd * V * 4, LS)
        loss = R.tmp(4, LS)
        R.dv.fl([am, cm])
        return loss, logits

    order = []
    while True:
        order = []
        for rep in range(6):
            bl = list(range(4))
            rng.shuffle(bl)
            order += bl
        order = order[:22]
        if order.index(3) >= 3 and order[16] != 3:
            break
    peaks = []
    for step in range(22):
        if step == 16:
            # validation, no_grad, batches of 32 at the longest bucket
            for vb in range(4):
                R = Rec(dv, None, grad=False)
                src = dv.a(32 * 512 * 8, S(VAL(188)), "input")
                tgt = dv.a(32 * 160 * 8, S(VAL(189)), "input")
                loss, logits = forward(R, 32, 512, 160, VAL(191))
                dv.wait(rng.randint(80000, 120000))
                dv.f(loss)
                R.drop()
                dv.fl([src, tgt])
            A.empty_cache(S([(SP + "torch_npu/npu/memory.py", 153, "empty_cache"), app("train_summ.py", 201, "验证"), app("train_summ.py", 268, "训练"), app("train_summ.py", 305, "main")] + MAIN[1:]))
        Ls, Lt = buckets[order[step]]
        Bb = 16
        R = Rec(dv, __import__("common").Tape())
        src = dv.a(Bb * Ls * 8, S(STEP(163)), "input")
        msk = dv.a(Bb * Ls * 8, S(STEP(164)), "input")
        lab = dv.a(Bb * Lt * 8, S(STEP(165)), "input")
        loss, logits = forward(R, Bb, Ls, Lt, STEP(168))
        dv.wait(rng.randint(60000, 90000))
        __import__("common").backward(dv, R.tape, grads)
        fill_grads(dv, grads, psz)
        dv.f(loss)
        dv.wait(rng.randint(60000, 90000))
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), L("torch/optim/lr_scheduler.py", 68, "wrapper"), app("train_summ.py", 176, "训练一步"), app("train_summ.py", 252, "训练"), app("train_summ.py", 305, "main")] + MAIN[1:]
        if not state:
            state = adam_init(dv, psz.values(), S([L("torch/optim/adamw.py", 124, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT),
                              S([L("torch/optim/adamw.py", 128, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adamw.py", 566, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 825, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train_summ.py", 178, "训练一步"), app("train_summ.py", 252, "训练"), app("train_summ.py", 305, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        dv.fl([src, msk, lab])
        dv.wait(rng.randint(20000, 30000))
    info = dict(param_bytes=sum(psz.values()), steps=22, order=[buckets[i] for i in order], opt_bytes=2 * sum(psz.values()))
    d = write([A], kind="npu", n_dev_lists=8)
    return dict(name="m02_mengzi_t5_summ_bucket_npu5.pkl", data=d, devs=[A], info=info)


# ============================================================================ m03
def build_m03():
    """Burst denoising with a kernel-prediction network (KPN, Mildenhall et al. 2018): a U-Net takes a
    burst of 8 RGB frames plus a noise map (25 channels) and predicts a 5x5 kernel per pixel and per
    frame (200 channels); apply_kernels() unfolds every frame's 5x5 neighbourhoods with F.unfold and
    multiplies them by the kernels.  Trained on 128x128 crops, batch 16, fp32, Adam, on a 24 GB
    TITAN RTX, torch 2.0.1 (2023 format: no time_us, no allocator_settings).  After 6 steps the
    validation runs one full 3072x2048 burst under torch.no_grad(): F.unfold returns
    (1, 600, 6,291,456) fp32 (14.06 GiB) and the product with the kernels asks for as much again:
    out of memory.  The snapshot is dumped in the except handler (the traceback still holds the
    unfolded burst and the kernels)."""
    rng = random.Random(3703)
    A = sim.Allocator(device=0, capacity=int(23.65 * GB), time_us=False, seg_frames=False, base=0x7F4E1C000000)
    dv = Dev(A)
    SP = "/home/lab/miniconda3/envs/kpn/lib/python3.10/site-packages/"
    L = Lib(SP, "2.0")
    app = fr("/home/lab/projects/burst-kpn/")
    call = L.call()
    MAIN = [app("train_kpn.py", 214, "main"), app("train_kpn.py", 236, "<module>")]
    TRAIN = lambda line: [app("train_kpn.py", line, "train_one_epoch"), app("train_kpn.py", 199, "main")] + MAIN[1:]
    VALID = lambda line: [app("train_kpn.py", line, "validate"), app("train_kpn.py", 205, "main")] + MAIN[1:]
    NB, K = 8, 5
    enc = [[(25, 64), (64, 64)], [(64, 128), (128, 128)], [(128, 256), (256, 256), (256, 256)],
           [(256, 512), (512, 512), (512, 512)], [(512, 512), (512, 512), (512, 512)]]
    dec = [[(1024, 512), (512, 512), (512, 512)], [(768, 256), (256, 256), (256, 256)],
           [(384, 128), (128, 128), (128, 128)], [(192, 64), (64, 64)]]
    outc = (64, NB * K * K)
    psz = OrderedDict()
    for i, lv in enumerate(enc):
        for j, (ci, co) in enumerate(lv):
            psz["e%d.%d.w" % (i, j)] = ci * co * 9 * 4
            psz["e%d.%d.b" % (i, j)] = co * 4
    for i, lv in enumerate(dec):
        for j, (ci, co) in enumerate(lv):
            psz["d%d.%d.w" % (i, j)] = ci * co * 9 * 4
            psz["d%d.%d.b" % (i, j)] = co * 4
    psz["out.w"] = outc[0] * outc[1] * 9 * 4
    psz["out.b"] = outc[1] * 4
    TO = S(L.convert() + [app("train_kpn.py", 181, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    info = dict(param_bytes=sum(psz.values()))
    grads, state = {}, []
    Common = __import__("common")

    def unet(R, Bb, Hh, Ww, OUT):
        KP = lambda line: [app("kpn/model.py", line, "forward")] + call + OUT
        BL = lambda line, nm: [app("kpn/model.py", line, "forward")] + call + [L("torch/nn/modules/container.py", 217, "forward")] + call + KP(nm)
        CONV = lambda line, nm: [L("torch/nn/modules/conv.py", 459, "_conv_forward"), L("torch/nn/modules/conv.py", 463, "forward")] + call + BL(line, nm)
        skips = []
        x = None
        h, w = Hh, Ww
        for i, lv in enumerate(enc):
            if i > 0:
                x_ = R.sv(Bb * lv[0][0] * (h // 2) * (w // 2) * 4, [L("torch/nn/modules/pooling.py", 630, "forward")] + call + KP(88))
                h, w = h // 2, w // 2
                x = x_
                if not R.grad:
                    R.drop(keep=skips + [x])
            for j, (ci, co) in enumerate(lv):
                R.prm("e%d.%d.w" % (i, j), ci * co * 9 * 4)
                R.prm("e%d.%d.b" % (i, j), co * 4)
                y = R.sv(Bb * co * h * w * 4, CONV(31, 86))
                if R.grad:
                    y = R.sv(Bb * co * h * w * 4, [L("torch/nn/functional.py", 1457, "relu")] + L.mod("torch/nn/modules/activation.py", 103) + BL(32, 86))
                x = y
                if not R.grad:
                    R.drop(keep=skips + [x])
            skips.append(x)
        skips.pop()
        for i, lv in enumerate(dec):
            sk = skips.pop()
            cin_up = lv[0][0] - (sk.req // (Bb * h * 2 * w * 2 * 4))
            up = R.sv(Bb * cin_up * (h * 2) * (w * 2) * 4, [L("torch/nn/functional.py", 3959, "interpolate"), app("kpn/model.py", 94, "forward")] + call + OUT)
            h, w = h * 2, w * 2
            cat = R.sv(Bb * lv[0][0] * h * w * 4, KP(95))
            if not R.grad:
                R.drop(keep=skips + [cat])
            x = cat
            for j, (ci, co) in enumerate(lv):
                R.prm("d%d.%d.w" % (i, j), ci * co * 9 * 4)
                R.prm("d%d.%d.b" % (i, j), co * 4)
                y = R.sv(Bb * co * h * w * 4, CONV(31, 96))
                if R.grad:
                    y = R.sv(Bb * co * h * w * 4, [L("torch/nn/functional.py", 1457, "relu")] + L.mod("torch/nn/modules/activation.py", 103) + BL(32, 96))
                x = y
                if not R.grad:
                    R.drop(keep=skips + [x])
        R.prm("out.w", outc[0] * outc[1] * 9 * 4)
        R.prm("out.b", outc[1] * 4)
        ker = R.sv(Bb * outc[1] * h * w * 4, [L("torch/nn/modules/conv.py", 459, "_conv_forward"), L("torch/nn/modules/conv.py", 463, "forward")] + call + KP(98))
        if not R.grad:
            R.drop(keep=[ker])
        return ker

    def apply_kernels(R, Bb, Hh, Ww, ker, OUT):
        AK = lambda line: [app("kpn/model.py", line, "apply_kernels"), app("kpn/model.py", 101, "forward")] + call + OUT
        n = Bb * NB * 3 * K * K * Hh * Ww * 4
        unf = R.sv(n, [L("torch/nn/functional.py", 4697, "unfold")] + AK(58))
        prod = R.sv(n, AK(61))
        out = R.sv(Bb * NB * 3 * Hh * Ww * 4, AK(62))
        return R.sv(Bb * 3 * Hh * Ww * 4, AK(63))

    Bb, Hc = 16, 128
    for step in range(6):
        R = Rec(dv, Common.Tape())
        burst = dv.a(Bb * NB * 3 * Hc * Hc * 4, S(TRAIN(151)), "input")
        nm = dv.a(Bb * Hc * Hc * 4, S(TRAIN(152)), "input")
        clean = dv.a(Bb * 3 * Hc * Hc * 4, S(TRAIN(153)), "input")
        inp = R.sv(Bb * 25 * Hc * Hc * 4, [app("kpn/model.py", 84, "forward")] + call + TRAIN(156))
        ker = unet(R, Bb, Hc, Hc, TRAIN(156))
        y = apply_kernels(R, Bb, Hc, Hc, ker, TRAIN(156))
        LS = [app("kpn/losses.py", 19, "forward")] + call + TRAIN(157)
        d1 = dv.a(Bb * 3 * Hc * Hc * 4, S(LS), "tmp")
        d2 = dv.a(Bb * 3 * Hc * Hc * 4, S(LS), "tmp")
        loss = dv.a(4, S(LS), "tmp")
        dv.fl([d1, d2])
        Common.backward(dv, R.tape, grads)
        fill_grads(dv, grads, psz)
        OPT = [L("torch/optim/optimizer.py", 280, "wrapper"), app("train_kpn.py", 160, "train_one_epoch"), app("train_kpn.py", 199, "main")] + MAIN[1:]
        if not state:
            state = adam_init(dv, psz.values(), S([L("torch/optim/adam.py", 110, "_init_group"), L("torch/optim/adam.py", 141, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT),
                              S([L("torch/optim/adam.py", 112, "_init_group"), L("torch/optim/adam.py", 141, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adam.py", 479, "_multi_tensor_adam"), L("torch/optim/adam.py", 284, "adam"), L("torch/optim/adam.py", 152, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 435, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train_kpn.py", 161, "train_one_epoch"), app("train_kpn.py", 199, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        dv.fl([burst, nm, clean, loss])
    # validation on one full-resolution burst
    Hh, Ww = 2048, 3072
    R = Rec(dv, None, grad=False)
    vb = dv.a(NB * 3 * Hh * Ww * 4, S(VALID(182)), "input")
    vn = dv.a(Hh * Ww * 4, S(VALID(183)), "input")
    inp = R.sv(25 * Hh * Ww * 4, [app("kpn/model.py", 84, "forward")] + call + VALID(186))
    ker = unet(R, 1, Hh, Ww, VALID(186))
    oom = None
    try:
        apply_kernels(R, 1, Hh, Ww, ker, VALID(186))
    except sim.OOMError as e:
        oom = dict(size=e.size, free=e.free)
    info.update(oom_request=oom["size"], oom_free=oom["free"], unfold_bytes=NB * 3 * K * K * Hh * Ww * 4,
                kernels_bytes=NB * K * K * Hh * Ww * 4, steps=6, opt_bytes=2 * sum(psz.values()))
    d = write([A], settings=False)
    return dict(name="m03_kpn_burst_denoise_2023.pickle", data=d, devs=[A], info=info)


# ============================================================================ m04
def build_m04():
    """XMem video object segmentation served behind an internal annotation tool: ResNet-50 key
    encoder, ResNet-18 value encoder, fp32, on an A10G (24 GB).  Per video the memory store keeps a
    working memory (at most 10 memory frames, one every 5 frames, grown with torch.cat) and a
    long-term memory of prototypes capped at 10,000 elements (consolidated when the working memory is
    full).  The first two videos ran at 720p, one after the other (affinity matrices of up to
    0.66 GB per frame); then four annotators' 480p videos ran interleaved.  Each session also keeps
    its per-frame uint8 masks on the device for the UI until the video is closed.
    _record_memory_history(enabled="state") at start-up; the dump was taken through
    the /debug/memory endpoint while four annotators were at frames 712, 545, 318 and 237 of their 480p videos.  State only.  Healthy."""
    rng = random.Random(3704)
    A = sim.Allocator(device=0, capacity=int(22.06 * GB), time_us=False, base=0x7F0A3E000000)
    dv = Dev(A)
    SP = "/opt/venv/lib/python3.10/site-packages/"
    L = Lib(SP, "2.2")
    xm = fr("/opt/xmem/")
    app = fr("/opt/vos-service/")
    call = L.call()
    SRV = [app("worker.py", 97, "segment_frame"), app("worker.py", 142, "run_video"), app("worker.py", 181, "handle_job"),
           ("/usr/lib/python3.10/threading.py", 953, "run"), ("/usr/lib/python3.10/threading.py", 1016, "_bootstrap_inner"), ("/usr/lib/python3.10/threading.py", 973, "_bootstrap")]
    STEP = lambda line: [xm("inference/inference_core.py", line, "step")] + SRV
    LOAD = S(L.convert() + [app("model_store.py", 44, "load_xmem"), app("worker.py", 61, "__init__"), app("service.py", 38, "main"), app("service.py", 77, "<module>")])
    wsz = []

    def conv_bn(cin, cout, k):
        wsz.append(cin * cout * k * k * 4)
        wsz.extend([cout * 4, cout * 4, cout * 4, cout * 4, 8])     # bn weight, bias, running mean / var, num_batches_tracked
    conv_bn(3, 64, 7)
    cin = 64
    for width, nblk in ((64, 3), (128, 4), (256, 6)):
        for i in range(nblk):
            conv_bn(cin, width, 1)
            conv_bn(width, width, 3)
            conv_bn(width, width * 4, 1)
            if i == 0:
                conv_bn(cin, width * 4, 1)
            cin = width * 4
    conv_bn(5, 64, 7)
    cin = 64
    for width in (64, 128, 256):
        for i in range(2):
            conv_bn(cin, width, 3)
            conv_bn(width, width, 3)
            if i == 0 and cin != width:
                conv_bn(cin, width, 1)
            cin = width
    wsz += [64 * 1024 * 9 * 4, 1024 * 4, 512 * 1536 * 9 * 4, 512 * 512 * 9 * 4, 512 * 512 * 9 * 4, 256 * 512 * 9 * 4, 256 * 256 * 9 * 4, 512 * 1024 * 9 * 4, 512 * 4 * 9 * 4, 1 * 256 * 9 * 4, 64 * 512 * 4]
    for s in wsz:
        dv.a(s, LOAD, "param")
    MAXF, LTCAP = 10, 10000
    kept = {}

    def video(h16, w16, nobj, frames, stop_at=None):
        HW = h16 * w16
        mem = dict(wk=None, wv=None, nwf=0, lk=None, lv=None, lt=0)
        masks = []
        sens = dv.a(nobj * 64 * h16 * w16 * 4, S([xm("inference/memory_manager.py", 262, "create_hidden_state")] + STEP(104)), "state")
        KS = lambda line: [xm("inference/kv_memory_store.py", line, "add"), xm("inference/memory_manager.py", 231, "add_memory")] + STEP(127)
        for f in range(frames):
            if stop_at is not None and f == stop_at:
                return
            ENC = lambda line: [xm("model/network.py", line, "encode_key")] + STEP(95)
            fi = dv.a(3 * h16 * 16 * w16 * 16 * 4, S([app("worker.py", 91, "segment_frame")] + SRV[1:]), "input")
            f4 = dv.a(256 * h16 * 4 * w16 * 4 * 4, S(L.conv2d() + [xm("model/modules.py", 128, "forward")] + call + ENC(61)), "tmp")
            f8 = dv.a(512 * h16 * 2 * w16 * 2 * 4, S(L.conv2d() + [xm("model/modules.py", 129, "forward")] + call + ENC(61)), "tmp")
            f16 = dv.a(1024 * HW * 4, S(L.conv2d() + [xm("model/modules.py", 130, "forward")] + call + ENC(61)), "tmp")
            key = dv.a(64 * HW * 4, S(L.conv2d() + [xm("model/modules.py", 202, "forward")] + call + ENC(63)), "tmp")
            shr = dv.a(HW * 4, S(L.conv2d() + [xm("model/modules.py", 204, "forward")] + call + ENC(63)), "tmp")
            sel = dv.a(64 * HW * 4, S(L.conv2d() + [xm("model/modules.py", 205, "forward")] + call + ENC(63)), "tmp")
            if mem["wk"] is not None:
                N = mem["nwf"] * HW + mem["lt"]
                RD = lambda line, fn="get_affinity": [xm("model/memory_util.py", line, fn), xm("inference/memory_manager.py", 118, "_readout")] + [xm("inference/memory_manager.py", 171, "match_memory")] + STEP(112)
                b2 = dv.a(N * HW * 4, S(RD(31)), "tmp")
                tk = dv.a(30 * HW * 4, S(RD(49, "do_softmax")), "tmp")
                ti = dv.a(30 * HW * 8, S(RD(49, "do_softmax")), "tmp")
                af = dv.a(N * HW * 4, S(RD(57, "do_softmax")), "tmp")
                dv.fl([b2, tk, ti])
                ro = dv.a(nobj * 512 * HW * 4, S([xm("inference/memory_manager.py", 79, "_readout")] + [xm("inference/memory_manager.py", 171, "match_memory")] + STEP(112)), "tmp")
                dv.f(af)
                DEC = lambda line: [xm("model/network.py", line, "segment")] + STEP(114)
                g1 = dv.a(nobj * 512 * HW * 4, S([xm("model/modules.py", 271, "forward")] + call + DEC(92)), "tmp")
                g2 = dv.a(nobj * 256 * HW * 4 * 4, S([xm("model/modules.py", 277, "forward")] + call + DEC(92)), "tmp")
                dv.f(g1)
                g3 = dv.a(nobj * 256 * HW * 16 * 4, S([xm("model/modules.py", 278, "forward")] + call + DEC(92)), "tmp")
                dv.f(g2)
                lg = dv.a(nobj * HW * 16 * 4, S([xm("model/modules.py", 283, "forward")] + call + DEC(92)), "tmp")
                dv.f(g3)
                prob = dv.a((nobj + 1) * HW * 256 * 4, S([L("torch/nn/functional.py", 3983, "interpolate")] + DEC(95)), "tmp")
                dv.fl([lg, ro])
            else:
                prob = dv.a((nobj + 1) * HW * 256 * 4, S([app("worker.py", 88, "segment_frame")] + SRV[1:]), "tmp")
            if f % 5 == 0:
                VE = lambda line: [xm("model/network.py", line, "encode_value")] + STEP(122)
                v1 = dv.a(nobj * 64 * HW * 16 * 4, S(L.conv2d() + [xm("model/modules.py", 160, "forward")] + call + VE(71)), "tmp")
                v2 = dv.a(nobj * 256 * HW * 4, S(L.conv2d() + [xm("model/modules.py", 168, "forward")] + call + VE(71)), "tmp")
                dv.f(v1)
                val = dv.a(nobj * 512 * HW * 4, S([xm("model/modules.py", 176, "forward")] + call + VE(71)), "tmp")
                dv.f(v2)
                nh = dv.a(nobj * 64 * HW * 4, S([xm("model/modules.py", 189, "forward")] + call + VE(71)), "state")
                dv.f(sens)
                sens = nh
                # working memory grows by concatenation
                if mem["wk"] is None:
                    mem["wk"] = dv.a(64 * HW * 4, S(KS(79)), "memory")
                    mem["wv"] = dv.a(nobj * 512 * HW * 4, S(KS(86)), "memory")
                    mem["nwf"] = 1
                else:
                    n = mem["nwf"] + 1
                    nk = dv.a(64 * n * HW * 4, S(KS(93)), "memory")
                    dv.f(mem["wk"])
                    nv = dv.a(nobj * 512 * n * HW * 4, S(KS(99)), "memory")
                    dv.f(mem["wv"])
                    mem["wk"], mem["wv"], mem["nwf"] = nk, nv, n
                dv.f(val)
                if mem["nwf"] > MAXF:
                    # consolidation: keep 5 frames, move prototypes of the oldest to long-term (capped)
                    CO = lambda line: [xm("inference/memory_manager.py", line, "compress_features"), xm("inference/memory_manager.py", 243, "add_memory")] + STEP(127)
                    pt = dv.a(64 * 128 * 4, S(CO(301)), "tmp")
                    add = min(LTCAP, mem["lt"] + HW // 8 * (mem["nwf"] - 5))
                    if add >= LTCAP:
                        add = LTCAP
                    lk = dv.a(64 * add * 4, S([xm("inference/kv_memory_store.py", 129, "add")] + CO(287)[:0] + [xm("inference/memory_manager.py", 287, "compress_features"), xm("inference/memory_manager.py", 243, "add_memory")] + STEP(127)), "memory")
                    lv = dv.a(nobj * 512 * add * 4, S([xm("inference/kv_memory_store.py", 135, "add"), xm("inference/memory_manager.py", 287, "compress_features"), xm("inference/memory_manager.py", 243, "add_memory")] + STEP(127)), "memory")
                    if mem["lk"] is not None:
                        dv.fl([mem["lk"], mem["lv"]])
                    mem["lk"], mem["lv"], mem["lt"] = lk, lv, add
                    dv.f(pt)
                    keep = 5
                    nk = dv.a(64 * keep * HW * 4, S([xm("inference/kv_memory_store.py", 161, "sieve_by_range"), xm("inference/memory_manager.py", 290, "compress_features"), xm("inference/memory_manager.py", 243, "add_memory")] + STEP(127)), "memory")
                    nv = dv.a(nobj * 512 * keep * HW * 4, S([xm("inference/kv_memory_store.py", 163, "sieve_by_range"), xm("inference/memory_manager.py", 290, "compress_features"), xm("inference/memory_manager.py", 243, "add_memory")] + STEP(127)), "memory")
                    dv.fl([mem["wk"], mem["wv"]])
                    mem["wk"], mem["wv"], mem["nwf"] = nk, nv, keep
            dv.fl([fi, f4, f8, f16, key, shr, sel])
            masks.append(dv.a(h16 * 16 * w16 * 16, S([app("results.py", 52, "store_mask"), app("worker.py", 101, "segment_frame")] + SRV[1:]), "masks"))
            dv.f(prob)
            yield f
        dv.fl(masks)
        for k in ("wk", "wv", "lk", "lv"):
            if mem[k] is not None:
                dv.f(mem[k])
        dv.f(sens)
        kept.clear()

    for _ in video(45, 80, 2, 180):
        pass
    for _ in video(45, 80, 3, 140):
        pass
    # now four annotators' sessions at 480p, interleaved frame by frame; the dump stops them
    stops = [712, 545, 318, 237]
    gens = [video(30, 54, n, 900, stop_at=st) for n, st in zip((2, 1, 3, 2), stops)]
    live = list(gens)
    while live:
        g = rng.choice(live)
        try:
            next(g)
        except StopIteration:
            live.remove(g)
    info = dict(param_bytes=sum(wsz))
    d = write([A], state_only=True)
    return dict(name="m04_xmem_vos_service_state.pickle", data=d, devs=[A], info=info)


# ============================================================================ m05
def build_m05():
    """A CCTV super-resolution service: BasicVSR++ (mmagic 1.2, fp16, torch.inference_mode) upscales
    motion-triggered clips 480x270 -> 1920x1080.  Four camera workers, each a thread with its own
    torch.cuda.Stream(), take clips of 8-60 frames from their camera's queue; all four share one
    L4 (24 GB).  torch 2.3, _record_memory_history(max_entries=40000): the trace is the last 40,000
    events of a run of 28 clips (5 of them start inside the window), so it starts mid-clip.  Problem: every stream keeps its own cached
    blocks, so the cache holds up to four clips' worth of memory; when a stream needs more than its
    own free blocks and the card is full of the other streams' cached segments, the allocator frees
    every cached segment and retries (stalls)."""
    rng = random.Random(3735)
    clock = sim.Clock(1716900000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(22.05 * GB), clock=clock, base=0x7F61A0000000)
    A.free_us_per_gb = 24000
    dv = Dev(A)
    SP = "/srv/vsr/.venv/lib/python3.10/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/srv/vsr/app/")
    call = L.call()
    NET = SP + "mmagic/models/editors/basicvsr_plusplus_net/basicvsr_plusplus_net.py"
    SPY = SP + "mmagic/models/editors/basicvsr/basicvsr_net.py"
    net = lambda line, name: (NET, line, name)
    spy = lambda line, name: (SPY, line, name)
    LOAD = S(L.convert() + [app("model.py", 36, "load_model"), app("service.py", 58, "main"), app("service.py", 104, "<module>")])
    wsz = [64 * 3 * 9 * 2, 64 * 2] + [64 * 64 * 9 * 2, 64 * 2] * 10
    for br in range(4):
        wsz += [64 * (2 + br) * 64 * 9 * 2, 64 * 2] + [64 * 64 * 9 * 2, 64 * 2] * 14
        wsz += [64 * 196 * 9 * 2, 64 * 2, 64 * 64 * 9 * 2, 64 * 2, 64 * 64 * 9 * 2, 64 * 2, 432 * 64 * 9 * 2, 432 * 2, 64 * 64 * 9 * 2, 64 * 2]
    wsz += [64 * 320 * 9 * 2, 64 * 2] + [64 * 64 * 9 * 2, 64 * 2] * 10 + [256 * 64 * 9 * 2, 256 * 2, 256 * 64 * 9 * 2, 256 * 2, 64 * 64 * 9 * 2, 64 * 2, 3 * 64 * 9 * 2, 3 * 2]
    for lv in range(6):
        wsz += [32 * 8 * 49 * 2, 32 * 2, 64 * 32 * 49 * 2, 64 * 2, 32 * 64 * 49 * 2, 32 * 2, 16 * 32 * 49 * 2, 16 * 2, 2 * 16 * 49 * 2, 2 * 2]
    for s in wsz:
        dv.a(s, LOAD, "param")
    STREAMS = [94830518426688, 94830518430816, 94830519012480, 94830519016608]
    W, H = 480, 270
    FM = 64 * H * W * 2
    OUTF = 3 * H * 4 * W * 4 * 2

    def worker(cam, sid):
        TH = [("/usr/lib/python3.10/threading.py", 953, "run"), ("/usr/lib/python3.10/threading.py", 1016, "_bootstrap_inner"), ("/usr/lib/python3.10/threading.py", 973, "_bootstrap")]
        WK = lambda line: [app("worker.py", line, "process_clip"), app("worker.py", 131, "camera_loop")] + TH
        FW = lambda line, fn="forward": [net(line, fn)] + ([net(384, "forward")] if fn != "forward" else []) + call + WK(97)
        while True:
            T = rng.choice([10, 15, 20, 24, 30, 30, 36, 45, 45, 60])
            A.stream = sid
            lq = dv.a(T * 3 * H * W * 2, S(WK(92)), "input")
            yield
            A.stream = sid
            # optical flow (SPyNet) in both directions
            flows = []
            CF = lambda line: [spy(line, "forward")] + call + [net(259, "compute_flow"), net(384, "forward")] + call + WK(97)
            for i in range(2 * (T - 1)):
                t1 = dv.a(2 * H * W * 4 // 4, S([spy(403, "compute_flow")] + CF(427)), "tmp")
                t2 = dv.a(2 * H * W * 4, S([L("torch/nn/functional.py", 4070, "interpolate"), spy(431, "forward")] + call + [net(259, "compute_flow"), net(384, "forward")] + call + WK(97)), "tmp")
                dv.f(t1)
                flows.append(t2)
            yield
            A.stream = sid
            feats = {"spatial": []}
            for i in range(T):
                x = dv.a(FM, S(L.conv2d() + [L("torch/nn/modules/container.py", 219, "forward")] + call + FW(366)), "act")
                feats["spatial"].append(x)
            yield
            for br in ("backward_1", "forward_1", "backward_2", "forward_2"):
                A.stream = sid
                out = []
                PR = lambda line: [net(line, "propagate"), net(398, "forward")] + call + WK(97)
                for i in range(T):
                    g = dv.a(H * W * 2 * 4, S([(SP + "mmagic/models/editors/basicvsr/basicvsr_net.py", 322, "flow_warp"), net(309, "propagate"), net(398, "forward")] + call + WK(97)), "tmp")
                    wf = dv.a(FM, S([L("torch/nn/functional.py", 4467, "grid_sample"), (SP + "mmagic/models/editors/basicvsr/basicvsr_net.py", 330, "flow_warp"), net(309, "propagate"), net(398, "forward")] + call + WK(97)), "tmp")
                    dv.f(g)
                    cond = dv.a(3 * FM + 4 * H * W * 2, S(PR(326)), "tmp")
                    DA = lambda line: [net(line, "forward")] + call + PR(327)
                    o1 = dv.a(FM, S(L.conv2d() + [L("torch/nn/modules/container.py", 219, "forward")] + call + DA(455)), "tmp")
                    dv.f(cond)
                    off = dv.a(27 * 16 * H * W * 2, S(L.conv2d() + [L("torch/nn/modules/container.py", 219, "forward")] + call + DA(455)), "tmp")
                    dv.f(o1)
                    dc = dv.a(FM, S([(SP + "mmcv/ops/modulated_deform_conv.py", 114, "forward"), L("torch/autograd/function.py", 553, "apply"), DA(470)[0]] + DA(470)[1:]), "tmp")
                    dv.f(off)
                    cat = dv.a(FM * (2 + ("backward_2", "forward_2").count(br) + 1), S(PR(335)), "tmp")
                    dv.f(wf)
                    r = dv.a(FM, S(L.conv2d() + [L("torch/nn/modules/container.py", 219, "forward")] + call + [net(73, "forward")] + call + PR(336)), "tmp")
                    dv.f(cat)
                    o = dv.a(FM, S(PR(337)), "act")
                    dv.fl([r, dc])
                    out.append(o)
                    if i % 6 == 5:
                        yield
                        A.stream = sid
                feats[br] = out
                yield
            A.stream = sid
            outs = []
            UP = lambda line: [net(line, "upsample"), net(401, "forward")] + call + WK(97)
            for i in range(T):
                c5 = dv.a(5 * FM, S(UP(356)), "tmp")
                h1 = dv.a(FM, S(L.conv2d() + [L("torch/nn/modules/container.py", 219, "forward")] + call + UP(357)), "tmp")
                dv.f(c5)
                u1 = dv.a(4 * FM, S(L.conv2d() + [net(530, "forward")] + call + UP(358)), "tmp")
                p1 = dv.a(4 * FM, S([L("torch/nn/modules/pixelshuffle.py", 58, "forward")] + call + [net(531, "forward")] + call + UP(358)), "tmp")
                dv.fl([u1, h1])
                u2 = dv.a(16 * FM, S(L.conv2d() + [net(530, "forward")] + call + UP(359)), "tmp")
                p2 = dv.a(16 * FM, S([L("torch/nn/modules/pixelshuffle.py", 58, "forward")] + call + [net(531, "forward")] + call + UP(359)), "tmp")
                dv.fl([u2, p1])
                h2 = dv.a(16 * FM, S(L.conv2d() + UP(360)), "tmp")
                dv.f(p2)
                o = dv.a(OUTF, S(L.conv2d() + UP(361)), "tmp")
                dv.f(h2)
                b = dv.a(OUTF, S([L("torch/nn/functional.py", 4070, "interpolate")] + UP(363)), "tmp")
                o2 = dv.a(OUTF, S(UP(363)), "act")
                dv.fl([o, b])
                outs.append(o2)
                if i % 4 == 3:
                    yield
                    A.stream = sid
            st = dv.a(T * OUTF, S(UP(365)), "act")
            dv.fl(outs)
            for br in ("spatial", "backward_1", "forward_1", "backward_2", "forward_2"):
                dv.fl(feats[br])
            dv.fl(flows)
            yield
            A.stream = sid
            dv.f(st, S(WK(104)))
            dv.f(lq, S(WK(104)))
            yield

    gens = [worker(c, sid) for c, sid in enumerate(STREAMS)]
    n = 0
    while len(A.trace) < 160000:
        g = rng.choice(gens)
        next(g)
        dv.wait(rng.randint(200, 3000))
        n += 1
    n0 = len(A.trace) - 40000
    info = dict(param_bytes=sum(wsz), max_entries=40000, streams=STREAMS, stalls_total=len(A.stalls),
                stalls_in_window=[[s_[0] - n0, s_[1], s_[2], s_[3]] for s_ in A.stalls if s_[0] >= n0])
    d = write([A], max_entries=40000)
    return dict(name="m05_basicvsrpp_cctv_4streams_ring.pickle", data=d, devs=[A], info=info)


# ============================================================================ m06
def build_m06():
    """GRPO fine-tuning of Qwen2.5-0.5B-Instruct on GSM8K-style maths prompts with the team's own
    trainer (grpo_trainer.py): the policy, a frozen reference copy and AdamW (foreach, bf16 state) on
    cuda:0; a vLLM engine (enforce_eager, gpu_memory_utilization=0.3) and a 0.5B reward model on
    cuda:1.  Each step: 2 prompts x 4 samples, 192 prompt + 128 completion tokens, generated on
    cuda:1, scored by the reward model there, then one policy update on cuda:0 (bf16, no
    checkpointing).  _policy_logps() builds torch.distributions.Categorical(logits=logits / T) over
    the completion positions and takes dist.entropy() for logging; training_step() appends
    entropy.mean() -- a tensor that still has its graph -- to self.entropy_log.  The entropy branch
    is never part of the loss, so backward() never frees its saved tensors: every kept 4-byte scalar
    pins the normalised logits, their clamp and the softmax probabilities (3 x 622 MB) of its step.
    torch 2.4, both devices recorded from the first step, 10 steps.  Problem: a leak."""
    rng = random.Random(3706)
    clock = sim.Clock(1730100000000000, rng, (3, 10))
    A0 = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, base=0x7F1B60000000)
    A1 = sim.Allocator(device=1, capacity=int(79.15 * GB), clock=clock, base=0x7F0E40000000)
    d0, d1 = Dev(A0), Dev(A1)
    SP = "/home/rl/miniforge3/envs/grpo/lib/python3.11/site-packages/"
    L = Lib(SP, "2.4")
    app = fr("/home/rl/grpo-math/")
    call = L.call()
    QW = SP + "transformers/models/qwen2/modeling_qwen2.py"
    qw = lambda line, name: (QW, line, name)
    VL = lambda f, line, name: (SP + "vllm/" + f, line, name)
    NL, D, I, V, KVD = 24, 896, 4864, 151936, 128
    MAIN = [app("train_grpo.py", 88, "main"), app("train_grpo.py", 121, "<module>")]
    TS = lambda line: [app("grpo_trainer.py", line, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
    psz = OrderedDict()
    psz["embed"] = V * D * 2
    for l in range(NL):
        p = "l%d." % l
        for n, s in (("q", D * D), ("qb", D), ("k", KVD * D), ("kb", KVD), ("v", KVD * D), ("vb", KVD), ("o", D * D),
                     ("g", I * D), ("u", I * D), ("d", D * I), ("n1", D), ("n2", D)):
            psz[p + n] = s * 2
    psz["norm"] = D * 2
    LOADP = S(L.convert() + [app("grpo_trainer.py", 58, "__init__"), app("train_grpo.py", 71, "main")] + MAIN[1:])
    LOADR = S(L.convert() + [app("grpo_trainer.py", 61, "__init__"), app("train_grpo.py", 71, "main")] + MAIN[1:])
    for k, v in psz.items():
        d0.a(v, LOADP, "param")
    for k, v in psz.items():
        d0.a(v, LOADR, "ref")
    # cuda:1: vLLM weights (fused qkv / gate_up), KV cache, reward model
    VLD = S([VL("model_executor/model_loader/loader.py", 364, "load_model"), VL("worker/model_runner.py", 1045, "load_model"),
             VL("worker/worker.py", 183, "load_model"), VL("executor/gpu_executor.py", 46, "_init_executor"),
             VL("engine/llm_engine.py", 317, "__init__"), VL("entrypoints/llm.py", 214, "__init__"), app("grpo_trainer.py", 74, "__init__"), app("train_grpo.py", 71, "main")] + MAIN[1:])
    vsz = [V * D * 2]
    for l in range(NL):
        vsz += [(D + 2 * KVD) * D * 2, (D + 2 * KVD) * 2, D * D * 2, 2 * I * D * 2, D * I * 2, D * 2, D * 2]
    vsz.append(D * 2)
    for s in vsz:
        d1.a(s, VLD, "param")
    KVS = S([VL("worker/cache_engine.py", 82, "_allocate_kv_cache"), VL("worker/cache_engine.py", 63, "__init__"), VL("worker/worker.py", 265, "_init_cache_engine"),
             VL("worker/worker.py", 251, "initialize_cache"), VL("executor/gpu_executor.py", 80, "initialize_cache"), VL("engine/llm_engine.py", 474, "_initialize_kv_caches"),
             VL("engine/llm_engine.py", 331, "__init__"), VL("entrypoints/llm.py", 214, "__init__"), app("grpo_trainer.py", 74, "__init__"), app("train_grpo.py", 71, "main")] + MAIN[1:])
    NBLK = 96500
    kv = [d1.a(2 * NBLK * 16 * 2 * 64 * 2, KVS, "kvcache") for _ in range(NL)]
    RML = S(L.convert() + [app("reward.py", 29, "load_reward_model"), app("grpo_trainer.py", 80, "__init__"), app("train_grpo.py", 71, "main")] + MAIN[1:])
    for k, v in psz.items():
        if k != "embed":
            d1.a(v, RML, "rm")
    d1.a(V * D * 2, RML, "rm")
    d1.a(D * 2, RML, "rm")
    start_recording(A0)
    start_recording(A1)
    grads, state = {}, []
    Common = __import__("common")
    B, P, C = 8, 192, 128
    T = P + C
    N = B * T
    kept = []

    def decoder(dv, R, n, OUTER):
        """Qwen2 decoder stack for n tokens; R: Rec (grad or no_grad)."""
        MODEL = lambda line: [qw(line, "forward")] + call + OUTER
        x = R.sv(n * D * 2, L.embedding() + MODEL(895))
        cos = R.tmp(n * 64 * 2, [qw(158, "forward")] + call + MODEL(913))
        sin = R.tmp(n * 64 * 2, [qw(159, "forward")] + call + MODEL(913))
        for l in range(NL):
            LY = lambda line: [qw(line, "forward")] + call + MODEL(942)
            NR = lambda line, at: [qw(line, "forward")] + call + LY(at)
            p = "l%d." % l
            for at, nm in ((726, "n1"),):
                t1 = R.tmp(n * D * 4, NR(73, at))
                v_ = R.tmp(n * 4, NR(74, at))
                dv.f(t1)
                r = R.sv(n * 4, NR(75, at))
                dv.f(v_)
                h32 = R.sv(n * D * 4, NR(75, at))
                R.prm(p + nm, D * 2)
                h = R.sv(n * D * 2, NR(76, at))
            AT = lambda line: [qw(line, "forward")] + call + LY(736)
            R.prm(p + "q", D * D * 2)
            q = R.sv(n * D * 2, L.linear() + AT(623))
            k = R.sv(n * KVD * 2, L.linear() + AT(624))
            v = R.sv(n * KVD * 2, L.linear() + AT(625))
            RO = lambda line: [qw(line, "apply_rotary_pos_emb"), qw(633, "forward")] + call + LY(736)
            q2 = R.sv(n * D * 2, RO(216))
            k2 = R.sv(n * KVD * 2, RO(217))
            o = R.sv(n * D * 2, [L("torch/nn/functional.py", 5560, "scaled_dot_product_attention")][:0] + AT(665))
            lse = R.sv(n // T * 14 * T * 4 if n % T == 0 else n * 14 * 4, AT(665))
            R.prm(p + "o", D * D * 2)
            ao = R.tmp(n * D * 2, L.linear() + AT(677))
            h1 = R.sv(n * D * 2, LY(739))
            dv.f(ao)
            t1 = R.tmp(n * D * 4, NR(73, 743))
            v_ = R.tmp(n * 4, NR(74, 743))
            dv.f(t1)
            R.sv(n * 4, NR(75, 743))
            dv.f(v_)
            R.sv(n * D * 4, NR(75, 743))
            R.prm(p + "n2", D * 2)
            h2 = R.sv(n * D * 2, NR(76, 743))
            ML = lambda: [qw(214, "forward")] + call + LY(744)
            R.prm(p + "g", I * D * 2)
            g = R.sv(n * I * 2, L.linear() + ML())
            s = R.sv(n * I * 2, [L("torch/nn/functional.py", 2102, "silu")] + L.mod("torch/nn/modules/activation.py", 396) + ML())
            R.prm(p + "u", I * D * 2)
            u = R.sv(n * I * 2, L.linear() + ML())
            m = R.sv(n * I * 2, ML())
            R.prm(p + "d", D * I * 2)
            dn = R.tmp(n * D * 2, L.linear() + ML())
            hn = R.sv(n * D * 2, LY(745))
            dv.f(dn)
            if not R.grad:
                R.drop(keep=[hn])
        dv.fl([cos, sin])
        t1 = R.tmp(n * D * 4, [qw(73, "forward")] + call + MODEL(967))
        dv.f(t1)
        R.prm("norm", D * 2)
        out = R.sv(n * D * 2, [qw(76, "forward")] + call + MODEL(967))
        if not R.grad:
            R.drop(keep=[out])
        return out

    for step in range(10):
        # ---- rollout on cuda:1 (vLLM, eager)
        GEN = lambda f, line, fn, outer=None: [VL(f, line, fn), VL("worker/model_runner.py", 1654, "execute_model"), VL("worker/worker_base.py", 343, "execute_model"),
                                               VL("engine/llm_engine.py", 1386, "step"), VL("entrypoints/llm.py", 880, "_run_engine"), VL("entrypoints/llm.py", 353, "generate"),
                                               app("grpo_trainer.py", 167, "generate_completions"), app("grpo_trainer.py", 241, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        VM = VL("model_executor/models/qwen2.py", 0, "")
        n = B * P
        for t in range(C + 1):
            ntok = n if t == 0 else B
            MF = lambda line: [VL("model_executor/models/qwen2.py", line, "forward")] + call + GEN("worker/model_runner.py", 1624, "execute_model")[1:]
            hs = d1.a(ntok * D * 2, S([VL("model_executor/layers/vocab_parallel_embedding.py", 406, "forward")] + call + MF(322)), "tmp")
            for l in range(NL if t == 0 else NL // 6):
                LM = lambda line: [VL("model_executor/models/qwen2.py", line, "forward")] + call + MF(336)
                qkv = d1.a(ntok * (D + 2 * KVD) * 2, S([VL("model_executor/layers/linear.py", 135, "apply"), VL("model_executor/layers/linear.py", 377, "forward")] + call + LM(170)), "tmp")
                ao = d1.a(ntok * D * 2, S([VL("attention/backends/xformers.py", 586, "forward"), VL("attention/layer.py", 98, "forward")] + call + LM(172)), "tmp")
                d1.f(qkv)
                o = d1.a(ntok * D * 2, S([VL("model_executor/layers/linear.py", 135, "apply"), VL("model_executor/layers/linear.py", 1061, "forward")] + call + LM(173)), "tmp")
                d1.f(ao)
                gu = d1.a(ntok * 2 * I * 2, S([VL("model_executor/layers/linear.py", 135, "apply"), VL("model_executor/layers/linear.py", 377, "forward")] + call + LM(89)), "tmp")
                ac = d1.a(ntok * I * 2, S([VL("model_executor/layers/activation.py", 85, "forward_cuda"), VL("model_executor/custom_op.py", 14, "forward")] + call + LM(90)), "tmp")
                d1.f(gu)
                dn = d1.a(ntok * D * 2, S([VL("model_executor/layers/linear.py", 135, "apply"), VL("model_executor/layers/linear.py", 1061, "forward")] + call + LM(91)), "tmp")
                d1.fl([ac, o])
                d1.f(hs)
                hs = dn
            lg = d1.a(B * V * 4, S([VL("model_executor/layers/logits_processor.py", 74, "forward")] + call + GEN("worker/model_runner.py", 1667, "execute_model")[1:]), "tmp")
            SM = lambda line: [VL("model_executor/layers/sampler.py", line, "_sample_with_torch" if line > 600 else "forward")] + call + GEN("worker/model_runner.py", 1675, "execute_model")[1:]
            pr = d1.a(B * V * 4, S(SM(307)), "tmp")
            lp = d1.a(B * V * 4, S(SM(309)), "tmp")
            q_ = d1.a(B * V * 4, S([VL("model_executor/layers/sampler.py", 1018, "_multinomial")] + SM(842)), "tmp")
            d1.fl([q_, lg, pr, lp, hs])
            clock.wait(rng.randint(9000, 13000))
        # ---- reward model scoring on cuda:1
        RS = [app("reward.py", 57, "score"), app("grpo_trainer.py", 188, "compute_rewards"), app("grpo_trainer.py", 246, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        ids1 = d1.a(N * 8, S(RS), "input")
        Rr = Rec(d1, None, grad=False)
        out = decoder(d1, Rr, N, [qw(1453, "forward")] + call + RS)
        sc = d1.a(N * 2, S(L.linear() + [qw(1462, "forward")] + call + RS), "tmp")
        rw = d1.a(B * 2, S([qw(1489, "forward")] + call + RS), "tmp")
        Rr.drop()
        d1.fl([sc, ids1])
        rw0 = d0.a(B * 4, S([app("grpo_trainer.py", 250, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN), "input")
        d1.f(rw)
        # ---- cuda:0: reference log-probs (no_grad)
        ids = d0.a(N * 8, S(TS(252)), "input")
        am = d0.a(N * 8, S(TS(253)), "input")
        adv = d0.a(B * 4, S([app("grpo_trainer.py", 199, "compute_advantages"), app("grpo_trainer.py", 255, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN), "tmp")
        d0.f(rw0)
        RFX = [app("grpo_trainer.py", 226, "_ref_logps"), app("grpo_trainer.py", 258, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        Rf = Rec(d0, None, grad=False)
        h = decoder(d0, Rf, N, [qw(1164, "forward")] + call + RFX)
        lgb = d0.a(N * V * 2, S(L.linear() + [qw(1183, "forward")] + call + RFX), "tmp")
        Rf.drop()
        lgf = d0.a(B * C * V * 4, S([app("grpo_trainer.py", 229, "_ref_logps")] + RFX[1:]), "tmp")
        d0.f(lgb)
        ls = d0.a(B * C * V * 4, S([L("torch/nn/functional.py", 2248, "log_softmax"), app("grpo_trainer.py", 230, "_ref_logps")] + RFX[1:]), "tmp")
        d0.f(lgf)
        ref = d0.a(B * C * 4, S([app("grpo_trainer.py", 231, "_ref_logps")] + RFX[1:]), "tmp")
        d0.f(ls)
        clock.wait(rng.randint(40000, 60000))
        # ---- policy forward with grad
        R = Rec(d0, Common.Tape())
        PX = [app("grpo_trainer.py", 206, "_policy_logps"), app("grpo_trainer.py", 261, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        PL = lambda line: [app("grpo_trainer.py", line, "_policy_logps"), app("grpo_trainer.py", 261, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        h = decoder(d0, R, N, [qw(1164, "forward")] + call + PX)
        R.prm("embed", V * D * 2)
        lgb = R.tmp(N * V * 2, L.linear() + [qw(1183, "forward")] + call + PX)
        lf = R.tmp(B * C * V * 4, PL(208))
        d0.f(lgb)
        lt = R.sv(B * C * V * 4, PL(208))
        d0.f(lf)
        CAT = SP + "torch/distributions/categorical.py"
        DU = SP + "torch/distributions/utils.py"
        lse = R.sv(B * C * 4, [(CAT, 70, "__init__"), app("grpo_trainer.py", 210, "_policy_logps")] + PL(210)[1:])
        nlog = d0.a(B * C * V * 4, S([(CAT, 70, "__init__"), app("grpo_trainer.py", 210, "_policy_logps")] + PL(210)[1:]), "entropy_graph")
        lp = R.sv(B * C * 4, [(CAT, 144, "log_prob"), app("grpo_trainer.py", 211, "_policy_logps")] + PL(211)[1:])
        clp = d0.a(B * C * V * 4, S([(CAT, 147, "entropy"), app("grpo_trainer.py", 212, "_policy_logps")] + PL(212)[1:]), "entropy_graph")
        prb = d0.a(B * C * V * 4, S([L("torch/nn/functional.py", 1888, "softmax"), (DU, 101, "logits_to_probs"), (CAT, 92, "probs"), (DU, 136, "__get__"),
                                     (CAT, 148, "entropy"), app("grpo_trainer.py", 212, "_policy_logps")] + PL(212)[1:]), "entropy_graph")
        plp = d0.a(B * C * V * 4, S([(CAT, 148, "entropy"), app("grpo_trainer.py", 212, "_policy_logps")] + PL(212)[1:]), "tmp")
        es = d0.a(B * C * 4, S([(CAT, 149, "entropy"), app("grpo_trainer.py", 212, "_policy_logps")] + PL(212)[1:]), "tmp")
        d0.f(plp)
        ent = d0.a(B * C * 4, S([(CAT, 149, "entropy"), app("grpo_trainer.py", 212, "_policy_logps")] + PL(212)[1:]), "tmp")
        d0.f(es)
        LO = lambda line: [app("grpo_trainer.py", line, "compute_loss"), app("grpo_trainer.py", 266, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        dl = R.sv(B * C * 4, LO(285))
        kl1 = R.sv(B * C * 4, LO(286))
        kl = R.sv(B * C * 4, LO(286))
        ratio = R.sv(B * C * 4, LO(289))
        pg = R.sv(B * C * 4, LO(290))
        tl = R.sv(B * C * 4, LO(292))
        loss = d0.a(4, S(LO(294)), "tmp")
        em = d0.a(4, S(TS(270)), "entropy_log")
        kept.append(em)
        d0.f(ent)
        clock.wait(rng.randint(30000, 50000))
        Common.backward(d0, R.tape, grads)
        fill_grads(d0, grads, psz)
        d0.fl([loss, ref, adv])
        OPT = [L("torch/optim/optimizer.py", 484, "wrapper"), L("torch/optim/lr_scheduler.py", 130, "wrapper"), app("grpo_trainer.py", 275, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN
        CL = S([L("torch/nn/utils/clip_grad.py", 73, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper"), app("grpo_trainer.py", 273, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN)
        nrm = [d0.a(4, CL, "tmp") for _ in range(len(psz) // 40 + 1)]
        tot = d0.a(4, CL, "tmp")
        d0.fl(nrm + [tot])
        if not state:
            state = adam_init(d0, psz.values(), S([L("torch/optim/adamw.py", 181, "_init_group"), L("torch/optim/adamw.py", 209, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT),
                              S([L("torch/optim/adamw.py", 185, "_init_group"), L("torch/optim/adamw.py", 209, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adamw.py", 590, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 342, "adamw"), L("torch/optim/adamw.py", 220, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT)
        keys = list(psz)
        for i0 in range(0, len(keys), 32):
            tmp = [d0.a(psz[k], FE, "tmp") for k in keys[i0:i0 + 32]]
            d0.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 996, "zero_grad"), L("torch/_compile.py", 32, "inner"), app("grpo_trainer.py", 277, "training_step"), app("grpo_trainer.py", 331, "train")] + MAIN)
        for k in list(grads):
            d0.f(grads.pop(k), ZG)
        d0.fl([ids, am])
        clock.wait(rng.randint(20000, 40000))
    info = dict(param_bytes=sum(psz.values()), ref_bytes=sum(psz.values()), steps=10, kept_per_step=3 * B * C * V * 4 + 4,
                entropy_tensor=B * C * V * 4, opt_bytes=2 * sum(psz.values()), kv_bytes=sum(b.req for b in kv))
    d = write([A0, A1])
    return dict(name="m06_grpo_qwen05b_vllm_2gpu.pickle", data=d, devs=[A0, A1], info=info)


# ============================================================================ m07
def build_m07():
    """A multi-tenant LoRA chat server on one A10G (24 GB): TinyLlama-1.1B in fp16 (22 layers,
    d=2048, GQA 32/4 heads, MLP 5632, vocabulary 32,000) with per-tenant LoRA adapters.  Each adapter
    is packed into one contiguous fp16 buffer (2.3-9.5 MB by rank and target modules) for the batched
    LoRA kernel and kept in an LRU of 48 adapters (400 tenants, Zipf-like traffic).  Requests run
    with continuous batching (up to 8 at a time); each gets one preallocated KV cache tensor
    (22 x 2 x (prompt + max_new) x 256 fp16) freed when it finishes.  torch 2.3,
    _record_memory_history() from start-up; the dump was taken after 420 requests.  Problem:
    fragmentation: adapters loaded on a cache miss land in holes of the 20 MiB segments left by
    prefill temporaries and small KV caches and pin them; the pool keeps calling cudaMalloc for KV
    caches and prefill buffers while the cached free bytes would cover them many times over."""
    rng = random.Random(3707)
    clock = sim.Clock(1712650000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(22.06 * GB), clock=clock, base=0x7F2C18000000)
    dv = Dev(A)
    SP = "/app/.venv/lib/python3.11/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/app/loraserve/")
    call = L.call()
    NL, D, I, V, KVD = 22, 2048, 5632, 32000, 256
    LOAD = S(L.convert() + [app("engine.py", 71, "load_base"), app("engine.py", 48, "__init__"), app("server.py", 39, "lifespan"),
                            (SP + "starlette/routing.py", 732, "lifespan")])
    psz = [V * D * 2]
    for l in range(NL):
        psz += [D * D * 2, KVD * D * 2, KVD * D * 2, D * D * 2, I * D * 2, I * D * 2, D * I * 2, D * 2, D * 2]
    psz += [D * 2, V * D * 2]
    for s in psz:
        dv.a(s, LOAD, "param")
    WS = S([app("engine.py", 95, "alloc_workspace"), app("engine.py", 52, "__init__"), app("server.py", 39, "lifespan"), (SP + "starlette/routing.py", 732, "lifespan")])
    ws = [dv.a(8 * 4096 * 2, WS, "workspace"), dv.a(8 * I * 2 * 2, WS, "workspace")]
    LOOP = [app("engine.py", 212, "run_forever"), ("/usr/lib/python3.11/threading.py", 1045, "run"), ("/usr/lib/python3.11/threading.py", 1082, "_bootstrap_inner"), ("/usr/lib/python3.11/threading.py", 1002, "_bootstrap")]
    ADL = S([app("adapters.py", 64, "pack_adapter"), app("adapters.py", 41, "get"), app("engine.py", 151, "admit")] + LOOP)
    ADE = S([app("adapters.py", 47, "get"), app("engine.py", 151, "admit")] + LOOP)
    KVA = S([app("kv.py", 22, "allocate"), app("engine.py", 156, "admit")] + LOOP)
    KVF = S([app("engine.py", 201, "finish"), app("engine.py", 190, "step")] + LOOP)
    ranks = {}
    for t in range(400):
        r_ = rng.choice([16, 32, 32, 32])
        tg = rng.choice(["qv", "qkvo", "qkvo"])
        per = (2 * D + 2 * (D + KVD)) if tg == "qkvo" else (D + D + D + KVD)
        ranks[t] = NL * r_ * per * 2
        if ranks[t] > 9900000:
            ranks[t] = NL * 16 * per * 2
    weights = [1.0 / (i + 1) ** 0.8 for i in range(400)]
    lru = OrderedDict()
    CAP = 48
    MAXB = 16
    pcache = OrderedDict()
    PCAP = 128
    PXA = S([app("prefix_cache.py", 38, "insert"), app("engine.py", 176, "admit")] + LOOP)
    PXE = S([app("prefix_cache.py", 44, "insert"), app("engine.py", 176, "admit")] + LOOP)
    active = []
    done = 0
    arrivals = 0
    misses = 0
    PF = lambda line, fn="forward": [app("model.py", line, fn), app("engine.py", 172, "prefill"), app("engine.py", 158, "admit")] + LOOP
    DC = lambda line: [app("model.py", line, "decode_step"), app("engine.py", 184, "step")] + LOOP
    while done < 300:
        # admit new requests
        while len(active) < MAXB and arrivals < 320 and rng.random() < 0.6:
            arrivals += 1
            tenant = rng.choices(range(400), weights)[0]
            if tenant in lru:
                lru.move_to_end(tenant)
            else:
                misses += 1
                lru[tenant] = dv.a(ranks[tenant], ADL, "adapter")
                if len(lru) > CAP:
                    k, b = lru.popitem(last=False)
                    dv.f(b, ADE)
            P = min(4000, int(rng.lognormvariate(6.5, 0.7)) + 16)
            G = rng.choice([64, 128, 256, 256, 512])
            kv = dv.a(NL * 2 * (P + G) * KVD * 2, KVA, "kv")
            ids = dv.a(P * 8, S([app("engine.py", 163, "admit")] + LOOP), "input")
            # prefill (transients)
            x = dv.a(P * D * 2, S(L.embedding() + PF(88)), "tmp")
            for l in range(NL):
                h = dv.a(P * D * 2, S(PF(101)), "tmp")
                q = dv.a(P * D * 2, S(PF(104)), "tmp")
                kvn = dv.a(P * 2 * KVD * 2, S(PF(105)), "tmp")
                lo = dv.a(P * 16 * 2, S([app("lora_ops.py", 33, "bgmv"), app("model.py", 106, "forward"), app("engine.py", 172, "prefill"), app("engine.py", 158, "admit")] + LOOP), "tmp")
                dv.fl([lo, kvn])
                o = dv.a(P * D * 2, S([L("torch/nn/functional.py", 5560, "scaled_dot_product_attention")][:0] + PF(111)), "tmp")
                dv.fl([q, h])
                a2 = dv.a(P * D * 2, S(PF(113)), "tmp")
                dv.f(o)
                g = dv.a(P * I * 2, S(PF(118)), "tmp")
                u = dv.a(P * I * 2, S(PF(118)), "tmp")
                dv.f(g)
                dn = dv.a(P * D * 2, S(PF(119)), "tmp")
                dv.fl([u, a2, x])
                x = dn
            lg = dv.a(V * 4, S(PF(126)), "tmp")
            dv.fl([lg, x, ids])
            # system-prompt / few-shot prefix of this tenant kept for reuse (LRU)
            pk = (tenant, P // 64)
            if pk not in pcache:
                npx = min(P, rng.choice([96, 128, 160, 192, 224, 256]))
                pcache[pk] = dv.a(NL * 2 * npx * KVD * 2, PXA, "prefix")
                if len(pcache) > PCAP:
                    k_, b_ = pcache.popitem(last=False)
                    dv.f(b_, PXE)
            else:
                pcache.move_to_end(pk)
            active.append(dict(kv=kv, left=G))
            clock.wait(rng.randint(2000, 15000))
        if not active:
            clock.wait(rng.randint(20000, 90000))
            continue
        # one decode step for the batch
        b = len(active)
        hs = dv.a(b * D * 2, S(DC(141)), "tmp")
        lg = dv.a(b * V * 4, S(DC(152)), "tmp")
        pr = dv.a(b * V * 4, S([L("torch/nn/functional.py", 1888, "softmax"), app("sampling.py", 18, "sample"), app("model.py", 154, "decode_step"), app("engine.py", 184, "step")] + LOOP), "tmp")
        nt = dv.a(b * 8, S([app("sampling.py", 21, "sample"), app("model.py", 154, "decode_step"), app("engine.py", 184, "step")] + LOOP), "tmp")
        dv.fl([pr, lg, hs, nt])
        clock.wait(rng.randint(14000, 22000))
        for r in list(active):
            r["left"] -= rng.choice([1, 1, 1, 1, 1, 1, 1, 1, 1, 50])
            if r["left"] <= 0:
                dv.f(r["kv"], KVF)
                active.remove(r)
                done += 1
    info = dict(param_bytes=sum(psz) + sum(b.req for b in ws), adapters=len(lru), adapter_bytes=sum(b.req for b in lru.values()),
                requests_done=done, misses=misses, active_at_dump=len(active))
    d = write([A])
    return dict(name="m07_tinyllama_multilora_server.pickle", data=d, devs=[A], info=info)


# ============================================================================ m08
def build_m08():
    """Audio Spectrogram Transformer (AST, ViT-Base/16 on 128x1024 fbank, patch stride 10: 1,212
    patches + 2 tokens = 1,214) fine-tuned on AudioSet-20k with the team's own ViT blocks built on
    nn.MultiheadAttention(768, 12, dropout=0.1, batch_first=True), called as
    `self.attn(h, h, h)[0]` -- need_weights left at its default True.  Batch 16, fp16 autocast with
    GradScaler, AdamW (foreach), A100-80GB, torch 2.3, 8 steps.  Because need_weights=True,
    F.multi_head_attention_forward takes the explicit path (bmm, softmax in fp32 under autocast,
    dropout, bmm) instead of scaled_dot_product_attention, and every layer saves its 16x12x1214x1214
    attention probabilities (fp32), their dropout mask and output and an fp16 copy for backward,
    then averages them over heads for a return value the caller throws away.  Problem: a wasteful,
    fixable peak (need_weights=False)."""
    rng = random.Random(3708)
    clock = sim.Clock(1715400000000000, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, base=0x7F9A20000000)
    dv = Dev(A)
    SP = "/opt/conda/lib/python3.10/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/workspace/ast-audioset/")
    call = L.call()
    Common = __import__("common")
    NL, D, H, FF, NCLS = 12, 768, 12, 3072, 527
    B, T = 16, 1214
    N = B * T
    MAIN = [app("train.py", 241, "main"), app("train.py", 268, "<module>")]
    STEP = lambda line: [app("train.py", line, "train_one_epoch"), app("train.py", 233, "main")] + MAIN[1:]
    MODEL = lambda line: [app("ast/model.py", line, "forward")] + call + STEP(176)
    psz = OrderedDict()
    psz["patch.w"], psz["patch.b"], psz["cls"], psz["dist"], psz["pos"] = D * 256 * 4, D * 4, D * 4, D * 4, T * D * 4
    for l in range(NL):
        p = "b%d." % l
        for n, s in (("ln1.w", D), ("ln1.b", D), ("in_w", 3 * D * D), ("in_b", 3 * D), ("out_w", D * D), ("out_b", D),
                     ("ln2.w", D), ("ln2.b", D), ("fc1.w", FF * D), ("fc1.b", FF), ("fc2.w", D * FF), ("fc2.b", D)):
            psz[p + n] = s * 4
    for n, s in (("norm.w", D), ("norm.b", D), ("head.ln.w", D), ("head.ln.b", D), ("head.w", NCLS * D), ("head.b", NCLS)):
        psz[n] = s * 4
    TO = S(L.convert() + [app("train.py", 204, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, []
    MHA = SP + "torch/nn/functional.py"
    mf = lambda line: (MHA, line, "multi_head_attention_forward")
    peaks = []

    def block(R, l):
        p = "b%d." % l
        BL = lambda line: [app("ast/blocks.py", line, "forward")] + call + MODEL(88)
        AT = lambda line: [mf(line), L("torch/nn/modules/activation.py", 1275, "forward")] + call + BL(41)
        R.prm(p + "ln1.w", D * 4)
        R.sv(N * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(41))
        R.sv(N * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(41))
        h = R.sv(N * D * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(41))
        R.prm(p + "in_w", 3 * D * D * 4)
        wc = R.sv(3 * D * D * 2, [(MHA, 4871, "_in_projection_packed"), mf(5362)] + AT(5362)[1:], "wcast")
        qkv = R.sv(N * 3 * D * 2, [(MHA, 4871, "_in_projection_packed"), mf(5362)] + AT(5362)[1:])
        q = R.sv(N * D * 2, AT(5491))
        R.prm(p + "in_b", 3 * D * 4)
        s16 = R.tmp(B * H * T * T * 2, AT(5495))
        s32 = R.tmp(B * H * T * T * 4, [L("torch/nn/functional.py", 1885, "softmax")] + AT(5497))
        R.dv.f(s16)
        pr = R.sv(B * H * T * T * 4, [L("torch/nn/functional.py", 1885, "softmax")] + AT(5497), "attn_weights")
        R.dv.f(s32)
        R.sv(B * H * T * T, [L("torch/nn/functional.py", 1295, "dropout")] + AT(5499), "attn_weights")
        R.sv(B * H * T * T * 4, [L("torch/nn/functional.py", 1295, "dropout")] + AT(5499), "attn_weights")
        R.sv(B * H * T * T * 2, AT(5501), "attn_weights")
        ao = R.sv(N * D * 2, AT(5502))
        ao2 = R.sv(N * D * 2, AT(5503))
        R.prm(p + "out_w", D * D * 4)
        R.sv(D * D * 2, AT(5504), "wcast")
        o = R.sv(N * D * 2, AT(5504))
        avg = R.tmp(B * T * T * 4, AT(5509))
        R.dv.f(avg)
        R.sv(N * D, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + BL(41))
        x = R.sv(N * D * 4, BL(41))
        R.prm(p + "ln2.w", D * 4)
        R.sv(N * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(42))
        R.sv(N * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(42))
        h2 = R.sv(N * D * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + BL(42))
        MLP = lambda line: [app("ast/blocks.py", line, "forward")] + call + BL(42)
        R.prm(p + "fc1.w", FF * D * 4)
        R.sv(FF * D * 2, L.linear() + MLP(19), "wcast")
        f1 = R.sv(N * FF * 2, L.linear() + MLP(19))
        g = R.sv(N * FF * 2, L.gelu() + MLP(20))
        R.sv(N * FF, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + MLP(21))
        gd = R.sv(N * FF * 2, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + MLP(21))
        R.prm(p + "fc2.w", D * FF * 4)
        R.sv(D * FF * 2, L.linear() + MLP(22), "wcast")
        f2 = R.sv(N * D * 2, L.linear() + MLP(22))
        R.sv(N * D, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + BL(42))
        return R.sv(N * D * 4, BL(42))

    STEPS = 8
    for step in range(STEPS):
        fb = dv.a(B * 1024 * 128 * 4, S(STEP(168)), "input")
        lab = dv.a(B * NCLS * 4, S(STEP(169)), "input")
        R = Rec(dv, Common.Tape())
        R.prm("patch.w", D * 256 * 4)
        R.sv(B * 128 * 1024 * 2, L.conv2d() + [app("ast/model.py", 71, "forward")] + call + MODEL(80))
        pe = R.sv(N * D * 2, L.conv2d() + [app("ast/model.py", 71, "forward")] + call + MODEL(80))
        R.prm("pos", T * D * 4)
        x = R.sv(N * D * 4, MODEL(83))
        R.sv(N * D, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + MODEL(84))
        x = R.sv(N * D * 4, [L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + MODEL(84))
        for l in range(NL):
            x = block(R, l)
        R.prm("norm.w", D * 4)
        xn = R.sv(N * D * 4, [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + MODEL(90))
        pool = R.sv(B * D * 4, MODEL(91))
        R.prm("head.w", NCLS * D * 4)
        lg = R.sv(B * NCLS * 2, L.linear() + [L("torch/nn/modules/container.py", 217, "forward")] + call + MODEL(92))
        LS = [L("torch/nn/functional.py", 3225, "binary_cross_entropy_with_logits")] + L.mod("torch/nn/modules/loss.py", 734) + STEP(178)
        l1 = R.sv(B * NCLS * 4, LS)
        loss = dv.a(4, S(LS), "tmp")
        sc = dv.a(4, S([L("torch/amp/grad_scaler.py", 188, "scale"), app("train.py", 180, "train_one_epoch"), app("train.py", 233, "main")] + MAIN[1:]), "tmp")
        clock.wait(rng.randint(150000, 200000))
        Common.backward(dv, R.tape, grads)
        fill_grads(dv, grads, psz)
        dv.f(sc)
        clock.wait(rng.randint(150000, 200000))
        US = S([L("torch/amp/grad_scaler.py", 259, "_unscale_grads_"), L("torch/amp/grad_scaler.py", 326, "unscale_"), app("train.py", 182, "train_one_epoch"), app("train.py", 233, "main")] + MAIN[1:])
        inf = dv.a(4, US, "tmp")
        OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), L("torch/amp/grad_scaler.py", 377, "_maybe_opt_step"), L("torch/amp/grad_scaler.py", 456, "step"), app("train.py", 184, "train_one_epoch"), app("train.py", 233, "main")] + MAIN[1:]
        if not state:
            state = adam_init(dv, psz.values(), S([L("torch/optim/adamw.py", 129, "_init_group"), L("torch/optim/adamw.py", 177, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT),
                              S([L("torch/optim/adamw.py", 133, "_init_group"), L("torch/optim/adamw.py", 177, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adamw.py", 576, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 188, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        dv.f(inf)
        ZG = S([L("torch/optim/optimizer.py", 811, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train.py", 186, "train_one_epoch"), app("train.py", 233, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        dv.fl([fb, lab, loss])
        clock.wait(rng.randint(30000, 60000))
    info = dict(param_bytes=sum(psz.values()), steps=STEPS, attn_per_layer=B * H * T * T * (4 + 1 + 4 + 2), opt_bytes=2 * sum(psz.values()))
    d = write([A])
    return dict(name="m08_ast_audioset20k_a100.pickle", data=d, devs=[A], info=info)


# ============================================================================ m09
def build_m09():
    """RAFT optical flow (princeton-vl/RAFT, 5.3 M parameters) trained on FlyingThings3D:
    400x720 crops, batch 6, 12 refinement iterations, fp32, AdamW, OneCycleLR,
    clip_grad_norm_(1.0), on an A100-40GB, torch 2.1.  The training script calls
    optimizer.zero_grad(set_to_none=False), so the gradients made in the first backward stay
    allocated between steps.  The all-pairs correlation volume (6*50*90 x 50*90 fp32, 486 MB) and
    its 3-level pyramid are built every step; every iteration's upsampled flow is kept for the
    sequence loss.  _record_memory_history() from the first step, 8 steps.  Healthy."""
    rng = random.Random(3709)
    clock = sim.Clock(1702300000000000, rng, (3, 12))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, base=0x7F77C0000000)
    dv = Dev(A)
    SP = "/home/flow/anaconda3/envs/raft/lib/python3.10/site-packages/"
    L = Lib(SP, "2.1")
    app = fr("/home/flow/RAFT/")
    call = L.call()
    Common = __import__("common")
    B, Hh, Ww = 6, 400, 720
    h8, w8 = Hh // 8, Ww // 8
    HW = h8 * w8
    MAIN = [app("train.py", 247, "<module>")]
    TR = lambda line: [app("train.py", line, "train")] + MAIN
    RF = lambda line: [app("core/raft.py", line, "forward")] + call + TR(172)
    psz = OrderedDict()
    def conv(name, ci, co, k):
        psz[name + ".w"] = ci * co * k * k * 4
        psz[name + ".b"] = co * 4
    for net_ in ("fnet", "cnet"):
        conv(net_ + ".conv1", 3, 64, 7)
        ci = 64
        for li, co in enumerate((64, 96, 128)):
            for bi in range(2):
                conv("%s.l%d.%d.c1" % (net_, li, bi), ci, co, 3)
                conv("%s.l%d.%d.c2" % (net_, li, bi), co, co, 3)
                if bi == 0 and li > 0:
                    conv("%s.l%d.%d.ds" % (net_, li, bi), ci, co, 1)
                    if net_ == "cnet":
                        psz["%s.l%d.%d.bn" % (net_, li, bi)] = co * 4 * 2
                ci = co
        conv(net_ + ".conv2", 128, 256, 1)
    for n, ci, co, k in (("convc1", 324, 256, 1), ("convc2", 256, 192, 3), ("convf1", 2, 128, 7), ("convf2", 128, 64, 3), ("conv", 256, 126, 3),
                         ("convz1", 384, 128, 1), ("convr1", 384, 128, 1), ("convq1", 384, 128, 1),
                         ("convz2", 384, 128, 1), ("convr2", 384, 128, 1), ("convq2", 384, 128, 1),
                         ("fh1", 128, 256, 3), ("fh2", 256, 2, 3), ("mask1", 128, 256, 3), ("mask2", 256, 576, 1)):
        conv("update." + n, ci, co, k)
    TO = S(L.convert() + [app("train.py", 139, "train")] + MAIN)
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, []

    def encoder(R, net_, n_img, line):
        EN = lambda ln_: [app("core/extractor.py", ln_, "forward")] + call + RF(line)
        CV = lambda ln_: L.conv2d() + EN(ln_)
        R.prm(net_ + ".conv1.w", psz[net_ + ".conv1.w"])
        R.sv(n_img * 3 * Hh * Ww * 4, RF(line)) if net_ == "fnet" else None
        x = R.sv(n_img * 64 * (Hh // 2) * (Ww // 2) * 4, CV(153))
        x = R.sv(n_img * 64 * (Hh // 2) * (Ww // 2) * 4, [L("torch/nn/functional.py", 2546, "instance_norm" if net_ == "fnet" else "batch_norm")] + L.mod("torch/nn/modules/instancenorm.py" if net_ == "fnet" else "torch/nn/modules/batchnorm.py", 87 if net_ == "fnet" else 171) + EN(154))
        x = R.sv(n_img * 64 * (Hh // 2) * (Ww // 2) * 4, [L("torch/nn/functional.py", 1471, "relu")] + L.mod("torch/nn/modules/activation.py", 101) + EN(155))
        sc = 2
        for li, co in enumerate((64, 96, 128)):
            if li > 0:
                sc *= 2
            for bi in range(2):
                RB = lambda ln_: [app("core/extractor.py", ln_, "forward")] + call + [L("torch/nn/modules/container.py", 215, "forward")] + call + EN(157 + li)
                n = n_img * co * (Hh // sc) * (Ww // sc) * 4
                R.prm("%s.l%d.%d.c1.w" % (net_, li, bi), psz["%s.l%d.%d.c1.w" % (net_, li, bi)])
                R.sv(n, L.conv2d() + RB(58))
                R.sv(n, [L("torch/nn/functional.py", 2546, "instance_norm")] + L.mod("torch/nn/modules/instancenorm.py", 87) + RB(58))
                R.sv(n, [L("torch/nn/functional.py", 1471, "relu")] + L.mod("torch/nn/modules/activation.py", 101) + RB(58))
                R.prm("%s.l%d.%d.c2.w" % (net_, li, bi), psz["%s.l%d.%d.c2.w" % (net_, li, bi)])
                R.sv(n, L.conv2d() + RB(59))
                R.sv(n, [L("torch/nn/functional.py", 2546, "instance_norm")] + L.mod("torch/nn/modules/instancenorm.py", 87) + RB(59))
                R.sv(n, [L("torch/nn/functional.py", 1471, "relu")] + L.mod("torch/nn/modules/activation.py", 101) + RB(59))
                if bi == 0 and li > 0:
                    R.prm("%s.l%d.%d.ds.w" % (net_, li, bi), psz["%s.l%d.%d.ds.w" % (net_, li, bi)])
                    R.sv(n, L.conv2d() + [L("torch/nn/modules/container.py", 215, "forward")] + call + RB(62))
                    R.sv(n, [L("torch/nn/functional.py", 2546, "instance_norm")] + L.mod("torch/nn/modules/instancenorm.py", 87) + [L("torch/nn/modules/container.py", 215, "forward")] + call + RB(62))
                R.sv(n, [L("torch/nn/functional.py", 1471, "relu")] + L.mod("torch/nn/modules/activation.py", 101) + RB(64))
        R.prm(net_ + ".conv2.w", psz[net_ + ".conv2.w"])
        return R.sv(n_img * 256 * HW * 4, CV(163))

    STEPS = 8
    for step in range(STEPS):
        im1 = dv.a(B * 3 * Hh * Ww * 4, S(TR(166)), "input")
        im2 = dv.a(B * 3 * Hh * Ww * 4, S(TR(167)), "input")
        fg = dv.a(B * 2 * Hh * Ww * 4, S(TR(168)), "input")
        vl = dv.a(B * Hh * Ww * 4, S(TR(169)), "input")
        R = Rec(dv, Common.Tape())
        n1 = R.sv(B * 3 * Hh * Ww * 4, RF(90))
        n2 = R.sv(B * 3 * Hh * Ww * 4, RF(91))
        cat = R.sv(2 * B * 3 * Hh * Ww * 4, [app("core/extractor.py", 146, "forward")] + call + RF(101))
        fm = encoder(R, "fnet", 2 * B, 101)
        CB = lambda ln_, fn="__init__": [app("core/corr.py", ln_, fn), RF(108)[0]] + RF(108)[1:]
        corr = R.sv(B * HW * HW * 4, [app("core/corr.py", 59, "corr")] + CB(20))
        pyr = [corr]
        for lv in range(1, 4):
            pyr.append(R.sv(B * HW * (h8 >> lv) * (w8 >> lv) * 4, [L("torch/nn/functional.py", 0, "avg_pool2d")][:0] + CB(28)))
        cn = encoder(R, "cnet", B, 113)
        net = R.sv(B * 128 * HW * 4, RF(115))
        inp = R.sv(B * 128 * HW * 4, RF(116))
        c0 = R.sv(B * 2 * HW * 4, [app("core/raft.py", 78, "initialize_flow")] + RF(119))
        c1 = R.sv(B * 2 * HW * 4, [app("core/raft.py", 79, "initialize_flow")] + RF(119))
        preds = []
        for it in range(12):
            LK = lambda ln_: [app("core/corr.py", ln_, "__call__"), app("core/raft.py", 126, "forward")] + call + TR(172)
            for lv in range(4):
                R.sv(B * HW * 81 * 2 * 4, LK(40))
                R.sv(B * HW * 81 * 4, [app("core/utils/utils.py", 73, "bilinear_sampler")] + LK(41))
            cf = R.sv(B * 324 * HW * 4, LK(45))
            UP = lambda ln_: [app("core/update.py", ln_, "forward")] + call + RF(133)
            ME = lambda ln_: [app("core/update.py", ln_, "forward")] + call + UP(135)
            for nm, co in (("convc1", 256), ("convc2", 192), ("convf1", 128), ("convf2", 64)):
                R.prm("update." + nm + ".w", psz["update." + nm + ".w"])
                R.sv(B * co * HW * 4, L.conv2d() + ME(108))
                R.sv(B * co * HW * 4, [L("torch/nn/functional.py", 1471, "relu")] + ME(108))
            R.sv(B * 256 * HW * 4, ME(112))
            R.prm("update.conv.w", psz["update.conv.w"])
            R.sv(B * 126 * HW * 4, L.conv2d() + ME(113))
            mf_ = R.sv(B * 128 * HW * 4, ME(114))
            x = R.sv(B * 256 * HW * 4, UP(136))
            GR = lambda ln_: [app("core/update.py", ln_, "forward")] + call + UP(137)
            for pas in ("1", "2"):
                R.sv(B * 384 * HW * 4, GR(44 if pas == "1" else 52))
                for g_ in ("z", "r"):
                    R.prm("update.conv%s%s.w" % (g_, pas), psz["update.conv%s%s.w" % (g_, pas)])
                    R.sv(B * 128 * HW * 4, L.conv2d() + GR(45 if pas == "1" else 53))
                    R.sv(B * 128 * HW * 4, GR(45 if pas == "1" else 53))
                R.sv(B * 128 * HW * 4, GR(47 if pas == "1" else 55))
                R.sv(B * 384 * HW * 4, GR(47 if pas == "1" else 55))
                R.prm("update.convq%s.w" % pas, psz["update.convq%s.w" % pas])
                R.sv(B * 128 * HW * 4, L.conv2d() + GR(47 if pas == "1" else 55))
                R.sv(B * 128 * HW * 4, GR(47 if pas == "1" else 55))
                R.sv(B * 128 * HW * 4, GR(49 if pas == "1" else 57))
            R.prm("update.fh1.w", psz["update.fh1.w"])
            R.sv(B * 256 * HW * 4, L.conv2d() + [app("core/update.py", 17, "forward")] + call + UP(138))
            R.sv(B * 256 * HW * 4, [L("torch/nn/functional.py", 1471, "relu")] + [app("core/update.py", 17, "forward")] + call + UP(138))
            R.sv(B * 2 * HW * 4, L.conv2d() + [app("core/update.py", 17, "forward")] + call + UP(138))
            R.prm("update.mask1.w", psz["update.mask1.w"])
            R.sv(B * 256 * HW * 4, L.conv2d() + [L("torch/nn/modules/container.py", 215, "forward")] + call + UP(141))
            R.sv(B * 256 * HW * 4, [L("torch/nn/functional.py", 1471, "relu")] + [L("torch/nn/modules/container.py", 215, "forward")] + call + UP(141))
            R.sv(B * 576 * HW * 4, L.conv2d() + [L("torch/nn/modules/container.py", 215, "forward")] + call + UP(141))
            R.sv(B * 576 * HW * 4, UP(141))
            c1 = R.sv(B * 2 * HW * 4, RF(139))
            CU = lambda ln_: [app("core/raft.py", ln_, "upsample_flow")] + RF(145)
            R.sv(B * 576 * HW * 4, CU(88))
            R.sv(B * 2 * 9 * HW * 4 * 16, [L("torch/nn/functional.py", 4809, "unfold")] + CU(90))
            R.sv(B * 2 * 9 * 64 * HW * 4, CU(93))
            preds.append(R.sv(B * 2 * Hh * Ww * 4, CU(96)))
        # sequence loss over the 12 predictions
        LSL = lambda ln_: [app("train.py", ln_, "sequence_loss")] + TR(173)
        mag = dv.a(B * Hh * Ww * 4, S(LSL(52)), "tmp")
        vv = dv.a(B * Hh * Ww, S(LSL(53)), "tmp")
        dv.f(mag)
        for i in range(12):
            R.sv(B * 2 * Hh * Ww * 4, LSL(57))
            R.sv(B * 2 * Hh * Ww * 4, LSL(58))
        loss = dv.a(4, S(LSL(58)), "tmp")
        epe = [dv.a(B * Hh * Ww * 4, S(LSL(60)), "tmp"), dv.a(4, S(LSL(60)), "tmp")]
        dv.fl(epe)
        clock.wait(rng.randint(120000, 160000))
        Common.backward(dv, R.tape, grads)
        fill_grads(dv, grads, psz)
        dv.f(vv)
        CL = S([L("torch/nn/utils/clip_grad.py", 76, "clip_grad_norm_"), app("train.py", 178, "train")] + MAIN)
        nr = [dv.a(4, CL, "tmp") for _ in range(len(psz) // 50 + 1)]
        dv.fl(nr + [dv.a(4, CL, "tmp")])
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), L("torch/optim/lr_scheduler.py", 68, "wrapper"), app("train.py", 180, "train")] + MAIN
        if not state:
            state = adam_init(dv, psz.values(), S([L("torch/optim/adamw.py", 124, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT),
                              S([L("torch/optim/adamw.py", 128, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adamw.py", 566, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        # zero_grad(set_to_none=False): grads zeroed in place, nothing freed
        dv.fl([im1, im2, fg, vl, loss])
        clock.wait(rng.randint(30000, 50000))
    info = dict(param_bytes=sum(psz.values()), steps=STEPS, corr_bytes=B * HW * HW * 4, grad_bytes=sum(psz.values()), opt_bytes=2 * sum(psz.values()))
    d = write([A])
    return dict(name="m09_raft_things_a100.pickle", data=d, devs=[A], info=info)


# ============================================================================ m10
def build_m10():
    """Depth Anything V2-Large (DINOv2 ViT-L/14 encoder, 24 layers, d=1024, + DPT head, 335 M
    parameters, fp32 master weights) fine-tuned for metric depth on NYU Depth v2: 518x518 crops
    (1,369 patches + cls), batch 4, bf16 autocast, AdamW (foreach; encoder lr 5e-6, head 5e-5),
    zero_grad() to None, on an A100-40GB, torch 2.2.  ProfilerStep annotations.  After step 8 a
    validation pass (4 full 480x640 images resized to 518x686, torch.no_grad, batch 1) and then
    torch.cuda.empty_cache() called by the training script; 14 steps.  Healthy."""
    rng = random.Random(3710)
    clock = sim.Clock(1708500000000000, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, base=0x7F3F5C000000)
    dv = Dev(A)
    ann = Ann(clock)
    SP = "/opt/conda/envs/da2/lib/python3.10/site-packages/"
    L = Lib(SP, "2.2")
    app = fr("/data/depth/Depth-Anything-V2/metric_depth/")
    call = L.call()
    Common = __import__("common")
    NL, D, FF, HEADS = 24, 1024, 4096, 16
    MAIN = [app("train.py", 219, "<module>")][:0] + [app("train.py", 203, "main"), app("train.py", 219, "<module>")]
    TR = lambda line: [app("train.py", line, "main")] + MAIN[1:]
    VA = lambda line: [app("train.py", line, "main")] + MAIN[1:]
    psz = OrderedDict()
    psz["patch.w"], psz["patch.b"], psz["cls"], psz["pos"], psz["mask_tok"] = D * 3 * 14 * 14 * 4, D * 4, D * 4, 1370 * D * 4, D * 4
    for l in range(NL):
        p = "b%d." % l
        for n, s in (("n1.w", D), ("n1.b", D), ("qkv.w", 3 * D * D), ("qkv.b", 3 * D), ("proj.w", D * D), ("proj.b", D), ("ls1", D),
                     ("n2.w", D), ("n2.b", D), ("fc1.w", FF * D), ("fc1.b", FF), ("fc2.w", D * FF), ("fc2.b", D), ("ls2", D)):
            psz[p + n] = s * 4
    psz["norm.w"], psz["norm.b"] = D * 4, D * 4
    for i, oc in enumerate((256, 512, 1024, 1024)):
        psz["proj%d.w" % i] = oc * D * 4
        psz["proj%d.b" % i] = oc * 4
        psz["rn%d.w" % i] = 256 * oc * 9 * 4
    for i in range(4):
        for j in range(2):
            psz["ref%d.rcu%d.c1" % (i, j)] = 256 * 256 * 9 * 4
            psz["ref%d.rcu%d.c2" % (i, j)] = 256 * 256 * 9 * 4
        psz["ref%d.out" % i] = 256 * 256 * 4
    psz["head.c1"], psz["head.c2"], psz["head.c3"] = 128 * 256 * 9 * 4, 32 * 128 * 9 * 4, 32 * 4
    TO = S(L.convert() + [app("train.py", 121, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, []
    DN = SP + "depth_anything_v2/dinov2_layers/"

    def forward(R, Bb, ht, wt, OUT):
        T = (ht // 14) * (wt // 14) + 1
        N = Bb * T
        DPT = lambda ln_: [app("depth_anything_v2/dpt.py", ln_, "forward")] + call + OUT
        ENC = lambda ln_: [app("depth_anything_v2/dinov2.py", ln_, "get_intermediate_layers"), app("depth_anything_v2/dpt.py", 185, "forward")] + call + OUT
        R.prm("patch.w", psz["patch.w"])
        R.sv(Bb * 3 * ht * wt * 2, L.conv2d() + [(DN + "patch_embed.py", 72, "forward")] + call + [app("depth_anything_v2/dinov2.py", 207, "prepare_tokens_with_masks")] + ENC(281))
        x = R.sv(N * D * 4, [app("depth_anything_v2/dinov2.py", 181, "interpolate_pos_encoding"), app("depth_anything_v2/dinov2.py", 213, "prepare_tokens_with_masks")] + ENC(281))
        feats = []
        for l in range(NL):
            p = "b%d." % l
            BL = lambda ln_: [(DN + "block.py", ln_, "forward")] + call + ENC(283)
            AT = lambda ln_: [(DN + "attention.py", ln_, "forward")] + call + BL(262)
            R.prm(p + "n1.w", D * 4)
            R.sv(N * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(262))
            R.sv(N * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(262))
            h = R.sv(N * D * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(262))
            R.prm(p + "qkv.w", 3 * D * D * 4)
            R.sv(3 * D * D * 2, L.linear() + AT(60), "wcast")
            qkv = R.sv(N * 3 * D * 2, L.linear() + AT(60))
            o = R.sv(N * D * 2, [L("torch/nn/functional.py", 5560, "scaled_dot_product_attention")][:0] + AT(67))
            R.sv(Bb * HEADS * T * 4, AT(67))
            R.prm(p + "proj.w", D * D * 4)
            R.sv(D * D * 2, L.linear() + AT(69), "wcast")
            pr = R.sv(N * D * 2, L.linear() + AT(69))
            R.prm(p + "ls1", D * 4)
            R.sv(N * D * 4, [(DN + "layer_scale.py", 24, "forward")] + call + BL(262))
            x = R.sv(N * D * 4, BL(262))
            R.prm(p + "n2.w", D * 4)
            R.sv(N * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(263))
            R.sv(N * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(263))
            h2 = R.sv(N * D * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + BL(263))
            MP = lambda ln_: [(DN + "mlp.py", ln_, "forward")] + call + BL(263)
            R.prm(p + "fc1.w", FF * D * 4)
            R.sv(FF * D * 2, L.linear() + MP(35), "wcast")
            f1 = R.sv(N * FF * 2, L.linear() + MP(35))
            g = R.sv(N * FF * 2, L.gelu() + MP(36))
            R.prm(p + "fc2.w", D * FF * 4)
            R.sv(D * FF * 2, L.linear() + MP(38), "wcast")
            f2 = R.sv(N * D * 2, L.linear() + MP(38))
            R.prm(p + "ls2", D * 4)
            R.sv(N * D * 4, [(DN + "layer_scale.py", 24, "forward")] + call + BL(263))
            x = R.sv(N * D * 4, BL(263))
            if l in (4, 11, 17, 23):
                feats.append(R.sv(N * D * 4, [L("torch/nn/functional.py", 2543, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + ENC(288)))
            if not R.grad:
                R.drop(keep=[x] + feats)
        h14, w14 = ht // 14, wt // 14
        outs = []
        HD = lambda ln_: [app("depth_anything_v2/dpt.py", ln_, "forward")] + call + DPT(187)
        for i, oc in enumerate((256, 512, 1024, 1024)):
            R.prm("proj%d.w" % i, psz["proj%d.w" % i])
            y = R.sv(Bb * oc * h14 * w14 * 2, L.conv2d() + HD(131))
            sc = (4, 2, 1, 0.5)[i]
            hh, ww = int(h14 * sc), int(w14 * sc)
            y = R.sv(Bb * oc * hh * ww * 2, L.conv2d() + HD(132))
            R.prm("rn%d.w" % i, psz["rn%d.w" % i])
            outs.append((R.sv(Bb * 256 * hh * ww * 2, L.conv2d() + HD(137)), hh, ww))
        prev = None
        for i in reversed(range(4)):
            b, hh, ww = outs[i]
            FB = lambda ln_: [app("depth_anything_v2/util/blocks.py", ln_, "forward")] + call + HD(145 + i)
            n = Bb * 256 * hh * ww * 2
            for j in range(2):
                R.prm("ref%d.rcu%d.c1" % (i, j), psz["ref%d.rcu%d.c1" % (i, j)])
                R.sv(n, [L("torch/nn/functional.py", 1473, "relu")] + FB(96))
                R.sv(n, L.conv2d() + FB(98))
                R.sv(n, [L("torch/nn/functional.py", 1473, "relu")] + FB(101))
                R.prm("ref%d.rcu%d.c2" % (i, j), psz["ref%d.rcu%d.c2" % (i, j)])
                R.sv(n, L.conv2d() + FB(103))
                R.sv(n, FB(111))
            R.sv(n * 4, [L("torch/nn/functional.py", 4001, "interpolate")] + FB(155))
            R.prm("ref%d.out" % i, psz["ref%d.out" % i])
            prev = R.sv(n * 4, L.conv2d() + FB(157))
            if not R.grad:
                R.drop(keep=[prev] + [o_[0] for o_ in outs])
        h2, w2 = h14 * 8, w14 * 8
        R.prm("head.c1", psz["head.c1"])
        R.sv(Bb * 128 * h2 * w2 * 2, L.conv2d() + HD(154))
        R.sv(Bb * 128 * ht * wt * 2, [L("torch/nn/functional.py", 4001, "interpolate")] + HD(155))
        R.prm("head.c2", psz["head.c2"])
        R.sv(Bb * 32 * ht * wt * 2, L.conv2d() + [L("torch/nn/modules/container.py", 217, "forward")] + call + HD(156))
        R.sv(Bb * 32 * ht * wt * 2, [L("torch/nn/functional.py", 1473, "relu")] + [L("torch/nn/modules/container.py", 217, "forward")] + call + HD(156))
        R.prm("head.c3", psz["head.c3"])
        R.sv(Bb * ht * wt * 2, L.conv2d() + [L("torch/nn/modules/container.py", 217, "forward")] + call + HD(156))
        out = R.sv(Bb * ht * wt * 4, [L("torch/nn/functional.py", 2072, "sigmoid")][:0] + DPT(190))
        if not R.grad:
            R.drop(keep=[out])
        return out

    for step in range(14):
        if step == 8:
            ann.start("validation")
            for v in range(4):
                R = Rec(dv, None, grad=False)
                img = dv.a(3 * 518 * 686 * 4, S(VA(176)), "input")
                gt = dv.a(480 * 640 * 4, S(VA(177)), "input")
                out = forward(R, 1, 518, 686, VA(179))
                up = dv.a(480 * 640 * 4, S([L("torch/nn/functional.py", 4001, "interpolate")] + VA(180)), "tmp")
                R.drop()
                m = [dv.a(480 * 640 * 4, S([app("util/metric.py", 9, "eval_depth")] + VA(182)), "tmp") for _ in range(4)]
                dv.fl(m + [up, img, gt])
                clock.wait(rng.randint(80000, 120000))
            ann.end("validation")
            A.empty_cache(S([L("torch/cuda/memory.py", 162, "empty_cache"), app("train.py", 191, "main")] + MAIN[1:]))
        ann.start("ProfilerStep#%d" % step)
        img = dv.a(4 * 3 * 518 * 518 * 4, S(TR(150)), "input")
        dep = dv.a(4 * 518 * 518 * 4, S(TR(151)), "input")
        vm = dv.a(4 * 518 * 518, S(TR(152)), "input")
        R = Rec(dv, Common.Tape())
        out = forward(R, 4, 518, 518, TR(155))
        SI = lambda ln_: [app("util/loss.py", ln_, "forward")] + call + TR(157)
        d1 = R.sv(4 * 518 * 518 * 4, SI(15))
        d2 = R.sv(4 * 518 * 518 * 4, SI(15))
        loss = dv.a(4, S(SI(18)), "tmp")
        clock.wait(rng.randint(200000, 260000))
        Common.backward(dv, R.tape, grads)
        fill_grads(dv, grads, psz)
        clock.wait(rng.randint(150000, 200000))
        ann.start("Optimizer.step#AdamW.step")
        OPT = [L("torch/optim/optimizer.py", 385, "wrapper"), app("train.py", 161, "main")] + MAIN[1:]
        if not state:
            state = adam_init(dv, psz.values(), S([L("torch/optim/adamw.py", 126, "_init_group"), L("torch/optim/adamw.py", 175, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT),
                              S([L("torch/optim/adamw.py", 130, "_init_group"), L("torch/optim/adamw.py", 175, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT))
        FE = S([L("torch/optim/adamw.py", 571, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 186, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        keys = list(psz)
        for i0 in range(0, len(keys), 64):
            tmp = [dv.a(psz[k], FE, "tmp") for k in keys[i0:i0 + 64]]
            dv.fl(tmp)
        ann.end("Optimizer.step#AdamW.step")
        ann.start("Optimizer.zero_grad#AdamW.zero_grad")
        ZG = S([L("torch/optim/optimizer.py", 811, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train.py", 162, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        ann.end("Optimizer.zero_grad#AdamW.zero_grad")
        dv.fl([img, dep, vm, loss])
        clock.wait(rng.randint(30000, 50000))
        ann.end("ProfilerStep#%d" % step)
    info = dict(param_bytes=sum(psz.values()), steps=14, opt_bytes=2 * sum(psz.values()))
    d = write([A], annotations=ann.items)
    return dict(name="m10_depth_anything_v2l_nyu.pickle", data=d, devs=[A], info=info)
