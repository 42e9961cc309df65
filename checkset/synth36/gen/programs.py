"""The ten workloads of batch 36.  Each build_mNN() runs one program through sim.Allocator and returns
dict(name, data (the snapshot dict), devs, info (the generator's own bookkeeping))."""
import random

import sim
import cpp
from common import S, Lib, Dev, Tape, op, backward, write, NOSTACK, Ann, MB, GB, KB, start_recording

MiB = MB


def fr(prefix):
    return lambda f, line, name: (prefix + f, line, name)


def adam_state(dv, sizes, stack, lines=(0, 0)):
    out = []
    for v in sizes:
        for st in stack:
            out.append(dv.a(v, st, "opt"))
    return out


# ============================================================================ m01
def build_m01():
    """Pairwise reward model on Anthropic HH-RLHF: Llama-3.2-1B loaded with AutoModelForCausalLM and
    wrapped by the team's RewardModel (v_head on the last hidden state, output_hidden_states=True),
    8 pairs (chosen + rejected = 16 sequences) x 1024 tokens, fp32 weights with bf16 autocast,
    gradient checkpointing (reentrant), AdamW (foreach), 4 steps on an A100-80GB, torch 2.5 with
    _record_memory_history(stacks="all"): C++ frames.  The wrapped model still runs lm_head over
    every position and casts the 128,256-wide logits to fp32 (transformers 4.44 LlamaForCausalLM),
    though only hidden_states[-1] is used: 11.7 GiB of logits at the peak of every step."""
    rng = random.Random(3601)
    clock = sim.Clock(1741600000000000 + 9 * 3600 * 10 ** 6, rng, (3, 12))
    A = sim.Allocator(device=0, capacity=int(79.14 * GB), clock=clock, base=0x7F3A80000000)
    dv = Dev(A)
    ann = Ann(clock)
    SP = "/opt/conda/envs/rlhf/lib/python3.11/site-packages/"
    L = Lib(SP, "2.5")
    app = fr("/home/ubuntu/rm-train/")
    ML = SP + "transformers/models/llama/modeling_llama.py"
    md = lambda line, name: (ML, line, name)
    call = L.call()
    NL, H, I, KVD, V = 16, 2048, 8192, 512, 128256
    B, T = 16, 1024
    N = B * T
    MAIN = [app("train_rm.py", 212, "main"), app("train_rm.py", 251, "<module>")]
    STEP = lambda line: [app("train_rm.py", line, "train_step"), app("train_rm.py", 198, "main")] + MAIN[1:]
    RM = lambda line: [app("rm/model.py", line, "forward")] + call + STEP(141)
    CLM = [md(1141, "forward")] + call + RM(58)
    MODEL = lambda line: [md(line, "forward")] + call + CLM
    # ---- parameters (before recording): fp32
    psz = {"embed": V * H * 4}
    for l in range(NL):
        for n, s in (("q", H * H), ("k", KVD * H), ("v", KVD * H), ("o", H * H), ("g", I * H), ("u", I * H), ("d", H * I), ("n1", H), ("n2", H)):
            psz["l%d.%s" % (l, n)] = s * 4
    psz["norm"] = H * 4
    psz["v_head"] = H * 4
    TO = cpp.fwd("to", L.convert() + [app("train_rm.py", 171, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    info = dict(param_bytes=sum(psz.values()), steps=4, batch=B, seq=T)
    grads, state = {}, []
    CK = [L("torch/utils/checkpoint.py", 264, "forward"), L("torch/autograd/function.py", 574, "apply"),
          L("torch/utils/checkpoint.py", 489, "checkpoint"), L("torch/_compile.py", 32, "inner"),
          L("torch/_dynamo/eval_frame.py", 632, "_fn"), md(947, "forward")] + call + CLM
    CKB = [L("torch/utils/checkpoint.py", 319, "backward"), L("torch/autograd/function.py", 307, "apply")]

    def layer(l, rec, keep, wcache):
        """One decoder layer.  rec: recomputation inside backward (ops saved for backward in keep)."""
        LY = [md(0, "forward")]
        base = (CKB if rec else CK)
        lay = lambda line: [md(line, "forward")] + call + ([L("torch/utils/checkpoint.py", 311 if rec else 264, "backward" if rec else "forward")] if False else []) + base
        mk = (lambda op, py: cpp.ckpt_fwd(op, py)) if rec else (lambda op, py: cpp.fwd(op, py))

        def a(sz, op, py, save=False):
            b = dv.a(sz, mk(op, py), "act" if rec else "tmp")
            if save:
                keep.append(b)
            return b

        def rms(line):
            NR = lambda ln: [md(ln, "forward")] + call + lay(line)
            p = a(N * 4, "pow", NR(73))
            m = a(N * 4, "mean", NR(73))
            dv.f(p)
            e = a(N * 4, "add", NR(74))
            r = a(N * 4, "rsqrt", NR(74), save=rec)
            dv.f(m)
            dv.f(e)
            x = a(N * H * 4, "mul", NR(74), save=rec)
            y = a(N * H * 4, "mul", NR(75), save=False)
            if not rec:
                dv.fl([x, r])
            return y

        def lin(key, out_bytes, line, at_line, save_out=False):
            if key not in wcache:
                wcache[key] = dv.a(psz[key] // 2, mk("to", L.linear() + [md(at_line, "forward")] + call + lay(line)), "wcast")
            return a(out_bytes, "mm", L.linear() + [md(at_line, "forward")] + call + lay(line), save=save_out)

        p = "l%d." % l
        h_in = rms(706)
        q = lin(p + "q", N * H * 2, 709, 598)
        k = lin(p + "k", N * KVD * 2, 709, 599)
        v = lin(p + "v", N * KVD * 2, 709, 600)
        RO = lambda ln: [md(ln, "apply_rotary_pos_emb"), md(612, "forward")] + call + lay(709)
        HF = lambda ln: [md(169, "rotate_half"), md(ln, "apply_rotary_pos_emb"), md(612, "forward")] + call + lay(709)
        embs = []
        for t, sz in ((q, N * H * 2), (k, N * KVD * 2)):
            c1 = a(sz, "mul", RO(196))
            ng = a(sz // 2, "neg", HF(197))
            ct = a(sz, "cat", HF(197))
            dv.f(ng)
            c2 = a(sz, "mul", RO(197))
            dv.f(ct)
            e = a(sz, "add", RO(197), save=rec)
            dv.fl([c1, c2])
            embs.append(e)
        if not rec:
            dv.fl([q, k])
        o = a(N * H * 2, "sdpa", [md(640, "forward")] + call + lay(709), save=rec)
        lse = a(B * 32 * T * 4, "sdpa", [md(640, "forward")] + call + lay(709), save=rec)
        if not rec:
            dv.fl(embs + [v])
        else:
            keep.extend([q, k, v])
        op_ = lin(p + "o", N * H * 2, 709, 651)
        if not rec:
            dv.fl([o, lse])
        h1 = a(N * H * 4, "add", lay(719))
        dv.f(op_)
        dv.f(h_in) if not rec else keep.append(h_in)
        h2 = rms(723)
        ML_ = lambda: None
        g = lin(p + "g", N * I * 2, 724, 224, save_out=rec)
        s = a(N * I * 2, "silu", [L("torch/nn/functional.py", 2380, "silu")] + L.mod("torch/nn/modules/activation.py", 432) + [md(224, "forward")] + call + lay(724), save=rec)
        u = lin(p + "u", N * I * 2, 724, 224, save_out=rec)
        m = a(N * I * 2, "mul", [md(224, "forward")] + call + lay(724), save=rec)
        if not rec:
            dv.fl([g, s, u])
        d = lin(p + "d", N * H * 2, 724, 224)
        if not rec:
            dv.f(m)
        out = a(N * H * 4, "add", lay(725))
        dv.fl([d, h1])
        if rec:
            keep.append(h2)
        else:
            dv.f(h2)
        return out

    def layer_backward(l, keep, wcache):
        """The backward ops of one recomputed layer: gradient temporaries sized like the saved
        tensors, fp32 weight gradients made by ToCopyBackward0 (kept by AccumulateGrad)."""
        p = "l%d." % l
        order = [("d", "MmBackward0"), ("u", "MmBackward0"), ("g", "MmBackward0"), ("o", "MmBackward0"),
                 ("v", "MmBackward0"), ("k", "MmBackward0"), ("q", "MmBackward0")]
        gtmp = []
        for b in reversed(keep):
            node = "MulBackward0" if b.req in (N * I * 2,) else ("ScaledDotProductFlashAttentionBackward0" if b.req == N * H * 2 else "MulBackward0")
            g = dv.a(b.req, cpp.bwd("mul" if node == "MulBackward0" else "sdpa_bwd", node), "tmp")
            gtmp.append(g)
            if len(gtmp) > 3:
                dv.f(gtmp.pop(0))
            if b.req == N * I * 2 and len(gtmp) == 3:
                n = order.pop(0) if order and order[0][0] in ("d", "u", "g") else None
                if n:
                    k = p + n[0]
                    wg = dv.a(psz[k] // 2, cpp.bwd("mm", "MmBackward0"), "tmp")
                    fg = dv.a(psz[k], cpp.bwd("to", "ToCopyBackward0"), "grad")
                    dv.f(wg)
                    grads[k] = fg
            dv.f(b)
        for n, node in order:
            k = p + n
            wg = dv.a(psz[k] // 2, cpp.bwd("mm", "MmBackward0"), "tmp")
            fg = dv.a(psz[k], cpp.bwd("to", "ToCopyBackward0"), "grad")
            dv.f(wg)
            grads[k] = fg
        for n in ("n2", "n1"):
            grads[p + n] = dv.a(psz[p + n], cpp.bwd("mul", "MulBackward0"), "grad")
        dv.fl(gtmp)
        for w in list(wcache.values()):
            dv.f(w)
        wcache.clear()

    for step in range(4):
        ann.start("ProfilerStep#%d" % step)
        ids = dv.a(N * 8, cpp.fwd("to", STEP(118)), "input")
        am = dv.a(N * 8, cpp.fwd("to", STEP(119)), "input")
        ends = dv.a(B * 8, cpp.fwd("to", STEP(120)), "input")
        wcache = {}
        emb = dv.a(N * H * 4, cpp.fwd("embedding", L.embedding() + MODEL(917)), "act")
        cos = dv.a(T * 128 * 4, cpp.fwd("cat", [md(116, "forward")] + call + MODEL(931)), "act")
        sin = dv.a(T * 128 * 4, cpp.fwd("cat", [md(117, "forward")] + call + MODEL(931)), "act")
        cm = dv.a(B * T * T // 8, cpp.fwd("index", [md(1042, "_update_causal_mask")] + MODEL(938)), "act")
        hs = [emb]
        h = emb
        for l in range(NL):
            h = layer(l, False, None, wcache)
            hs.append(h)
        NRf = lambda ln: [md(ln, "forward")] + call + MODEL(979)
        p_ = dv.a(N * H * 4, cpp.fwd("pow", NRf(73)), "tmp")
        m_ = dv.a(N * 4, cpp.fwd("mean", NRf(73)), "tmp")
        dv.f(p_)
        r_ = dv.a(N * 4, cpp.fwd("rsqrt", NRf(74)), "act")
        dv.f(m_)
        x_ = dv.a(N * H * 4, cpp.fwd("mul", NRf(74)), "act")
        hn = dv.a(N * H * 4, cpp.fwd("mul", NRf(75)), "act")
        # lm_head over every position (tied to embed_tokens): bf16 copy of the weight, bf16 logits, fp32 cast
        LMH = L.linear() + [md(1163, "forward")] + call + RM(58)
        wl = dv.a(V * H * 2, cpp.fwd("to", LMH), "wcast")
        lg = dv.a(N * V * 2, cpp.fwd("mm", LMH), "logits")
        lf = dv.a(N * V * 4, cpp.fwd("to", [md(1164, "forward")] + call + RM(58)), "logits")
        dv.f(lg)
        # RewardModel: v_head on hidden_states[-1], gather the last non-pad token
        vh_w = dv.a(H * 2, cpp.fwd("to", L.linear() + RM(60)), "wcast")
        hc = dv.a(N * H * 2, cpp.fwd("to", L.linear() + RM(60)), "act")
        sc = dv.a(N * 2, cpp.fwd("mm", L.linear() + RM(60)), "act")
        rw = dv.a(B * 4, cpp.fwd("index", RM(62)), "act")
        # forward returns: out (with the fp32 logits and 17 hidden states) goes out of scope
        dv.wait(rng.randint(1000, 3000))
        dv.f(lf)
        LS = STEP(144)
        df = dv.a(8 * 4, cpp.fwd("sub", LS), "tmp")
        ls = dv.a(8 * 4, cpp.fwd("logsigmoid", [L("torch/nn/functional.py", 2056, "logsigmoid")] + LS), "tmp")
        loss = dv.a(4, cpp.fwd("mean", STEP(145)), "tmp")
        # leaving the autocast region drops its cache of bf16 weight copies
        dv.f(wl)
        dv.f(vh_w)
        for w in list(wcache.values()):
            dv.f(w)
        dv.wait(rng.randint(200000, 260000))
        # backward
        g = dv.a(N * 2, cpp.bwd("index", "IndexBackward0"), "tmp")
        grads["v_head"] = dv.a(H * 4, cpp.bwd("to", "ToCopyBackward0"), "grad")
        gh = dv.a(N * H * 4, cpp.bwd("mm", "MmBackward0"), "tmp")
        dv.fl([g, sc, hc, rw, df, ls])
        gn = dv.a(N * H * 4, cpp.bwd("mul", "MulBackward0"), "tmp")
        grads["norm"] = dv.a(H * 4, cpp.bwd("mul", "MulBackward0"), "grad")
        dv.fl([gh, hn, x_, r_])
        for l in reversed(range(NL)):
            keep = []
            wcache = {}
            out = layer(l, True, keep, wcache)
            dv.f(out)
            layer_backward(l, keep, wcache)
            dv.f(hs[l + 1])
        ge = dv.a(V * H * 4, cpp.bwd("embedding_bwd", "EmbeddingBackward0"), "grad")
        grads["embed"] = ge
        dv.fl([gn, emb, cos, sin, cm, ids, am, ends, loss])
        dv.wait(rng.randint(150000, 200000))
        ann.start("Optimizer.step#AdamW.step")
        OPT = [L("torch/optim/optimizer.py", 487, "wrapper"), L("torch/optim/lr_scheduler.py", 130, "wrapper"), app("train_rm.py", 150, "train_step"), app("train_rm.py", 198, "main")] + MAIN[1:]
        if not state:
            for k, v in psz.items():
                for ln in (181, 185):
                    state.append(dv.a(v, cpp.fwd("zeros_like", [L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 209, "step"), L("torch/optim/optimizer.py", 91, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adamw.py", 590, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 342, "adamw"), L("torch/optim/adamw.py", 220, "step"), L("torch/optim/optimizer.py", 91, "_use_grad")] + OPT
        keys = list(psz)
        for i0 in range(0, len(keys), 24):
            chunk = keys[i0:i0 + 24]
            tmp = [dv.a(psz[k], cpp.fwd("foreach", FE), "tmp") for k in chunk]
            dv.fl(tmp)
        ann.end("Optimizer.step#AdamW.step")
        ann.start("Optimizer.zero_grad#AdamW.zero_grad")
        ZG = cpp.fwd("zeros_like", [L("torch/optim/optimizer.py", 1003, "zero_grad"), app("train_rm.py", 152, "train_step"), app("train_rm.py", 198, "main")] + MAIN[1:])
        ZG = S([("??", 0, "torch::unwind::unwind()"), ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
                ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
                ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)"),
                ("", 0, "c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)"),
                ("", 0, "c10::StorageImpl::~StorageImpl()"),
                ("", 0, "c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()"),
                ("??", 0, "c10::TensorImpl::~TensorImpl()"), ("TensorImpl.cpp", 0, "c10::TensorImpl::~TensorImpl() [clone .localalias]"),
                ("python_variable.cpp", 0, "THPVariable_clear(THPVariable*)"), ("??", 0, "THPVariable_subclass_dealloc(_object*)"),
                ("??", 0, "_Py_Dealloc")], cpp.interleave([L("torch/optim/optimizer.py", 1003, "zero_grad"), L("torch/_compile.py", 32, "inner"), app("train_rm.py", 152, "train_step"), app("train_rm.py", 198, "main")] + MAIN[1:]), cpp.MAIN_TAIL[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        ann.end("Optimizer.zero_grad#AdamW.zero_grad")
        ann.end("ProfilerStep#%d" % step)
    info["logits_bytes_per_step"] = N * V * 2 + N * V * 4
    d = write([A], annotations=ann.items)
    return dict(name="m01_llama32_1b_reward_hh_cpp.pickle", data=d, devs=[A], info=info)


# ============================================================================ m02
def build_m02():
    """torch_npu LoRA fine-tuning of ChatGLM3-6B (28 layers, d=4096, multi-query attention with 2
    groups, SwiGLU 13696, vocabulary 65024) on card 4 of an Atlas 800T A2 (64 GB), a Chinese team's
    script (/home/李明/微调/…, functions 训练循环, 整理批次, 融合注意力).  fp16 base weights frozen,
    LoRA r=8 on query_key_value in fp32, fp16 autocast, gradient checkpointing per layer, batch
    4 x 1024, AdamW on the LoRA parameters, 6 steps; the loss is computed inside the model on the
    fp32 logits.  torch_npu format: no time_us, one raw stream pointer, 8 device lists.  Healthy."""
    rng = random.Random(3602)
    STREAM = 1874262816
    A = sim.Allocator(device=4, stream=STREAM, npu=True, capacity=int(61.0 * GB), time_us=False, base=0x12C2C0000000)
    dv = Dev(A)
    HOME = "/home/李明/"
    L = Lib(HOME + "miniconda3/envs/glm_npu/lib/python3.9/site-packages/", "2.1")
    app = fr(HOME + "微调/chatglm3_lora/")
    MD = HOME + ".cache/huggingface/modules/transformers_modules/chatglm3-6b/modeling_chatglm.py"
    md = lambda line, name: (MD, line, name)
    PL = L.p + "peft/tuners/lora/layer.py"
    call = L.call()
    NL, H, QKV, FF, V = 28, 4096, 4608, 13696, 65024
    B, T = 4, 1024
    N = B * T
    MAIN = [app("训练.py", 188, "主函数"), app("训练.py", 203, "<module>")]
    LOOP = lambda line: [app("训练.py", line, "训练循环"), app("训练.py", 181, "主函数")] + MAIN[1:]
    PEFT = [L("peft/peft_model.py", 1129, "forward")] + call + LOOP(97)
    CG = [md(943, "forward")] + call + [L("peft/tuners/tuners_utils.py", 188, "forward")] + call + PEFT
    TR = lambda line: [md(line, "forward")] + call + [md(800, "forward")] + call + CG
    # ---- frozen fp16 base (before recording), LoRA adapters in fp32
    LOAD = S([L("torch_npu/utils/_module.py", 76, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch/nn/modules/module.py", 797, "_apply"), L("torch/nn/modules/module.py", 797, "_apply"),
              L("torch_npu/utils/_module.py", 78, "to"), app("模型/加载.py", 41, "加载模型"), app("训练.py", 152, "主函数")] + MAIN[1:])
    wsz = [V * H * 2]
    for l in range(NL):
        wsz += [H * 2, QKV * H * 2, QKV * 2, H * H * 2, H * 2, 2 * FF * H * 2, FF * H * 2]
    wsz += [H * 2, V * H * 2]
    for s in wsz:
        dv.a(s, LOAD, "param")
    LORA = S([L("peft/tuners/lora/layer.py", 137, "update_layer"), L("peft/tuners/lora/layer.py", 398, "__init__"), L("peft/tuners/lora/model.py", 236, "_create_and_replace"),
              L("peft/tuners/tuners_utils.py", 446, "inject_adapter"), L("peft/tuners/tuners_utils.py", 160, "__init__"), L("peft/peft_model.py", 1089, "__init__"),
              L("peft/mapping.py", 183, "get_peft_model"), app("模型/加载.py", 58, "加载模型"), app("训练.py", 152, "主函数")] + MAIN[1:])
    lsz = {}
    for l in range(NL):
        lsz["l%d.A" % l] = 8 * H * 4
        lsz["l%d.B" % l] = QKV * 8 * 4
    for s in lsz.values():
        dv.a(s, LORA, "param")
    start_recording(A)
    info = dict(param_bytes=sum(wsz) + sum(lsz.values()), base_bytes=sum(wsz), lora_bytes=sum(lsz.values()), steps=6)
    grads, state = {}, []
    CK = [L("torch/utils/checkpoint.py", 230, "forward"), L("torch/autograd/function.py", 539, "apply"),
          L("torch/utils/checkpoint.py", 458, "checkpoint"), L("torch/_compile.py", 24, "inner"), L("torch/_dynamo/eval_frame.py", 489, "_fn"),
          md(620, "forward")] + call + TR(815)
    CKB = [L("torch/utils/checkpoint.py", 288, "backward"), L("torch/autograd/function.py", 288, "apply")]

    def layer(l, rec, keep):
        base = CKB if rec else CK
        BL = lambda line: [md(line, "forward")] + call + base
        kind = "act" if rec else "tmp"

        def a(sz, py, save=False):
            b = dv.a(sz, S(py), kind)
            if save:
                keep.append(b)
            return b

        def rms(line):
            R = lambda ln: [md(ln, "forward")] + call + BL(line)
            f = a(N * H * 4, R(191))
            v_ = a(N * 4, R(192))
            r = a(N * H * 4, R(192), save=rec)
            dv.f(f)
            y = a(N * H * 2, R(194))
            if not rec:
                dv.fl([v_, r])
            else:
                keep.append(v_)
            return y

        n1 = rms(542)
        AT = lambda ln: [md(ln, "forward")] + call + BL(547)
        qkv = a(N * QKV * 2, L.linear() + [L("peft/tuners/lora/layer.py", 497, "forward")] + call + AT(402), save=rec)
        xa = a(N * H * 4, [(PL, 505, "forward")] + call + AT(402))
        la = a(N * 8 * 4, L.linear() + [(PL, 509, "forward")] + call + AT(402), save=rec)
        lb = a(N * QKV * 4, L.linear() + [(PL, 509, "forward")] + call + AT(402))
        sc = a(N * QKV * 4, [(PL, 509, "forward")] + call + AT(402))
        dv.f(lb)
        q2 = a(N * QKV * 2, [(PL, 509, "forward")] + call + AT(402), save=rec)
        dv.fl([sc, xa])
        if not rec:
            dv.fl([qkv, la])
        RP = lambda: [md(170, "apply_rotary_pos_emb"), md(432, "forward")] + call + BL(547)
        qr = a(N * H * 2, RP(), save=rec)
        kr = a(N * 256 * 2, [md(170, "apply_rotary_pos_emb"), md(433, "forward")] + call + BL(547), save=rec)
        ke = a(N * H * 2, [md(450, "forward")] + call + BL(547), save=rec)
        ve = a(N * H * 2, [md(452, "forward")] + call + BL(547), save=rec)
        FA = [app("模型/补丁.py", 37, "融合注意力"), md(464, "forward")] + call + AT(464)[1:]
        ctx = a(N * H * 2, FA, save=rec)
        smx = a(B * 32 * T * 8 * 4, FA, save=rec)
        sms = a(B * 32 * T * 8 * 4, FA, save=rec)
        if not rec:
            dv.fl([qr, kr, ke, ve, smx, sms, q2])
        dn = a(N * H * 2, L.linear() + AT(472))
        if not rec:
            dv.f(ctx)
        r1 = a(N * H * 2, BL(556))
        dv.fl([dn])
        if not rec:
            dv.f(n1)
        else:
            keep.append(n1)
        n2 = rms(560)
        MLP = lambda ln: [md(ln, "forward")] + call + BL(563)
        hh = a(N * 2 * FF * 2, L.linear() + MLP(484), save=rec)
        sw = a(N * FF * 2, [md(477, "swiglu"), md(485, "forward")] + call + BL(563), save=rec)
        if not rec:
            dv.f(hh)
        o = a(N * H * 2, L.linear() + MLP(487))
        if not rec:
            dv.fl([sw, n2])
        else:
            keep.append(n2)
        out = a(N * H * 2, BL(572))
        dv.fl([o, r1])
        return out

    def layer_backward(l, keep):
        gt = []
        for b in reversed(keep):
            g = dv.a(b.req, NOSTACK, "tmp")
            gt.append(g)
            if len(gt) > 2:
                dv.f(gt.pop(0))
            dv.f(b)
            if b.req == N * 8 * 4:
                grads.setdefault("l%d.B" % l, dv.a(lsz["l%d.B" % l], NOSTACK, "grad"))
                grads.setdefault("l%d.A" % l, dv.a(lsz["l%d.A" % l], NOSTACK, "grad"))
        dv.fl(gt)

    for step in range(6):
        BT = [app("数据/整理.py", 33, "整理批次"), L("torch/utils/data/dataloader.py", 677, "_next_data"), L("torch/utils/data/dataloader.py", 633, "__next__")] + LOOP(88)
        ids = dv.a(N * 8, S([app("训练.py", 92, "训练循环"), app("训练.py", 181, "主函数")] + MAIN[1:]), "input")
        lab = dv.a(N * 8, S([app("训练.py", 93, "训练循环"), app("训练.py", 181, "主函数")] + MAIN[1:]), "input")
        emb = dv.a(N * H * 2, S(L.embedding() + [md(705, "forward")] + call + TR(788)), "act")
        rope = dv.a(T * 32 * 2 * 2, S([md(737, "forward_impl"), md(762, "forward")] + call + TR(795)), "act")
        hs = [emb]
        for l in range(NL):
            hs.append(layer(l, False, None))
        FN = [md(192, "forward")] + call + TR(825)
        f_ = dv.a(N * H * 4, S(FN), "tmp")
        v_ = dv.a(N * 4, S(FN), "act")
        r_ = dv.a(N * H * 4, S([md(193, "forward")] + call + TR(825)), "act")
        dv.f(f_)
        hn = dv.a(N * H * 2, S([md(194, "forward")] + call + TR(825)), "act")
        lg = dv.a(N * V * 2, S(L.linear() + [md(944, "forward")] + call + CG[len(call) + 1:]), "logits")
        lf = dv.a(N * V * 4, S([md(945, "forward")] + call + CG[len(call) + 1:]), "logits")
        CE = [L("torch/nn/functional.py", 3053, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1179) + [md(956, "forward")] + call + CG[len(call) + 1:]
        sl = dv.a((N - B) * V * 4, S([md(952, "forward")] + call + CG[len(call) + 1:]), "logits")
        lsm = dv.a((N - B) * V * 4, S(CE), "logits")
        loss = dv.a(4, S(CE), "tmp")
        # backward
        g1 = dv.a((N - B) * V * 4, NOSTACK, "tmp")
        dv.fl([lsm])
        g2 = dv.a(N * V * 4, NOSTACK, "tmp")
        dv.fl([g1, sl])
        g3 = dv.a(N * V * 2, NOSTACK, "tmp")
        dv.fl([g2, lf])
        gh = dv.a(N * H * 2, NOSTACK, "tmp")
        dv.fl([g3, lg])
        gn = dv.a(N * H * 2, NOSTACK, "tmp")
        dv.fl([gh, hn, r_, v_])
        for l in reversed(range(NL)):
            keep = []
            out = layer(l, True, keep)
            dv.f(out)
            layer_backward(l, keep)
            dv.f(hs[l + 1])
        dv.fl([gn, emb, rope, ids, lab, loss])
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), app("训练.py", 121, "训练循环"), app("训练.py", 181, "主函数")] + MAIN[1:]
        if not state:
            for k, v in lsz.items():
                for ln in (112, 116):
                    state.append(dv.a(v, S([L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 577, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 333, "adamw"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in lsz.values()]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 815, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("训练.py", 123, "训练循环"), app("训练.py", 181, "主函数")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
    info["opt_bytes"] = sum(b.req for b in state)
    d = write([A], kind="npu", n_dev_lists=8)
    return dict(name="m02_chatglm3_6b_lora_npu4.pkl", data=d, devs=[A], info=info)


# ============================================================================ m03
def build_m03():
    """RWKV-4 430M (24 layers, d=1024, FFN 4096, vocabulary 50277) pre-training on the Pile with the
    custom WKV CUDA kernel (fp32 inputs, saves w, u, k, v and y), bf16 autocast, Adam (foreach),
    ctx 1024 x batch 8, 4 steps on an A100-40GB; torch 2.0, recorded in the 2023 format (no
    time_us, no allocator_settings, Python stacks only, backward allocations without stacks,
    segment stacks empty).  Healthy."""
    rng = random.Random(3603)
    A = sim.Allocator(device=0, capacity=int(39.39 * GB), time_us=False, seg_frames=False, base=0x7F5C36000000)
    dv = Dev(A)
    L = Lib("/home/rwkv/.local/lib/python3.10/site-packages/", "2.0")
    app = fr("/home/rwkv/RWKV-LM/RWKV-v4neo/")
    call = L.call()
    NL, C, F, V = 24, 1024, 4096, 50277
    B, T = 8, 1024
    N = B * T
    MAIN = [app("train_pile.py", 160, "main"), app("train_pile.py", 178, "<module>")]
    LOOP = lambda line: [app("train_pile.py", line, "train"), app("train_pile.py", 156, "main")] + MAIN[1:]
    MOD = lambda line: [app("src/model.py", line, "forward")] + call + LOOP(118)
    psz = {"emb": V * C * 4, "ln0.w": C * 4, "ln0.b": C * 4}
    for l in range(NL):
        p = "b%d." % l
        for n, s in (("ln1.w", C), ("ln1.b", C), ("ln2.w", C), ("ln2.b", C), ("att.time_decay", C), ("att.time_first", C),
                     ("att.time_mix_k", C), ("att.time_mix_v", C), ("att.time_mix_r", C), ("att.key", C * C), ("att.value", C * C),
                     ("att.receptance", C * C), ("att.output", C * C), ("ffn.time_mix_k", C), ("ffn.time_mix_r", C),
                     ("ffn.key", F * C), ("ffn.receptance", C * C), ("ffn.value", C * F)):
            psz[p + n] = s * 4
    psz.update({"ln_out.w": C * 4, "ln_out.b": C * 4, "head": V * C * 4})
    TO = S(L.convert() + [app("train_pile.py", 131, "main")] + MAIN[1:])
    for v in psz.values():
        dv.a(v, TO, "param")
    start_recording(A)
    info = dict(param_bytes=sum(psz.values()), steps=4, batch=B, ctx=T)
    grads, state = {}, []

    def block(l, tape, x):
        p = "b%d." % l
        BL = lambda line: [app("src/model.py", line, "forward")] + call + MOD(334)
        if l == 0:
            tape.param("ln0.w", psz["ln0.w"])
            tape.param("ln0.b", psz["ln0.b"])
            x = op(dv, tape, N * C * 4, S(L.layer_norm() + BL(248)), True)
        tape.param(p + "ln1.w", psz[p + "ln1.w"])
        tape.param(p + "ln1.b", psz[p + "ln1.b"])
        h = op(dv, tape, N * C * 4, S(L.layer_norm() + BL(253)), True)
        TM = lambda line, nm="jit_func": [app("src/model.py", line, nm), app("src/model.py", 147, "forward")] + call + BL(253)
        xx = op(dv, tape, N * C * 4, S([L("torch/nn/functional.py", 4495, "pad")] + L.mod("torch/nn/modules/padding.py", 25) + TM(130)), True)
        for n, ln in (("k", 131), ("v", 132), ("r", 133)):
            tape.param(p + "att.time_mix_" + n, psz[p + "att.time_mix_" + n])
        xk = op(dv, tape, N * C * 4, S(TM(131)), True)
        xv = op(dv, tape, N * C * 4, S(TM(132)), True)
        xr = op(dv, tape, N * C * 4, S(TM(133)), True)
        outs = []
        for n, src, ln in (("key", xk, 135), ("value", xv, 136), ("receptance", xr, 137)):
            tape.param(p + "att." + n, psz[p + "att." + n])
            op(dv, tape, N * C * 2, S(L.linear() + TM(ln)), True)      # autocast copy of the input, saved
            outs.append(op(dv, tape, N * C * 2, S(L.linear() + TM(ln)), False))
        k, v, r = outs
        sr = op(dv, tape, N * C * 2, S(TM(138)), True)
        dv.f(r)
        WK = lambda line, nm: [app("src/model.py", line, nm), app("src/model.py", 98, "RUN_CUDA"), app("src/model.py", 147, "forward")] + call + BL(253)
        tape.param(p + "att.time_decay", psz[p + "att.time_decay"])
        tape.param(p + "att.time_first", psz[p + "att.time_first"])
        w = op(dv, tape, C * 4, S([app("src/model.py", 51, "forward"), L("torch/autograd/function.py", 506, "apply")] + WK(98, "RUN_CUDA")[1:]), True)
        kf = op(dv, tape, N * C * 4, S([app("src/model.py", 53, "forward"), L("torch/autograd/function.py", 506, "apply")] + WK(98, "RUN_CUDA")[1:]), True)
        vf = op(dv, tape, N * C * 4, S([app("src/model.py", 54, "forward"), L("torch/autograd/function.py", 506, "apply")] + WK(98, "RUN_CUDA")[1:]), True)
        dv.fl([k, v])
        y = op(dv, tape, N * C * 4, S([app("src/model.py", 55, "forward"), L("torch/autograd/function.py", 506, "apply")] + WK(98, "RUN_CUDA")[1:]), True)
        rw = op(dv, tape, N * C * 4, S([app("src/model.py", 147, "forward")] + call + BL(253)), True)
        tape.param(p + "att.output", psz[p + "att.output"])
        op(dv, tape, N * C * 2, S(L.linear() + [app("src/model.py", 148, "forward")] + call + BL(253)), True)
        ao = op(dv, tape, N * C * 2, S(L.linear() + [app("src/model.py", 148, "forward")] + call + BL(253)), False)
        x1 = op(dv, tape, N * C * 4, S(BL(253)), False)
        dv.f(ao)
        tape.param(p + "ln2.w", psz[p + "ln2.w"])
        tape.param(p + "ln2.b", psz[p + "ln2.b"])
        op(dv, tape, N * C * 4, S(L.layer_norm() + BL(254)), True)
        CM = lambda line: [app("src/model.py", line, "forward")] + call + BL(254)
        op(dv, tape, N * C * 4, S([L("torch/nn/functional.py", 4495, "pad")] + L.mod("torch/nn/modules/padding.py", 25) + CM(171)), True)
        tape.param(p + "ffn.time_mix_k", psz[p + "ffn.time_mix_k"])
        tape.param(p + "ffn.time_mix_r", psz[p + "ffn.time_mix_r"])
        op(dv, tape, N * C * 4, S(CM(172)), True)
        op(dv, tape, N * C * 4, S(CM(173)), True)
        tape.param(p + "ffn.key", psz[p + "ffn.key"])
        op(dv, tape, N * C * 2, S(L.linear() + CM(175)), True)
        kk = op(dv, tape, N * F * 2, S(L.linear() + CM(175)), False)
        rl = op(dv, tape, N * F * 2, S(CM(176)), True)
        dv.f(kk)
        sq = op(dv, tape, N * F * 2, S(CM(176)), True)
        tape.param(p + "ffn.value", psz[p + "ffn.value"])
        kv = op(dv, tape, N * C * 2, S(L.linear() + CM(177)), True)
        tape.param(p + "ffn.receptance", psz[p + "ffn.receptance"])
        op(dv, tape, N * C * 2, S(L.linear() + CM(179)), True)
        rr = op(dv, tape, N * C * 2, S(L.linear() + CM(179)), False)
        sg = op(dv, tape, N * C * 2, S(CM(179)), True)
        dv.f(rr)
        m = op(dv, tape, N * C * 4, S(CM(179)), False)
        x2 = op(dv, tape, N * C * 4, S(BL(254)), False)
        dv.fl([m, x1])
        if x is not None and l > 0:
            dv.f(x)
        return x2

    for step in range(4):
        DL = [L("torch/utils/data/dataloader.py", 634, "__next__"), app("train_pile.py", 109, "train"), app("train_pile.py", 156, "main")] + MAIN[1:]
        idx = dv.a(N * 8, S([app("train_pile.py", 112, "train"), app("train_pile.py", 156, "main")] + MAIN[1:]), "input")
        tgt = dv.a(N * 8, S([app("train_pile.py", 113, "train"), app("train_pile.py", 156, "main")] + MAIN[1:]), "input")
        tape = Tape()
        tape.param("emb", psz["emb"])
        x = op(dv, tape, N * C * 4, S(L.embedding() + MOD(328)), False)
        emb = x
        for l in range(NL):
            x = block(l, tape, x if l > 0 else None) if l > 0 else block(0, tape, None)
        if emb is not None:
            dv.f(emb)
        tape.param("ln_out.w", psz["ln_out.w"])
        tape.param("ln_out.b", psz["ln_out.b"])
        op(dv, tape, N * C * 4, S(L.layer_norm() + MOD(341)), True)
        dv.f(x)
        tape.param("head", psz["head"])
        op(dv, tape, N * C * 2, S(L.linear() + MOD(343)), True)
        lg = op(dv, tape, N * V * 2, S(L.linear() + MOD(343)), False)
        TS = lambda line: [app("train_pile.py", line, "train"), app("train_pile.py", 156, "main")] + MAIN[1:]
        CE = [L("torch/nn/functional.py", 3029, "cross_entropy"), ] + TS(119)
        lf = op(dv, tape, N * V * 4, S(CE), False, gsize=N * V * 2)
        dv.f(lg)
        lsm = op(dv, tape, N * V * 4, S(CE), True)
        loss = dv.a(4, S(CE), "tmp")
        l2 = dv.a(N * 4, S([app("src/model.py", 26, "forward"), L("torch/autograd/function.py", 506, "apply")] + TS(120)), "tmp")
        l2b = dv.a(N * 8, S([app("src/model.py", 27, "forward"), L("torch/autograd/function.py", 506, "apply")] + TS(120)), "tmp")
        dv.wait(0)
        tape.mark(lambda: dv.f(lf))
        backward(dv, tape, grads)
        dv.fl([loss, l2, l2b, idx, tgt])
        OPT = [L("torch/optim/optimizer.py", 280, "wrapper"), L("torch/cuda/amp/grad_scaler.py", 0, "step")][:1] + TS(125)
        if not state:
            for k, v in psz.items():
                for ln in (125, 127):
                    state.append(dv.a(v, S([L("torch/optim/adam.py", ln, "_init_group"), L("torch/optim/adam.py", 141, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adam.py", 499, "_multi_tensor_adam"), L("torch/optim/adam.py", 290, "adam"), L("torch/optim/adam.py", 152, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT)
        keys = list(psz)
        for i0 in range(0, len(keys), 64):
            tmp = [dv.a(psz[k], FE, "tmp") for k in keys[i0:i0 + 64]]
            dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 442, "zero_grad"), L("torch/_compile.py", 24, "inner")] + TS(127))
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
    info["opt_bytes"] = sum(b.req for b in state)
    d = write([A], settings=False)
    return dict(name="m03_rwkv4_430m_pile_2023.pickle", data=d, devs=[A], info=info)


# ============================================================================ m04
def build_m04():
    """SDXL LoRA fine-tuning (diffusers train_text_to_image_lora_sdxl.py, adapted): fp16 UNet frozen,
    LoRA rank 8 on to_q/to_k/to_v/to_out.0 in fp32, fp16 autocast, gradient checkpointing, batch 4
    at 1024x1024 (128x128 latents, precomputed on the host), AdamW, 1,200 steps on an L40S (48 GB);
    torch 2.3 with _record_memory_history(max_entries=60000): the trace is the last 60,000 events
    (it begins inside a step).  Both text encoders were run once before training: the prompt
    embeddings of all 833 captions (77x2048 fp16) and their pooled embeddings (1280 fp16) are kept
    on the GPU in a dict, built before the recorded window.  Healthy."""
    rng = random.Random(3604)
    clock = sim.Clock(1727800000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(44.31 * GB), clock=clock, base=0x7F8E20000000)
    dv = Dev(A)
    SP = "/opt/conda/lib/python3.10/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/workspace/sdxl-lora/")
    call = L.call()
    D = SP + "diffusers/models/"
    dm = lambda f, line, name: (D + f, line, name)
    MAIN = [app("train_sdxl_lora.py", 1302, "main"), app("train_sdxl_lora.py", 1321, "<module>")]
    LOOP = lambda line: [app("train_sdxl_lora.py", line, "main")] + MAIN[1:]
    UNET = lambda line: [dm("unets/unet_2d_condition.py", line, "forward")] + call + LOOP(1098)
    # ---- before recording: fp16 UNet, LoRA (fp32), the caption-embedding cache, AdamW state
    LOADU = S(L.convert() + [app("train_sdxl_lora.py", 612, "main")] + MAIN[1:])
    unet_sizes = []
    # a condensed SDXL UNet: 2.567e9 parameters in ~1,680 tensors
    rem = 2567463684 * 2
    pr = random.Random(36041)
    while rem > 0:
        s = min(rem, pr.choice([1280 * 1280 * 2, 640 * 640 * 2, 1280 * 5120 * 2, 1280 * 2, 640 * 2, 1280 * 10240 * 2, 2048 * 1280 * 2, 1280 * 1280 * 9 * 2, 320 * 2]))
        unet_sizes.append(s)
        rem -= s
    for s in unet_sizes:
        dv.a(s, LOADU, "param")
    LOR = S([L("peft/tuners/lora/layer.py", 131, "update_layer"), L("peft/tuners/lora/layer.py", 421, "__init__"), L("peft/tuners/lora/model.py", 340, "_create_new_module"),
             L("peft/tuners/lora/model.py", 226, "_create_and_replace"), L("peft/tuners/tuners_utils.py", 478, "inject_adapter"), L("peft/tuners/tuners_utils.py", 166, "__init__"),
             L("peft/mapping.py", 215, "inject_adapter_in_model"), L("diffusers/loaders/peft.py", 738, "add_adapter"), app("train_sdxl_lora.py", 678, "main")] + MAIN[1:])
    CAST = S([L("diffusers/training_utils.py", 328, "cast_training_params"), app("train_sdxl_lora.py", 694, "main")] + MAIN[1:])
    lora_sizes = []
    dims = [640] * 4 + [1280] * 20 + [1280] * 10 + [1280] * 30 + [640] * 6
    for dmn in dims:
        for kind in ("q", "k", "v", "o", "cq", "ck", "cv", "co"):
            din = 2048 if kind in ("ck", "cv") else dmn
            lora_sizes += [8 * din * 4, dmn * 8 * 4]
    for s in lora_sizes:
        b = dv.a(s // 2, LOR, "param")
        nb = dv.a(s, CAST, "param")
        dv.f(b, CAST)
    EMB = S([app("train_sdxl_lora.py", 521, "encode_prompt"), app("train_sdxl_lora.py", 552, "compute_embeddings"), app("train_sdxl_lora.py", 905, "main")] + MAIN[1:])
    POOL = S([app("train_sdxl_lora.py", 517, "encode_prompt"), app("train_sdxl_lora.py", 552, "compute_embeddings"), app("train_sdxl_lora.py", 905, "main")] + MAIN[1:])
    NCAP = 833
    cache = []
    for i in range(NCAP):
        cache.append(dv.a(77 * 2048 * 2, EMB, "textcache"))
        cache.append(dv.a(1280 * 2, POOL, "textcache"))
    info = dict(unet_bytes=sum(unet_sizes), lora_bytes=sum(lora_sizes), text_cache_entries=NCAP,
                text_cache_bytes=sum(b.req for b in cache), max_entries=60000, batch=4)
    grads, state = {}, []
    B = 4
    CKF = [L("torch/utils/checkpoint.py", 264, "forward"), L("torch/autograd/function.py", 598, "apply"), L("torch/utils/checkpoint.py", 488, "checkpoint"),
           L("torch/_compile.py", 24, "inner"), L("torch/_dynamo/eval_frame.py", 451, "_fn")]
    CKB = [L("torch/utils/checkpoint.py", 319, "backward"), L("torch/autograd/function.py", 289, "apply")]

    levels = [(128, 320, 0), (64, 640, 2), (32, 1280, 10)]

    def transformer_layer(tok, dmn, rec, keep, outer):
        kind = "act" if rec else "tmp"
        BT = lambda line: [dm("attention.py", line, "forward")] + call + outer
        AP = lambda line, nm="__call__": [dm("attention_processor.py", line, nm), dm("attention_processor.py", 559, "forward")] + call
        out = []

        def a(sz, st, save=False):
            b = dv.a(sz, S(st), kind)
            if save and rec:
                keep.append(b)
            elif not save or not rec:
                out.append(b)
            return b
        n1 = a(tok * dmn * 2, L.layer_norm() + BT(329), True)
        for ln in (2736, 2737, 2738):
            a(tok * 8 * 4, L.linear() + [L("peft/tuners/lora/layer.py", 509, "forward")] + call + AP(ln) + BT(366), True)
            a(tok * dmn * 2, [L("peft/tuners/lora/layer.py", 509, "forward")] + call + AP(ln) + BT(366), True)
        at = a(tok * dmn * 2, [L("torch/nn/functional.py", 5472, "scaled_dot_product_attention")][:0] + AP(2759) + BT(366), True)
        a(tok * dmn * 2, [L("peft/tuners/lora/layer.py", 509, "forward")] + call + AP(2770) + BT(366), True)
        h = a(tok * dmn * 2, BT(374))
        n2 = a(tok * dmn * 2, L.layer_norm() + BT(393), True)
        a(tok * dmn * 2, [L("peft/tuners/lora/layer.py", 509, "forward")] + call + AP(2736) + BT(409), True)
        a(tok * dmn * 2, AP(2759) + BT(409), True)
        h2 = a(tok * dmn * 2, BT(417))
        n3 = a(tok * dmn * 2, L.layer_norm() + BT(430), True)
        FF = lambda line, nm="forward": [dm("activations.py", line, nm)] + call + [dm("attention.py", 1200, "forward")] + call + BT(447)
        pj = a(tok * dmn * 8 * 2, L.linear() + FF(88), True)
        ge = a(tok * dmn * 4 * 2, [dm("activations.py", 78, "gelu")] + FF(89), True)
        o = a(tok * dmn * 2, L.linear() + [dm("attention.py", 1200, "forward")] + call + BT(447))
        h3 = a(tok * dmn * 2, BT(453))
        for b in out:
            if b is not h3 and b.state == "active_allocated":
                dv.f(b)
        return h3

    def resnet(tok, ch, rec, keep, outer):
        kind = "act" if rec else "tmp"
        RN = lambda line: [dm("resnet.py", line, "forward")] + call + outer
        bs = []
        for ln, sz in ((332, tok * ch * 4), (333, tok * ch * 2), (342, tok * ch * 2), (356, tok * ch * 4), (357, tok * ch * 2), (365, tok * ch * 2), (377, tok * ch * 2)):
            b = dv.a(sz, S((L.group_norm() if ln in (332, 356) else L.conv2d()) + RN(ln)), kind)
            bs.append(b)
        if rec:
            keep.extend(bs[:-1])
        else:
            dv.fl(bs[:-1])
        return bs[-1]

    def step_once(step):
        LT = dv.a(B * 4 * 128 * 128 * 2, S([app("train_sdxl_lora.py", 1043, "main")] + MAIN[1:]), "input")
        noise = dv.a(B * 4 * 128 * 128 * 2, S([app("train_sdxl_lora.py", 1047, "main")] + MAIN[1:]), "input")
        noisy = dv.a(B * 4 * 128 * 128 * 2, S([L("diffusers/schedulers/scheduling_ddpm.py", 520, "add_noise"), app("train_sdxl_lora.py", 1068, "main")] + MAIN[1:]), "input")
        pe = dv.a(B * 77 * 2048 * 2, S([app("train_sdxl_lora.py", 1084, "main")] + MAIN[1:]), "input")
        tid = dv.a(B * 6 * 2, S([app("train_sdxl_lora.py", 1079, "compute_time_ids"), app("train_sdxl_lora.py", 1081, "main")] + MAIN[1:]), "input")
        saved = []
        blocks = []
        for lvl, (hw, ch, nt) in enumerate(levels):
            blocks += [("res", hw * hw * B, ch, lvl)] * 2 + ([("tx", hw * hw * B, ch, lvl)] * (2 * nt))
        blocks += [("tx", 32 * 32 * B, 1280, 2)] * 10
        for lvl, (hw, ch, nt) in reversed(list(enumerate(levels))):
            blocks += [("res", hw * hw * B, ch, lvl)] * 3 + ([("tx", hw * hw * B, ch, lvl)] * (3 * nt))
        x = dv.a(B * 128 * 128 * 320 * 2, S(L.conv2d() + UNET(1216)), "act")
        skip = [x]
        for i, (kind, tok, ch, lvl) in enumerate(blocks):
            OUT = CKF + [dm("unets/unet_2d_blocks.py", 1290 if kind == "tx" else 1281, "forward")] + call + UNET(1235 if i < 60 else 1290)
            y = (transformer_layer(tok, ch, False, None, OUT) if kind == "tx" else resnet(tok, ch, False, None, OUT))
            saved.append((kind, tok, ch, x))
            x = y
        out = dv.a(B * 4 * 128 * 128 * 2, S(L.conv2d() + UNET(1331)), "act")
        MSE = [L("torch/nn/functional.py", 3383, "mse_loss"), app("train_sdxl_lora.py", 1128, "main")] + MAIN[1:]
        pf = dv.a(B * 4 * 128 * 128 * 4, S([app("train_sdxl_lora.py", 1128, "main")] + MAIN[1:]), "tmp")
        loss = dv.a(4, S(MSE), "tmp")
        dv.wait(rng.randint(200000, 260000))
        g = dv.a(B * 4 * 128 * 128 * 4, NOSTACK, "tmp")
        dv.fl([pf, x])
        dv.f(out)
        gi = dv.a(B * 128 * 128 * 320 * 2, NOSTACK, "tmp")
        dv.f(g)
        li = 0
        for kind, tok, ch, xin in reversed(saved):
            keep = []
            OUT = CKB
            y = transformer_layer(tok, ch, True, keep, OUT) if kind == "tx" else resnet(tok, ch, True, keep, OUT)
            dv.f(y)
            gt = []
            for b in reversed(keep):
                gg = dv.a(b.req, NOSTACK, "tmp")
                gt.append(gg)
                if len(gt) > 2:
                    dv.f(gt.pop(0))
                dv.f(b)
            if kind == "tx":
                for j in range(16):
                    k = (li, j)
                    if k not in grads:
                        grads[k] = dv.a(lora_sizes[(li * 16 + j) % len(lora_sizes)], NOSTACK, "grad")
                li += 1
            dv.fl(gt)
            if xin is not saved[0][3]:
                dv.f(xin)
        dv.fl([gi, saved[0][3], LT, noise, noisy, pe, tid, loss])
        dv.wait(rng.randint(120000, 160000))
        OPT = [L("accelerate/optimizer.py", 170, "step"), app("train_sdxl_lora.py", 1141, "main")] + MAIN[1:]
        if not state:
            for s in lora_sizes:
                for ln in (132, 136):
                    state.append(dv.a(s, S([L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad"), L("torch/optim/optimizer.py", 391, "wrapper")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 578, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad"), L("torch/optim/optimizer.py", 391, "wrapper")] + OPT)
        for i0 in range(0, len(lora_sizes), 256):
            tmp = [dv.a(s, FE, "tmp") for s in lora_sizes[i0:i0 + 256]]
            dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 817, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train_sdxl_lora.py", 1143, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)

    # the first steps before recording shape the pool; the ring buffer keeps the last 60,000 events
    for step in range(12):
        step_once(step)
    info["steps_simulated"] = 12
    info["opt_bytes"] = sum(b.req for b in state)
    d = write([A], max_entries=60000)
    return dict(name="m04_sdxl_lora_textcache_ring.pickle", data=d, devs=[A], info=info)


# ============================================================================ m05
def build_m05():
    """BLIP-2 (LAVIS blip2_opt, pretrain stage 2) with the model split by hand over two GPUs: EVA
    ViT-g/14 (frozen, fp16, run under no_grad) and the Q-Former (trainable, fp32, 32 queries) with
    the language projection on cuda:0; OPT-2.7B (frozen, fp16) on cuda:1, receiving the projected
    queries, text 40 tokens.  Batch 16 images at 224, fp16 autocast, AdamW on the Q-Former and
    projection, 5 steps on two A100-40GB; torch 2.1.  Healthy."""
    rng = random.Random(3605)
    clock = sim.Clock(1707000000000000, rng, (2, 9))
    A0 = sim.Allocator(device=0, capacity=int(39.39 * GB), clock=clock, base=0x7F6A00000000)
    A1 = sim.Allocator(device=1, capacity=int(39.39 * GB), clock=clock, base=0x7F4400000000)
    d0, d1 = Dev(A0), Dev(A1)
    SP = "/opt/conda/envs/lavis/lib/python3.9/site-packages/"
    L = Lib(SP, "2.1")
    app = fr("/data/users/ktan/LAVIS/")
    call = L.call()
    MAIN = [app("train_split.py", 214, "main"), app("train_split.py", 238, "<module>")]
    LOOP = lambda line: [app("train_split.py", line, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:]
    BO = lambda line: [app("lavis/models/blip2_models/blip2_opt_split.py", line, "forward")] + call + LOOP(151)
    # ---- weights (before recording)
    TO0 = S(L.convert() + [app("train_split.py", 181, "place_model"), app("train_split.py", 199, "main")] + MAIN[1:])
    TO1 = S(L.convert() + [app("train_split.py", 184, "place_model"), app("train_split.py", 199, "main")] + MAIN[1:])
    vit = []
    for l in range(39):
        vit += [1408 * 3 * 1408 * 2, 3 * 1408 * 2, 1408 * 1408 * 2, 1408 * 2, 6144 * 1408 * 2, 6144 * 2, 1408 * 6144 * 2, 1408 * 2, 1408 * 2 * 2, 1408 * 2 * 2]
    vit += [1408 * 3 * 14 * 14 * 2, 257 * 1408 * 2, 1408 * 2]
    qf = {}
    for l in range(12):
        for n, s in (("q", 768 * 768 + 768), ("k", 768 * 768 + 768), ("v", 768 * 768 + 768), ("ao", 768 * 768 + 768), ("ln1", 1536),
                     ("i", 3072 * 768 + 3072), ("o", 768 * 3072 + 768), ("ln2", 1536), ("qi", 3072 * 768 + 3072), ("qo", 768 * 3072 + 768), ("ln3", 1536)):
            qf["l%d.%s" % (l, n)] = s * 4
        if l % 2 == 0:
            for n, s in (("cq", 768 * 768 + 768), ("ck", 768 * 1408 + 768), ("cv", 768 * 1408 + 768), ("co", 768 * 768 + 768), ("cln", 1536)):
                qf["l%d.%s" % (l, n)] = s * 4
    qf["query_tokens"] = 32 * 768 * 4
    qf["ln_vision"] = 1408 * 2 * 4
    qf["opt_proj"] = (2560 * 768 + 2560) * 4
    opt = [50272 * 2560 * 2, 2050 * 2560 * 2]
    for l in range(32):
        opt += [2560 * 2560 * 2 + 2560 * 2] * 4 + [2560 * 2 * 2, 10240 * 2560 * 2, 10240 * 2, 2560 * 10240 * 2, 2560 * 2, 2560 * 2 * 2]
    opt += [2560 * 2 * 2]
    for s in vit:
        d0.a(s, TO0, "param")
    for s in qf.values():
        d0.a(s, TO0, "param")
    for s in opt:
        d1.a(s, TO1, "param")
    start_recording(A0)
    start_recording(A1)
    info = dict(dev0_weights=sum(vit) + sum(qf.values()), dev1_weights=sum(opt), qformer_bytes=sum(qf.values()), steps=5, batch=16)
    grads, state = {}, []
    B, NQ, TT = 16, 32, 40
    NI = B * 257
    for step in range(5):
        img = d0.a(B * 3 * 224 * 224 * 4, S([app("train_split.py", 139, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:]), "input")
        txt = d1.a(B * TT * 8, S([app("train_split.py", 142, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:]), "input")
        tam = d1.a(B * TT * 8, S([app("train_split.py", 143, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:]), "input")
        # ViT-g under no_grad: transients only
        VT = lambda line: [app("lavis/models/eva_vit.py", line, "forward")] + call + [app("lavis/models/eva_vit.py", 436, "forward_features"), app("lavis/models/eva_vit.py", 447, "forward")] + call + BO(88)
        ih = d0.a(NI * 1408 * 2, S(L.conv2d() + VT(200)), "tmp")
        d0.f(img)
        for l in range(39):
            n1 = d0.a(NI * 1408 * 2, S(L.layer_norm() + VT(174)), "tmp")
            qkv = d0.a(NI * 3 * 1408 * 2, S(L.linear() + [app("lavis/models/eva_vit.py", 113, "forward")] + call + VT(174)), "tmp")
            sc = d0.a(B * 16 * 257 * 257 * 2, S([app("lavis/models/eva_vit.py", 120, "forward")] + call + VT(174)), "tmp")
            sm = d0.a(B * 16 * 257 * 257 * 2, S([L("torch/nn/functional.py", 1856, "softmax"), app("lavis/models/eva_vit.py", 128, "forward")] + call + VT(174)), "tmp")
            d0.f(sc)
            ao = d0.a(NI * 1408 * 2, S([app("lavis/models/eva_vit.py", 133, "forward")] + call + VT(174)), "tmp")
            d0.fl([qkv, sm, n1])
            pr = d0.a(NI * 1408 * 2, S(L.linear() + [app("lavis/models/eva_vit.py", 135, "forward")] + call + VT(174)), "tmp")
            d0.f(ao)
            h1 = d0.a(NI * 1408 * 2, S(VT(174)), "tmp")
            d0.fl([pr, ih])
            n2 = d0.a(NI * 1408 * 2, S(L.layer_norm() + VT(175)), "tmp")
            f1 = d0.a(NI * 6144 * 2, S(L.linear() + [app("lavis/models/eva_vit.py", 57, "forward")] + call + VT(175)), "tmp")
            g = d0.a(NI * 6144 * 2, S(L.gelu() + [app("lavis/models/eva_vit.py", 58, "forward")] + call + VT(175)), "tmp")
            d0.f(f1)
            f2 = d0.a(NI * 1408 * 2, S(L.linear() + [app("lavis/models/eva_vit.py", 61, "forward")] + call + VT(175)), "tmp")
            d0.fl([g, n2])
            ih = d0.a(NI * 1408 * 2, S(VT(175)), "tmp")
            d0.fl([f2, h1])
        tape = Tape()
        for k in ("ln_vision",):
            tape.param(k, qf[k])
        ie = op(d0, tape, NI * 1408 * 4, S(L.layer_norm() + BO(88)), True)
        d0.f(ih)
        QF = lambda line: [app("lavis/models/blip2_models/Qformer.py", line, "forward")] + call + BO(97)
        tape.param("query_tokens", qf["query_tokens"])
        q = op(d0, tape, B * NQ * 768 * 4, S(BO(93)), True)
        for l in range(12):
            p = "l%d." % l
            LY = lambda line: [app("lavis/models/blip2_models/Qformer.py", line, "forward")] + call + QF(546)
            for n in ("q", "k", "v"):
                tape.param(p + n, qf[p + n])
                op(d0, tape, B * NQ * 768 * 2, S(L.linear() + LY(148)), True)
            op(d0, tape, B * 12 * NQ * NQ * 4, S([L("torch/nn/functional.py", 1856, "softmax")] + LY(221)), True)
            tape.param(p + "ao", qf[p + "ao"])
            tape.param(p + "ln1", qf[p + "ln1"])
            op(d0, tape, B * NQ * 768 * 4, S(L.layer_norm() + LY(279)), True)
            if l % 2 == 0:
                for n in ("cq", "ck", "cv"):
                    tape.param(p + n, qf[p + n])
                    op(d0, tape, (B * NQ if n == "cq" else NI) * 768 * 2, S(L.linear() + LY(159 if n != "cq" else 148)), True)
                op(d0, tape, B * 12 * NQ * 257 * 4, S([L("torch/nn/functional.py", 1856, "softmax")] + LY(221)), True)
                op(d0, tape, B * 12 * NQ * 257 * 2, S([L("torch/nn/functional.py", 1252, "dropout")] + LY(228)), True)
                tape.param(p + "co", qf[p + "co"])
                tape.param(p + "cln", qf[p + "cln"])
                op(d0, tape, B * NQ * 768 * 4, S(L.layer_norm() + LY(279)), True)
            tape.param(p + "qi", qf[p + "qi"])
            op(d0, tape, B * NQ * 3072 * 2, S(L.linear() + LY(389)), True)
            op(d0, tape, B * NQ * 3072 * 2, S(L.gelu() + LY(390)), True)
            tape.param(p + "qo", qf[p + "qo"])
            tape.param(p + "ln3", qf[p + "ln3"])
            op(d0, tape, B * NQ * 768 * 4, S(L.layer_norm() + LY(404)), True)
        tape.param("opt_proj", qf["opt_proj"])
        inp0 = op(d0, tape, B * NQ * 2560 * 2, S(L.linear() + BO(104)), False)
        # to cuda:1 and through OPT-2.7B (frozen: saves only what the input gradient needs)
        inp1 = d1.a(B * NQ * 2560 * 2, S(BO(118)), "act")
        emb = d1.a(B * TT * 2560 * 2, S(L.embedding() + BO(121)), "act")
        x = d1.a(B * (NQ + TT) * 2560 * 2, S(BO(122)), "act")
        d1.fl([emb])
        t2 = Tape()
        TOK = B * (NQ + TT)
        OP = SP + "transformers/models/opt/modeling_opt.py"
        OL = lambda line: [(OP, line, "forward")] + call + [(OP, 743, "forward")] + call + [(OP, 1005, "forward")] + call + [(OP, 1152, "forward")] + call + BO(131)
        mask = op(d1, t2, B * (NQ + TT) * (NQ + TT) * 2, S([(OP, 679, "_prepare_decoder_attention_mask"), (OP, 702, "forward")] + call + OL(702)[3:]), False)
        for l in range(32):
            op(d1, t2, TOK * 2560 * 2, S(L.layer_norm() + OL(514)), True)
            q_ = op(d1, t2, TOK * 2560 * 2, S(L.linear() + OL(178)), True)
            k_ = op(d1, t2, TOK * 2560 * 2, S(L.linear() + OL(180)), True)
            v_ = op(d1, t2, TOK * 2560 * 2, S(L.linear() + OL(181)), True)
            op(d1, t2, B * 32 * (NQ + TT) * (NQ + TT) * 4, S([L("torch/nn/functional.py", 1856, "softmax")] + OL(236)), True)
            op(d1, t2, TOK * 2560 * 2, S(OL(258)), True)
            d1.f(op(d1, t2, TOK * 2560 * 2, S(L.linear() + OL(270)), False))
            op(d1, t2, TOK * 2560 * 2, S(L.layer_norm() + OL(538)), True)
            op(d1, t2, TOK * 10240 * 2, S(L.linear() + OL(541)), True)
            op(d1, t2, TOK * 10240 * 2, S([L("torch/nn/functional.py", 1469, "relu")] + OL(542)), True)
            d1.f(op(d1, t2, TOK * 2560 * 2, S(L.linear() + OL(544)), False))
        op(d1, t2, TOK * 2560 * 2, S(L.layer_norm() + OL(721)), True)
        CL = lambda line: [(OP, line, "forward")] + call + BO(131)
        lg = op(d1, t2, TOK * 50272 * 2, S(L.linear() + CL(1161)), False)
        lf = op(d1, t2, TOK * 50272 * 4, S(CL(1163)), False)
        sh = op(d1, t2, (TOK - B) * 50272 * 4, S(CL(1166)), True)
        lsm = op(d1, t2, (TOK - B) * 50272 * 4, S([L("torch/nn/functional.py", 3053, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1179) + CL(1170)), True)
        loss = d1.a(4, S([L("torch/nn/functional.py", 3053, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1179) + CL(1170)), "tmp")
        d1.fl([lg, lf])
        clock.wait(rng.randint(80000, 120000))
        backward(d1, t2, {})
        gin1 = d1.a(B * NQ * 2560 * 2, NOSTACK, "tmp")
        d1.fl([x, inp1, mask, loss, txt, tam])
        # gradient of the projected queries back to cuda:0, then the Q-Former backward
        gin0 = d0.a(B * NQ * 2560 * 2, NOSTACK, "tmp")
        d1.f(gin1)
        d0.f(inp0)
        backward(d0, tape, grads)
        d0.f(gin0)
        clock.wait(rng.randint(60000, 90000))
        OPTS = [L("torch/optim/optimizer.py", 373, "wrapper"), L("torch/cuda/amp/grad_scaler.py", 374, "step"), app("train_split.py", 158, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:]
        if not state:
            for k, v in qf.items():
                for ln in (109, 113):
                    state.append(d0.a(v, S([L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPTS), "opt"))
        FE = S([L("torch/optim/adamw.py", 577, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 333, "adamw"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPTS)
        tmp = [d0.a(v, FE, "tmp") for k, v in qf.items()]
        d0.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 815, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("train_split.py", 160, "train_epoch"), app("train_split.py", 205, "main")] + MAIN[1:])
        for k in list(grads):
            d0.f(grads.pop(k), ZG)
    info["opt_bytes"] = sum(b.req for b in state)
    d = write([A0, A1])
    return dict(name="m05_blip2_opt27b_split_2gpu.pickle", data=d, devs=[A0, A1], info=info)


# ============================================================================ m06
def build_m06():
    """A TimesFM-1.0-200M forecasting service (20 decoder layers, d=1280, 16 heads, input patch 32,
    output patch 128, fp32) answering batched forecast requests for retail series; each series'
    patch-embedded context (16 patches x 1280, fp32) is kept in an LRU keyed by series id, capped at
    4,096 entries, so repeat queries skip the input projection.  _record_memory_history(
    enabled="state") from start-up; the dump was taken by the service's /debug/memory endpoint
    between two batches, after 700 batches.  State only.  Healthy."""
    rng = random.Random(3606)
    A = sim.Allocator(device=0, capacity=int(22.05 * GB), time_us=False, base=0x7F1D80000000)
    dv = Dev(A)
    SP = "/srv/forecast/.venv/lib/python3.11/site-packages/"
    L = Lib(SP, "2.4")
    app = fr("/srv/forecast/app/")
    call = L.call()
    TF = SP + "timesfm/pytorch_patched_decoder.py"
    tf = lambda line, name: (TF, line, name)
    NL, D, FF = 20, 1280, 1280
    SRV = [app("server.py", 88, "forecast"), L("starlette/concurrency.py", 42, "run_in_threadpool"), L("fastapi/routing.py", 212, "run_endpoint_function")]
    LOAD = S([L("torch/nn/modules/module.py", 1340, "convert"), L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 900, "_apply"),
              L("torch/nn/modules/module.py", 1355, "to"), L("timesfm/timesfm_torch.py", 89, "load_from_checkpoint"), app("model_store.py", 31, "load"), app("server.py", 47, "startup")])
    wsz = [64 * 1280 * 4, 1280 * 4, 1280 * 1280 * 4, 1280 * 4, 1280 * 1280 * 4 + 1280 * 4, 1280 * 4]
    for l in range(NL):
        wsz += [3 * D * D * 4, 3 * D * 4, D * D * 4, D * 4, D * 4, FF * D * 4, FF * 4, D * FF * 4, D * 4, D * 4, 128 * 4]
    wsz += [D * 4, 1280 * 1280 * 4, 1280 * 4, 1280 * 1280 * 4 + 1280 * 4, 128 * 10 * 1280 * 4, 1280 * 4, 2 * 1280 * 4]
    for s in wsz:
        dv.a(s, LOAD, "param")
    CAP = 4096
    PUT = S([app("context_cache.py", 27, "put"), app("pipeline.py", 63, "embed_contexts"), app("pipeline.py", 101, "run_batch")] + SRV)
    EVICT = S([app("context_cache.py", 31, "put"), app("pipeline.py", 63, "embed_contexts"), app("pipeline.py", 101, "run_batch")] + SRV)
    from collections import OrderedDict
    lru = OrderedDict()
    universe = 30000
    peak_batch = 0
    for bi in range(700):
        nb = rng.choice([64, 128, 256, 256, 512])
        ctx_len = 512
        ids = [rng.randrange(universe) if rng.random() < 0.55 else rng.randrange(2000) for _ in range(nb)]
        x = dv.a(nb * ctx_len * 4, S([app("pipeline.py", 88, "run_batch")] + SRV), "tmp")
        pad = dv.a(nb * ctx_len * 4, S([app("pipeline.py", 89, "run_batch")] + SRV), "tmp")
        miss = [i for i in ids if i not in lru]
        EMB = [tf(611, "_preprocess_input"), tf(664, "forward")] + call + [app("pipeline.py", 58, "embed_contexts"), app("pipeline.py", 101, "run_batch")] + SRV
        if miss:
            r1 = dv.a(len(miss) * 16 * 64 * 4, S(EMB), "tmp")
            r2 = dv.a(len(miss) * 16 * 1280 * 4, S(L.linear() + [tf(298, "forward")] + call + EMB), "tmp")
            r3 = dv.a(len(miss) * 16 * 1280 * 4, S(L.linear() + [tf(300, "forward")] + call + EMB), "tmp")
            dv.fl([r1, r2])
            for i in dict.fromkeys(miss):
                lru[i] = dv.a(16 * 1280 * 4, PUT, "cache")
                if len(lru) > CAP:
                    k, b = lru.popitem(last=False)
                    dv.f(b, EVICT)
            dv.f(r3)
        for i in ids:
            if i in lru:
                lru.move_to_end(i)
        T = nb * 16
        h = dv.a(T * D * 4, S([app("pipeline.py", 70, "stack_contexts"), app("pipeline.py", 103, "run_batch")] + SRV), "tmp")
        ST = lambda line: [tf(line, "forward")] + call + [tf(486, "forward")] + call + [tf(690, "forward")] + call + [app("pipeline.py", 108, "run_batch")] + SRV
        for l in range(NL):
            n = dv.a(T * D * 4, S([tf(152, "forward")] + call + ST(438)), "tmp")
            qkv = dv.a(T * 3 * D * 4, S(L.linear() + [tf(361, "forward")] + call + ST(441)), "tmp")
            ao = dv.a(T * D * 4, S([L("torch/nn/functional.py", 5560, "scaled_dot_product_attention")][:0] + [tf(385, "forward")] + call + ST(441)), "tmp")
            dv.fl([qkv, n])
            o = dv.a(T * D * 4, S(L.linear() + [tf(392, "forward")] + call + ST(441)), "tmp")
            dv.f(ao)
            h2 = dv.a(T * D * 4, S(ST(448)), "tmp")
            dv.fl([o, h])
            f1 = dv.a(T * FF * 4, S(L.linear() + [tf(255, "forward")] + call + ST(450)), "tmp")
            f2 = dv.a(T * D * 4, S(L.linear() + [tf(257, "forward")] + call + ST(450)), "tmp")
            dv.f(f1)
            h = dv.a(T * D * 4, S(ST(452)), "tmp")
            dv.fl([f2, h2])
        out = dv.a(nb * 16 * 128 * 10 * 4, S(L.linear() + [tf(298, "forward")] + call + [tf(695, "forward")] + call + [app("pipeline.py", 108, "run_batch")] + SRV), "tmp")
        dv.f(h)
        res = dv.a(nb * 128 * 10 * 4, S([app("pipeline.py", 112, "run_batch")] + SRV), "tmp")
        dv.fl([out, x, pad, res])
    info = dict(param_bytes=sum(wsz), cache_cap=CAP, cache_entries=len(lru), cache_bytes=sum(b.req for b in lru.values()),
                entry_bytes=16 * 1280 * 4, batches=700)
    d = write([A], state_only=True)
    return dict(name="m06_timesfm_forecast_service_state.pickle", data=d, devs=[A], info=info)


# ============================================================================ m07
def build_m07():
    """mmsegmentation 1.x UPerNet with a ConvNeXt-B backbone on ADE20K (150 classes), 512x512
    crops, batch 16, fp16 AMP (AmpOptimWrapper), AdamW; the decode head's loss is
    CrossEntropyLoss + DiceLoss (config: loss_decode=[CE, Dice]), the auxiliary FCN head CE only.
    ConvNeXt with_cp=True (each block keeps only its input).  One RTX 4080 (16 GB), torch 2.1.  Step 0 runs out of memory in DiceLoss: mmseg's
    _expand_onehot_labels_dice builds F.one_hot(target, 151) in int64 — 16x512x512x151x8 B — on top
    of the forward activations and the fp32 CE copies.  The dump was written by an OOM observer."""
    rng = random.Random(3607)
    clock = sim.Clock(1712300000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(15.59 * GB), clock=clock, base=0x7F0E00000000)
    dv = Dev(A)
    SP = "/home/dev/miniconda3/envs/mmseg/lib/python3.10/site-packages/"
    L = Lib(SP, "2.1")
    MS = "/home/dev/mmsegmentation/"
    ms = lambda f, line, name: (MS + f, line, name)
    call = L.call()
    B, NC = 16, 150
    MAIN = [ms("tools/train.py", 104, "main"), ms("tools/train.py", 108, "<module>")]
    RUN = [L("mmengine/runner/loops.py", 287, "run_iter"), L("mmengine/runner/loops.py", 273, "run"), L("mmengine/runner/runner.py", 1777, "train")] + MAIN[:1] + MAIN[1:]
    TS = [L("mmengine/model/base_model/base_model.py", 114, "train_step")] + RUN
    FWD = lambda: [L("mmengine/model/base_model/base_model.py", 346, "_run_forward"), L("mmengine/model/base_model/base_model.py", 113, "train_step")] + RUN
    SEG = lambda line, nm="loss": [ms("mmseg/models/segmentors/encoder_decoder.py", line, nm), ms("mmseg/models/segmentors/base.py", 94, "forward")] + call + FWD()
    # ---- parameters (before recording)
    TO = S(L.convert() + [L("mmengine/runner/runner.py", 912, "wrap_model"), L("mmengine/runner/runner.py", 438, "__init__"), L("mmengine/runner/runner.py", 462, "from_cfg"), ms("tools/train.py", 98, "main")] + MAIN[1:])
    psz = []
    dims = [128, 256, 512, 1024]
    depths = [3, 3, 27, 3]
    for dmn, dp in zip(dims, depths):
        for _ in range(dp):
            psz += [dmn * 49 * 4, dmn * 4, dmn * 4, dmn * 4, 4 * dmn * dmn * 4, 4 * dmn * 4, dmn * 4 * dmn * 4, dmn * 4, dmn * 4]
        psz += [dmn * 4, dmn * 4, dmn * 2 * dmn * 4 * 4]
    psz += [512 * 2048 * 9 * 4, 512 * 4] + [512 * 1024 * 4] * 4 + [512 * 512 * 9 * 4] * 3 + [512 * d * 4 for d in dims[:3]] + [512 * 2048 * 9 * 4, NC * 512 * 4, 256 * 512 * 9 * 4, NC * 256 * 4]
    # _record_memory_history at the top of tools/train.py: model.cuda() is in the trace
    for s in psz:
        dv.a(s, TO, "param")
    info = dict(param_bytes=sum(psz), batch=B)
    dv.wait(rng.randint(4000000, 6000000))
    tape = Tape()
    PRE = lambda line, nm="forward": [ms("mmseg/models/data_preprocessor.py", line, nm)] + call + [L("mmengine/model/base_model/base_model.py", 112, "train_step")] + RUN
    ims, labs = [], []
    for i in range(B):
        h_, w_ = rng.choice([(512, 683), (512, 512), (512, 768), (512, 910)])
        u8 = dv.a(3 * 512 * 512, S([L("mmengine/structures/base_data_element.py", 0, "cuda")][:0] + PRE(108)), "input")
        ims.append(dv.a(3 * 512 * 512 * 4, S(PRE(113)), "input"))
        nrm = dv.a(3 * 512 * 512 * 4, S(PRE(115)), "input")
        dv.f(ims[-1])
        ims[-1] = nrm
        dv.f(u8)
        s8 = dv.a(512 * 512, S(PRE(108)), "input")
        labs.append(dv.a(512 * 512 * 8, S([ms("mmseg/utils/misc.py", 88, "stack_batch"), ms("mmseg/models/data_preprocessor.py", 124, "forward")] + call + [L("mmengine/model/base_model/base_model.py", 112, "train_step")] + RUN), "input"))
        dv.f(s8)
    img = dv.a(B * 3 * 512 * 512 * 4, S([ms("mmseg/utils/misc.py", 111, "stack_batch"), ms("mmseg/models/data_preprocessor.py", 122, "forward")] + call + [L("mmengine/model/base_model/base_model.py", 112, "train_step")] + RUN), "input")
    dv.fl(ims)
    lab = dv.a(B * 512 * 512 * 8, S([ms("mmseg/utils/misc.py", 112, "stack_batch"), ms("mmseg/models/data_preprocessor.py", 122, "forward")] + call + [L("mmengine/model/base_model/base_model.py", 112, "train_step")] + RUN), "input")
    dv.fl(labs)
    CX = "mmpretrain/models/backbones/convnext.py"
    BK = lambda line, nm="forward": [L(CX, line, nm)] + call + [ms("mmseg/models/segmentors/encoder_decoder.py", 119, "extract_feat"), ms("mmseg/models/segmentors/encoder_decoder.py", 176, "loss")] + SEG(176)[1:]
    h = op(dv, tape, B * 128 * 128 * 128 * 2, S(L.conv2d() + BK(298)), True)
    feats = []
    for si, (dmn, dp) in enumerate(zip(dims, depths)):
        hw = 128 >> si
        n = B * dmn * hw * hw
        if si > 0:
            op(dv, tape, n // 2 * 4, S(L.layer_norm() + BK(317)), True)
            h = op(dv, tape, n * 2, S(L.conv2d() + BK(317)), True)
        for bi in range(dp):
            # with_cp=True: torch.utils.checkpoint keeps only the block input
            IN = lambda line: [L(CX, line, "_inner_forward"), L("torch/utils/checkpoint.py", 230, "forward"), L("torch/autograd/function.py", 539, "apply"),
                               L("torch/utils/checkpoint.py", 458, "checkpoint"), L(CX, 136, "forward")] + call + BK(322)
            tape.save(h)
            t1 = dv.a(n * 2, S(L.conv2d() + IN(114)), "tmp")
            t2 = dv.a(n * 4, S(L.layer_norm() + IN(116)), "tmp")
            dv.f(t1)
            t3 = dv.a(n * 4 * 2, S(L.linear() + IN(117)), "tmp")
            dv.f(t2)
            t4 = dv.a(n * 4 * 2, S(L.gelu() + IN(118)), "tmp")
            dv.f(t3)
            t5 = dv.a(n * 2, S(L.linear() + IN(119)), "tmp")
            dv.f(t4)
            t6 = dv.a(n * 2, S(IN(121)), "tmp")
            dv.f(t5)
            h = dv.a(n * 2, S([L(CX, 139, "forward")] + call + BK(322)), "act")
            dv.f(t6)
        feats.append(op(dv, tape, n * 4, S(L.layer_norm() + BK(326)), True))
    # UPerNet head (PPM + FPN at 128x128, 512 channels)
    # auxiliary FCN head on stage 3 (CE only)
    AH = lambda line, nm="forward": [ms("mmseg/models/decode_heads/fcn_head.py", line, nm), ms("mmseg/models/decode_heads/fcn_head.py", 82, "forward")] + call + [ms("mmseg/models/decode_heads/decode_head.py", 262, "loss"), ms("mmseg/models/segmentors/encoder_decoder.py", 104, "_auxiliary_head_forward_train")] + SEG(182)
    ALB = lambda line: [ms("mmseg/models/decode_heads/decode_head.py", line, "loss_by_feat"), ms("mmseg/models/decode_heads/decode_head.py", 263, "loss"), ms("mmseg/models/segmentors/encoder_decoder.py", 104, "_auxiliary_head_forward_train")] + SEG(182)
    op(dv, tape, B * 256 * 32 * 32 * 2, S(L.conv2d() + AH(73, "_forward_feature")), True)
    op(dv, tape, B * 256 * 32 * 32 * 2, S([L("torch/nn/functional.py", 1469, "relu")] + AH(73, "_forward_feature")), True)
    op(dv, tape, B * NC * 32 * 32 * 2, S(L.conv2d() + [ms("mmseg/models/decode_heads/decode_head.py", 318, "cls_seg")] + AH(83)[1:]), True)
    op(dv, tape, B * NC * 512 * 512 * 2, S([L("torch/nn/functional.py", 3985, "interpolate"), ms("mmseg/models/utils/wrappers.py", 28, "resize")] + ALB(304)), True)
    AC = [L("torch/nn/functional.py", 3053, "cross_entropy"), ms("mmseg/models/losses/cross_entropy_loss.py", 45, "cross_entropy"), ms("mmseg/models/losses/cross_entropy_loss.py", 284, "forward")] + call + ALB(322)
    acf = op(dv, tape, B * NC * 512 * 512 * 4, S(AC), False)   # autocast's fp32 copy, not saved
    op(dv, tape, B * NC * 512 * 512 * 4, S(AC), True)
    dv.f(acf)
    op(dv, tape, B * 512 * 512 * 4, S(AC), True)
    dv.a(4, S(AC), "tmp")
    UH = lambda line, nm="forward": [ms("mmseg/models/decode_heads/uper_head.py", line, nm), ms("mmseg/models/decode_heads/uper_head.py", 130, "forward")] + call + [ms("mmseg/models/decode_heads/decode_head.py", 262, "loss"), ms("mmseg/models/segmentors/encoder_decoder.py", 93, "_decode_head_forward_train")] + SEG(178)
    for s in range(4):
        op(dv, tape, B * 512 * 4 * 4 * 2, S(L.conv2d() + UH(81, "psp_forward")), True)
        op(dv, tape, B * 512 * 4 * 4 * 2, S(L.conv2d() + UH(84, "psp_forward")), True)
    op(dv, tape, B * 512 * 4 * 4 * 2, S(L.conv2d() + UH(84, "psp_forward")), True)
    lat = []
    for si in range(3):
        hw = 128 >> si
        lat.append(op(dv, tape, B * 512 * hw * hw * 2, S(L.conv2d() + UH(107, "_forward_feature")), True))
    for si in range(3):
        hw = 128 >> si
        op(dv, tape, B * 512 * hw * hw * 2, S([ms("mmseg/models/utils/wrappers.py", 28, "resize"), ms("mmseg/models/decode_heads/uper_head.py", 114, "_forward_feature")] + UH(130)[1:]), True)
        op(dv, tape, B * 512 * hw * hw * 2, S(L.conv2d() + UH(122, "_forward_feature")), True)
    for si in range(1, 4):
        op(dv, tape, B * 512 * 128 * 128 * 2, S([ms("mmseg/models/utils/wrappers.py", 28, "resize"), ms("mmseg/models/decode_heads/uper_head.py", 127, "_forward_feature")] + UH(130)[1:]), True)
    cat = op(dv, tape, B * 2048 * 128 * 128 * 2, S([ms("mmseg/models/decode_heads/uper_head.py", 129, "_forward_feature")] + UH(130)[1:]), True)
    fb = op(dv, tape, B * 512 * 128 * 128 * 2, S(L.conv2d() + UH(130, "_forward_feature")), True)
    lg = op(dv, tape, B * NC * 128 * 128 * 2, S(L.conv2d() + [ms("mmseg/models/decode_heads/decode_head.py", 318, "cls_seg"), ms("mmseg/models/decode_heads/uper_head.py", 138, "forward")] + call + UH(130)[3:]), True)
    LBF = lambda line: [ms("mmseg/models/decode_heads/decode_head.py", line, "loss_by_feat"), ms("mmseg/models/decode_heads/decode_head.py", 263, "loss")] + [ms("mmseg/models/segmentors/encoder_decoder.py", 93, "_decode_head_forward_train")] + SEG(178)
    up = op(dv, tape, B * NC * 512 * 512 * 2, S([L("torch/nn/functional.py", 3985, "interpolate"), ms("mmseg/models/utils/wrappers.py", 28, "resize")] + LBF(304)), True)
    CEL = lambda line: [ms("mmseg/models/losses/cross_entropy_loss.py", line, "cross_entropy"), ms("mmseg/models/losses/cross_entropy_loss.py", 284, "forward")] + call + LBF(322)
    cf = op(dv, tape, B * NC * 512 * 512 * 4, S([L("torch/nn/functional.py", 3053, "cross_entropy")] + CEL(45)), False)
    cl = op(dv, tape, B * NC * 512 * 512 * 4, S([L("torch/nn/functional.py", 3053, "cross_entropy")] + CEL(45)), True)
    dv.f(cf)
    cpx = op(dv, tape, B * 512 * 512 * 4, S([L("torch/nn/functional.py", 3053, "cross_entropy")] + CEL(45)), True)
    cm = dv.a(4, S(CEL(55)), "tmp")
    DL = lambda line, nm="forward": [ms("mmseg/models/losses/dice_loss.py", line, nm)] + ([ms("mmseg/models/losses/dice_loss.py", 183, "forward")] + call if nm != "forward" else call) + LBF(322)
    sm = op(dv, tape, B * NC * 512 * 512 * 4, S([L("torch/nn/functional.py", 1858, "softmax")] + DL(176)), True)
    cl2 = dv.a(B * 512 * 512 * 8, S(DL(14, "_expand_onehot_labels_dice")), "tmp")
    dv.wait(rng.randint(3000, 6000))
    oom = None
    try:
        dv.a(B * 512 * 512 * (NC + 1) * 8, S([L("torch/nn/functional.py", 0, "one_hot")][:0] + DL(15, "_expand_onehot_labels_dice")), "tmp")
    except sim.OOMError as e:
        oom = e
    info["oom_request"] = oom.size
    info["oom_free"] = oom.free
    info["onehot_bytes"] = B * 512 * 512 * (NC + 1) * 8
    d = write([A])
    return dict(name="m07_upernet_convnext_ade20k_dice.pickle", data=d, devs=[A], info=info)


# ============================================================================ m08
def build_m08():
    """WavLM-Large feature extraction for a layer-wise speaker probe: 1,024 VoxCeleb1 test
    utterances (2-16 s, 16 kHz), sorted by duration ascending to limit padding, batch 16,
    fp32 weights, fp16 autocast, torch.inference_mode(), one A100-80GB, torch 2.2.  For every batch
    the script keeps, on the GPU, the frame-level features of layers 6, 12, 18 and 24 (fp16), the
    mean-pooled hidden states of all 25 layers (fp32) and the lengths, to stack at the end; the dump
    was taken after the last batch.  Because each batch is longer than the one before, its activations never fit in
    the blocks the previous batch freed, and the kept 1.6 MB outputs are carved out of exactly
    those cached blocks (best fit), so the old segments can neither be reused nor released."""
    rng = random.Random(3608)
    clock = sim.Clock(1709900000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, base=0x7F2B40000000)
    dv = Dev(A)
    SP = "/home/lab/miniconda3/envs/sv/lib/python3.10/site-packages/"
    L = Lib(SP, "2.2")
    app = fr("/home/lab/sv-probe/")
    call = L.call()
    WM = SP + "transformers/models/wavlm/modeling_wavlm.py"
    wm = lambda line, name: (WM, line, name)
    MAIN = [app("extract_wavlm.py", 118, "main"), app("extract_wavlm.py", 131, "<module>")]
    EX = lambda line: [app("extract_wavlm.py", line, "extract"), app("extract_wavlm.py", 109, "main")] + MAIN[1:]
    MODEL = lambda line: [wm(line, "forward")] + call + EX(71)
    NL, D = 24, 1024
    TO = S(L.convert() + [app("extract_wavlm.py", 101, "main")] + MAIN[1:])
    wsz = [512 * 10 * 4] + [512 * 512 * 3 * 4] * 4 + [512 * 512 * 2 * 4] * 2 + [512 * 4 * 2, 512 * 4 * 2, 1024 * 512 * 4, 1024 * 4, 1024 * 64 * 128 * 4, 1024 * 4 * 2]
    for l in range(NL):
        wsz += [D * D * 4 + D * 4] * 4 + [320 * 16 * 4, 16 * 8 * 4 + 8 * 4, 16 * 4, D * 4 * 2, 4 * D * D * 4 + 4 * D * 4, D * 4 * D * 4 + D * 4, D * 4 * 2]
    for s in wsz:
        dv.a(s, TO, "param")
    start_recording(A)
    info = dict(param_bytes=sum(wsz), utterances=1024, batch=16)
    durs = sorted(rng.uniform(2.0, 16.0) for _ in range(1024))
    kept = []
    B = 16
    for bi in range(64):
        secs = durs[bi * B:(bi + 1) * B]
        S_ = int(max(secs) * 16000)
        wav = dv.a(B * S_ * 4, S(EX(62)), "input")
        lens = dv.a(B * 8, S(EX(63)), "kept")
        FE = lambda line: [wm(line, "forward")] + call + [wm(380, "forward")] + call + MODEL(1210)
        Tl = S_
        x = None
        for ci, (k, st) in enumerate(((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2))):
            Tl = (Tl - k) // st + 1
            c = dv.a(B * 512 * Tl * 2, S(L.conv2d()[0:0] + [L("torch/nn/modules/conv.py", 306, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 310) + FE(304 if ci else 255)), "tmp")
            if x is not None:
                dv.f(x)
            else:
                dv.f(wav)
            n = dv.a(B * 512 * Tl * 4, S(L.layer_norm() + FE(305 if ci else 256)), "tmp")
            dv.f(c)
            x = dv.a(B * 512 * Tl * 2, S(L.gelu() + FE(307 if ci else 258)), "tmp")
            dv.f(n)
        T = Tl
        ext = dv.a(B * T * 512 * 4, S(L.layer_norm() + MODEL(1220)), "tmp")
        dv.f(x)
        h = dv.a(B * T * D * 2, S(L.linear() + [wm(405, "forward")] + call + MODEL(1221)), "tmp")
        ENC = lambda line: [wm(line, "forward")] + call + MODEL(1236)
        pc = dv.a(B * T * D * 2, S(L.conv2d()[0:0] + [L("torch/nn/modules/conv.py", 306, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 310) + [wm(345, "forward")] + call + ENC(773)), "tmp")
        h2 = dv.a(B * T * D * 4, S(ENC(774)), "tmp")
        dv.fl([pc, h, ext])
        hs = dv.a(B * T * D * 4, S(L.layer_norm() + ENC(775)), "tmp")
        dv.f(h2)
        pooled = []
        pooled.append(dv.a(B * D * 4, S(EX(77)), "tmp"))
        pb = None
        LY = lambda line: [wm(line, "forward")] + call + ENC(797)
        for l in range(NL):
            AT = lambda line: [wm(line, "forward")] + call + LY(603)
            if l == 0:
                rp = dv.a(T * T * 8, S([wm(520, "compute_bias")] + AT(472)), "tmp")
                pb = dv.a(B * 16 * T * T * 2, S([wm(524, "compute_bias")] + AT(472)), "tmp")
                dv.f(rp)
            g = dv.a(B * 16 * T * 8 * 2, S(AT(481)), "tmp")
            gb = dv.a(B * 16 * T * T * 2, S(AT(487)), "tmp")
            dv.f(g)
            ao = dv.a(B * T * D * 2, S([L("torch/nn/functional.py", 5381, "multi_head_attention_forward")] + AT(498)), "tmp")
            dv.f(gb)
            h1 = dv.a(B * T * D * 4, S(LY(606)), "tmp")
            dv.f(ao)
            n1 = dv.a(B * T * D * 4, S(L.layer_norm() + LY(607)), "tmp")
            dv.fl([h1])
            f1 = dv.a(B * T * 4 * D * 2, S(L.linear() + [wm(552, "forward")] + call + LY(608)), "tmp")
            ge = dv.a(B * T * 4 * D * 2, S(L.gelu() + [wm(553, "forward")] + call + LY(608)), "tmp")
            dv.f(f1)
            f2 = dv.a(B * T * D * 2, S(L.linear() + [wm(556, "forward")] + call + LY(608)), "tmp")
            dv.f(ge)
            h3 = dv.a(B * T * D * 4, S(LY(608)), "tmp")
            dv.f(f2)
            out = dv.a(B * T * D * 4, S(L.layer_norm() + LY(609)), "tmp")
            dv.fl([h3, n1])
            pooled.append(dv.a(B * D * 4, S(EX(77)), "tmp"))
            if l in (5, 11, 17, 23):
                # the probe's frame-level features of four layers, copied out at once (fp16)
                kept.append(dv.a(B * T * D * 2, S([app("extract_wavlm.py", 74, "<listcomp>"), app("extract_wavlm.py", 74, "extract"), app("extract_wavlm.py", 109, "main")] + MAIN[1:]), "kept"))
            dv.f(hs)
            hs = out
        dv.fl([pb])
        st = dv.a(B * 25 * D * 4, S([app("extract_wavlm.py", 78, "extract"), app("extract_wavlm.py", 109, "main")] + MAIN[1:]), "kept")
        dv.fl(pooled)
        dv.f(hs)
        kept += [lens, st]
        dv.wait(rng.randint(30000, 50000))
    info["kept_bytes"] = sum(b.req for b in kept)
    info["kept_blocks"] = len(kept)
    info["batches"] = 64
    d = write([A])
    return dict(name="m08_wavlm_large_voxceleb_features.pickle", data=d, devs=[A], info=info)


# ============================================================================ m09
def build_m09():
    """Deformable DETR (ResNet-50, 4 feature levels, 6+6 layers, 300 queries, two-stage off) on COCO
    with the standard multi-scale augmentation (shorter side 480-800 step 32, longer side <= 1333,
    batch padded to its largest image), batch 2, fp32, AdamW, 64 iterations on one V100-32GB,
    torch 2.1, run with PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 (left in the job script after
    an earlier out-of-memory error).  Blocks of 64 MiB and more are never split and a cached one is
    reused only for a request at most 20 MiB smaller, so every new image shape asks the driver for
    new segments; when the card is full the allocator frees cached oversize segments and retries."""
    rng = random.Random(3609)
    clock = sim.Clock(1699000000000000, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=int(31.74 * GB), clock=clock, base=0x7F6000000000, max_split=64 * MB)
    A.free_us_per_gb = 9000
    dv = Dev(A)
    SP = "/opt/conda/lib/python3.8/site-packages/"
    L = Lib(SP, "2.1")
    app = fr("/mnt/det/Deformable-DETR/")
    call = L.call()
    MAIN = [app("main.py", 302, "main"), app("main.py", 330, "<module>")]
    ENG = lambda line: [app("engine.py", line, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:]
    DD = lambda line: [app("models/deformable_detr.py", line, "forward")] + call + ENG(43)
    TV = SP + "torchvision/models/resnet.py"
    # ---- parameters (before recording): 40.8M
    psz = []
    for cin, cmid, cout, n in ((64, 64, 256, 3), (256, 128, 512, 4), (512, 256, 1024, 6), (1024, 512, 2048, 3)):
        for i in range(n):
            psz += [cmid * (cin if i == 0 else cout) * 4, cmid * cmid * 9 * 4, cout * cmid * 4] + ([cout * cin * 4] if i == 0 else [])
    psz += [64 * 3 * 49 * 4]
    for c in (512, 1024, 2048, 2048):
        psz += [256 * c * (9 if c == 2048 and len(psz) % 2 else 1) * 4, 256 * 4, 256 * 4 * 2]
    for l in range(6):
        psz += [256 * 256 * 4, 256 * 4, 256 * 256 * 4, 256 * 4, 256 * 256 * 4, 256 * 128 * 4, 128 * 4, 256 * 256 * 4, 1024 * 256 * 4, 1024 * 4, 256 * 1024 * 4, 256 * 4, 256 * 4 * 4]
    for l in range(6):
        psz += [256 * 768 * 4, 768 * 4, 256 * 256 * 4, 256 * 256 * 4, 256 * 128 * 4, 256 * 256 * 4, 1024 * 256 * 4, 256 * 1024 * 4, 256 * 4 * 6, 91 * 256 * 4, 256 * 256 * 4 * 2 + 4 * 256 * 4]
    psz += [300 * 512 * 4, 4 * 256 * 4, 256 * 2 * 4]
    TO = S(L.convert() + [app("main.py", 158, "main")] + MAIN[1:])
    for s in psz:
        dv.a(s, TO, "param")
    start_recording(A)
    info = dict(param_bytes=sum(psz), steps=64, batch=2, max_split=64 * MB)
    grads, state = {}, []
    B = 2
    shapes = []
    for step in range(64):
        hs, ws = [], []
        for i in range(B):
            s = rng.choice(range(480, 801, 32))
            ar = rng.choice([4 / 3, 4 / 3, 3 / 2, 3 / 4, 1.0, 16 / 9])
            h, w = (s, min(1333, int(s * ar))) if ar >= 1 else (min(1333, int(s / ar)), s)
            hs.append(h)
            ws.append(w)
        H, W = max(hs), max(ws)
        shapes.append((H, W))
        tape = Tape()
        LD = [app("datasets/data_prefetcher.py", 17, "to_cuda"), app("datasets/data_prefetcher.py", 38, "next"), app("engine.py", 31, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:]
        img = dv.a(B * 3 * H * W * 4, S(LD), "input")
        msk = dv.a(B * H * W, S(LD), "input")
        tg = [dv.a(rng.randint(2, 40) * 4 * 4, S(LD), "input") for _ in range(B * 2)]
        BB = lambda line, nm="forward": [(TV, line, nm)] + call + [app("models/backbone.py", 71, "forward")] + call + [app("models/backbone.py", 112, "forward")] + call + DD(137)
        # frozen stem and layer1 (no graph): transients
        h, w = H // 2, W // 2
        t1 = dv.a(B * 64 * h * w * 4, S(L.conv2d() + BB(268, "_forward_impl")), "tmp")
        dv.f(img) if False else None
        t2 = dv.a(B * 64 * h * w * 4, S([app("models/backbone.py", 43, "forward")] + call + BB(269, "_forward_impl")), "tmp")
        dv.f(t1)
        h, w = h // 2, w // 2
        x = dv.a(B * 64 * h * w * 4, S([L("torch/nn/functional.py", 796, "_max_pool2d")] + BB(271, "_forward_impl")), "tmp")
        dv.f(t2)
        for i in range(3):
            a1 = dv.a(B * 64 * h * w * 4, S(L.conv2d() + [(TV, 146, "forward")] + call + BB(273, "_forward_impl")), "tmp")
            a2 = dv.a(B * 64 * h * w * 4, S(L.conv2d() + [(TV, 150, "forward")] + call + BB(273, "_forward_impl")), "tmp")
            dv.f(a1)
            a3 = dv.a(B * 256 * h * w * 4, S(L.conv2d() + [(TV, 154, "forward")] + call + BB(273, "_forward_impl")), "tmp")
            dv.f(a2)
            if i == 0:
                ds = dv.a(B * 256 * h * w * 4, S(L.conv2d() + [(TV, 157, "forward")] + call + BB(273, "_forward_impl")), "tmp")
                dv.f(ds)
            y = dv.a(B * 256 * h * w * 4, S([(TV, 160, "forward")] + call + BB(273, "_forward_impl")), "tmp")
            dv.fl([a3, x])
            x = y
        feats = []
        for li, (cmid, cout, n) in enumerate(((128, 512, 4), (256, 1024, 6), (512, 2048, 3))):
            h, w = (h + 1) // 2, (w + 1) // 2
            for i in range(n):
                LN = 274 + li
                op(dv, tape, B * cmid * h * w * 4, S(L.conv2d() + [(TV, 146, "forward")] + call + BB(LN, "_forward_impl")), True)
                op(dv, tape, B * cmid * h * w * 4, S([app("models/backbone.py", 43, "forward")] + call + [(TV, 147, "forward")] + call + BB(LN, "_forward_impl")), True)
                op(dv, tape, B * cmid * h * w * 4, S(L.conv2d() + [(TV, 150, "forward")] + call + BB(LN, "_forward_impl")), True)
                op(dv, tape, B * cmid * h * w * 4, S([app("models/backbone.py", 43, "forward")] + call + [(TV, 151, "forward")] + call + BB(LN, "_forward_impl")), True)
                op(dv, tape, B * cout * h * w * 4, S(L.conv2d() + [(TV, 154, "forward")] + call + BB(LN, "_forward_impl")), True)
                y = op(dv, tape, B * cout * h * w * 4, S([(TV, 160, "forward")] + call + BB(LN, "_forward_impl")), True)
            feats.append((cout, h, w))
        if x.state == "active_allocated":
            dv.f(x)
        # input projections, positional encodings, flattening
        lv = feats + [(2048, (feats[-1][1] + 1) // 2, (feats[-1][2] + 1) // 2)]
        Ntok = sum(B * hh * ww for _, hh, ww in lv)
        for c, hh, ww in lv:
            op(dv, tape, B * 256 * hh * ww * 4, S(L.conv2d() + DD(156)), True)
            op(dv, tape, B * 256 * hh * ww * 4, S([L("torch/nn/functional.py", 2558, "group_norm")] + DD(156)), True)
            dv.a(B * 256 * hh * ww * 4, S([app("models/position_encoding.py", 58, "forward")] + call + [app("models/backbone.py", 115, "forward")] + call + DD(137)), "tmp")
        TF = lambda line, nm="forward": [app("models/deformable_transformer.py", line, nm)] + call + DD(196)
        src = op(dv, tape, Ntok * 256 * 4, S(TF(146)), True)
        pos = op(dv, tape, Ntok * 256 * 4, S(TF(147)), True)
        refp = op(dv, tape, Ntok * 4 * 2 * 4, S([app("models/deformable_transformer.py", 250, "get_reference_points"), app("models/deformable_transformer.py", 258, "forward")] + call + TF(160)), True)
        EL = lambda line, nm="forward": [app("models/deformable_transformer.py", line, nm)] + call + [app("models/deformable_transformer.py", 261, "forward")] + call + TF(160)
        MS = lambda line, nm="forward": [app("models/ops/modules/ms_deform_attn.py", line, nm)] + call + EL(219)
        for l in range(6):
            q = op(dv, tape, Ntok * 256 * 4, S([app("models/deformable_transformer.py", 211, "with_pos_embed")] + EL(219)), True)
            val = op(dv, tape, Ntok * 256 * 4, S(L.linear() + MS(96)), True)
            off = op(dv, tape, Ntok * 256 * 4, S(L.linear() + MS(100)), True)
            aw = op(dv, tape, Ntok * 128 * 4, S(L.linear() + MS(101)), True)
            aws = op(dv, tape, Ntok * 128 * 4, S([L("torch/nn/functional.py", 1856, "softmax")] + MS(102)), True)
            loc = op(dv, tape, Ntok * 256 * 4, S(MS(105)), True)
            core = op(dv, tape, Ntok * 256 * 4, S([app("models/ops/functions/ms_deform_attn_func.py", 28, "forward"), L("torch/autograd/function.py", 539, "apply")] + MS(114)), True)
            o = op(dv, tape, Ntok * 256 * 4, S(L.linear() + MS(116)), True)
            s1 = op(dv, tape, Ntok * 256 * 4, S(EL(220)), True)
            n1 = op(dv, tape, Ntok * 256 * 4, S(L.layer_norm() + EL(221)), True)
            f1 = op(dv, tape, Ntok * 1024 * 4, S(L.linear() + EL(204, "forward_ffn") + []), True)
            f2 = op(dv, tape, Ntok * 1024 * 4, S([L("torch/nn/functional.py", 1469, "relu")] + EL(204, "forward_ffn")), True)
            f3 = op(dv, tape, Ntok * 256 * 4, S(L.linear() + EL(204, "forward_ffn")), True)
            n2 = op(dv, tape, Ntok * 256 * 4, S(L.layer_norm() + EL(206, "forward_ffn")), True)
        DL = lambda line: [app("models/deformable_transformer.py", line, "forward")] + call + [app("models/deformable_transformer.py", 362, "forward")] + call + TF(179)
        for l in range(6):
            for sz in (B * 300 * 256 * 4, B * 300 * 256 * 4, B * 8 * 300 * 300 * 4, B * 300 * 256 * 4, B * 300 * 256 * 4, B * 300 * 1024 * 4, B * 300 * 256 * 4):
                op(dv, tape, sz, S(DL(313)), True)
        CR = lambda line, nm="forward": [app("models/matcher.py", line, nm)] + call + [app("models/deformable_detr.py", 369, "forward")] + call + ENG(44)
        cost = dv.a(B * 300 * 80 * 4, S(CR(79)), "tmp")
        dv.f(cost)
        loss = dv.a(4, S([app("engine.py", 46, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:]), "tmp")
        dv.wait(rng.randint(90000, 140000))
        backward(dv, tape, grads)
        for i in range(len(psz)):
            if i not in grads:
                grads[i] = dv.a(psz[i], NOSTACK, "grad")
        dv.fl([img, msk, loss] + tg)
        for b in list(A.blocks.values()):
            pass
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), app("engine.py", 55, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:]
        CLIP = S([L("torch/nn/utils/clip_grad.py", 55, "clip_grad_norm_"), app("engine.py", 52, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:])
        nrm = [dv.a(4, CLIP, "tmp") for _ in range(8)]
        dv.fl(nrm)
        if not state:
            for s in psz:
                for ln in (109, 113):
                    state.append(dv.a(s, S([L("torch/optim/adamw.py", ln, "_init_group"), L("torch/optim/adamw.py", 173, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 577, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 333, "adamw"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(s, FE, "tmp") for s in psz]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 815, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("engine.py", 49, "train_one_epoch"), app("main.py", 270, "main")] + MAIN[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
    info["shapes"] = shapes
    d = write([A], settings_extra={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64", "max_split_size": 64 * MB})
    return dict(name="m09_deformable_detr_coco_v100.pickle", data=d, devs=[A], info=info)


# ============================================================================ m10
def build_m10():
    """An internal FAQ chatbot: Qwen2.5-1.5B-Instruct (28 layers, d=1536, 12 query / 2 KV heads of
    128, SwiGLU 8960, vocabulary 151,936 tied, bf16) on one NVIDIA L4 (24 GB), torch 2.4,
    transformers 4.46.  At start-up the engine prefills the 620-token system prompt into a
    DynamicCache (prefix caching), then answers requests one at a time with its own greedy loop
    (prompt prefill + up to 40 new tokens), passing that same DynamicCache object as
    past_key_values — without copying or cropping it — so each request's prompt and answer are
    appended to the shared cache (torch.cat per layer in DynamicCache.update) and stay there.
    14 requests recorded."""
    rng = random.Random(3610)
    clock = sim.Clock(1733900000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(22.05 * GB), clock=clock, base=0x7F4F80000000)
    dv = Dev(A)
    SP = "/srv/faqbot/.venv/lib/python3.11/site-packages/"
    L = Lib(SP, "2.4")
    app = fr("/srv/faqbot/")
    call = L.call()
    QW = SP + "transformers/models/qwen2/modeling_qwen2.py"
    qw = lambda line, name: (QW, line, name)
    CU = SP + "transformers/cache_utils.py"
    NL, H, KV, I, V = 28, 1536, 256, 8960, 151936
    SRV = [app("bot/server.py", 74, "handle_chat"), L("starlette/concurrency.py", 42, "run_in_threadpool"), L("fastapi/routing.py", 212, "run_endpoint_function"), L("fastapi/routing.py", 301, "app")]
    START = [app("bot/engine.py", 61, "__init__"), app("bot/server.py", 33, "lifespan"), L("contextlib.py", 0, "__aenter__")[0:0] and None]
    START = [app("bot/engine.py", 61, "__init__"), app("bot/server.py", 33, "lifespan")]
    # ---- weights (before recording)
    LOAD = S([L("torch/nn/modules/module.py", 1340, "convert"), L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 900, "_apply"),
              L("torch/nn/modules/module.py", 1355, "to"), app("bot/engine.py", 48, "__init__"), app("bot/server.py", 33, "lifespan")])
    wsz = [V * H * 2]
    for l in range(NL):
        wsz += [H * H * 2, H * 2, KV * H * 2, KV * 2, KV * H * 2, KV * 2, H * H * 2, I * H * 2, I * H * 2, H * I * 2, H * 2, H * 2]
    wsz += [H * 2]
    for s in wsz:
        dv.a(s, LOAD, "param")
    start_recording(A)
    info = dict(param_bytes=sum(wsz), requests=14)
    cache_k = [None] * NL
    cache_v = [None] * NL
    clen = [0]

    def forward(ntok, outer, last_only=True):
        MD = lambda line: [qw(line, "forward")] + call + [qw(1164, "forward")] + call + outer
        LY = lambda line: [qw(line, "forward")] + call + MD(901)
        AT = lambda line: [qw(line, "forward")] + call + LY(655)
        h = dv.a(ntok * H * 2, S(L.embedding() + MD(858)), "tmp")
        pos = dv.a(ntok * 128 * 4 * 2, S([qw(184, "forward")] + call + MD(886)), "tmp")
        mask = dv.a(ntok * (clen[0] + ntok) * 2, S([qw(1010, "_update_causal_mask"), qw(872, "forward")] + call + MD(872)[1:]), "tmp") if ntok > 1 else None
        for l in range(NL):
            if ntok > 1:
                n1 = dv.a(ntok * H * 2, S([qw(78, "forward")] + call + LY(651)), "tmp")
                q = dv.a(ntok * H * 2, S(L.linear() + AT(539)), "tmp")
                k = dv.a(ntok * KV * 2, S(L.linear() + AT(540)), "tmp")
                v = dv.a(ntok * KV * 2, S(L.linear() + AT(541)), "tmp")
                qr = dv.a(ntok * H * 2, S([qw(238, "apply_rotary_pos_emb"), qw(555, "forward")] + call + LY(655)), "tmp")
                kr = dv.a(ntok * KV * 2, S([qw(239, "apply_rotary_pos_emb"), qw(555, "forward")] + call + LY(655)), "tmp")
                dv.fl([q, k, n1])
            else:
                qr = dv.a(H * 2 + 2 * KV * 2, S(L.linear() + AT(539)), "tmp")
                kr = v = None
            UP = lambda line: [(CU, line, "update"), qw(559, "forward")] + call + LY(655)
            nk = dv.a((clen[0] + ntok) * KV * 2, S(UP(449)), "kv")
            nv = dv.a((clen[0] + ntok) * KV * 2, S(UP(450)), "kv")
            if cache_k[l] is not None:
                dv.f(cache_k[l], S(UP(449)))
                dv.f(cache_v[l], S(UP(450)))
            cache_k[l], cache_v[l] = nk, nv
            if kr is not None:
                dv.fl([kr, v])
            ao = dv.a(ntok * H * 2, S([qw(583, "forward")] + call + LY(655)), "tmp")
            dv.f(qr)
            if ntok > 1:
                o = dv.a(ntok * H * 2, S(L.linear() + AT(595)), "tmp")
                dv.f(ao)
                h1 = dv.a(ntok * H * 2, S(LY(663)), "tmp")
                dv.fl([o])
                n2 = dv.a(ntok * H * 2, S([qw(78, "forward")] + call + LY(666)), "tmp")
                ML = lambda line: [qw(line, "forward")] + call + LY(667)
                g = dv.a(ntok * I * 2, S(L.linear() + ML(223)), "tmp")
                ac = dv.a(ntok * I * 2, S(L.silu() + ML(223)), "tmp")
                dv.f(g)
                u = dv.a(ntok * I * 2, S(L.linear() + ML(223)), "tmp")
                m = dv.a(ntok * I * 2, S(ML(223)), "tmp")
                dv.fl([ac, u, n2])
                dn = dv.a(ntok * H * 2, S(L.linear() + ML(223)), "tmp")
                dv.f(m)
                h2 = dv.a(ntok * H * 2, S(LY(668)), "tmp")
                dv.fl([dn, h1, h])
            else:
                # one token: the layer's temporaries (a few KiB each) shown as the MLP intermediate
                m = dv.a(I * 2 * 2, S([qw(223, "forward")] + call + LY(667)), "tmp")
                h2 = dv.a(H * 2, S(LY(668)), "tmp")
                dv.fl([m, ao, h])
            h = h2
        clen[0] += ntok
        nf = dv.a((1 if last_only else ntok) * H * 2, S([qw(78, "forward")] + call + MD(912)), "tmp")
        CL = [qw(1183, "forward")] + call + outer
        lg = dv.a(V * 2, S(L.linear() + CL), "tmp")
        lf = dv.a(V * 4, S([qw(1184, "forward")] + call + outer), "tmp")
        dv.fl([lg, nf, h, pos] + ([mask] if mask else []))
        return lf

    # start-up: the system prompt into the prefix cache
    ids = dv.a(620 * 8, S([app("bot/engine.py", 57, "__init__"), app("bot/server.py", 33, "lifespan")]), "tmp")
    lf = forward(620, [app("bot/engine.py", 59, "warm_prefix"), app("bot/engine.py", 64, "__init__"), app("bot/server.py", 33, "lifespan")])
    dv.fl([lf, ids])
    info["prefix_tokens"] = 620
    info["kv_bytes_per_token"] = NL * 2 * KV * 2
    per_req = []
    for r in range(14):
        dv.wait(rng.randint(2000000, 9000000))
        p = rng.randint(38, 120)
        a = rng.randint(18, 40)
        OUT = lambda line, nm: [app("bot/engine.py", line, nm), app("bot/engine.py", 97, "answer")] + SRV
        ids = dv.a(p * 8, S([app("bot/engine.py", 91, "answer")] + SRV), "tmp")
        lf = forward(p, OUT(112, "_prefill"))
        toks = []
        for t in range(a):
            nt = dv.a(8, S([app("bot/engine.py", 131, "_decode")] + [app("bot/engine.py", 99, "answer")] + SRV), "tmp")
            dv.f(lf)
            toks.append(nt)
            lf = forward(1, [app("bot/engine.py", 126, "_decode"), app("bot/engine.py", 99, "answer")] + SRV)
        dv.f(lf)
        out = dv.a((p + a) * 8, S([app("bot/engine.py", 101, "answer")] + SRV), "tmp")
        dv.fl(toks + [ids, out])
        per_req.append(p + a)
    info["tokens_per_request"] = per_req
    info["cache_tokens_end"] = clen[0]
    info["cache_bytes_end"] = sum(b.req for b in cache_k + cache_v)
    d = write([A])
    return dict(name="m10_qwen25_15b_faqbot_l4.pickle", data=d, devs=[A], info=info)
