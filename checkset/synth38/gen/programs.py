"""The ten workloads of batch 38.  Each build_mNN() runs one program through sim.Allocator and
returns dict(name, data (the snapshot dict), devs, info (the generator's own bookkeeping))."""
import random
from collections import OrderedDict

import sim
import cpp
from common import S, Lib, Dev, write, NOSTACK, MB, GB, KB, start_recording

MiB = MB

CPP_FREE = [("??", 0, "torch::unwind::unwind()"), ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
            ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
            ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)"),
            ("", 0, "c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)"),
            ("", 0, "c10::StorageImpl::~StorageImpl()"),
            ("", 0, "c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()"),
            ("??", 0, "c10::TensorImpl::~TensorImpl()"), ("TensorImpl.cpp", 0, "c10::TensorImpl::~TensorImpl() [clone .localalias]"),
            ("python_variable.cpp", 0, "THPVariable_clear(THPVariable*)"), ("??", 0, "THPVariable_subclass_dealloc(_object*)"),
            ("??", 0, "_Py_Dealloc")]


def fr(prefix):
    return lambda f, line, name: (prefix + f, line, name)


class AG:
    """Autograd bookkeeping of one forward pass.  node() records a backward node in forward order:
    the tensors it saved (freed when backward reaches it), the sizes of the input gradients it
    makes, and the parameters whose .grad it produces.  backward() walks the nodes in reverse:
    makes the input gradients, the parameter gradients (AccumulateGrad, first touch only; later
    touches add into them through a temporary), frees the saved tensors and the incoming
    gradients."""

    def __init__(self, dv, bst, acc):
        self.dv = dv
        self.bst = bst          # (node, op) -> stack of allocations made by that backward node
        self.acc = acc          # node -> stack of AccumulateGrad allocations
        self.nodes = []

    def node(self, name, op, saved=(), gin=(), params=()):
        self.nodes.append((name, op, [b for b in saved if b is not None], list(gin), list(params)))

    def backward(self, grads, gin0=()):
        dv = self.dv
        gin = list(gin0)
        for name, op, saved, gsz, params in reversed(self.nodes):
            st = self.bst(name, op)
            new = [dv.a(s, st, "tmp") for s in gsz]
            for k, sz in params:
                if grads.get(k) is None:
                    grads[k] = dv.a(sz, self.acc(name), "grad")
                else:
                    t = dv.a(sz, st, "tmp")
                    dv.f(t, st)
            dv.fl(gin, st)
            dv.fl(saved, st)
            gin = new
        dv.fl(gin)
        self.nodes = []


def py_only_ag(dv):
    return AG(dv, lambda n, o: NOSTACK, lambda n: NOSTACK)


def cpp_ag(dv):
    return AG(dv, lambda n, o: cpp.bwd(o, n), lambda n: cpp.accumulate_grad())


# ============================================================================ m01
def build_m01():
    """fairseq 0.12.2 transformer_wmt_en_de (6+6 layers, d=512, FFN 2048, 8 heads, shared 32,776
    BPE vocabulary, share_all_embeddings) on WMT16 En-De, fp32 (TF32), label-smoothed cross
    entropy (0.1), fairseq's Adam (betas 0.9/0.98, weight decay 1e-4), max_tokens 12,288 (batches of
    varying shape), on an RTX A6000 (48 GB), torch 2.4.  _record_memory_history(stacks="all",
    max_entries=200000) in fairseq_cli/train.py after the trainer was built; dump after 14 updates.
    Healthy."""
    rng = random.Random(3801)
    clock = sim.Clock(1731911400000000, rng, (3, 12))
    A = sim.Allocator(device=0, capacity=int(47.41 * GB), clock=clock, base=0x7F5C30000000)
    dv = Dev(A)
    SP = "/opt/conda/lib/python3.10/site-packages/"
    L = Lib(SP, "2.4")
    fs = fr("/workspace/fairseq/")
    call = L.call()
    V, D, FF, H, NL = 32776, 512, 2048, 8, 6
    MAIN = [fs("fairseq_cli/train.py", 190, "main"), fs("fairseq/distributed/utils.py", 404, "call_main"),
            fs("fairseq_cli/train.py", 574, "cli_main"), ("/opt/conda/bin/fairseq-train", 8, "<module>")]
    TRAIN = [fs("fairseq_cli/train.py", 346, "train"), ("/opt/conda/lib/python3.10/contextlib.py", 79, "inner"),
             fs("fairseq_cli/train.py", 180, "main")] + MAIN[1:]
    TSTEP = lambda line: [fs("fairseq/trainer.py", line, "train_step"), ("/opt/conda/lib/python3.10/contextlib.py", 79, "inner")] + TRAIN
    TASK = lambda line: [fs("fairseq/tasks/fairseq_task.py", line, "train_step")] + TSTEP(847)
    CRIT = lambda line, fn="forward": [fs("fairseq/criterions/label_smoothed_cross_entropy.py", line, fn)] + \
        ([] if fn == "forward" else [fs("fairseq/criterions/label_smoothed_cross_entropy.py", 80, "forward")]) + call + TASK(518)
    MODEL = lambda line: [fs("fairseq/models/transformer/transformer_base.py", line, "forward")] + call + CRIT(80)
    ENC = lambda line, fn="forward_scriptable": [fs("fairseq/models/transformer/transformer_encoder.py", line, fn)] + \
        ([fs("fairseq/models/transformer/transformer_encoder.py", 216, "forward_scriptable")] if fn != "forward_scriptable" else []) + \
        [fs("fairseq/models/transformer/transformer_encoder.py", 165, "forward")] + call + MODEL(144)
    DEC = lambda line, fn="extract_features_scriptable": [fs("fairseq/models/transformer/transformer_decoder.py", line, fn)] + \
        ([fs("fairseq/models/transformer/transformer_decoder.py", 343, "extract_features_scriptable")] if fn == "buffered_future_mask" else []) + \
        [fs("fairseq/models/transformer/transformer_decoder.py", 249, "extract_features")] + \
        [fs("fairseq/models/transformer/transformer_decoder.py", 224, "forward")] + call + MODEL(154)
    ELAY = lambda line: [fs("fairseq/modules/transformer_layer.py", line, "forward")] + call + ENC(247)
    DLAY = lambda line: [fs("fairseq/modules/transformer_layer.py", line, "forward")] + call + DEC(349)
    MHA = lambda line, lay: [fs("fairseq/modules/multihead_attention.py", line, "forward")] + call + lay
    FMHA = lambda line, fn, lay, mline: [L("torch/nn/functional.py", line, fn)] + \
        ([L("torch/nn/functional.py", 5705, "multi_head_attention_forward")] if fn != "multi_head_attention_forward" else []) + MHA(mline, lay)
    LIN = lambda where: L.linear() + where
    DROP = lambda where: [L("torch/nn/functional.py", 1295, "dropout"), fs("fairseq/modules/fairseq_dropout.py", 24, "forward")] + call + where
    LN = lambda where: [L("torch/nn/functional.py", 2573, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + where
    F = cpp.fwd
    psz = OrderedDict()
    psz["embed"] = V * D * 4
    for side, n in (("e", NL), ("d", NL)):
        for l in range(n):
            p = "%s%d." % (side, l)
            for att in (("sa", "ca") if side == "d" else ("sa",)):
                for w in "qkvo":
                    psz[p + att + w + ".w"] = D * D * 4
                    psz[p + att + w + ".b"] = D * 4
                psz[p + att + "ln.w"] = D * 4
                psz[p + att + "ln.b"] = D * 4
            psz[p + "fc1.w"] = FF * D * 4
            psz[p + "fc1.b"] = FF * 4
            psz[p + "fc2.w"] = D * FF * 4
            psz[p + "fc2.b"] = D * 4
            psz[p + "ln.w"] = D * 4
            psz[p + "ln.b"] = D * 4
    TO = S(L.convert() + [fs("fairseq/trainer.py", 170, "__init__"), fs("fairseq_cli/train.py", 141, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, {}
    future = [None, 0]
    STEPS = 14
    shapes = []
    for step in range(STEPS):
        Ls = rng.choice([24, 32, 40, 48, 56, 64, 72, 88, 104, 120, 136])
        Lt = int(Ls * rng.uniform(0.92, 1.2)) // 1
        B = 12288 // max(Ls, Lt)
        shapes.append((B, Ls, Lt))
        Ts, Tt = B * Ls, B * Lt
        # zero_grad at the start of the update (fairseq: p.grad = None)
        ZG = S(CPP_FREE, cpp.interleave([fs("fairseq/optim/fairseq_optimizer.py", 89, "zero_grad"), fs("fairseq/trainer.py", 1213, "zero_grad")] + TSTEP(799)), cpp.MAIN_TAIL[1:])
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        MV = [fs("fairseq/utils.py", 67, "_move_to_cuda"), fs("fairseq/utils.py", 60, "_apply"), fs("fairseq/utils.py", 55, "<dictcomp>"),
              fs("fairseq/utils.py", 55, "_apply"), fs("fairseq/utils.py", 72, "move_to_cuda"), fs("fairseq/trainer.py", 1385, "_prepare_sample")] + TSTEP(833)
        batch = [dv.a(B * Ls * 8, F("to", MV), "input"), dv.a(B * 8, F("to", MV), "input"),
                 dv.a(B * Lt * 8, F("to", MV), "input"), dv.a(B * Lt * 8, F("to", MV), "input")]
        dv.wait(rng.randint(1500, 4000))
        ag = cpp_ag(dv)
        # ---------------- encoder
        pm = dv.a(B * Ls, F("eq", ENC(192)), "act")
        te = dv.a(Ts * D * 4, F("embedding", [L("torch/nn/functional.py", 2267, "embedding")] + L.mod("torch/nn/modules/sparse.py", 164) + ENC(134, "forward_embedding")), "act")
        ag.node("EmbeddingBackward0", "embedding_bwd", [], [], [("embed", V * D * 4)])
        sc = dv.a(Ts * D * 4, F("mul", ENC(135, "forward_embedding")), "act")
        dv.f(te)
        POS = lambda line, fn: [fs("fairseq/utils.py", line, fn), fs("fairseq/modules/sinusoidal_positional_embedding.py", 97, "forward")] + call + ENC(137, "forward_embedding")
        mk = dv.a(B * Ls * 4, F("mul", POS(254, "make_positions")), "tmp")
        cs = dv.a(B * Ls * 4, F("cumsum", POS(256, "make_positions")), "tmp")
        cm = dv.a(B * Ls * 4, F("mul", POS(256, "make_positions")), "tmp")
        lg = dv.a(B * Ls * 8, F("to", POS(256, "make_positions")), "tmp")
        ps = dv.a(B * Ls * 8, F("add", POS(256, "make_positions")), "tmp")
        dv.fl([mk, cs, cm, lg])
        pe = dv.a(Ts * D * 4, F("index_select", [fs("fairseq/modules/sinusoidal_positional_embedding.py", 102, "forward")] + call + ENC(137, "forward_embedding")), "tmp")
        dv.f(ps)
        x = dv.a(Ts * D * 4, F("add", ENC(137, "forward_embedding")), "act")
        dv.fl([sc, pe])
        xm = dv.a(Ts * D, F("dropout", DROP(ENC(141, "forward_embedding"))), "act")
        xd = dv.a(Ts * D * 4, F("dropout", DROP(ENC(141, "forward_embedding"))), "act")
        ag.node("NativeDropoutBackward0", "dropout_bwd", [xm], [Ts * D * 4])
        dv.f(x)
        x = xd
        lse_s = B * H * ((Ls + 31) // 32 * 32) * 4

        def self_attn(x, T, Bq, Lq, where, mline, pfx, causal):
            cb = dv.a(3 * D * 4, F("cat", MHA(mline - 8, where)), "tmp")
            q = dv.a(T * D * 4, F("mm", LIN(FMHA(5295, "_in_projection", where, mline))), "act")
            k = dv.a(T * D * 4, F("mm", LIN(FMHA(5296, "_in_projection", where, mline))), "act")
            v = dv.a(T * D * 4, F("mm", LIN(FMHA(5297, "_in_projection", where, mline))), "act")
            ag.node("MmBackward0", "mm", [x], [T * D * 4] * 3, [(pfx + "q.w", D * D * 4), (pfx + "k.w", D * D * 4), (pfx + "v.w", D * D * 4)])
            o = dv.a(T * D * 4, F("sdpa_eff", FMHA(5894 if causal else 5894, "multi_head_attention_forward", where, mline)), "act")
            lse = dv.a(Bq * H * ((Lq + 31) // 32 * 32) * 4, F("sdpa_eff", FMHA(5894, "multi_head_attention_forward", where, mline)), "act")
            ag.node("ScaledDotProductEfficientAttentionBackward0", "sdpa_eff_bwd", [q, k, v, lse], [T * D * 4] * 3)
            oc = dv.a(T * D * 4, F("copy", FMHA(5895, "multi_head_attention_forward", where, mline)), "act")
            ag.node("CloneBackward0", "copy", [o], [T * D * 4])
            op = dv.a(T * D * 4, F("addmm", LIN(FMHA(5896, "multi_head_attention_forward", where, mline))), "act")
            ag.node("AddmmBackward0", "mm", [oc], [T * D * 4], [(pfx + "o.w", D * D * 4), (pfx + "o.b", D * 4)])
            dv.f(cb)
            return op

        def cross_attn(x, enc, Tq, Tk, Bq, Lq, Lk, where, pfx):
            q = dv.a(Tq * D * 4, F("addmm", LIN(MHA(593, where))), "act")
            k = dv.a(Tk * D * 4, F("addmm", LIN(MHA(605, where))), "act")
            v = dv.a(Tk * D * 4, F("addmm", LIN(MHA(606, where))), "act")
            ag.node("AddmmBackward0", "mm", [x], [Tq * D * 4], [(pfx + "q.w", D * D * 4), (pfx + "q.b", D * 4)])
            ag.node("AddmmBackward0", "mm", [enc] if pfx == "d0.ca" else [], [Tk * D * 4, Tk * D * 4], [(pfx + "k.w", D * D * 4), (pfx + "k.b", D * 4), (pfx + "v.w", D * D * 4), (pfx + "v.b", D * 4)])
            sc = Bq * H * Lq * Lk * 4
            w = dv.a(sc, F("bmm", MHA(683, where)), "act")
            ag.node("BmmBackward0", "bmm", [q, k], [Tq * D * 4, Tk * D * 4])
            sm = dv.a(sc, F("softmax", [L("torch/nn/functional.py", 1890, "softmax"), fs("fairseq/utils.py", 531, "softmax")] + MHA(717, where)), "act")
            dv.f(w)
            am = dv.a(Bq * H * Lq * Lk, F("dropout", DROP(MHA(721, where))), "act")
            ad = dv.a(sc, F("dropout", DROP(MHA(721, where))), "act")
            ag.node("SoftmaxBackward0", "softmax_bwd", [sm], [sc])
            ag.node("NativeDropoutBackward0", "dropout_bwd", [am], [sc])
            at = dv.a(Tq * D * 4, F("bmm", MHA(725, where)), "act")
            ag.node("BmmBackward0", "bmm", [ad, v], [sc, Tk * D * 4])
            ac = dv.a(Tq * D * 4, F("copy", MHA(734, where)), "act")
            dv.f(at)
            op = dv.a(Tq * D * 4, F("addmm", LIN(MHA(738, where))), "act")
            ag.node("AddmmBackward0", "mm", [ac], [Tq * D * 4], [(pfx + "o.w", D * D * 4), (pfx + "o.b", D * 4)])
            return op

        def res_ln(x, resid, T, where_drop, where_add, where_ln, key):
            m = dv.a(T * D, F("dropout", DROP(where_drop)), "act")
            d = dv.a(T * D * 4, F("dropout", DROP(where_drop)), "act")
            ag.node("NativeDropoutBackward0", "dropout_bwd", [m], [T * D * 4])
            dv.f(x)
            a = dv.a(T * D * 4, F("add", where_add), "act")
            dv.f(d)
            o = dv.a(T * D * 4, F("layer_norm", LN(where_ln)), "act")
            mu = dv.a(T * 4, F("layer_norm", LN(where_ln)), "act")
            rs = dv.a(T * 4, F("layer_norm", LN(where_ln)), "act")
            ag.node("NativeLayerNormBackward0", "layer_norm_bwd", [a, mu, rs], [T * D * 4], [(key + ".w", D * 4), (key + ".b", D * 4)])
            return o

        def ffn(x, T, LAY, l0, pfx):
            h = dv.a(T * FF * 4, F("addmm", LIN(LAY(l0))), "act")
            ag.node("AddmmBackward0", "mm", [x], [T * D * 4], [(pfx + "fc1.w", FF * D * 4), (pfx + "fc1.b", FF * 4)])
            r = dv.a(T * FF * 4, F("relu", [L("torch/nn/functional.py", 1500, "relu")] + LAY(l0 + 1)), "act")
            dv.f(h)
            ag.node("ReluBackward0", "threshold_bwd", [], [T * FF * 4])
            o = dv.a(T * D * 4, F("addmm", LIN(LAY(l0 + 3))), "act")
            ag.node("AddmmBackward0", "mm", [r], [T * FF * 4], [(pfx + "fc2.w", D * FF * 4), (pfx + "fc2.b", D * 4)])
            return o

        for l in range(NL):
            pfx = "e%d." % l
            a = self_attn(x, Ts, B, Ls, ELAY(338), 538, pfx + "sa", False)
            x1 = res_ln(a, x, Ts, ELAY(347), ELAY(348), ELAY(350), pfx + "saln")
            f = ffn(x1, Ts, ELAY, 352, pfx)
            x = res_ln(f, x1, Ts, ELAY(356), ELAY(357), ELAY(359), pfx + "ln")
        enc = x
        # ---------------- decoder
        if future[1] < Lt:
            if future[0] is not None:
                dv.f(future[0])
            future[0] = dv.a(Lt * Lt * 4, F("to", DEC(480, "buffered_future_mask")), "cache")
            future[1] = Lt
        te = dv.a(Tt * D * 4, F("embedding", [L("torch/nn/functional.py", 2267, "embedding")] + L.mod("torch/nn/modules/sparse.py", 164) + DEC(322)), "act")
        ag.node("EmbeddingBackward0", "embedding_bwd", [], [], [("embed", V * D * 4)])
        sc = dv.a(Tt * D * 4, F("mul", DEC(325)), "act")
        dv.f(te)
        pe = dv.a(Tt * D * 4, F("index_select", [fs("fairseq/modules/sinusoidal_positional_embedding.py", 102, "forward")] + call + DEC(314)), "tmp")
        x = dv.a(Tt * D * 4, F("add", DEC(333)), "act")
        dv.fl([sc, pe])
        xm = dv.a(Tt * D, F("dropout", DROP(DEC(337))), "act")
        xd = dv.a(Tt * D * 4, F("dropout", DROP(DEC(337))), "act")
        ag.node("NativeDropoutBackward0", "dropout_bwd", [xm], [Tt * D * 4])
        dv.f(x)
        x = xd
        for l in range(NL):
            pfx = "d%d." % l
            a = self_attn(x, Tt, B, Lt, DLAY(470), 538, pfx + "sa", True)
            x1 = res_ln(a, x, Tt, DLAY(482), DLAY(483), DLAY(485), pfx + "saln")
            c = cross_attn(x1, enc, Tt, Ts, B, Lt, Ls, DLAY(500), pfx + "ca")
            x2 = res_ln(c, x1, Tt, DLAY(513), DLAY(514), DLAY(516), pfx + "caln")
            f = ffn(x2, Tt, DLAY, 523, pfx)
            x = res_ln(f, x2, Tt, DLAY(527), DLAY(528), DLAY(530), pfx + "ln")
        OUT = L.linear() + [fs("fairseq/models/transformer/transformer_decoder.py", 410, "output_layer"),
                                                                               fs("fairseq/models/transformer/transformer_decoder.py", 229, "forward")] + call + MODEL(154)
        logits = dv.a(Tt * V * 4, F("mm", OUT), "act")
        ag.node("MmBackward0", "mm", [x], [Tt * D * 4], [("embed", V * D * 4)])
        LP = [L("torch/nn/functional.py", 1985, "log_softmax"), fs("fairseq/utils.py", 541, "log_softmax"),
              fs("fairseq/models/fairseq_model.py", 90, "get_normalized_probs_scriptable"),
              fs("fairseq/models/fairseq_model.py", 65, "get_normalized_probs")] + CRIT(92, "get_lprobs_and_target")[:1] + \
            [fs("fairseq/criterions/label_smoothed_cross_entropy.py", 104, "compute_loss")] + CRIT(81)[0:1] + call + TASK(518)
        lp = dv.a(Tt * V * 4, F("log_softmax", LP), "act")
        LSN = lambda line: [fs("fairseq/criterions/label_smoothed_cross_entropy.py", line, "label_smoothed_nll_loss"),
                            fs("fairseq/criterions/label_smoothed_cross_entropy.py", 106, "compute_loss"),
                            fs("fairseq/criterions/label_smoothed_cross_entropy.py", 81, "forward")] + call + TASK(518)
        g = dv.a(Tt * 4, F("gather", LSN(23)), "act")
        nl = dv.a(Tt * 4, F("neg", LSN(23)), "act")
        ss = dv.a(Tt * 4, F("sum", LSN(24)), "act")
        sn = dv.a(Tt * 4, F("neg", LSN(24)), "act")
        pmk = dv.a(Tt, F("mul", LSN(26)), "tmp")
        dv.fl([g, ss])
        s1 = dv.a(4, F("sum", LSN(31)), "act")
        s2 = dv.a(4, F("sum", LSN(32)), "act")
        loss = dv.a(4, F("add", LSN(35)), "act")
        dv.fl([pmk, nl, sn, s1, s2])
        # net_output (logits) goes out of scope when the criterion returns
        dv.f(logits)
        dv.wait(rng.randint(2000, 5000))
        # ---------------- backward: grad of lprobs from gather (zeros + scatter) and sum (expand)
        BW = lambda node: cpp.bwd("gather_bwd", node)
        g1 = dv.a(Tt * V * 4, BW("GatherBackward0"), "tmp")
        g2 = dv.a(Tt * V * 4, cpp.bwd("add", "SumBackward1"), "tmp")
        dv.f(g1)
        gl = dv.a(Tt * V * 4, cpp.bwd("log_softmax_bwd", "LogSoftmaxBackward0"), "tmp")
        dv.f(g2)
        dv.f(lp)
        ag.backward(grads, [gl])
        dv.f(loss)
        for k in psz:
            if k not in grads:
                grads[k] = dv.a(psz[k], cpp.accumulate_grad(), "grad")
        dv.wait(rng.randint(3000, 8000))
        # ---------------- clip_grad_norm_ (max_norm 0: the norm is only logged)
        CG = lambda line, fn: [fs("fairseq/utils.py", line, fn)] + ([fs("fairseq/utils.py", 370, "clip_grad_norm_")] if fn != "clip_grad_norm_" else []) + \
            [fs("fairseq/optim/fairseq_optimizer.py", 120, "clip_grad_norm"), fs("fairseq/trainer.py", 1420, "clip_grad_norm")] + TSTEP(920)
        ns = [dv.a(4, F("norm", CG(370, "<listcomp>")), "tmp") for _ in psz]
        st = dv.a(len(psz) * 4, F("stack", CG(369, "clip_grad_norm_")), "tmp")
        tn = dv.a(4, F("norm", CG(369, "clip_grad_norm_")), "tmp")
        dv.fl(ns)
        dv.f(st)
        # ---------------- fairseq Adam
        OPT = lambda line: [fs("fairseq/optim/adam.py", line, "step"), L("torch/optim/optimizer.py", 484, "wrapper"),
                            fs("fairseq/optim/fairseq_optimizer.py", 127, "step"), fs("fairseq/tasks/fairseq_task.py", 531, "optimizer_step")] + TSTEP(937)
        for k, sz in psz.items():
            if k not in state:
                state[k] = (dv.a(sz, F("zeros_like", OPT(208)), "opt"), dv.a(sz, F("zeros_like", OPT(210)), "opt"))
            den = dv.a(sz, F("sqrt", OPT(228)), "tmp")
            dv.f(den)
        dv.f(tn)
        dv.fl(batch + [pm])
        dv.wait(rng.randint(60000, 90000))
    info = dict(param_bytes=sum(psz.values()), opt_bytes=2 * sum(psz.values()), steps=STEPS, shapes=shapes,
                n_params=len(psz), vocab=V)
    d = write([A])
    return dict(name="m01_fairseq_transformer_wmt16_ende_cpp.pickle", data=d, devs=[A], info=info)


# ============================================================================ m02
def build_m02():
    """Model-soup checkpoint sweep: 24 fine-tuned checkpoints of one timm ViT-B/16 (86.6 M
    parameters, fp32) are each loaded with torch.load(map_location="cuda") and
    model.load_state_dict(sd, assign=True), then evaluated on 8 held-out batches of 256 images under
    torch.no_grad().  The whole sweep runs inside one `with torch.autocast("cuda", dtype=torch.float16)`
    opened at the top of main().  RTX 4090 (24 GB), torch 2.3, timm 0.9.16;
    _record_memory_history() at start-up (model built and moved to the GPU inside the trace); dump
    after the 24th checkpoint.  Problem: the autocast weight-cast cache (cleared only when the
    outermost autocast region exits) keeps the fp16 copy of every parameter of every checkpoint:
    the new parameter tensors are new cache keys, the stale entries keep their casts alive."""
    rng = random.Random(3802)
    clock = sim.Clock(1733322000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(23.54 * GB), clock=clock, base=0x7F11E6000000)
    dv = Dev(A)
    SP = "/home/ml/.venv/lib/python3.11/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/home/ml/soups/")
    call = L.call()
    D, FF, NB, NCLS, B, N = 768, 3072, 12, 1000, 256, 197
    T = B * N
    MAIN = [app("soup_sweep.py", 131, "main"), app("soup_sweep.py", 162, "<module>")]
    EVAL = lambda line: [app("soup_sweep.py", line, "evaluate"), app("soup_sweep.py", 118, "main")] + MAIN[1:]
    VT = SP + "timm/models/vision_transformer.py"
    MODEL = lambda line, fn="forward_features": [(VT, line, fn)] + ([(VT, 674, "forward")] if fn != "forward" else []) + call + EVAL(71)
    BLK = lambda l, line: [(VT, line, "forward")] + call + [L("torch/nn/modules/container.py", 219, "forward")] + call + MODEL(660)
    ATT = lambda l, line: [(VT, line, "forward")] + call + BLK(l, 150)
    MLP = lambda l, line: [(SP + "timm/layers/mlp.py", line, "forward")] + call + BLK(l, 151)
    LIN = lambda where: L.linear() + where
    LN = lambda where: [L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 201) + where
    # parameters, in state_dict order
    psz = OrderedDict()
    psz["cls_token"] = D * 4
    psz["pos_embed"] = N * D * 4
    psz["patch_embed.proj.weight"] = D * 3 * 16 * 16 * 4
    psz["patch_embed.proj.bias"] = D * 4
    for l in range(NB):
        p = "blocks.%d." % l
        psz[p + "norm1.weight"] = D * 4
        psz[p + "norm1.bias"] = D * 4
        psz[p + "attn.qkv.weight"] = 3 * D * D * 4
        psz[p + "attn.qkv.bias"] = 3 * D * 4
        psz[p + "attn.proj.weight"] = D * D * 4
        psz[p + "attn.proj.bias"] = D * 4
        psz[p + "norm2.weight"] = D * 4
        psz[p + "norm2.bias"] = D * 4
        psz[p + "mlp.fc1.weight"] = FF * D * 4
        psz[p + "mlp.fc1.bias"] = FF * 4
        psz[p + "mlp.fc2.weight"] = D * FF * 4
        psz[p + "mlp.fc2.bias"] = D * 4
    psz["norm.weight"] = D * 4
    psz["norm.bias"] = D * 4
    psz["head.weight"] = NCLS * D * 4
    psz["head.bias"] = NCLS * 4
    cast_keys = [k for k in psz if ("qkv" in k or "proj" in k or "fc1" in k or "fc2" in k or k.startswith("head."))]
    TO = S(L.convert() + [app("soup_sweep.py", 109, "main")] + MAIN[1:])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    LOAD = S([L("torch/_utils.py", 103, "_cuda"), L("torch/serialization.py", 259, "_cuda_deserialize"),
              L("torch/serialization.py", 290, "default_restore_location"), L("torch/serialization.py", 1392, "restore_location"),
              L("torch/serialization.py", 1363, "load_tensor"), L("torch/serialization.py", 1383, "persistent_load"),
              L("torch/serialization.py", 1401, "_load"), L("torch/serialization.py", 1040, "load"),
              app("soup_sweep.py", 52, "load_checkpoint"), app("soup_sweep.py", 114, "main")] + MAIN[1:])
    LSD = S([L("torch/nn/modules/module.py", 2110, "_load_from_state_dict"), L("torch/nn/modules/module.py", 2183, "load"),
             L("torch/nn/modules/module.py", 2177, "load"), L("torch/nn/modules/module.py", 2177, "load"),
             L("torch/nn/modules/module.py", 2189, "load_state_dict"), app("soup_sweep.py", 55, "load_checkpoint"),
             app("soup_sweep.py", 114, "main")] + MAIN[1:])
    NCK, NBATCH = 24, 8
    kept = []
    for ck in range(NCK):
        # torch.load(map_location="cuda") then load_state_dict(assign=True): the old parameters go
        sd = {k: dv.a(v, LOAD, "param") for k, v in psz.items()}
        dv.wait(rng.randint(700000, 1100000))
        for k in psz:
            dv.f(params[k], LSD)
            params[k] = sd[k]
        cache = {}

        def w(key, where):
            """autocast's cached_cast: the fp16 copy of a leaf parameter, kept in the cache."""
            if key not in cache:
                cache[key] = dv.a(psz[key] // 2, where, "cast")
                kept.append(cache[key])
            return cache[key]

        for bi in range(NBATCH):
            img = dv.a(B * 3 * 224 * 224 * 4, S(EVAL(66)), "input")
            lab = dv.a(B * 8, S(EVAL(67)), "input")
            PE = [L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + \
                [(SP + "timm/layers/patch_embed.py", 131, "forward")] + call + MODEL(655)
            S_PE = S(PE)
            xi = dv.a(B * 3 * 224 * 224 * 2, S_PE, "tmp")
            w("patch_embed.proj.weight", S_PE)
            w("patch_embed.proj.bias", S_PE)
            c = dv.a(B * D * 196 * 2, S_PE, "act")
            dv.f(xi)
            x = dv.a(T * D * 4, S([(VT, 590, "_pos_embed")] + MODEL(656)), "act")
            dv.f(c)
            x2 = dv.a(T * D * 4, S([(VT, 597, "_pos_embed")] + MODEL(656)), "act")
            dv.f(x)
            x = x2
            for l in range(NB):
                p = "blocks.%d." % l
                n1 = dv.a(T * D * 4, S(LN(BLK(l, 150))), "act")
                SQ = S(LIN(ATT(l, 89)))
                h = dv.a(T * D * 2, SQ, "tmp")
                w(p + "attn.qkv.weight", SQ)
                w(p + "attn.qkv.bias", SQ)
                qkv = dv.a(T * 3 * D * 2, SQ, "act")
                dv.fl([h, n1])
                SD = S(ATT(l, 93))
                o = dv.a(T * D * 2, SD, "act")
                lse = dv.a(B * 12 * N * 4, SD, "act")
                dv.fl([qkv, lse])
                oc = dv.a(T * D * 2, S(ATT(l, 101)), "act")
                dv.f(o)
                SP_ = S(LIN(ATT(l, 102)))
                w(p + "attn.proj.weight", SP_)
                w(p + "attn.proj.bias", SP_)
                pr = dv.a(T * D * 2, SP_, "act")
                dv.f(oc)
                x2 = dv.a(T * D * 4, S(BLK(l, 150)), "act")
                dv.fl([pr, x])
                x = x2
                n2 = dv.a(T * D * 4, S(LN(BLK(l, 151))), "act")
                S1 = S(LIN(MLP(l, 42)))
                h = dv.a(T * D * 2, S1, "tmp")
                w(p + "mlp.fc1.weight", S1)
                w(p + "mlp.fc1.bias", S1)
                f1 = dv.a(T * FF * 2, S1, "act")
                dv.fl([h, n2])
                g = dv.a(T * FF * 2, S(L.mod("torch/nn/modules/activation.py", 682) + MLP(l, 43)), "act")
                dv.f(f1)
                S2 = S(LIN(MLP(l, 46)))
                w(p + "mlp.fc2.weight", S2)
                w(p + "mlp.fc2.bias", S2)
                f2 = dv.a(T * D * 2, S2, "act")
                dv.f(g)
                x2 = dv.a(T * D * 4, S(BLK(l, 151)), "act")
                dv.fl([f2, x])
                x = x2
            nx = dv.a(T * D * 4, S(LN(MODEL(661))), "act")
            dv.f(x)
            cls = dv.a(B * D * 4, S(MODEL(669, "forward_head")), "act")
            dv.f(nx)
            SH = S(LIN(MODEL(671, "forward_head")))
            h = dv.a(B * D * 2, SH, "tmp")
            w("head.weight", SH)
            w("head.bias", SH)
            logits = dv.a(B * NCLS * 2, SH, "act")
            dv.fl([h, cls])
            am = dv.a(B * 8, S(EVAL(73)), "tmp")
            eq = dv.a(B, S(EVAL(74)), "tmp")
            sm = dv.a(8, S(EVAL(74)), "tmp")
            dv.fl([am, eq, logits, img, lab])
            dv.f(sm)
            dv.wait(rng.randint(90000, 130000))
        dv.wait(rng.randint(200000, 400000))
    info = dict(param_bytes=sum(psz.values()), n_ckpt=NCK, cast_per_ckpt=sum(psz[k] // 2 for k in cast_keys),
                kept_blocks=len(kept), kept_bytes=sum(b.req for b in kept))
    d = write([A])
    return dict(name="m02_vitb16_soup_ckpt_sweep.pickle", data=d, devs=[A], info=info)


# ============================================================================ m03
def build_m03():
    """torch_npu TimesNet (Time-Series-Library) for electricity-load forecasting, written by a
    Chinese team (电力负荷预测): ECL data (321 series), seq_len 96, pred_len 96, d_model 256,
    d_ff 512, top_k 5, 6 Inception kernels, 2 TimesBlocks, batch 32, fp32, Adam (foreach) made in
    the first step, zero_grad() (set to None) at the top of each step.  Ascend 910B, card 7
    (ASCEND_RT_VISIBLE_DEVICES=7, 8 device lists), torch 2.1 + torch_npu 2.1.0.post3.  30 steps,
    a validation pass of 8 batches under no_grad, torch.npu.empty_cache(), then 10 more steps.
    The periods found by the FFT change per batch, so the padded shapes change.  Healthy."""
    rng = random.Random(3803)
    STREAM = 2145283072
    A = sim.Allocator(device=7, stream=STREAM, npu=True, capacity=int(60.96 * GB), time_us=False, base=0x12C0C0000000)
    dv = Dev(A)
    HOME = "/home/ma-user/"
    SP = HOME + "anaconda3/envs/PyTorch-2.1.0/lib/python3.9/site-packages/"
    L = Lib(SP, "2.1")
    app = fr(HOME + "work/电力负荷预测/")
    tsl = fr(HOME + "work/电力负荷预测/Time-Series-Library/")
    call = L.call()
    B, C, SEQ, PRED, DM, DF, K, NK, EL = 32, 321, 96, 96, 256, 512, 5, 6, 2
    TT = SEQ + PRED
    MAIN = [app("训练.py", 208, "主函数"), app("训练.py", 236, "<module>")]
    STEP = lambda line: [app("训练.py", line, "训练一轮"), app("训练.py", 187, "主函数")] + MAIN[1:]
    VAL = lambda line: [app("训练.py", line, "验证"), app("训练.py", 193, "主函数")] + MAIN[1:]
    psz = OrderedDict()
    psz["enc_embedding.value_embedding.tokenConv.weight"] = DM * C * 3 * 4
    psz["predict_linear.weight"] = TT * SEQ * 4
    psz["predict_linear.bias"] = TT * 4
    for l in range(EL):
        for j, (ci, co) in enumerate(((DM, DF), (DF, DM))):
            for kk in range(NK):
                ks = 2 * kk + 1
                psz["model.%d.conv.%d.kernels.%d.weight" % (l, 2 * j, kk)] = co * ci * ks * ks * 4
                psz["model.%d.conv.%d.kernels.%d.bias" % (l, 2 * j, kk)] = co * 4
    psz["layer_norm.weight"] = DM * 4
    psz["layer_norm.bias"] = DM * 4
    psz["projection.weight"] = C * DM * 4
    psz["projection.bias"] = C * 4
    TO = S([(SP + "torch_npu/utils/module.py", 76, "convert"), L("torch/nn/modules/module.py", 825, "_apply"),
            L("torch/nn/modules/module.py", 802, "_apply"), L("torch/nn/modules/module.py", 802, "_apply"),
            (SP + "torch_npu/utils/module.py", 78, "to"), app("训练.py", 171, "主函数")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    # fixed temporal embedding tables (buffers of TemporalEmbedding, embed='fixed')
    for n in (4, 32, 7, 24, 13):
        dv.a(n * DM * 4, TO, "param")
    start_recording(A)
    grads, state = {}, []
    periods_seen = []

    def model(Bb, where, ag):
        """Model.forecast; returns the output block and the list of blocks to free at the end."""
        TN = lambda line, fn="forecast": [tsl("models/TimesNet.py", line, fn)] + \
            ([tsl("models/TimesNet.py", 206, "forward")] if fn != "forward" else []) + call + where
        EMB = lambda line, fn, cls_line: [tsl("layers/Embed.py", line, fn)] + call + [tsl("layers/Embed.py", cls_line, "forward")] + call + TN(169)
        bx = dv.a(Bb * SEQ * C * 4, S(where), "input")
        bm = dv.a(Bb * SEQ * 4 * 4, S(where), "input")
        mean = dv.a(Bb * C * 4, S(TN(160)), "act")
        xc = dv.a(Bb * SEQ * C * 4, S(TN(161)), "act")
        var = dv.a(Bb * C * 4, S(TN(162)), "tmp")
        sd = dv.a(Bb * C * 4, S(TN(162)), "act")
        dv.f(var)
        ag.node("SqrtBackward0", "x", [sd], [])
        x = dv.a(Bb * SEQ * C * 4, S(TN(163)), "act")
        ag.node("DivBackward0", "x", [xc], [Bb * SEQ * C * 4])
        cv = dv.a(Bb * SEQ * DM * 4, S([L("torch/nn/modules/conv.py", 306, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + EMB(42, "forward", 153)), "act")
        pad = dv.a(Bb * C * (SEQ + 2) * 4, S([L("torch/nn/functional.py", 4522, "pad")] + [L("torch/nn/modules/conv.py", 303, "_conv_forward"), L("torch/nn/modules/conv.py", 310, "forward")] + call + EMB(42, "forward", 153)), "act")
        ag.node("ConvolutionBackward0", "x", [pad], [], [("enc_embedding.value_embedding.tokenConv.weight", DM * C * 3 * 4)])
        dv.f(x)
        te = [dv.a(Bb * SEQ * DM * 4, S([L("torch/nn/functional.py", 2233, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + [tsl("layers/Embed.py", 62, "forward")] + call + EMB(line, "forward", 154)), "tmp") for line in (104, 105, 106, 107)]
        tsum = dv.a(Bb * SEQ * DM * 4, S(EMB(109, "forward", 154)), "tmp")
        dv.fl(te)
        e = dv.a(Bb * SEQ * DM * 4, S(EMB(155, "forward", 155)), "act")
        dv.fl([cv, tsum])
        dm = dv.a(Bb * SEQ * DM, S([L("torch/nn/functional.py", 1266, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(156, "forward", 156)), "act")
        ed = dv.a(Bb * SEQ * DM * 4, S([L("torch/nn/functional.py", 1266, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(156, "forward", 156)), "act")
        ag.node("NativeDropoutBackward0", "x", [dm], [Bb * SEQ * DM * 4])
        dv.f(e)
        ep = dv.a(Bb * DM * SEQ * 4, S(TN(170)), "act")
        ag.node("CloneBackward0", "x", [ed], [Bb * SEQ * DM * 4])
        pl = dv.a(Bb * DM * TT * 4, S(L.linear() + TN(170)), "act")
        ag.node("AddmmBackward0", "x", [ep], [Bb * DM * SEQ * 4], [("predict_linear.weight", TT * SEQ * 4), ("predict_linear.bias", TT * 4)])
        x = dv.a(Bb * TT * DM * 4, S(TN(170)), "act")
        dv.f(pl)
        for l in range(EL):
            TB = lambda line, fn="forward": [tsl("models/TimesNet.py", line, fn)] + ([tsl("models/TimesNet.py", 38, "forward")] if fn != "forward" else []) + call + TN(174)
            xf = dv.a(Bb * (TT // 2 + 1) * DM * 8, S(TB(12, "FFT_for_Period")), "act")
            ab = dv.a(Bb * (TT // 2 + 1) * DM * 4, S(TB(14, "FFT_for_Period")), "tmp")
            m0 = dv.a((TT // 2 + 1) * DM * 4, S(TB(14, "FFT_for_Period")), "tmp")
            m1 = dv.a((TT // 2 + 1) * 4, S(TB(14, "FFT_for_Period")), "tmp")
            dv.fl([ab, m0])
            tv = dv.a(K * 4, S(TB(16, "FFT_for_Period")), "tmp")
            ti = dv.a(K * 8, S(TB(16, "FFT_for_Period")), "tmp")
            dv.fl([m1, tv, ti])
            ab2 = dv.a(Bb * (TT // 2 + 1) * DM * 4, S(TB(19, "FFT_for_Period")), "act")
            pw0 = dv.a(Bb * (TT // 2 + 1) * 4, S(TB(19, "FFT_for_Period")), "act")
            pw = dv.a(Bb * K * 4, S(TB(19, "FFT_for_Period")), "act")
            ag.node("AbsBackward0", "x", [xf, ab2], [])
            ag.node("MeanBackward1", "x", [], [])
            dv.f(pw0)
            freqs = sorted(rng.sample([1, 2, 3, 4, 6, 7, 8, 12, 14, 16, 24], K - 1) + [rng.choice([1, 2])])
            periods = [TT // f for f in freqs]
            periods_seen.append(tuple(periods))
            res = []
            for p in periods:
                length = TT if TT % p == 0 else (TT // p + 1) * p
                if length != TT:
                    z = dv.a(Bb * (length - TT) * DM * 4, S(TB(47)), "tmp")
                    o = dv.a(Bb * length * DM * 4, S(TB(48)), "act")
                    dv.f(z)
                else:
                    o = None
                oc = dv.a(Bb * length * DM * 4, S(TB(54)), "act")
                if o is not None:
                    dv.f(o)
                hw = length
                cur, cin = oc, DM
                for j, cout in enumerate((DF, DM)):
                    INC = lambda line: [tsl("layers/Conv_Blocks.py", line, "forward")] + call + [L("torch/nn/modules/container.py", 215, "forward")] + call + TB(56)
                    outs = []
                    for kk in range(NK):
                        outs.append(dv.a(Bb * cout * hw * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + INC(24)), "act"))
                    ag.node("ConvolutionBackward0", "x", [cur], [Bb * cin * hw * 4],
                            [("model.%d.conv.%d.kernels.%d.weight" % (l, 2 * j, kk), cout * cin * (2 * kk + 1) ** 2 * 4) for kk in range(NK)] +
                            [("model.%d.conv.%d.kernels.%d.bias" % (l, 2 * j, kk), cout * 4) for kk in range(NK)])
                    stk = dv.a(Bb * cout * hw * NK * 4, S(INC(25)), "act")
                    dv.fl(outs)
                    mn = dv.a(Bb * cout * hw * 4, S(INC(25)), "act")
                    dv.f(stk)
                    ag.node("StackBackward0", "x", [], [Bb * cout * hw * 4] * 0)
                    if j == 0:
                        g = dv.a(Bb * cout * hw * 4, S(L.mod("torch/nn/modules/activation.py", 682) + [L("torch/nn/modules/container.py", 215, "forward")] + call + TB(56)), "act")
                        ag.node("GeluBackward0", "x", [mn], [Bb * cout * hw * 4])
                        cur, cin = g, DF
                    else:
                        cur = mn
                pr = dv.a(Bb * length * DM * 4, S(TB(58)), "act")
                dv.f(cur)
                res.append(pr)
            stk = dv.a(Bb * TT * DM * K * 4, S(TB(61)), "act")
            for pr in res:
                ag.node("CloneBackward0", "x", [pr], [])
            sm = dv.a(Bb * K * 4, S([L("torch/nn/functional.py", 1856, "softmax")] + TB(63)), "act")
            rp = dv.a(Bb * TT * DM * K * 4, S(TB(64)), "act")
            ag.node("SoftmaxBackward0", "x", [sm, pw], [Bb * K * 4])
            ml = dv.a(Bb * TT * DM * K * 4, S(TB(65)), "tmp")
            sm2 = dv.a(Bb * TT * DM * 4, S(TB(65)), "act")
            dv.f(ml)
            ag.node("MulBackward0", "x", [stk, rp], [Bb * TT * DM * K * 4])
            r = dv.a(Bb * TT * DM * 4, S(TB(67)), "act")
            dv.f(sm2)
            ln = dv.a(Bb * TT * DM * 4, S([L("torch/nn/functional.py", 2546, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 201) + TN(175)), "act")
            mu = dv.a(Bb * TT * 4, S([L("torch/nn/functional.py", 2546, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 201) + TN(175)), "act")
            rs = dv.a(Bb * TT * 4, S([L("torch/nn/functional.py", 2546, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 201) + TN(175)), "act")
            ag.node("NativeLayerNormBackward0", "x", [r, mu, rs], [Bb * TT * DM * 4], [("layer_norm.weight", DM * 4), ("layer_norm.bias", DM * 4)])
            ag.node("AddBackward0", "x", [x], [])
            x = ln
        po = dv.a(Bb * TT * C * 4, S(L.linear() + TN(178)), "act")
        ag.node("AddmmBackward0", "x", [x], [Bb * TT * DM * 4], [("projection.weight", C * DM * 4), ("projection.bias", C * 4)])
        r1 = dv.a(Bb * TT * C * 4, S(TN(181)), "tmp")
        o1 = dv.a(Bb * TT * C * 4, S(TN(181)), "act")
        dv.f(r1)
        ag.node("MulBackward0", "x", [], [Bb * TT * C * 4])
        r2 = dv.a(Bb * TT * C * 4, S(TN(183)), "tmp")
        o2 = dv.a(Bb * TT * C * 4, S(TN(183)), "act")
        dv.fl([r2, po, o1])
        ag.node("AddBackward0", "x", [], [])
        return o2, [bx, bm, mean], [x]

    def train_step(step):
        ag = py_only_ag(dv)
        ZG = S([L("torch/optim/optimizer.py", 820, "zero_grad"), L("torch/_compile.py", 24, "inner")] + STEP(121))
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        out, keep, last = model(B, STEP(128), ag)
        by = dv.a(B * (48 + PRED) * C * 4, S(STEP(125)), "input")
        sl = dv.a(B * PRED * C * 4, S(STEP(131)), "tmp")
        df = dv.a(B * PRED * C * 4, S([L("torch/nn/functional.py", 3338, "mse_loss")] + L.mod("torch/nn/modules/loss.py", 535) + STEP(133)), "act")
        sq = dv.a(B * PRED * C * 4, S([L("torch/nn/functional.py", 3338, "mse_loss")] + L.mod("torch/nn/modules/loss.py", 535) + STEP(133)), "tmp")
        loss = dv.a(4, S([L("torch/nn/functional.py", 3338, "mse_loss")] + L.mod("torch/nn/modules/loss.py", 535) + STEP(133)), "act")
        dv.f(sq)
        ag.node("MseLossBackward0", "x", [df, out], [])
        ag.backward(grads)
        for k, v in psz.items():
            if k not in grads:
                grads[k] = dv.a(v, NOSTACK, "grad")
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), app("训练.py", 136, "训练一轮"), app("训练.py", 187, "主函数")] + MAIN[1:]
        if not state:
            for v in psz.values():
                state.append(dv.a(v, S([L("torch/optim/adam.py", 112, "_init_group"), L("torch/optim/adam.py", 157, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                state.append(dv.a(v, S([L("torch/optim/adam.py", 114, "_init_group"), L("torch/optim/adam.py", 157, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adam.py", 564, "_multi_tensor_adam"), L("torch/optim/adam.py", 352, "adam"), L("torch/optim/adam.py", 168, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        li = dv.a(8, S(STEP(138)), "tmp")
        dv.f(li)
        dv.fl(keep + [by, sl, loss])

    for step in range(30):
        train_step(step)
    # validation under no_grad
    for vb in range(8):
        ag = py_only_ag(dv)
        out, keep, last = model(B, VAL(96), ag)
        # under no_grad nothing is saved: free what the recorder kept, in order
        held = []
        for nd in ag.nodes:
            held.extend(nd[2])
        ag.nodes = []
        seen = set()
        for b in held:
            if id(b) not in seen:
                seen.add(id(b))
                dv.f(b)
        by = dv.a(B * (48 + PRED) * C * 4, S(VAL(93)), "input")
        l1 = dv.a(B * PRED * C * 4, S(VAL(99)), "tmp")
        l2 = dv.a(8, S(VAL(100)), "tmp")
        dv.fl([l1, out, by, l2] + keep)
    EC = S([(SP + "torch_npu/npu/memory.py", 144, "empty_cache"), app("训练.py", 195, "主函数")] + MAIN[1:])
    A.empty_cache(EC)
    for step in range(30, 40):
        train_step(step)
    info = dict(param_bytes=sum(psz.values()) + sum(n * DM * 4 for n in (4, 32, 7, 24, 13)), weights=sum(psz.values()),
                opt_bytes=2 * sum(psz.values()), steps=40, periods=periods_seen)
    d = write([A], kind="npu", n_dev_lists=8)
    return dict(name="m03_npu_timesnet_ecl_card7.pkl", data=d, devs=[A], info=info)


# ============================================================================ m04
def build_m04(tune=None):
    """Population-based training of nanoGPT-style decoders on OpenWebText, one process driving two
    GPUs (2x RTX 3060 12 GB): 8 members per GPU, n_layer 4, n_head 8, block 256, batch 10, vocabulary
    50,304 (tied head), fp32, AdamW (foreach) made at each member's first step, zero_grad(set_to_none)
    after each step.  Member widths n_embd differ (384-1024).  Each round trains every member 3 steps
    and evaluates it on 2 batches; then the two worst members of each GPU are replaced by copies of
    the best one of that GPU (new model of the winner's width, load_state_dict, and a deepcopy of
    the winner's optimizer state), which is how widths drift upwards.
    _record_memory_history() before the population was built; dumped in the except handler of the
    torch.cuda.OutOfMemoryError raised on cuda:1.  Problem: fragmentation."""
    tune = tune or {}
    rng = random.Random(3804)
    clock = sim.Clock(1734528000000000, rng, (2, 8))
    CAP = int(tune.get("cap", 11.76 * GB))
    As = [sim.Allocator(device=d, capacity=CAP, clock=clock, base=base, other_usage=int(tune.get("other", 0.45) * GB))
          for d, base in ((0, 0x7F3A80000000), (1, 0x7F0B20000000))]
    for A in As:
        A.free_us_per_gb = 90000
    dvs = [Dev(A) for A in As]
    SP = "/home/ubuntu/miniconda3/envs/pbt/lib/python3.11/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/home/ubuntu/pbt-nanogpt/")
    call = L.call()
    NL, H, T, B, V = tune.get("nl", 4), 8, 256, tune.get("b", 10), 50304
    BT = B * T
    MAIN = [app("pbt.py", 248, "main"), app("pbt.py", 281, "<module>")]
    RND = lambda line, fn: [app("pbt.py", line, fn), app("pbt.py", 231, "main")] + MAIN[1:]
    TRN = lambda line: [app("pbt.py", line, "train_member")] + RND(209, "run_round")
    EVL = lambda line: [app("pbt.py", line, "eval_member")] + RND(213, "run_round")
    EXP = lambda line: [app("pbt.py", line, "exploit")] + RND(221, "run_round")

    def pnames(d):
        ps = OrderedDict()
        ps["wte"] = V * d * 4
        ps["wpe"] = T * d * 4
        for l in range(NL):
            p = "h.%d." % l
            ps[p + "ln_1.w"] = d * 4
            ps[p + "ln_1.b"] = d * 4
            ps[p + "attn.c_attn.w"] = 3 * d * d * 4
            ps[p + "attn.c_attn.b"] = 3 * d * 4
            ps[p + "attn.c_proj.w"] = d * d * 4
            ps[p + "attn.c_proj.b"] = d * 4
            ps[p + "ln_2.w"] = d * 4
            ps[p + "ln_2.b"] = d * 4
            ps[p + "mlp.c_fc.w"] = 4 * d * d * 4
            ps[p + "mlp.c_fc.b"] = 4 * d * 4
            ps[p + "mlp.c_proj.w"] = 4 * d * d * 4
            ps[p + "mlp.c_proj.b"] = d * 4
        ps["ln_f.w"] = d * 4
        ps["ln_f.b"] = d * 4
        return ps

    class Member:
        pass

    def build(dv, d, where):
        m = Member()
        m.d = d
        m.ps = pnames(d)
        TO = S(L.convert() + where)
        m.p = OrderedDict((k, dv.a(v, TO, "param")) for k, v in m.ps.items())
        m.state = None
        m.dv = dv
        return m

    widths = tune.get("widths", [[384, 512, 640, 768, 512, 640, 384, 768], [512, 768, 1024, 640, 768, 512, 1024, 640]])
    pop = []
    for g in (0, 1):
        for i, d in enumerate(widths[g]):
            pop.append((g, build(dvs[g], d, [app("pbt.py", 62, "__init__"), app("pbt.py", 229, "main")] + MAIN[1:])))
    GPTF = lambda line, fn="forward": [app("model.py", line, fn)] + call
    def fwd(m, where, train):
        dv = m.dv
        d = m.d
        ag = py_only_ag(dv)
        held = []
        M = lambda line: GPTF(line) + where
        BLK = lambda l, line: GPTF(line) + M(181)
        ATT = lambda l, line: GPTF(line) + BLK(l, 104)
        MLP = lambda l, line: GPTF(line) + BLK(l, 105)
        LIN = lambda w: L.linear() + w
        LN = lambda w: [L("torch/nn/functional.py", 2576, "layer_norm")] + GPTF(26) + w
        idx = dv.a(BT * 8, S(where), "input")
        tgt = dv.a(BT * 8, S(where), "input")
        pos = dv.a(T * 8, S(M(174)), "act")
        te = dv.a(BT * d * 4, S([L("torch/nn/functional.py", 2264, "embedding")] + L.mod("torch/nn/modules/sparse.py", 163) + M(177)), "act")
        pe = dv.a(T * d * 4, S([L("torch/nn/functional.py", 2264, "embedding")] + L.mod("torch/nn/modules/sparse.py", 163) + M(178)), "act")
        x = dv.a(BT * d * 4, S(M(179)), "act")
        dv.fl([te, pe])
        ag.node("EmbeddingBackward0", "x", [pos], [], [("wte", V * d * 4), ("wpe", T * d * 4)])

        def ln(x, w, key):
            o = dv.a(BT * d * 4, S(LN(w)), "act")
            mu = dv.a(BT * 4, S(LN(w)), "act")
            rs = dv.a(BT * 4, S(LN(w)), "act")
            ag.node("NativeLayerNormBackward0", "x", [mu, rs], [BT * d * 4], [(key + ".w", d * 4), (key + ".b", d * 4)])
            return o
        for l in range(NL):
            p = "h.%d." % l
            a = ln(x, BLK(l, 104), p + "ln_1")
            qkv = dv.a(BT * 3 * d * 4, S(LIN(ATT(l, 56))), "act")
            ag.node("AddmmBackward0", "x", [a], [BT * d * 4], [(p + "attn.c_attn.w", 3 * d * d * 4), (p + "attn.c_attn.b", 3 * d * 4)])
            o = dv.a(BT * d * 4, S(ATT(l, 62)), "act")
            lse = dv.a(B * H * T * 4, S(ATT(l, 62)), "act")
            ag.node("ScaledDotProductEfficientAttentionBackward0", "x", [qkv, lse], [BT * 3 * d * 4])
            oc = dv.a(BT * d * 4, S(ATT(l, 68)), "act")
            ag.node("CloneBackward0", "x", [o], [])
            pr = dv.a(BT * d * 4, S(LIN(ATT(l, 71))), "act")
            ag.node("AddmmBackward0", "x", [oc], [BT * d * 4], [(p + "attn.c_proj.w", d * d * 4), (p + "attn.c_proj.b", d * 4)])
            x2 = dv.a(BT * d * 4, S(BLK(l, 104)), "act")
            dv.f(pr)
            ag.node("AddBackward0", "x", [x], [])
            x = x2
            a = ln(x, BLK(l, 105), p + "ln_2")
            h = dv.a(BT * 4 * d * 4, S(LIN(MLP(l, 86))), "act")
            ag.node("AddmmBackward0", "x", [a], [BT * d * 4], [(p + "mlp.c_fc.w", 4 * d * d * 4), (p + "mlp.c_fc.b", 4 * d * 4)])
            g = dv.a(BT * 4 * d * 4, S(L.mod("torch/nn/modules/activation.py", 682) + MLP(l, 87)), "act")
            ag.node("GeluBackward0", "x", [h], [BT * 4 * d * 4])
            c = dv.a(BT * d * 4, S(LIN(MLP(l, 88))), "act")
            ag.node("AddmmBackward0", "x", [g], [BT * 4 * d * 4], [(p + "mlp.c_proj.w", 4 * d * d * 4), (p + "mlp.c_proj.b", d * 4)])
            x2 = dv.a(BT * d * 4, S(BLK(l, 105)), "act")
            dv.f(c)
            ag.node("AddBackward0", "x", [x], [])
            x = x2
        xf = ln(x, M(183), "ln_f")
        ag.node("AddBackward0", "x", [x], [])
        logits = dv.a(BT * V * 4, S(LIN(M(187))), "act")
        ag.node("MmBackward0", "x", [xf], [BT * d * 4], [("wte", V * d * 4)])
        CE = [L("torch/nn/functional.py", 3086, "cross_entropy")] + M(188)
        lp = dv.a(BT * V * 4, S(CE), "act")
        nll = dv.a(4, S(CE), "act")
        if not train:
            for nd in ag.nodes:
                held.extend(nd[2])
            ag.nodes = []
            dv.fl(held)
            dv.fl([lp, nll, logits, idx, tgt])
            return None
        return ag, logits, lp, nll, [idx, tgt]

    def train_step(m, g):
        dv = m.dv
        ag, logits, lp, nll, inp = fwd(m, TRN(143), True)
        grads = {}
        g1 = dv.a(BT * V * 4, NOSTACK, "tmp")
        dv.f(nll)
        g2 = dv.a(BT * V * 4, NOSTACK, "tmp")
        dv.f(g1)
        dv.f(lp)
        ag.backward(grads, [g2])
        for k, v in m.ps.items():
            if k not in grads:
                grads[k] = dv.a(v, NOSTACK, "grad")
        dv.f(logits)
        OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), app("pbt.py", 147, "train_member")] + RND(209, "run_round")
        if m.state is None:
            m.state = []
            for k, v in m.ps.items():
                m.state.append(dv.a(v, S([L("torch/optim/adamw.py", 122, "_init_group"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                m.state.append(dv.a(v, S([L("torch/optim/adamw.py", 126, "_init_group"), L("torch/optim/adamw.py", 187, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 601, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 198, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in m.ps.values()]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 822, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("pbt.py", 148, "train_member")] + RND(209, "run_round"))
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        dv.fl(inp)
        dv.wait(rng.randint(40000, 90000) * m.d // 512)

    oom = None
    replaced = []
    rounds = tune.get("rounds", 6)
    try:
        for r in range(rounds):
            for g, m in pop:
                for s in range(3):
                    train_step(m, g)
            scores = {}
            for i, (g, m) in enumerate(pop):
                for e in range(2):
                    fwd(m, EVL(166), False)
                scores[i] = rng.random() - 0.0004 * m.d
            for g in (0, 1):
                idxs = [i for i, (gg, m) in enumerate(pop) if gg == g]
                order = sorted(idxs, key=lambda i: scores[i])
                best = order[0]
                for loser in order[-2:]:
                    w = pop[best][1]
                    old = pop[loser][1]
                    dv = dvs[g]
                    new = build(dv, w.d, [app("pbt.py", 104, "exploit"), app("pbt.py", 221, "run_round"), app("pbt.py", 231, "main")] + MAIN[1:])
                    for k in old.ps:
                        dv.f(old.p[k], S([app("pbt.py", 105, "exploit"), app("pbt.py", 221, "run_round"), app("pbt.py", 231, "main")] + MAIN[1:]))
                    if w.state is not None:
                        DC = S([L("torch/_tensor.py", 109, "__deepcopy__"), ("/home/ubuntu/miniconda3/envs/pbt/lib/python3.11/copy.py", 153, "deepcopy"),
                                ("/home/ubuntu/miniconda3/envs/pbt/lib/python3.11/copy.py", 231, "_deepcopy_dict"),
                                ("/home/ubuntu/miniconda3/envs/pbt/lib/python3.11/copy.py", 146, "deepcopy"),
                                app("pbt.py", 108, "exploit"), app("pbt.py", 221, "run_round"), app("pbt.py", 231, "main")] + MAIN[1:])
                        new.state = [dv.a(b.req, DC, "opt") for b in w.state]
                    if old.state is not None:
                        dv.fl(old.state, S([app("pbt.py", 111, "exploit"), app("pbt.py", 221, "run_round"), app("pbt.py", 231, "main")] + MAIN[1:]))
                    pop[loser] = (g, new)
                    replaced.append((r, g, old.d, w.d))
    except sim.OOMError as e:
        oom = dict(size=e.size, free=e.free)
    info = dict(oom=oom, replaced=replaced, widths=[(g, m.d) for g, m in pop])
    d = write(As)
    return dict(name="m04_pbt_nanogpt_owt_2gpu.pickle", data=d, devs=As, info=info)


# ============================================================================ m05
def build_m05():
    """LayoutLMv3-base (125.9 M parameters, fp32 master weights) fine-tuned for RVL-CDIP document
    classification (16 classes) with the Hugging Face Trainer: fp16=True (autocast + GradScaler),
    batch 8, 512 text tokens with boxes + 224x224 page image (197 visual tokens: 709 tokens),
    AdamW (foreach) made in the first step, max_grad_norm 1.0, model.zero_grad() (set to None) after
    each step.  RTX A5000 (24 GB), torch 2.0.1, transformers 4.30.2 (2023 format: no time_us, no
    allocator_settings).  _record_memory_history() in a TrainerCallback at on_train_begin; dump after
    12 steps.  Healthy."""
    rng = random.Random(3805)
    A = sim.Allocator(device=0, capacity=int(23.68 * GB), time_us=False, base=0x7FB0E2000000)
    dv = Dev(A)
    SP = "/home/docai/anaconda3/envs/lmv3/lib/python3.10/site-packages/"
    L = Lib(SP, "2.0")
    app = fr("/home/docai/rvlcdip/")
    call = L.call()
    B, NT, NV, D, FF, H, NLy, V, NC = 8, 512, 197, 768, 3072, 12, 12, 50265, 16
    Lq = NT + NV
    TK = B * Lq
    SC = B * H * Lq * Lq
    TR = SP + "transformers/trainer.py"
    LM = SP + "transformers/models/layoutlmv3/modeling_layoutlmv3.py"
    MAIN = [app("run_rvlcdip.py", 187, "main"), app("run_rvlcdip.py", 201, "<module>")]
    LOOP = lambda line: [(TR, line, "_inner_training_loop"), (TR, 1645, "train")] + MAIN
    TSTEP = lambda line: [(TR, line, "training_step")] + LOOP(1938)
    CL = lambda line: [(TR, line, "compute_loss")] + TSTEP(2759)
    SEQ = lambda line: [(LM, line, "forward")] + call + CL(2801)
    MOD = lambda line, fn="forward": [(LM, line, fn)] + ([(LM, 1065, "forward")] if fn != "forward" else []) + call + SEQ(1216)
    ENC = lambda line: [(LM, line, "forward")] + call + MOD(1113)
    LAY = lambda line: [(LM, line, "forward")] + call + ENC(680)
    ATT = lambda line: [(LM, line, "forward")] + call + LAY(545)
    SELF = lambda line, fn="forward": [(LM, line, fn)] + ([(LM, 374, "forward")] if fn != "forward" else []) + call + ATT(473)
    INTER = lambda line: [(LM, line, "forward")] + call + LAY(560)
    OUT = lambda line: [(LM, line, "forward")] + call + LAY(561)
    SOUT = lambda line: [(LM, line, "forward")] + call + ATT(474)
    LIN = lambda w: [L("torch/nn/modules/linear.py", 114, "forward")] + call + w
    LN = lambda w: [L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + w
    DR = lambda w: [L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + w
    psz = OrderedDict()
    psz["embeddings.word_embeddings"] = V * D * 4
    psz["embeddings.position_embeddings"] = 514 * D * 4
    psz["embeddings.token_type_embeddings"] = D * 4
    for a in "xyhw":
        psz["embeddings.%s_position_embeddings" % a] = 1024 * 128 * 4
    psz["embeddings.LayerNorm.weight"] = D * 4
    psz["embeddings.LayerNorm.bias"] = D * 4
    psz["cls_token"] = D * 4
    psz["pos_embed"] = NV * D * 4
    psz["patch_embed.proj.weight"] = D * 3 * 16 * 16 * 4
    psz["patch_embed.proj.bias"] = D * 4
    psz["LayerNorm.weight"] = D * 4
    psz["LayerNorm.bias"] = D * 4
    psz["norm.weight"] = D * 4
    psz["norm.bias"] = D * 4
    psz["rel_pos_bias.weight"] = H * 32 * 4
    psz["rel_pos_x_bias.weight"] = H * 64 * 4
    psz["rel_pos_y_bias.weight"] = H * 64 * 4
    lin_keys = ["patch_embed.proj"]
    for l in range(NLy):
        p = "encoder.layer.%d." % l
        for w in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            psz[p + w + ".weight"] = D * D * 4
            psz[p + w + ".bias"] = D * 4
            lin_keys.append(p + w)
        psz[p + "attention.output.LayerNorm.weight"] = D * 4
        psz[p + "attention.output.LayerNorm.bias"] = D * 4
        psz[p + "intermediate.dense.weight"] = FF * D * 4
        psz[p + "intermediate.dense.bias"] = FF * 4
        psz[p + "output.dense.weight"] = D * FF * 4
        psz[p + "output.dense.bias"] = D * 4
        psz[p + "output.LayerNorm.weight"] = D * 4
        psz[p + "output.LayerNorm.bias"] = D * 4
        lin_keys += [p + "intermediate.dense", p + "output.dense"]
    psz["classifier.dense.weight"] = D * D * 4
    psz["classifier.dense.bias"] = D * 4
    psz["classifier.out_proj.weight"] = NC * D * 4
    psz["classifier.out_proj.bias"] = NC * 4
    lin_keys += ["classifier.dense", "classifier.out_proj"]
    TO = S(L.convert()[:4] + [L("torch/nn/modules/module.py", 1145, "to"), (TR, 745, "_move_model_to_device"), (TR, 503, "__init__"), app("run_rvlcdip.py", 171, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, []
    STEPS = 12
    for step in range(STEPS):
        PREP = S([L("accelerate/utils/operations.py", 137, "send_to_device"), (TR, 2686, "_prepare_input"), (TR, 2699, "_prepare_inputs"),
                  (TR, 2745, "training_step")] + LOOP(1938))
        ins = [dv.a(B * NT * 8, PREP, "input"), dv.a(B * NT * 4 * 8, PREP, "input"), dv.a(B * NT * 8, PREP, "input"),
               dv.a(B * 3 * 224 * 224 * 4, PREP, "input"), dv.a(B * 8, PREP, "input")]
        ag = py_only_ag(dv)
        casts = {}

        def wcast(key, where):
            """autocast's cached fp16 copy of a weight (and bias), saved for backward."""
            if key not in casts:
                casts[key] = [dv.a(psz[key + ".weight"] // 2, where, "cast"), dv.a(psz[key + ".bias"] // 2, where, "cast")]
            return casts[key]

        def linear(x16, key, tokens, dout, where, din=D):
            st = S(LIN(where))
            xi = dv.a(tokens * din * 2, st, "act") if x16 is None else x16
            wc = wcast(key, st)
            o = dv.a(tokens * dout * 2, st, "act")
            ag.node("AddmmBackward0", "x", ([xi] if x16 is None else []) + [wc[0]], [tokens * din * 4], [(key + ".weight", psz[key + ".weight"]), (key + ".bias", psz[key + ".bias"])])
            ag.node("ToCopyBackward0", "x", [wc[1]], [])
            return o
        # ---- text embeddings
        EMB = lambda line, fn="forward": [(LM, line, fn)] + ([(LM, 293, "forward")] if fn != "forward" else []) + call + MOD(1051)
        E = lambda line, fn="forward": S([L("torch/nn/functional.py", 2210, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + EMB(line, fn))
        pid = dv.a(B * NT * 8, S(EMB(280, "create_position_ids_from_input_ids")), "act")
        we = dv.a(B * NT * D * 4, E(296), "act")
        ag.node("EmbeddingBackward0", "x", [], [], [("embeddings.word_embeddings", V * D * 4)])
        tt = dv.a(B * NT * D * 4, E(297), "act")
        pe = dv.a(B * NT * D * 4, E(302), "act")
        sp = [dv.a(B * NT * 128 * 4, E(l_, "calculate_spatial_position_embeddings"), "act") for l_ in (252, 253, 254, 255, 257, 258)]
        spc = dv.a(B * NT * D * 4, E(262, "calculate_spatial_position_embeddings"), "act")
        dv.fl(sp)
        ag.node("EmbeddingBackward0", "x", [], [], [("embeddings.%s_position_embeddings" % a, 1024 * 128 * 4) for a in "xyhw"])
        e1 = dv.a(B * NT * D * 4, S(EMB(303)), "act")
        dv.fl([we, tt])
        e2 = dv.a(B * NT * D * 4, S(EMB(305)), "act")
        dv.fl([e1, pe, spc])
        ln = dv.a(B * NT * D * 4, S(LN(EMB(307))), "act")
        ag.node("NativeLayerNormBackward0", "x", [e2], [B * NT * D * 4], [("embeddings.LayerNorm.weight", D * 4), ("embeddings.LayerNorm.bias", D * 4)])
        tm = dv.a(B * NT * D, S(DR(EMB(308))), "act")
        td = dv.a(B * NT * D * 4, S(DR(EMB(308))), "act")
        dv.f(ln)
        ag.node("NativeDropoutBackward0", "x", [tm, pid], [B * NT * D * 4])
        # ---- visual embeddings
        PE = [L("torch/nn/modules/conv.py", 459, "_conv_forward"), L("torch/nn/modules/conv.py", 463, "forward")] + call + [(LM, 156, "forward")] + call + MOD(1060, "forward_image")
        xi = dv.a(B * 3 * 224 * 224 * 2, S(PE), "act")
        wcast("patch_embed.proj", S(PE))
        pv = dv.a(B * D * 196 * 2, S(PE), "act")
        ag.node("ConvolutionBackward0", "x", [xi] + casts["patch_embed.proj"], [], [("patch_embed.proj.weight", D * 768 * 4), ("patch_embed.proj.bias", D * 4)])
        vc = dv.a(B * NV * D * 4, S(MOD(1030, "forward_image")), "act")
        dv.f(pv)
        vp = dv.a(B * NV * D * 4, S(MOD(1036, "forward_image")), "act")
        dv.f(vc)
        vn = dv.a(B * NV * D * 4, S(LN(MOD(1039, "forward_image"))), "act")
        ag.node("NativeLayerNormBackward0", "x", [vp], [B * NV * D * 4], [("norm.weight", D * 4), ("norm.bias", D * 4)])
        # ---- concatenate, LayerNorm, dropout
        cat = dv.a(TK * D * 4, S(MOD(1066)), "act")
        dv.fl([td, vn])
        cl = dv.a(TK * D * 4, S(LN(MOD(1067))), "act")
        ag.node("NativeLayerNormBackward0", "x", [cat], [TK * D * 4], [("LayerNorm.weight", D * 4), ("LayerNorm.bias", D * 4)])
        cm = dv.a(TK * D, S(DR(MOD(1068))), "act")
        x = dv.a(TK * D * 4, S(DR(MOD(1068))), "act")
        dv.f(cl)
        ag.node("NativeDropoutBackward0", "x", [cm], [TK * D * 4])
        ext = dv.a(B * Lq * 4, S([(SP + "transformers/modeling_utils.py", 884, "get_extended_attention_mask")] + MOD(1085)), "act")
        # ---- relative position biases, once per forward (kept by every layer)
        rels = []
        for fn, nbias, key in (("_cal_1d_pos_emb", 32, "rel_pos_bias.weight"), ("_cal_2d_pos_emb", 64, "rel_pos_x_bias.weight"), ("_cal_2d_pos_emb", 64, "rel_pos_y_bias.weight")):
            BK = lambda line: S([(LM, line, "relative_position_bucket"), (LM, 638 if fn == "_cal_1d_pos_emb" else 652, fn), (LM, 665 if fn == "_cal_1d_pos_emb" else 666, "forward")] + call + MOD(1113))
            mat = dv.a(B * Lq * Lq * 8, BK(598), "tmp")
            t = [dv.a(B * Lq * Lq * 8, BK(l_), "tmp") for l_ in (610, 612, 613)]
            dv.fl(t[:2])
            lg = dv.a(B * Lq * Lq * 4, BK(616), "tmp")
            vl = dv.a(B * Lq * Lq * 8, BK(620), "tmp")
            dv.f(lg)
            bk = dv.a(B * Lq * Lq * 8, BK(624), "act")
            dv.fl([mat, t[2], vl])
            G = S([(LM, 640 if fn == "_cal_1d_pos_emb" else 656, fn), (LM, 665 if fn == "_cal_1d_pos_emb" else 666, "forward")] + call + MOD(1113))
            g = dv.a(B * Lq * Lq * H * 4, G, "tmp")
            ag.node("IndexBackward0", "x", [bk], [], [(key, H * nbias * 4)])
            c = dv.a(B * Lq * Lq * H * 4, S([(LM, 641 if fn == "_cal_1d_pos_emb" else 657, fn), (LM, 665 if fn == "_cal_1d_pos_emb" else 666, "forward")] + call + MOD(1113)), "act")
            dv.f(g)
            rels.append(c)
        r2d = dv.a(SC * 4, S([(LM, 659, "_cal_2d_pos_emb"), (LM, 666, "forward")] + call + MOD(1113)), "act")
        dv.fl(rels[1:])
        rel1 = rels[0]
        for l in range(NLy):
            p = "encoder.layer.%d." % l
            q = linear(None, p + "attention.self.query", TK, D, SELF(347))
            k = linear(None, p + "attention.self.key", TK, D, SELF(348))
            v = linear(None, p + "attention.self.value", TK, D, SELF(349))
            qd = dv.a(TK * D * 2, S(SELF(355)), "act")
            dv.f(q)
            qc = dv.a(TK * D * 2, S(SELF(355)), "act")
            kc = dv.a(TK * D * 2, S(SELF(355)), "act")
            dv.f(qd)
            s_ = dv.a(SC * 2, S(SELF(355)), "act")
            ag.node("BmmBackward0", "x", [qc, kc, k], [TK * D * 2, TK * D * 2])
            r = dv.a(SC * 4, S(SELF(358)), "tmp")
            r2 = dv.a(SC * 4, S(SELF(358)), "tmp")
            dv.f(r)
            dv.f(r2)
            am = dv.a(SC * 4, S(SELF(364)), "act")
            dv.f(s_)
            CV = lambda line: S(SELF(line, "cogview_attention"))
            a1 = dv.a(SC * 4, CV(327), "act")
            dv.f(am)
            mx = dv.a(B * H * Lq * 4, CV(328), "act")
            a2 = dv.a(SC * 4, CV(329), "act")
            dv.fl([a1, mx])
            a3 = dv.a(SC * 4, CV(329), "act")
            dv.f(a2)
            pr = dv.a(SC * 4, S([L("torch/nn/functional.py", 1843, "softmax")] + L.mod("torch/nn/modules/activation.py", 1514) + SELF(330, "cogview_attention")), "act")
            dv.f(a3)
            ag.node("SoftmaxBackward0", "x", [pr], [SC * 4])
            dm = dv.a(SC, S(DR(SELF(372))), "act")
            dd = dv.a(SC * 4, S(DR(SELF(372))), "act")
            ag.node("NativeDropoutBackward0", "x", [dm], [SC * 4])
            d16 = dv.a(SC * 2, S(SELF(378)), "act")
            dv.f(dd)
            ctx = dv.a(TK * D * 2, S(SELF(378)), "act")
            ag.node("BmmBackward0", "x", [d16, v], [SC * 2, TK * D * 2])
            cc = dv.a(TK * D * 2, S(SELF(380)), "act")
            dv.f(ctx)
            o = linear(cc, p + "attention.output.dense", TK, D, SOUT(403))
            ag.node("CloneBackward0", "x", [cc], [])
            om = dv.a(TK * D, S(DR(SOUT(404))), "act")
            od = dv.a(TK * D * 2, S(DR(SOUT(404))), "act")
            dv.f(o)
            ag.node("NativeDropoutBackward0", "x", [om], [TK * D * 2])
            ad = dv.a(TK * D * 4, S(SOUT(405)), "act")
            dv.f(od)
            x1 = dv.a(TK * D * 4, S(LN(SOUT(405))), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad], [TK * D * 4], [(p + "attention.output.LayerNorm.weight", D * 4), (p + "attention.output.LayerNorm.bias", D * 4)])
            ag.node("AddBackward0", "x", [x], [])
            hi = linear(None, p + "intermediate.dense", TK, FF, INTER(419))
            ge = dv.a(TK * FF * 2, S([L("torch/nn/modules/activation.py", 684, "forward")] + call + [(SP + "transformers/activations.py", 78, "forward")] + call + INTER(420)), "act")
            ag.node("GeluBackward0", "x", [hi], [TK * FF * 2])
            ho = linear(ge, p + "output.dense", TK, D, OUT(433), din=FF)
            ag.node("CloneBackward0", "x", [ge], [])
            hm = dv.a(TK * D, S(DR(OUT(434))), "act")
            hd = dv.a(TK * D * 2, S(DR(OUT(434))), "act")
            dv.f(ho)
            ag.node("NativeDropoutBackward0", "x", [hm], [TK * D * 2])
            ad = dv.a(TK * D * 4, S(OUT(435)), "act")
            dv.f(hd)
            x2 = dv.a(TK * D * 4, S(LN(OUT(435))), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad], [TK * D * 4], [(p + "output.LayerNorm.weight", D * 4), (p + "output.LayerNorm.bias", D * 4)])
            ag.node("AddBackward0", "x", [x1], [])
            x = x2
        ag.node("AddBackward0", "x", [rel1, r2d, ext], [])
        # ---- classification head on the CLS token
        HEAD = lambda line: [(LM, line, "forward")] + call + SEQ(1225)
        h1 = linear(None, "classifier.dense", B, D, HEAD(1170))
        th = dv.a(B * D * 2, S(HEAD(1171)), "act")
        ag.node("TanhBackward0", "x", [th, x], [B * D * 2])
        lo = linear(th, "classifier.out_proj", B, NC, HEAD(1173))
        dv.f(h1)
        CE = S([L("torch/nn/functional.py", 3029, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1174) + SEQ(1248))
        lp = dv.a(B * NC * 4, CE, "act")
        loss = dv.a(4, CE, "act")
        ag.node("LogSoftmaxBackward0", "x", [lp], [B * NC * 4])
        # Trainer: accelerator.backward(loss) -> scaler.scale(loss).backward()
        BWD = S([L("torch/cuda/amp/grad_scaler.py", 164, "scale"), (SP + "accelerate/accelerator.py", 1851, "backward")] + TSTEP(2770))
        sl = dv.a(4, BWD, "act")
        ag.backward(grads)
        for kk, vv in psz.items():
            if kk not in grads:
                grads[kk] = dv.a(vv, NOSTACK, "grad")
        dv.fl([lo, loss, sl])
        # clip_grad_norm_ with unscale_ first
        UN = S([L("torch/cuda/amp/grad_scaler.py", 232, "_unscale_grads_"), L("torch/cuda/amp/grad_scaler.py", 284, "unscale_"),
                (SP + "accelerate/accelerator.py", 1914, "unscale_gradients"), (SP + "accelerate/accelerator.py", 1960, "clip_grad_norm_")] + LOOP(1987))
        fi = dv.a(4, UN, "tmp")
        CN = lambda line: S([L("torch/nn/utils/clip_grad.py", line, "clip_grad_norm_"), (SP + "accelerate/accelerator.py", 1962, "clip_grad_norm_")] + LOOP(1987))
        norms = [dv.a(4, CN(55), "tmp") for _ in psz]
        tot = dv.a(4, CN(55), "tmp")
        dv.fl(norms)
        coef = dv.a(4, CN(56), "tmp")
        cc2 = dv.a(4, CN(57), "tmp")
        dv.fl([coef, cc2])
        OPT = [L("torch/optim/optimizer.py", 280, "wrapper"), L("torch/cuda/amp/grad_scaler.py", 314, "_maybe_opt_step"),
               L("torch/cuda/amp/grad_scaler.py", 374, "step"), (SP + "accelerate/optimizer.py", 132, "step")] + LOOP(2009)
        if not state:
            for kk, vv in psz.items():
                state.append(dv.a(vv, S([L("torch/optim/adamw.py", 111, "_init_group"), L("torch/optim/adamw.py", 160, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
                state.append(dv.a(vv, S([L("torch/optim/adamw.py", 113, "_init_group"), L("torch/optim/adamw.py", 160, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 476, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 331, "adamw"), L("torch/optim/adamw.py", 171, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT)
        tmp = [dv.a(vv, FE, "tmp") for vv in psz.values()]
        dv.fl(tmp)
        dv.fl([fi, tot])
        ZG = S([L("torch/nn/modules/module.py", 2403, "zero_grad")] + LOOP(2020))
        for kk in list(grads):
            dv.f(grads.pop(kk), ZG)
        dv.fl(ins)
    info = dict(param_bytes=sum(psz.values()), opt_bytes=2 * sum(psz.values()), steps=STEPS,
                cast_bytes=sum(psz[k + ".weight"] // 2 + psz[k + ".bias"] // 2 for k in lin_keys), score_block=SC * 4)
    d = write([A], settings=False)
    return dict(name="m05_layoutlmv3_rvlcdip_2023.pickle", data=d, devs=[A], info=info)


# ============================================================================ m06
def build_m06():
    """One Ray Tune trial (ASHA search, tune.with_resources(train_vit, {"gpu": 0.5}): two trials share
    each GPU) fine-tuning timm vit_small_patch16_224 (22.1 M parameters, fp32, fused SDPA) on
    CIFAR-100 upscaled to 224x224, this trial's config batch 160, AdamW (foreach) made in the first
    step, zero_grad(set_to_none=True).  A10G (24 GB), torch 2.2, timm 0.9.12, ray 2.9.
    _record_memory_history() at the top of the trainable (the model is moved to the GPU inside the
    trace).  Epoch 1: 10 steps, a validation of 4 batches of 320 under no_grad, then the trial's
    report_and_cleanup() calls torch.cuda.empty_cache().  The co-located trial (batch 256) grows
    meanwhile; at the first step of epoch 2 the trial runs out of memory, and the snapshot is dumped
    in the except handler."""
    rng = random.Random(3806)
    clock = sim.Clock(1707213600000000, rng, (2, 9))
    CAP = int(22.20 * GB)
    A = sim.Allocator(device=0, capacity=CAP, clock=clock, base=0x7EFC5C000000, other_usage=int(10.30 * GB))
    A.free_us_per_gb = 60000
    dv = Dev(A)
    SP = "/home/ray/anaconda3/lib/python3.10/site-packages/"
    L = Lib(SP, "2.2")
    app = fr("/home/ray/jobs/vit_sweep/")
    call = L.call()
    D, FF, NB, NCLS, N, H = 384, 1536, 12, 100, 197, 6
    TH = [(SP + "ray/tune/trainable/util.py", 130, "inner"), (SP + "ray/tune/trainable/function_trainable.py", 642, "_trainable_func"),
          (SP + "ray/tune/trainable/function_trainable.py", 331, "entrypoint"), (SP + "ray/air/_internal/util.py", 88, "run"),
          ("/home/ray/anaconda3/lib/python3.10/threading.py", 1016, "_bootstrap_inner"), ("/home/ray/anaconda3/lib/python3.10/threading.py", 973, "_bootstrap")]
    TOP = lambda line: [app("tune_vit.py", line, "train_vit")] + TH
    EP = lambda line: [app("tune_vit.py", line, "train_one_epoch"), app("tune_vit.py", 151, "train_vit")] + TH
    EV = lambda line: [app("tune_vit.py", line, "evaluate"), app("tune_vit.py", 153, "train_vit")] + TH
    VT = SP + "timm/models/vision_transformer.py"
    psz = OrderedDict()
    psz["cls_token"] = D * 4
    psz["pos_embed"] = N * D * 4
    psz["patch_embed.proj.weight"] = D * 768 * 4
    psz["patch_embed.proj.bias"] = D * 4
    for l in range(NB):
        p = "blocks.%d." % l
        for k_, s_ in (("norm1.weight", D), ("norm1.bias", D), ("attn.qkv.weight", 3 * D * D), ("attn.qkv.bias", 3 * D),
                       ("attn.proj.weight", D * D), ("attn.proj.bias", D), ("norm2.weight", D), ("norm2.bias", D),
                       ("mlp.fc1.weight", FF * D), ("mlp.fc1.bias", FF), ("mlp.fc2.weight", D * FF), ("mlp.fc2.bias", D)):
            psz[p + k_] = s_ * 4
    psz["norm.weight"] = D * 4
    psz["norm.bias"] = D * 4
    psz["head.weight"] = NCLS * D * 4
    psz["head.bias"] = NCLS * 4
    TO = S(L.convert() + [app("tune_vit.py", 128, "train_vit")] + TH)
    for k, v in psz.items():
        dv.a(v, TO, "param")
    grads, state = {}, []

    def forward(B, where, train, ag):
        T = B * N
        MODEL = lambda line, fn="forward_features": [(VT, line, fn)] + ([(VT, 674, "forward")] if fn != "forward" else []) + call + where
        BLK = lambda line: [(VT, line, "forward")] + call + [L("torch/nn/modules/container.py", 217, "forward")] + call + MODEL(660)
        ATT = lambda line: [(VT, line, "forward")] + call + BLK(150)
        MLP = lambda line: [(SP + "timm/layers/mlp.py", line, "forward")] + call + BLK(151)
        LIN = lambda w: S(L.linear() + w)
        LN = lambda w: S([L("torch/nn/functional.py", 2546, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 196) + w)
        held = []

        def node(*a, **k):
            if train:
                ag.node(*a, **k)
            else:
                held.extend(a[2] if len(a) > 2 else k.get("saved", []))
        img = dv.a(B * 3 * 224 * 224 * 4, S([(where[0][0], where[0][1] - 3, where[0][2])] + where[1:]), "input")
        c = dv.a(B * D * 196 * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + [(SP + "timm/layers/patch_embed.py", 131, "forward")] + call + MODEL(655)), "act")
        node("ConvolutionBackward0", "x", [], [], [("patch_embed.proj.weight", D * 768 * 4), ("patch_embed.proj.bias", D * 4)])
        x0 = dv.a(T * D * 4, S([(VT, 590, "_pos_embed")] + MODEL(656)), "act")
        dv.f(c)
        x = dv.a(T * D * 4, S([(VT, 597, "_pos_embed")] + MODEL(656)), "act")
        dv.f(x0)
        for l in range(NB):
            p = "blocks.%d." % l
            n1 = dv.a(T * D * 4, LN(BLK(150)), "act")
            m1 = dv.a(T * 4, LN(BLK(150)), "act")
            r1 = dv.a(T * 4, LN(BLK(150)), "act")
            node("NativeLayerNormBackward0", "x", [m1, r1], [T * D * 4], [(p + "norm1.weight", D * 4), (p + "norm1.bias", D * 4)])
            qkv = dv.a(T * 3 * D * 4, LIN(ATT(89)), "act")
            node("AddmmBackward0", "x", [n1], [T * D * 4], [(p + "attn.qkv.weight", 3 * D * D * 4), (p + "attn.qkv.bias", 3 * D * 4)])
            o = dv.a(T * D * 4, S(ATT(93)), "act")
            lse = dv.a(B * H * ((N + 31) // 32 * 32) * 4, S(ATT(93)), "act")
            node("ScaledDotProductEfficientAttentionBackward0", "x", [qkv, lse], [T * 3 * D * 4])
            oc = dv.a(T * D * 4, S(ATT(101)), "act")
            node("CloneBackward0", "x", [o], [])
            pr = dv.a(T * D * 4, LIN(ATT(102)), "act")
            node("AddmmBackward0", "x", [oc], [T * D * 4], [(p + "attn.proj.weight", D * D * 4), (p + "attn.proj.bias", D * 4)])
            x2 = dv.a(T * D * 4, S(BLK(150)), "act")
            dv.f(pr)
            node("AddBackward0", "x", [x], [])
            x = x2
            n2 = dv.a(T * D * 4, LN(BLK(151)), "act")
            m2 = dv.a(T * 4, LN(BLK(151)), "act")
            r2 = dv.a(T * 4, LN(BLK(151)), "act")
            node("NativeLayerNormBackward0", "x", [m2, r2], [T * D * 4], [(p + "norm2.weight", D * 4), (p + "norm2.bias", D * 4)])
            h = dv.a(T * FF * 4, LIN(MLP(42)), "act")
            node("AddmmBackward0", "x", [n2], [T * D * 4], [(p + "mlp.fc1.weight", FF * D * 4), (p + "mlp.fc1.bias", FF * 4)])
            g = dv.a(T * FF * 4, S(L.mod("torch/nn/modules/activation.py", 682) + MLP(43)), "act")
            node("GeluBackward0", "x", [h], [T * FF * 4])
            f2 = dv.a(T * D * 4, LIN(MLP(46)), "act")
            node("AddmmBackward0", "x", [g], [T * FF * 4], [(p + "mlp.fc2.weight", D * FF * 4), (p + "mlp.fc2.bias", D * 4)])
            x2 = dv.a(T * D * 4, S(BLK(151)), "act")
            dv.f(f2)
            node("AddBackward0", "x", [x], [])
            x = x2
            if not train:
                dv.fl(held)
                held.clear()
        nx = dv.a(T * D * 4, LN(MODEL(661)), "act")
        node("NativeLayerNormBackward0", "x", [x], [T * D * 4], [("norm.weight", D * 4), ("norm.bias", D * 4)])
        cls = dv.a(B * D * 4, S(MODEL(669, "forward_head")), "act")
        node("SelectBackward0", "x", [nx], [])
        lo = dv.a(B * NCLS * 4, LIN(MODEL(671, "forward_head")), "act")
        node("AddmmBackward0", "x", [cls], [B * D * 4], [("head.weight", NCLS * D * 4), ("head.bias", NCLS * 4)])
        if not train:
            dv.fl(held)
        return lo, img

    oom = None
    try:
        for epoch in range(2):
            nsteps = 10 if epoch == 0 else 3
            for step in range(nsteps):
                B = 160
                ag = py_only_ag(dv)
                lab = dv.a(B * 8, S(EP(97)), "input")
                lo, img = forward(B, EP(99), True, ag)
                CE = S([L("torch/nn/functional.py", 3059, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1179) + EP(100))
                lp = dv.a(B * NCLS * 4, CE, "act")
                loss = dv.a(4, CE, "act")
                ag.node("LogSoftmaxBackward0", "x", [lp], [B * NCLS * 4])
                ag.backward(grads)
                dv.fl([lo, loss])
                for k, v in psz.items():
                    if k not in grads:
                        grads[k] = dv.a(v, NOSTACK, "grad")
                OPT = [L("torch/optim/optimizer.py", 385, "wrapper"), app("tune_vit.py", 103, "train_one_epoch"), app("tune_vit.py", 151, "train_vit")] + TH
                if not state:
                    for v in psz.values():
                        state.append(dv.a(v, S([L("torch/optim/adamw.py", 122, "_init_group"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                        state.append(dv.a(v, S([L("torch/optim/adamw.py", 126, "_init_group"), L("torch/optim/adamw.py", 184, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                FE = S([L("torch/optim/adamw.py", 599, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 196, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
                tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
                dv.fl(tmp)
                ZG = S([L("torch/optim/optimizer.py", 808, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("tune_vit.py", 95, "train_one_epoch"), app("tune_vit.py", 151, "train_vit")] + TH)
                for k in list(grads):
                    dv.f(grads.pop(k), ZG)
                it = dv.a(8, S(EP(106)), "tmp")
                dv.fl([it, lab, img])
                dv.wait(rng.randint(380000, 460000))
            if epoch == 0:
                for vb in range(4):
                    lo, img = forward(320, EV(121), False, None)
                    am = dv.a(320 * 8, S(EV(122)), "tmp")
                    lab = dv.a(320 * 8, S(EV(119)), "input")
                    eq = dv.a(320, S(EV(123)), "tmp")
                    sm = dv.a(8, S(EV(123)), "tmp")
                    dv.fl([am, eq, sm, lo, img, lab])
                    dv.wait(rng.randint(300000, 400000))
                EC = S([L("torch/cuda/memory.py", 162, "empty_cache"), app("tune_vit.py", 84, "report_and_cleanup"), app("tune_vit.py", 155, "train_vit")] + TH)
                A.empty_cache(EC)
                dv.wait(2500000)
                # the other trial on this GPU moves to a larger batch in the meantime
                A.other = int(15.62 * GB)
    except sim.OOMError as e:
        oom = dict(size=e.size, free=e.free)
    info = dict(oom=oom, param_bytes=sum(psz.values()), opt_bytes=2 * sum(psz.values()), capacity=CAP)
    d = write([A], settings=False)
    return dict(name="m06_raytune_vits16_cifar100_trial.pickle", data=d, devs=[A], info=info)


# ============================================================================ m07
def build_m07():
    """ProteinMPNN training (dauparas/ProteinMPNN, training/): 3 encoder + 3 decoder layers, hidden
    128, k=48 neighbours, 25 backbone atom-pair RBF features, batch_size 10,000 residues (proteins of
    varying length padded per batch), fp32, Adam inside NoamOpt (made at the first step, long
    before the recorded window), label-smoothed NLL, optimizer.zero_grad() at the top of each step.
    A100 80GB, torch 2.3.  _record_memory_history(max_entries=40000) from the start; dump after 64
    steps: the ring buffer kept only the last 40,000 events, so the trace starts in the middle of a
    step.  Healthy."""
    rng = random.Random(3807)
    clock = sim.Clock(1719394200000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, base=0x7F6A3E000000)
    dv = Dev(A)
    SP = "/opt/conda/envs/mlfold/lib/python3.10/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/data/jobs/ProteinMPNN/training/")
    call = L.call()
    HD, K, NE, ND, NRBF, VOC = 128, 48, 3, 3, 16, 21
    MAIN = [app("training.py", 274, "<module>")]
    TRN = lambda line: [app("training.py", line, "main")] + MAIN
    MU = "model_utils.py"
    PM = lambda line, fn="forward": [app(MU, line, fn)] + ([app(MU, 301, "forward")] if fn != "forward" else []) + call + TRN(181)
    FEAT = lambda line, fn="forward": [app(MU, line, fn)] + ([app(MU, 253, "forward")] if fn not in ("forward",) else []) + call + PM(293)
    LIN = lambda w: S(L.linear() + w)
    LNS = lambda w: S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 201) + w)
    DRS = lambda w: S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + w)
    GELU = lambda w: S(L.mod("torch/nn/modules/activation.py", 682) + w)
    psz = OrderedDict()
    psz["features.embeddings.linear"] = (66 * 16 + 16) * 4
    psz["features.edge_embedding"] = 416 * HD * 4
    psz["features.norm_edges.w"] = HD * 4
    psz["features.norm_edges.b"] = HD * 4
    psz["W_e.w"] = HD * HD * 4
    psz["W_e.b"] = HD * 4
    psz["W_s"] = VOC * HD * 4
    for side, n, din in (("enc", NE, 3 * HD), ("dec", ND, 4 * HD)):
        for l in range(n):
            p = "%s%d." % (side, l)
            ws = [("W1", din, HD), ("W2", HD, HD), ("W3", HD, HD)] + ([("W11", din, HD), ("W12", HD, HD), ("W13", HD, HD)] if side == "enc" else [])
            for w, i, o in ws:
                psz[p + w + ".w"] = i * o * 4
                psz[p + w + ".b"] = o * 4
            for nrm in (("norm1", "norm2", "norm3") if side == "enc" else ("norm1", "norm2")):
                psz[p + nrm + ".w"] = HD * 4
                psz[p + nrm + ".b"] = HD * 4
            psz[p + "ff.W_in.w"] = HD * 4 * HD * 4
            psz[p + "ff.W_in.b"] = 4 * HD * 4
            psz[p + "ff.W_out.w"] = 4 * HD * HD * 4
            psz[p + "ff.W_out.b"] = HD * 4
    psz["W_out.w"] = HD * VOC * 4
    psz["W_out.b"] = VOC * 4
    TO = S(L.convert() + [app("training.py", 96, "main")] + MAIN)
    for k, v in psz.items():
        dv.a(v, TO, "param")
    grads, state = {}, []
    STEPS = 64
    tokens = []
    for step in range(STEPS):
        Lp = rng.choice([160, 200, 240, 280, 320, 360, 400, 450, 500, 560, 640, 720, 800, 900, 1000])
        Bp = 10000 // Lp
        N = Bp * Lp
        tokens.append(N)
        E = N * K
        ZG = S([L("torch/optim/optimizer.py", 822, "zero_grad"), L("torch/_compile.py", 24, "inner"), app(MU, 1002, "zero_grad"), app("training.py", 177, "main")] + MAIN)
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        FZ = S([app(MU, 120, "featurize"), app("training.py", 175, "main")] + MAIN)
        X = dv.a(N * 4 * 3 * 4, FZ, "input")
        Sq = dv.a(N * 8, FZ, "input")
        msk = dv.a(N * 4, FZ, "input")
        cm = dv.a(N * 4, FZ, "input")
        ri = dv.a(N * 8, FZ, "input")
        ce = dv.a(N * 8, FZ, "input")
        ag = py_only_ag(dv)
        # ---- ProteinFeatures
        b = [dv.a(N * 3 * 4, S(FEAT(220 + i)), "act") for i in range(4)]
        Cb = dv.a(N * 3 * 4, S(FEAT(224)), "act")
        dv.fl(b[:3])
        dX = dv.a(N * Lp * 3 * 4, S(FEAT(157, "_dist")), "tmp")
        Dm = dv.a(N * Lp * 4, S(FEAT(158, "_dist")), "tmp")
        dv.f(dX)
        Dn = dv.a(E * 4, S(FEAT(160, "_dist")), "act")
        Ei = dv.a(E * 8, S(FEAT(160, "_dist")), "act")
        dv.f(Dm)
        rbf = []
        for pr in range(25):
            RB = lambda line, fn: S([app(MU, line, fn), app(MU, 185, "_get_rbf"), app(MU, 230 + pr // 5, "forward")] + call + PM(293))
            if pr > 0:
                dd = dv.a(N * Lp * 4, RB(182, "_get_rbf"), "tmp")
                g = dv.a(E * 4, RB(184, "_get_rbf"), "act")
                dv.f(dd)
            else:
                g = None
            r = dv.a(E * NRBF * 4, RB(172, "_rbf"), "act")
            ag.node("ExpBackward0", "x", [r] + ([g] if g else []), [])
            rbf.append(r)
        RBF = dv.a(E * 25 * NRBF * 4, S(FEAT(257)), "act")
        off = dv.a(E * 8, S(FEAT(260)), "act")
        d_ = dv.a(E * 8, S(FEAT(262)), "act")
        oh = dv.a(E * 66 * 4, S([app(MU, 132, "forward")] + call + FEAT(263)), "tmp")
        pe = dv.a(E * 16 * 4, LIN([app(MU, 133, "forward")] + call + FEAT(263)), "act")
        ag.node("AddmmBackward0", "x", [oh], [], [("features.embeddings.linear", (66 * 16 + 16) * 4)])
        dv.fl([off, d_])
        Ecat = dv.a(E * 416 * 4, S(FEAT(264)), "act")
        dv.fl([pe, RBF])
        e1 = dv.a(E * HD * 4, LIN(FEAT(265)), "act")
        ag.node("MmBackward0", "x", [Ecat], [E * 416 * 4], [("features.edge_embedding", 416 * HD * 4)])
        e2 = dv.a(E * HD * 4, LNS(FEAT(266)), "act")
        ag.node("NativeLayerNormBackward0", "x", [e1], [E * HD * 4], [("features.norm_edges.w", HD * 4), ("features.norm_edges.b", HD * 4)])
        hE = dv.a(E * HD * 4, LIN(PM(295)), "act")
        ag.node("AddmmBackward0", "x", [e2], [E * HD * 4], [("W_e.w", HD * HD * 4), ("W_e.b", HD * 4)])
        hV = dv.a(N * HD * 4, S(PM(294)), "act")
        mA = dv.a(E * 4, S(PM(298)), "act")
        # ---- encoder
        for l in range(NE):
            p = "enc%d." % l
            EL = lambda line: [app(MU, line, "forward")] + call + PM(300)
            gn = dv.a(E * HD * 4, S([app(MU, 62, "gather_nodes"), app(MU, 71, "cat_neighbors_nodes")] + EL(88)), "tmp")
            c1 = dv.a(E * 2 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + EL(88)), "tmp")
            dv.f(gn)
            ex = dv.a(E * HD * 4, S(EL(89)), "tmp")
            hEV = dv.a(E * 3 * HD * 4, S(EL(90)), "act")
            dv.fl([c1, ex])
            m1 = dv.a(E * HD * 4, LIN(EL(91)), "act")
            ag.node("AddmmBackward0", "x", [hEV], [E * 3 * HD * 4], [(p + "W1.w", 3 * HD * HD * 4), (p + "W1.b", HD * 4)])
            a1 = dv.a(E * HD * 4, GELU(EL(91)), "act")
            ag.node("GeluBackward0", "x", [m1], [E * HD * 4])
            m2 = dv.a(E * HD * 4, LIN(EL(91)), "act")
            ag.node("AddmmBackward0", "x", [a1], [E * HD * 4], [(p + "W2.w", HD * HD * 4), (p + "W2.b", HD * 4)])
            a2 = dv.a(E * HD * 4, GELU(EL(91)), "act")
            ag.node("GeluBackward0", "x", [m2], [E * HD * 4])
            m3 = dv.a(E * HD * 4, LIN(EL(91)), "act")
            ag.node("AddmmBackward0", "x", [a2], [E * HD * 4], [(p + "W3.w", HD * HD * 4), (p + "W3.b", HD * 4)])
            mm = dv.a(E * HD * 4, S(EL(93)), "act")
            ag.node("MulBackward0", "x", [m3], [E * HD * 4])
            dh = dv.a(N * HD * 4, S(EL(94)), "act")
            dv.f(mm)
            dm_ = dv.a(N * HD, DRS(EL(95)), "act")
            dd_ = dv.a(N * HD * 4, DRS(EL(95)), "act")
            dv.f(dh)
            ad = dv.a(N * HD * 4, S(EL(95)), "act")
            dv.f(dd_)
            hV2 = dv.a(N * HD * 4, LNS(EL(95)), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad, dm_], [N * HD * 4], [(p + "norm1.w", HD * 4), (p + "norm1.b", HD * 4)])
            FFL = lambda line: [app(MU, line, "forward")] + call + EL(97)
            f1 = dv.a(N * 4 * HD * 4, LIN(FFL(40)), "act")
            ag.node("AddmmBackward0", "x", [hV2], [N * HD * 4], [(p + "ff.W_in.w", 4 * HD * HD * 4), (p + "ff.W_in.b", 4 * HD * 4)])
            f2 = dv.a(N * 4 * HD * 4, GELU(FFL(40)), "act")
            ag.node("GeluBackward0", "x", [f1], [N * 4 * HD * 4])
            f3 = dv.a(N * HD * 4, LIN(FFL(41)), "act")
            ag.node("AddmmBackward0", "x", [f2], [N * 4 * HD * 4], [(p + "ff.W_out.w", 4 * HD * HD * 4), (p + "ff.W_out.b", HD * 4)])
            ad2 = dv.a(N * HD * 4, S(EL(98)), "act")
            dv.f(f3)
            hV3 = dv.a(N * HD * 4, LNS(EL(98)), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad2], [N * HD * 4], [(p + "norm2.w", HD * 4), (p + "norm2.b", HD * 4)])
            hV4 = dv.a(N * HD * 4, S(EL(101)), "act")
            ag.node("MulBackward0", "x", [hV3], [])
            # edge update
            gn = dv.a(E * HD * 4, S([app(MU, 62, "gather_nodes"), app(MU, 71, "cat_neighbors_nodes")] + EL(103)), "tmp")
            c1 = dv.a(E * 2 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + EL(103)), "tmp")
            dv.f(gn)
            ex = dv.a(E * HD * 4, S(EL(104)), "tmp")
            hEV2 = dv.a(E * 3 * HD * 4, S(EL(105)), "act")
            dv.fl([c1, ex])
            n1 = dv.a(E * HD * 4, LIN(EL(106)), "act")
            ag.node("AddmmBackward0", "x", [hEV2], [E * 3 * HD * 4], [(p + "W11.w", 3 * HD * HD * 4), (p + "W11.b", HD * 4)])
            n2 = dv.a(E * HD * 4, GELU(EL(106)), "act")
            ag.node("GeluBackward0", "x", [n1], [E * HD * 4])
            n3 = dv.a(E * HD * 4, LIN(EL(106)), "act")
            ag.node("AddmmBackward0", "x", [n2], [E * HD * 4], [(p + "W12.w", HD * HD * 4), (p + "W12.b", HD * 4)])
            n4 = dv.a(E * HD * 4, GELU(EL(106)), "act")
            ag.node("GeluBackward0", "x", [n3], [E * HD * 4])
            n5 = dv.a(E * HD * 4, LIN(EL(106)), "act")
            ag.node("AddmmBackward0", "x", [n4], [E * HD * 4], [(p + "W13.w", HD * HD * 4), (p + "W13.b", HD * 4)])
            em = dv.a(E * HD, DRS(EL(107)), "act")
            ed = dv.a(E * HD * 4, DRS(EL(107)), "act")
            dv.f(n5)
            ae = dv.a(E * HD * 4, S(EL(107)), "act")
            dv.f(ed)
            hE2 = dv.a(E * HD * 4, LNS(EL(107)), "act")
            ag.node("NativeLayerNormBackward0", "x", [ae, em], [E * HD * 4], [(p + "norm3.w", HD * 4), (p + "norm3.b", HD * 4)])
            ag.node("AddBackward0", "x", [hE] if l > 0 else [], [])
            if l == 0:
                ag.node("AddBackward0", "x", [hE], [])
            hE = hE2
            ag.node("AddBackward0", "x", [hV], [])
            hV = hV4
        # ---- decoder (teacher forcing, random decoding order)
        hS = dv.a(N * HD * 4, S([L("torch/nn/functional.py", 2264, "embedding")] + L.mod("torch/nn/modules/sparse.py", 163) + PM(308)), "act")
        ag.node("EmbeddingBackward0", "x", [], [], [("W_s", VOC * HD * 4)])
        gS = dv.a(E * HD * 4, S([app(MU, 62, "gather_nodes"), app(MU, 71, "cat_neighbors_nodes")] + PM(309)), "tmp")
        hES = dv.a(E * 2 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + PM(309)), "act")
        dv.f(gS)
        z = dv.a(E * HD * 4, S(PM(312)), "tmp")
        hEX = dv.a(E * 2 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + PM(313)), "tmp")
        dv.f(z)
        gE = dv.a(E * HD * 4, S([app(MU, 62, "gather_nodes"), app(MU, 71, "cat_neighbors_nodes")] + PM(314)), "tmp")
        hEXV = dv.a(E * 3 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + PM(314)), "act")
        dv.fl([gE, hEX])
        rnd = dv.a(N * 4, S(PM(317)), "tmp")
        order = dv.a(N * 8, S(PM(318)), "tmp")
        oh = dv.a(N * Lp * 4, S(PM(320)), "tmp")
        om = dv.a(N * Lp * 4, S(PM(321)), "tmp")
        dv.fl([rnd, oh])
        mAtt = dv.a(E * 4, S(PM(322)), "act")
        dv.fl([om, order])
        mbw = dv.a(E * 4, S(PM(324)), "act")
        mfw = dv.a(E * 4, S(PM(325)), "act")
        hEXV_fw = dv.a(E * 3 * HD * 4, S(PM(326)), "act")
        ag.node("MulBackward0", "x", [hEXV], [])
        for l in range(ND):
            p = "dec%d." % l
            DL = lambda line: [app(MU, line, "forward")] + call + PM(331)
            gV = dv.a(E * HD * 4, S([app(MU, 62, "gather_nodes"), app(MU, 71, "cat_neighbors_nodes")] + PM(329)), "tmp")
            hESV = dv.a(E * 3 * HD * 4, S([app(MU, 72, "cat_neighbors_nodes")] + PM(329)), "tmp")
            dv.f(gV)
            m_ = dv.a(E * 3 * HD * 4, S(PM(330)), "tmp")
            dv.f(hESV)
            h2 = dv.a(E * 3 * HD * 4, S(PM(330)), "act")
            dv.f(m_)
            ex = dv.a(E * HD * 4, S(DL(139)), "tmp")
            hEV = dv.a(E * 4 * HD * 4, S(DL(140)), "act")
            dv.f(ex)
            ag.node("CatBackward0", "x", [h2], [])
            m1 = dv.a(E * HD * 4, LIN(DL(142)), "act")
            ag.node("AddmmBackward0", "x", [hEV], [E * 4 * HD * 4], [(p + "W1.w", 4 * HD * HD * 4), (p + "W1.b", HD * 4)])
            a1 = dv.a(E * HD * 4, GELU(DL(142)), "act")
            ag.node("GeluBackward0", "x", [m1], [E * HD * 4])
            m2 = dv.a(E * HD * 4, LIN(DL(142)), "act")
            ag.node("AddmmBackward0", "x", [a1], [E * HD * 4], [(p + "W2.w", HD * HD * 4), (p + "W2.b", HD * 4)])
            a2 = dv.a(E * HD * 4, GELU(DL(142)), "act")
            ag.node("GeluBackward0", "x", [m2], [E * HD * 4])
            m3 = dv.a(E * HD * 4, LIN(DL(142)), "act")
            ag.node("AddmmBackward0", "x", [a2], [E * HD * 4], [(p + "W3.w", HD * HD * 4), (p + "W3.b", HD * 4)])
            mm = dv.a(E * HD * 4, S(DL(144)), "act")
            ag.node("MulBackward0", "x", [m3], [E * HD * 4])
            dh = dv.a(N * HD * 4, S(DL(145)), "act")
            dv.f(mm)
            dm_ = dv.a(N * HD, DRS(DL(147)), "act")
            dd_ = dv.a(N * HD * 4, DRS(DL(147)), "act")
            dv.f(dh)
            ad = dv.a(N * HD * 4, S(DL(147)), "act")
            dv.f(dd_)
            hV2 = dv.a(N * HD * 4, LNS(DL(147)), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad, dm_], [N * HD * 4], [(p + "norm1.w", HD * 4), (p + "norm1.b", HD * 4)])
            FFL = lambda line: [app(MU, line, "forward")] + call + DL(150)
            f1 = dv.a(N * 4 * HD * 4, LIN(FFL(40)), "act")
            ag.node("AddmmBackward0", "x", [hV2], [N * HD * 4], [(p + "ff.W_in.w", 4 * HD * HD * 4), (p + "ff.W_in.b", 4 * HD * 4)])
            f2 = dv.a(N * 4 * HD * 4, GELU(FFL(40)), "act")
            ag.node("GeluBackward0", "x", [f1], [N * 4 * HD * 4])
            f3 = dv.a(N * HD * 4, LIN(FFL(41)), "act")
            ag.node("AddmmBackward0", "x", [f2], [N * 4 * HD * 4], [(p + "ff.W_out.w", 4 * HD * HD * 4), (p + "ff.W_out.b", HD * 4)])
            ad2 = dv.a(N * HD * 4, S(DL(151)), "act")
            dv.f(f3)
            hV3 = dv.a(N * HD * 4, LNS(DL(151)), "act")
            ag.node("NativeLayerNormBackward0", "x", [ad2], [N * HD * 4], [(p + "norm2.w", HD * 4), (p + "norm2.b", HD * 4)])
            hV4 = dv.a(N * HD * 4, S(DL(154)), "act")
            ag.node("MulBackward0", "x", [hV3], [])
            ag.node("AddBackward0", "x", [hV], [])
            hV = hV4
        ag.node("AddBackward0", "x", [hES, hEXV_fw, hE, mA, mAtt, mbw, mfw, Dn, Ei, Cb, b[3], hS], [])
        lo = dv.a(N * VOC * 4, LIN(PM(336)), "act")
        ag.node("AddmmBackward0", "x", [hV], [N * HD * 4], [("W_out.w", HD * VOC * 4), ("W_out.b", VOC * 4)])
        lp = dv.a(N * VOC * 4, S([L("torch/nn/functional.py", 1985, "log_softmax")] + PM(337)), "act")
        dv.f(lo)
        ag.node("LogSoftmaxBackward0", "x", [lp], [N * VOC * 4])
        LS = lambda line: S([app(MU, line, "loss_smoothed"), app("training.py", 182, "main")] + MAIN)
        oh = dv.a(N * VOC * 4, LS(27), "act")
        s1 = dv.a(N * VOC * 4, LS(28), "tmp")
        s2 = dv.a(N * VOC * 4, LS(28), "act")
        dv.fl([oh, s1])
        l1 = dv.a(N * VOC * 4, LS(30), "tmp")
        l2 = dv.a(N * 4, LS(30), "act")
        dv.f(l1)
        l3 = dv.a(N * 4, LS(31), "act")
        ls = dv.a(4, LS(31), "act")
        ag.node("MulBackward0", "x", [s2, l2, l3], [N * VOC * 4])
        ag.backward(grads)
        for k, v in psz.items():
            if k not in grads:
                grads[k] = dv.a(v, NOSTACK, "grad")
        dv.f(ls)
        OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), app(MU, 996, "step"), app("training.py", 186, "main")] + MAIN
        if not state:
            for v in psz.values():
                state.append(dv.a(v, S([L("torch/optim/adam.py", 110, "_init_group"), L("torch/optim/adam.py", 157, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                state.append(dv.a(v, S([L("torch/optim/adam.py", 114, "_init_group"), L("torch/optim/adam.py", 157, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adam.py", 530, "_multi_tensor_adam"), L("torch/optim/adam.py", 333, "adam"), L("torch/optim/adam.py", 168, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
        tmp = [dv.a(v, FE, "tmp") for v in psz.values()]
        dv.fl(tmp)
        acc = [dv.a(N * 8, S(TRN(190)), "tmp"), dv.a(N * 4, S(TRN(191)), "tmp"), dv.a(8, S(TRN(192)), "tmp")]
        dv.fl(acc)
        dv.fl([X, Sq, msk, cm, ri, ce])
        dv.wait(rng.randint(250000, 400000))
    info = dict(param_bytes=sum(psz.values()), opt_bytes=2 * sum(psz.values()), steps=STEPS, max_entries=40000, tokens=tokens)
    d = write([A], max_entries=40000)
    return dict(name="m07_proteinmpnn_cath_ring.pickle", data=d, devs=[A], info=info)


# ============================================================================ m08
def build_m08():
    """Mask2Former-style instance segmentation (detectron2 + a fork of the Mask2Former code): ResNet-50
    (stem and res2 frozen, FrozenBatchNorm), MSDeformAttn pixel decoder (6 layers, 256 channels),
    masked-attention transformer decoder (9 layers, 100 queries, 8 heads), mask features at 1/4
    resolution, COCO with large-scale jitter crops of 1024x1024, batch 4, fp32, AdamW with
    full-model gradient clipping, optimizer.zero_grad() before backward.  The fork's HungarianMatcher
    and SetCriterion.loss_masks follow the MaskFormer (v1) recipe: every query's mask logits are
    upsampled to the 1024x1024 ground-truth size for the matching costs, and the matched ones again
    for the sigmoid focal and dice losses, for the final and the 9 auxiliary outputs (Mask2Former
    computes both on 12,544 sampled points).  A100 80GB, torch 2.4; _record_memory_history() after
    the model was built; dump after 6 iterations.  Problem: a wasteful peak."""
    rng = random.Random(3808)
    clock = sim.Clock(1729170000000000, rng, (2, 9))
    A = sim.Allocator(device=0, capacity=int(79.15 * GB), clock=clock, base=0x7F2D56000000)
    dv = Dev(A)
    SP = "/opt/conda/lib/python3.11/site-packages/"
    L = Lib(SP, "2.4")
    app = fr("/home/seg/m2f-coco/")
    call = L.call()
    B, HW, Q, C, NH, NDL, NCLS = 4, 1024, 100, 256, 8, 9, 81
    D2 = SP + "detectron2/"
    MAIN = [app("train_net.py", 318, "main"), (D2 + "engine/launch.py", 84, "launch"), app("train_net.py", 331, "<module>")]
    RUN = lambda line: [(D2 + "engine/train_loop.py", line, "run_step"), (D2 + "engine/defaults.py", 498, "run_step"),
                        (D2 + "engine/train_loop.py", 155, "train"), (D2 + "engine/defaults.py", 488, "train"), app("train_net.py", 312, "main")] + MAIN[1:]
    META = lambda line: [app("mask2former/maskformer_model.py", line, "forward")] + call + RUN(395)
    BB = lambda line, fn="forward": [(D2 + "modeling/backbone/resnet.py", line, fn)] + call + META(196)
    HEAD = lambda line, fn="forward": [app("mask2former/modeling/meta_arch/mask_former_head.py", line, fn)] + \
        ([app("mask2former/modeling/meta_arch/mask_former_head.py", 117, "forward")] if fn != "forward" else []) + call + META(197)
    PIX = lambda line, fn="forward_features": [app("mask2former/modeling/pixel_decoder/msdeformattn.py", line, fn)] + HEAD(120, "layers")
    TD = lambda line, fn="forward": [app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", line, fn)] + \
        ([app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", 372 if line > 390 else 340, "forward")] if fn != "forward" else []) + call + HEAD(124, "layers")
    CRIT = lambda line, fn="forward": [app("mask2former/modeling/criterion.py", line, fn)] + \
        ([app("mask2former/modeling/criterion.py", 264, "get_loss"), app("mask2former/modeling/criterion.py", 293, "forward")] if fn == "loss_masks" else []) + call + META(227)
    MATCH = lambda line, fn="memory_efficient_forward": [app("mask2former/modeling/matcher.py", line, fn)] + \
        ([app("mask2former/modeling/matcher.py", 172, "memory_efficient_forward")] if fn != "memory_efficient_forward" else []) + \
        [L("torch/utils/_contextlib.py", 116, "decorate_context"), app("mask2former/modeling/matcher.py", 199, "forward")] + call + CRIT(284)
    CONV = lambda w: [(D2 + "layers/wrappers.py", 131, "forward")] + call + w
    FBN = lambda w: [(D2 + "layers/batch_norm.py", 66, "forward")] + call + [(D2 + "layers/wrappers.py", 133, "forward")] + call + w
    # ---- parameters (made before recording)
    res_cfg = [(3, 64, 256, 256), (4, 128, 512, 128), (6, 256, 1024, 64), (3, 512, 2048, 32)]
    psz = OrderedDict()
    psz["stem"] = 64 * 3 * 49 * 4
    cin = 64
    for si, (nb, mid, out, hw) in enumerate(res_cfg):
        for bi in range(nb):
            p = "res%d.%d." % (si + 2, bi)
            psz[p + "conv1"] = mid * cin * 4
            psz[p + "conv2"] = mid * mid * 9 * 4
            psz[p + "conv3"] = out * mid * 4
            if bi == 0:
                psz[p + "shortcut"] = out * cin * 4
            cin = out
    trainable = [k for k in psz if not k.startswith(("stem", "res2"))]
    for k in ("pix.input_proj.%d" % i for i in range(3)):
        psz[k] = C * 2048 * 4
    for l in range(6):
        p = "pix.enc%d." % l
        for k_, s_ in (("sampling_offsets", 256 * 192 + 192), ("attention_weights", 256 * 96 + 96), ("value_proj", 256 * 256 + 256),
                       ("output_proj", 256 * 256 + 256), ("norm1", 512), ("linear1", 1024 * 256 + 1024), ("linear2", 256 * 1024 + 256), ("norm2", 512)):
            psz[p + k_] = s_ * 4
    psz["pix.mask_features"] = C * C * 4
    psz["pix.adapter_1"] = C * 256 * 4
    psz["pix.layer_1"] = C * C * 9 * 4
    for l in range(NDL):
        p = "dec%d." % l
        for k_, s_ in (("cross_attn", 4 * C * C + 4 * C + 2 * C), ("self_attn", 4 * C * C + 4 * C + 2 * C), ("ffn", 2 * 2048 * C + 2048 + 3 * C)):
            psz[p + k_] = s_ * 4
    psz["query_feat"] = Q * C * 4
    psz["query_embed"] = Q * C * 4
    psz["class_embed"] = (C + 1) * NCLS * 4
    psz["mask_embed"] = 3 * (C * C + C) * 4
    psz["decoder_norm"] = 2 * C * 4
    trainable += [k for k in psz if k.startswith(("pix", "dec", "query", "class", "mask_embed", "decoder_norm"))]
    TO = S(L.convert() + [(D2 + "engine/defaults.py", 371, "build_model"), (D2 + "engine/defaults.py", 302, "__init__"), app("train_net.py", 309, "main")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    start_recording(A)
    grads, state = {}, []
    STEPS = 6
    ninst_log = []
    for step in range(STEPS):
        ag = py_only_ag(dv)
        ninst = [rng.randint(4, 26) for _ in range(B)]
        ninst_log.append(ninst)
        NM = sum(ninst)
        LOADS = S([app("mask2former/maskformer_model.py", 252, "<listcomp>"), app("mask2former/maskformer_model.py", 252, "forward")] + call + RUN(395))
        img = dv.a(B * 3 * HW * HW * 4, S([app("mask2former/maskformer_model.py", 188, "<listcomp>"), app("mask2former/maskformer_model.py", 188, "forward")] + call + RUN(395)), "input")
        nimg = dv.a(B * 3 * HW * HW * 4, S([(D2 + "structures/image_list.py", 129, "from_tensors"), app("mask2former/maskformer_model.py", 190, "forward")] + call + RUN(395)), "input")
        gtm = [dv.a(n * HW * HW, LOADS, "input") for n in ninst]
        gtc = [dv.a(n * 8, LOADS, "input") for n in ninst]
        PADM = S([app("mask2former/maskformer_model.py", 316, "prepare_targets"), app("mask2former/maskformer_model.py", 255, "forward")] + call + RUN(395))
        gtp = [dv.a(n * HW * HW, PADM, "input") for n in ninst]
        dv.fl(gtm)
        # ---- backbone: stem and res2 frozen (no activations kept), res3-res5 trained
        s1 = dv.a(B * 64 * 512 * 512 * 4, S(CONV(BB(350, "forward"))), "tmp")
        s2 = dv.a(B * 64 * 512 * 512 * 4, S(FBN(BB(350))), "tmp")
        dv.f(s1)
        s3 = dv.a(B * 64 * 256 * 256 * 4, S([L("torch/nn/functional.py", 830, "max_pool2d"), (D2 + "modeling/backbone/resnet.py", 352, "forward")] + call + BB(445)), "tmp")
        dv.f(s2)
        x = s3
        feats = {}
        cin = 64
        for si, (nb, mid, out, hw) in enumerate(res_cfg):
            train = si > 0
            for bi in range(nb):
                p = "res%d.%d." % (si + 2, bi)
                hin = hw * (2 if (bi == 0 and si > 0) else 1)
                BLK = lambda line: [(D2 + "modeling/backbone/resnet.py", line, "forward")] + call + [L("torch/nn/modules/container.py", 219, "forward")] + call + BB(449)
                outs = []
                t1 = dv.a(B * mid * hin * hin * 4, S(CONV(BLK(199))), "act")
                t2 = dv.a(B * mid * hin * hin * 4, S(FBN(BLK(199))), "act")
                dv.f(t1)
                t3 = dv.a(B * mid * hw * hw * 4, S(CONV(BLK(202))), "act")
                t4 = dv.a(B * mid * hw * hw * 4, S(FBN(BLK(202))), "act")
                dv.f(t3)
                t5 = dv.a(B * out * hw * hw * 4, S(CONV(BLK(205))), "act")
                t6 = dv.a(B * out * hw * hw * 4, S(FBN(BLK(205))), "act")
                dv.f(t5)
                sc = None
                if bi == 0:
                    u = dv.a(B * out * hw * hw * 4, S(CONV(BLK(208))), "act")
                    sc = dv.a(B * out * hw * hw * 4, S(FBN(BLK(208))), "act")
                    dv.f(u)
                ad = dv.a(B * out * hw * hw * 4, S(BLK(212)), "act")
                dv.f(t6)
                if sc is not None:
                    dv.f(sc)
                r = dv.a(B * out * hw * hw * 4, S([L("torch/nn/functional.py", 1500, "relu_")] + BLK(213)), "act")
                dv.f(ad)
                if train:
                    ag.node("ConvolutionBackward0", "x", [x, t2, t4], [B * cin * hin * hin * 4], [(p + k_, psz[p + k_]) for k_ in ("conv1", "conv2", "conv3", "shortcut") if p + k_ in psz])
                    ag.node("ReluBackward0", "x", [], [B * out * hw * hw * 4])
                else:
                    dv.fl([x, t2, t4] if x is not s3 or bi > 0 else [t2, t4])
                x = r
                cin = out
            feats[si] = x
        # ---- pixel decoder (multi-scale deformable attention on 1/8, 1/16, 1/32) and mask features (1/4)
        Ltok = B * (128 * 128 + 64 * 64 + 32 * 32)
        src = dv.a(Ltok * C * 4, S(PIX(330)), "act")
        ag.node("CatBackward0", "x", [feats[3]], [], [("pix.input_proj.%d" % i, C * 2048 * 4) for i in range(3)])
        for l in range(6):
            p = "pix.enc%d." % l
            EL = lambda line, fn="forward": [app("mask2former/modeling/pixel_decoder/msdeformattn.py", line, fn)] + call + PIX(178, "forward")
            MS = lambda line: [app("mask2former/modeling/pixel_decoder/ops/modules/ms_deform_attn.py", line, "forward")] + call + EL(77)
            q = dv.a(Ltok * C * 4, S(EL(75, "with_pos_embed")), "act")
            val = dv.a(Ltok * C * 4, S(L.linear() + MS(105)), "act")
            off = dv.a(Ltok * 192 * 4, S(L.linear() + MS(109)), "act")
            aw = dv.a(Ltok * 96 * 4, S(L.linear() + MS(110)), "act")
            aws = dv.a(Ltok * 96 * 4, S([L("torch/nn/functional.py", 1890, "softmax")] + MS(110)), "act")
            dv.f(aw)
            loc = dv.a(Ltok * 192 * 4, S(MS(115)), "act")
            o = dv.a(Ltok * C * 4, S([app("mask2former/modeling/pixel_decoder/ops/functions/ms_deform_attn_func.py", 33, "forward"), L("torch/autograd/function.py", 574, "apply")] + MS(126)), "act")
            op = dv.a(Ltok * C * 4, S(L.linear() + MS(129)), "act")
            ag.node("MSDeformAttnFunctionBackward", "x", [q, val, off, aws, loc, o], [Ltok * C * 4] * 2, [(p + k_, psz[p + k_]) for k_ in ("sampling_offsets", "attention_weights", "value_proj", "output_proj")])
            a1 = dv.a(Ltok * C * 4, S(EL(79)), "act")
            dv.f(op)
            n1 = dv.a(Ltok * C * 4, S([L("torch/nn/functional.py", 2900, "layer_norm")] + EL(80)), "act")
            ag.node("NativeLayerNormBackward0", "x", [a1], [Ltok * C * 4], [(p + "norm1", psz[p + "norm1"])])
            h = dv.a(Ltok * 1024 * 4, S(L.linear() + EL(60, "forward_ffn")), "act")
            hr = dv.a(Ltok * 1024 * 4, S([L("torch/nn/functional.py", 1500, "relu")] + EL(60, "forward_ffn")), "act")
            f2 = dv.a(Ltok * C * 4, S(L.linear() + EL(60, "forward_ffn")), "act")
            ag.node("AddmmBackward0", "x", [n1, h, hr], [Ltok * C * 4], [(p + "linear1", psz[p + "linear1"]), (p + "linear2", psz[p + "linear2"])])
            a2 = dv.a(Ltok * C * 4, S(EL(61, "forward_ffn")), "act")
            dv.f(f2)
            n2 = dv.a(Ltok * C * 4, S([L("torch/nn/functional.py", 2900, "layer_norm")] + EL(62, "forward_ffn")), "act")
            ag.node("NativeLayerNormBackward0", "x", [a2, src], [Ltok * C * 4], [(p + "norm2", psz[p + "norm2"])])
            src = n2
        ag.node("SplitBackward0", "x", [src], [])
        up = dv.a(B * C * 256 * 256 * 4, S([L("torch/nn/functional.py", 4070, "interpolate")] + PIX(360)), "act")
        lat = dv.a(B * C * 256 * 256 * 4, S(CONV(PIX(359))), "act")
        y = dv.a(B * C * 256 * 256 * 4, S(PIX(360)), "act")
        dv.f(up)
        yo = dv.a(B * C * 256 * 256 * 4, S(CONV(PIX(361))), "act")
        ag.node("ConvolutionBackward0", "x", [lat, y], [B * C * 256 * 256 * 4], [("pix.adapter_1", psz["pix.adapter_1"]), ("pix.layer_1", psz["pix.layer_1"])])
        mf = dv.a(B * C * 256 * 256 * 4, S(CONV(PIX(364, "forward_features"))), "act")
        ag.node("ConvolutionBackward0", "x", [yo], [B * C * 256 * 256 * 4], [("pix.mask_features", psz["pix.mask_features"])])
        # ---- transformer decoder: a mask prediction per layer (and one before the first)
        preds = []
        qf = dv.a(Q * B * C * 4, S(TD(355)), "act")
        ag.node("RepeatBackward0", "x", [], [], [("query_feat", Q * C * 4), ("query_embed", Q * C * 4)])
        for l in range(NDL + 1):
            PH = lambda line: S([app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", line, "forward_prediction_heads"),
                                 app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", 365 if l == 0 else 391, "forward")] + call + HEAD(124, "layers"))
            dn = dv.a(Q * B * C * 4, PH(396), "act")
            ce = dv.a(B * Q * NCLS * 4, S(L.linear() + [app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", 398, "forward_prediction_heads")] + call + HEAD(124, "layers")), "act")
            me = dv.a(B * Q * C * 4, PH(399), "act")
            om = dv.a(B * Q * 256 * 256 * 4, PH(401), "act")
            ag.node("BmmBackward0", "x", [dn, me], [B * Q * C * 4], [("class_embed", psz["class_embed"]), ("mask_embed", psz["mask_embed"]), ("decoder_norm", psz["decoder_norm"])])
            scale = [32, 16, 8][l % 3]
            am = dv.a(B * Q * (HW // scale) ** 2 * 4, PH(405), "tmp")
            sg = dv.a(B * Q * (HW // scale) ** 2 * 4, PH(408), "tmp")
            dv.f(am)
            rp = dv.a(B * NH * Q * (HW // scale) ** 2 * 4, PH(408), "tmp")
            attn_mask = dv.a(B * NH * Q * (HW // scale) ** 2, PH(408), "act")
            dv.fl([sg, rp])
            preds.append((om, ce))
            if l < NDL:
                p = "dec%d." % l
                DL = lambda line: S([app("mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py", line, "forward")] + call + HEAD(124, "layers"))
                kv = B * (HW // scale) ** 2
                k_ = dv.a(kv * C * 4, DL(376), "act")
                v_ = dv.a(kv * C * 4, DL(376), "act")
                w_ = dv.a(B * NH * Q * (HW // scale) ** 2 * 4, DL(376), "act")
                ao = dv.a(Q * B * C * 4, DL(376), "act")
                ag.node("MultiheadAttentionBackward", "x", [k_, v_, w_, attn_mask, qf], [Q * B * C * 4], [(p + "cross_attn", psz[p + "cross_attn"])])
                sa = [dv.a(Q * B * C * 4, DL(382), "act") for _ in range(4)] + [dv.a(B * NH * Q * Q * 4, DL(382), "act")]
                ag.node("MultiheadAttentionBackward", "x", sa + [ao], [Q * B * C * 4], [(p + "self_attn", psz[p + "self_attn"])])
                ff = [dv.a(Q * B * 2048 * 4, DL(387), "act"), dv.a(Q * B * 2048 * 4, DL(387), "act"), dv.a(Q * B * C * 4, DL(387), "act")]
                ag.node("AddmmBackward0", "x", ff, [Q * B * C * 4], [(p + "ffn", psz[p + "ffn"])])
                qf = dv.a(Q * B * C * 4, DL(387), "act")
            else:
                dv.f(attn_mask)
        ag.node("AddBackward0", "x", [qf, mf], [])
        # ---- criterion: match every output (final + 9 aux), then losses at full resolution
        full = HW * HW
        loss_parts = []
        for li, (om, ce) in enumerate(reversed(preds)):
            for b in range(B):
                n = ninst[b]
                prob = dv.a(Q * NCLS * 4, S(MATCH(149)), "tmp")
                cc = dv.a(Q * n * 4, S(MATCH(153)), "tmp")
                dv.f(prob)
                tm = dv.a(n * full * 4, S(MATCH(158)), "tmp")
                up = dv.a(Q * full * 4, S([L("torch/nn/functional.py", 4071, "interpolate")] + MATCH(162)), "tmp")
                ones = dv.a(Q * full * 4, S([app("mask2former/modeling/matcher.py", 57, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                pos = dv.a(Q * full * 4, S([L("torch/nn/functional.py", 3268, "binary_cross_entropy_with_logits"), app("mask2former/modeling/matcher.py", 57, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                dv.f(ones)
                zeros = dv.a(Q * full * 4, S([app("mask2former/modeling/matcher.py", 60, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                neg = dv.a(Q * full * 4, S([L("torch/nn/functional.py", 3268, "binary_cross_entropy_with_logits"), app("mask2former/modeling/matcher.py", 60, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                dv.f(zeros)
                c1 = dv.a(Q * n * 4, S([app("mask2former/modeling/matcher.py", 64, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                c2 = dv.a(Q * n * 4, S([app("mask2former/modeling/matcher.py", 66, "batch_sigmoid_ce_loss")] + MATCH(168)), "tmp")
                dv.fl([pos, neg])
                sgm = dv.a(Q * full * 4, S([app("mask2former/modeling/matcher.py", 28, "batch_dice_loss")] + MATCH(171)), "tmp")
                num = dv.a(Q * n * 4, S([app("mask2former/modeling/matcher.py", 30, "batch_dice_loss")] + MATCH(171)), "tmp")
                den = dv.a(Q * n * 4, S([app("mask2former/modeling/matcher.py", 31, "batch_dice_loss")] + MATCH(171)), "tmp")
                dv.fl([sgm, up, tm])
                cst = dv.a(Q * n * 4, S(MATCH(175)), "tmp")
                dv.fl([cc, c1, c2, num, den, cst])
            # loss_labels (small) and loss_masks on the matched queries, with grad
            lbl = [dv.a(B * Q * 8, S(CRIT(105, "loss_labels")), "act"), dv.a(B * Q * NCLS * 4, S([L("torch/nn/functional.py", 3104, "cross_entropy")] + CRIT(108, "loss_labels")), "act")]
            sm = dv.a(NM * 256 * 256 * 4, S(CRIT(125, "loss_masks")), "act")
            tg = dv.a(NM * full * 4, S(CRIT(131, "loss_masks")), "act")
            us = dv.a(NM * full * 4, S([L("torch/nn/functional.py", 4071, "interpolate")] + CRIT(136, "loss_masks")), "act")
            ag.node("IndexBackward0", "x", [sm], [B * Q * 256 * 256 * 4])
            SF = lambda line: S([app("mask2former/modeling/criterion.py", line, "sigmoid_focal_loss")] + CRIT(143, "loss_masks"))
            pr = dv.a(NM * full * 4, SF(38), "act")
            bce = dv.a(NM * full * 4, S([L("torch/nn/functional.py", 3268, "binary_cross_entropy_with_logits"), app("mask2former/modeling/criterion.py", 39, "sigmoid_focal_loss")] + CRIT(143, "loss_masks")), "act")
            t1 = dv.a(NM * full * 4, SF(40), "tmp")
            t2 = dv.a(NM * full * 4, SF(40), "tmp")
            pt = dv.a(NM * full * 4, SF(40), "act")
            dv.fl([t1, t2])
            w1 = dv.a(NM * full * 4, SF(41), "act")
            fl = dv.a(NM * full * 4, SF(41), "act")
            ag.node("MulBackward0", "x", [us, tg, pr, bce, pt, w1], [NM * full * 4])
            aw = dv.a(NM * full * 4, SF(44), "tmp")
            fa = dv.a(NM * full * 4, SF(45), "act")
            dv.fl([aw, fl])
            fm = dv.a(NM * 4, SF(47), "act")
            ag.node("MeanBackward1", "x", [fa], [])
            DC = lambda line: S([app("mask2former/modeling/criterion.py", line, "dice_loss")] + CRIT(144, "loss_masks"))
            ds = dv.a(NM * full * 4, DC(20), "act")
            dn_ = dv.a(NM * full * 4, DC(22), "tmp")
            dnum = dv.a(NM * 4, DC(22), "act")
            dv.f(dn_)
            dd = dv.a(NM * 4, DC(23), "act")
            ag.node("SigmoidBackward0", "x", [ds, dnum, dd, fm], [])
            l_ = [dv.a(4, DC(24), "act"), dv.a(4, S(CRIT(146, "loss_masks")), "act")]
            loss_parts.append(l_ + lbl)
        ag.node("SumBackward0", "x", [x for lp in loss_parts for x in lp], [])
        # the outputs dict goes out of scope when MaskFormer.forward returns the losses
        for om, ce in preds:
            dv.fl([om, ce])
        # ---- SimpleTrainer.run_step: zero_grad, backward, step (with full-model gradient clipping)
        ZG = S([L("torch/optim/optimizer.py", 985, "zero_grad"), L("torch/_compile.py", 32, "inner")] + RUN(405))
        for k in list(grads):
            dv.f(grads.pop(k), ZG)
        tot = dv.a(4, S(RUN(400)), "act")
        ag.backward(grads)
        dv.f(tot)
        for k in trainable:
            if k not in grads:
                grads[k] = dv.a(psz[k], NOSTACK, "grad")
        CG = S([L("torch/nn/utils/clip_grad.py", 59, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper"), app("train_net.py", 236, "step")] + RUN(432))
        nrm = [dv.a(4, CG, "tmp") for _ in trainable]
        tn = dv.a(4, CG, "tmp")
        dv.fl(nrm)
        OPT = [L("torch/optim/optimizer.py", 484, "wrapper"), app("train_net.py", 237, "step")] + RUN(432)
        if not state:
            for k in trainable:
                state.append(dv.a(psz[k], S([L("torch/optim/adamw.py", 127, "_init_group"), L("torch/optim/adamw.py", 191, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT), "opt"))
                state.append(dv.a(psz[k], S([L("torch/optim/adamw.py", 131, "_init_group"), L("torch/optim/adamw.py", 191, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT), "opt"))
        FE = S([L("torch/optim/adamw.py", 611, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 343, "adamw"), L("torch/optim/adamw.py", 204, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT)
        tmp = [dv.a(psz[k], FE, "tmp") for k in trainable]
        dv.fl(tmp)
        dv.f(tn)
        dv.fl([img, nimg, s3] + gtp + gtc)
        dv.wait(rng.randint(800000, 1100000))
    info = dict(param_bytes=sum(psz.values()), steps=STEPS, ninst=ninst_log, full=HW * HW, Q=Q,
                opt_bytes=2 * sum(psz[k] for k in trainable))
    d = write([A])
    return dict(name="m08_mask2former_r50_coco_lsj.pickle", data=d, devs=[A], info=info)


# ============================================================================ m09
def build_m09():
    """A speaker-diarization service (FastAPI + pyannote.audio 3.1 `speaker-diarization-3.1`: PyanNet
    segmentation, WeSpeaker ResNet34 embeddings, batch 32 each) on a T4 (16 GB), torch 2.2.  The
    service keeps a preallocated bank of 20,000 enrolled voiceprints (256-d, fp32) for speaker
    identification and an LRU of the embeddings of the last 16 meetings.  Started with
    _record_memory_history(enabled="state") (no trace); the dump was taken by the /debug/memory
    endpoint between requests, after 22 meetings of 4-75 minutes.  Healthy."""
    rng = random.Random(3809)
    A = sim.Allocator(device=0, capacity=int(14.58 * GB), time_us=False, base=0x7F8E00000000)
    dv = Dev(A)
    SP = "/srv/diarize/.venv/lib/python3.10/site-packages/"
    L = Lib(SP, "2.2")
    app = fr("/srv/diarize/app/")
    call = L.call()
    PA = SP + "pyannote/audio/"
    UV = [(SP + "starlette/concurrency.py", 42, "run_in_threadpool"), (SP + "fastapi/routing.py", 193, "run_endpoint_function"),
          (SP + "fastapi/routing.py", 291, "app"), (SP + "starlette/routing.py", 74, "app")]
    TH = [(SP + "anyio/_backends/_asyncio.py", 851, "run"), ("/usr/lib/python3.10/threading.py", 953, "run"),
          ("/usr/lib/python3.10/threading.py", 1016, "_bootstrap_inner"), ("/usr/lib/python3.10/threading.py", 973, "_bootstrap")]
    REQ = lambda line: [app("service.py", line, "diarize_file")] + TH
    PIPE = lambda line, fn: [(PA + "pipelines/speaker_diarization.py", line, fn), (PA + "pipelines/speaker_diarization.py", 468 if fn == "get_segmentations" else 517, "apply"),
                             (PA + "core/pipeline.py", 325, "__call__"), app("service.py", 88, "diarize_file")] + TH
    INF = lambda line, fn: [(PA + "core/inference.py", line, fn), (PA + "core/inference.py", 343 if fn == "infer" else 406, "slide" if fn == "infer" else "__call__")] + \
        ([(PA + "core/inference.py", 406, "__call__")] if fn == "infer" else []) + PIPE(228, "get_segmentations")
    TO = S(L.convert() + [(PA + "core/pipeline.py", 343, "to"), app("service.py", 41, "load_models")] + [(SP + "starlette/routing.py", 732, "lifespan")])
    seg_params = [80 * 251 * 4, 60 * 80 * 5 * 4, 60 * 60 * 5 * 4] + [4 * 128 * 60 * 4, 4 * 128 * 128 * 4, 4 * 128 * 4 * 2] * 2 + \
        [4 * 128 * 256 * 4, 4 * 128 * 128 * 4, 4 * 128 * 4 * 2] * 2 + [128 * 256 * 4, 128 * 128 * 4, 7 * 128 * 4]
    emb_params = [32 * 9 * 4] + [32 * 32 * 9 * 4] * 6 + [64 * 32 * 9 * 4, 64 * 64 * 9 * 4 * 7] + [128 * 64 * 9 * 4, 128 * 128 * 9 * 4 * 11] + \
        [256 * 128 * 9 * 4, 256 * 256 * 9 * 4 * 5] + [256 * 2560 * 2 * 4, 256 * 4]
    for p in seg_params:
        dv.a(p, TO, "param")
    emb_detail = []
    for p in emb_params:
        emb_detail.append(p)
        nch = max(32, int((p // 36) ** 0.5)) if p > 1024 else 256
        emb_detail += [nch * 4] * 4 + [8]        # BatchNorm weight, bias, running_mean, running_var, num_batches_tracked
    for p in emb_detail:
        dv.a(p, TO, "param")
    bank = dv.a(20000 * 256 * 4, S([app("voiceprints.py", 31, "__init__"), app("service.py", 47, "load_models"), (SP + "starlette/routing.py", 732, "lifespan")]), "cache")
    bank_norm = dv.a(20000 * 4, S([app("voiceprints.py", 33, "__init__"), app("service.py", 47, "load_models"), (SP + "starlette/routing.py", 732, "lifespan")]), "cache")
    lru = []
    durations = []
    for meeting in range(22):
        minutes = rng.choice([4, 7, 12, 18, 25, 31, 40, 52, 63, 75])
        durations.append(minutes)
        nchunks = minutes * 60  # 10 s windows with a 1 s step
        wav = dv.a(minutes * 60 * 16000 * 4, S(REQ(79)), "input")
        outs = []
        for b0 in range(0, nchunks, 32):
            bs = min(32, nchunks - b0)
            x = dv.a(bs * 160000 * 4, S(INF(188, "infer")), "input")
            IN = lambda line: S([(PA + "models/segmentation/PyanNet.py", line, "forward")] + call + INF(191, "infer"))
            a1 = dv.a(bs * 80 * 53333 * 4, S([(PA + "models/blocks/sincnet.py", 87, "forward")] + call + [(PA + "models/segmentation/PyanNet.py", 170, "forward")] + call + INF(191, "infer")), "tmp")
            a2 = dv.a(bs * 80 * 17777 * 4, S([(PA + "models/blocks/sincnet.py", 89, "forward")] + call + [(PA + "models/segmentation/PyanNet.py", 170, "forward")] + call + INF(191, "infer")), "tmp")
            dv.f(a1)
            a3 = dv.a(bs * 60 * 5920 * 4, S([(PA + "models/blocks/sincnet.py", 93, "forward")] + call + [(PA + "models/segmentation/PyanNet.py", 170, "forward")] + call + INF(191, "infer")), "tmp")
            dv.fl([a2, x])
            a4 = dv.a(bs * 60 * 589 * 4, S([(PA + "models/blocks/sincnet.py", 93, "forward")] + call + [(PA + "models/segmentation/PyanNet.py", 170, "forward")] + call + INF(191, "infer")), "tmp")
            dv.f(a3)
            l1 = dv.a(bs * 589 * 256 * 4, IN(175), "tmp")
            ws = dv.a(bs * 589 * 256 * 4 * 2, IN(175), "tmp")
            dv.fl([a4, ws])
            l2 = dv.a(bs * 589 * 256 * 4, IN(175), "tmp")
            dv.f(l1)
            o = dv.a(bs * 589 * 7 * 4, IN(186), "tmp")
            dv.f(l2)
            outs.append(o)
            cpu = dv.a(bs * 589 * 7 * 4, S(INF(196, "infer")), "tmp")
            dv.f(cpu)
        dv.f(wav)
        # embeddings: 3 local speakers per chunk, batches of 32 (chunk, speaker) pairs
        EMB = lambda line, fn="__call__": [(PA + "pipelines/speaker_verification.py", line, fn), (PA + "pipelines/speaker_diarization.py", 342, "get_embeddings")] + \
            PIPE(517, "get_embeddings")[1:]
        nemb = nchunks * 3
        emb_out = []
        for b0 in range(0, nemb, 32):
            bs = min(32, nemb - b0)
            wv = dv.a(bs * 160000 * 4, S(EMB(713)), "input")
            fb = dv.a(bs * 998 * 80 * 4, S([(PA + "pipelines/speaker_verification.py", 693, "compute_fbank")] + EMB(715)), "tmp")
            dv.f(wv)
            RN = lambda line: S([(PA + "models/embedding/wespeaker/resnet.py", line, "forward")] + call + [(PA + "models/embedding/wespeaker/__init__.py", 272, "forward")] + call + EMB(717))
            acts = []
            cur = fb
            for (ch, h, w, nblk) in ((32, 80, 998, 3), (64, 40, 499, 4), (128, 20, 250, 6), (256, 10, 125, 3)):
                for bi in range(nblk):
                    t1 = dv.a(bs * ch * h * w * 4, RN(131), "tmp")
                    t2 = dv.a(bs * ch * h * w * 4, RN(132), "tmp")
                    dv.f(t1)
                    t3 = dv.a(bs * ch * h * w * 4, RN(134), "tmp")
                    dv.f(t2)
                    dv.f(cur)
                    cur = t3
            st = dv.a(bs * 2560 * 2 * 4, RN(166), "tmp")
            dv.f(cur)
            e = dv.a(bs * 256 * 4, RN(170), "tmp")
            dv.f(st)
            emb_out.append(e)
        # the service keeps this meeting's per-batch segmentation and embedding tensors (for
        # re-clustering with other thresholds) in an LRU of 16 meetings
        lru.append(outs + emb_out)
        if len(lru) > 16:
            dv.fl(lru.pop(0), S([app("lru.py", 28, "put"), app("service.py", 97, "diarize_file")] + TH))
        sim_ = dv.a(3 * 20000 * 4, S([app("voiceprints.py", 58, "identify"), app("service.py", 101, "diarize_file")] + TH), "tmp")
        dv.f(sim_)
    info = dict(param_bytes=sum(seg_params) + sum(emb_detail), bank_bytes=20000 * 256 * 4 + 20000 * 4,
                lru_bytes=sum(b.req for m in lru for b in m), lru_n=len(lru), lru_blocks=sum(len(m) for m in lru), durations=durations)
    d = write([A], state_only=True, settings=False)
    return dict(name="m09_pyannote_diarize_service_state.pickle", data=d, devs=[A], info=info)


# ============================================================================ m10
def build_m10():
    """AlphaZero for 9x9 Go on one RTX 3080 (10 GB), a single process alternating self-play and
    training: residual tower of 10 blocks x 128 channels (BatchNorm), policy and value heads; 17
    input planes; replay buffer of 400,000 positions kept on the GPU (uint8 planes, fp32 policy
    targets).  Self-play evaluates 16 MCTS leaves per game and network call under torch.no_grad()
    (24 calls per self-play phase), with 256 parallel games in the first cycle and 64 more every
    cycle (4,096 -> 10,240 leaves per call); training runs 6 steps of batch 2,816 with SGD (momentum
    0.9, weight decay) after each phase.  torch 2.3; _record_memory_history() after the buffer and
    network were made;
    dump after 7 cycles.  Problem: allocator stalls."""
    rng = random.Random(3810)
    clock = sim.Clock(1716898800000000, rng, (2, 7))
    A = sim.Allocator(device=0, capacity=int(9.78 * GB), clock=clock, base=0x7FA9C4000000, other_usage=int(0.33 * GB))
    A.free_us_per_gb = 70000
    dv = Dev(A)
    SP = "/home/go/venv/lib/python3.11/site-packages/"
    L = Lib(SP, "2.3")
    app = fr("/home/go/azgo/")
    call = L.call()
    CH, NB, PL, BD = 128, 10, 17, 81
    MAIN = [app("main.py", 140, "run"), app("main.py", 171, "<module>")]
    NET = lambda line, where, fn="forward": [app("azgo/net.py", line, fn)] + call + where
    psz = OrderedDict()
    psz["stem.conv"] = CH * PL * 9 * 4
    psz["stem.bn"] = 2 * CH * 4
    for b in range(NB):
        for c in (1, 2):
            psz["res%d.conv%d" % (b, c)] = CH * CH * 9 * 4
            psz["res%d.bn%d" % (b, c)] = 2 * CH * 4
    psz["pol.conv"] = 2 * CH * 4
    psz["pol.bn"] = 4 * 4
    psz["pol.fc"] = (2 * BD * 82 + 82) * 4
    psz["val.conv"] = CH * 4
    psz["val.bn"] = 2 * 4
    psz["val.fc1"] = (BD * 256 + 256) * 4
    psz["val.fc2"] = 257 * 4
    TO = S(L.convert() + [app("main.py", 118, "run")] + MAIN[1:])
    for k, v in psz.items():
        dv.a(v, TO, "param")
    for nb in range(NB + 1):
        dv.a(CH * 4, TO, "param")
        dv.a(CH * 4, TO, "param")
    NBUF = 400000
    BUF = S([app("azgo/replay.py", 22, "__init__"), app("main.py", 121, "run")] + MAIN[1:])
    dv.a(NBUF * PL * BD, BUF, "buffer")
    dv.a(NBUF * 82 * 4, BUF, "buffer")
    dv.a(NBUF * 4, BUF, "buffer")
    start_recording(A)
    grads, mom = {}, []

    def tower(Bb, where, train, ag):
        T = Bb * CH * BD * 4
        held = []
        CV = lambda line: S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + NET(line, where))
        BN = lambda line: S([L("torch/nn/functional.py", 2512, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 176) + NET(line, where))
        RL = lambda line: S([L("torch/nn/functional.py", 1500, "relu")] + NET(line, where))
        x = dv.a(Bb * PL * BD * 4, S(NET(60, where)), "act")
        c = dv.a(T, CV(61), "act")
        bn = dv.a(T, BN(61), "act")
        sv = [dv.a(CH * 4, BN(61), "act"), dv.a(CH * 4, BN(61), "act")] if train else []
        r = dv.a(T, RL(61), "act")
        if train:
            ag.node("ConvolutionBackward0", "x", [x, c] + sv, [], [("stem.conv", psz["stem.conv"]), ("stem.bn", psz["stem.bn"])])
            ag.node("ReluBackward0", "x", [bn], [T])
        else:
            dv.fl([x, c, bn])
        cur = r
        for b in range(NB):
            BL = lambda line: [app("azgo/net.py", line, "forward")] + call + [L("torch/nn/modules/container.py", 219, "forward")] + call + NET(63, where)
            CVb = lambda line: S([L("torch/nn/modules/conv.py", 456, "_conv_forward"), L("torch/nn/modules/conv.py", 460, "forward")] + call + BL(line))
            BNb = lambda line: S([L("torch/nn/functional.py", 2512, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 176) + BL(line))
            c1 = dv.a(T, CVb(31), "act")
            b1 = dv.a(T, BNb(31), "act")
            s1 = [dv.a(CH * 4, BNb(31), "act"), dv.a(CH * 4, BNb(31), "act")] if train else []
            if not train:
                dv.f(c1)
            r1 = dv.a(T, S([L("torch/nn/functional.py", 1500, "relu")] + BL(31)), "act")
            if not train:
                dv.f(b1)
            c2 = dv.a(T, CVb(32), "act")
            b2 = dv.a(T, BNb(32), "act")
            s2 = [dv.a(CH * 4, BNb(32), "act"), dv.a(CH * 4, BNb(32), "act")] if train else []
            if not train:
                dv.f(c2)
            ad = dv.a(T, S(BL(33)), "act")
            if not train:
                dv.fl([b2, cur])
            r2 = dv.a(T, S([L("torch/nn/functional.py", 1500, "relu")] + BL(33)), "act")
            if train:
                ag.node("ConvolutionBackward0", "x", [cur, c1] + s1, [T], [("res%d.conv1" % b, CH * CH * 36), ("res%d.bn1" % b, 2 * CH * 4)])
                ag.node("ReluBackward0", "x", [b1], [T])
                ag.node("ConvolutionBackward0", "x", [r1, c2] + s2, [T], [("res%d.conv2" % b, CH * CH * 36), ("res%d.bn2" % b, 2 * CH * 4)])
                ag.node("ReluBackward0", "x", [ad, b2], [T])
            else:
                dv.fl([r1, ad])
            cur = r2
        # heads
        pc = dv.a(Bb * 2 * BD * 4, S(NET(70, where)), "act")
        pb = dv.a(Bb * 2 * BD * 4, S(NET(70, where)), "act")
        pr = dv.a(Bb * 2 * BD * 4, S(NET(70, where)), "act")
        pl = dv.a(Bb * 82 * 4, S(L.linear() + NET(71, where)), "act")
        vc = dv.a(Bb * BD * 4, S(NET(73, where)), "act")
        vb = dv.a(Bb * BD * 4, S(NET(73, where)), "act")
        vr = dv.a(Bb * BD * 4, S(NET(73, where)), "act")
        v1 = dv.a(Bb * 256 * 4, S(L.linear() + NET(74, where)), "act")
        v2 = dv.a(Bb * 256 * 4, S(NET(74, where)), "act")
        v3 = dv.a(Bb * 4, S(L.linear() + NET(75, where)), "act")
        vt = dv.a(Bb * 4, S(NET(75, where)), "act")
        if train:
            ag.node("ConvolutionBackward0", "x", [cur, pc, pb, pr, vc, vb, vr, v1, v2, v3], [T],
                    [(k, psz[k]) for k in ("pol.conv", "pol.bn", "pol.fc", "val.conv", "val.bn", "val.fc1", "val.fc2")])
            return pl, vt
        dv.fl([cur, pc, pb, pr, vc, vb, vr, v1, v2, v3])
        return pl, vt

    cycles = 7
    phases = []
    for cyc in range(cycles):
        # ---- self-play: batched leaf evaluation under no_grad
        phases.append(("selfplay", len(A.trace)))
        SPW = lambda line: [app("azgo/selfplay.py", line, "evaluate_leaves"), app("azgo/mcts.py", 141, "search_batch"),
                            app("azgo/selfplay.py", 88, "play_games"), app("main.py", 131, "run")] + MAIN[1:]
        leaves = 16 * min(256 + 64 * cyc, 1024)     # 16 leaves per game, more parallel games each cycle
        for call_i in range(24):
            nl = leaves
            feats = dv.a(nl * PL * BD * 4, S([app("azgo/features.py", 44, "encode_batch")] + SPW(52)), "input")
            pl, vt = tower(nl, SPW(55), False, None)
            dv.f(feats)
            pp = dv.a(nl * 82 * 4, S([L("torch/nn/functional.py", 1890, "softmax")] + SPW(56)), "tmp")
            dv.f(pl)
            cp = dv.a(nl * 82 * 4, S(SPW(57)), "tmp")
            dv.fl([pp, vt, cp])
            dv.wait(rng.randint(25000, 40000))
        # the finished games go into the replay buffer (in place)
        ins = dv.a(rng.randint(9000, 12000) * PL * BD, S([app("azgo/replay.py", 41, "add_games"), app("main.py", 133, "run")] + MAIN[1:]), "tmp")
        dv.f(ins)
        # ---- training
        phases.append(("train", len(A.trace)))
        TRW = lambda line: [app("azgo/train.py", line, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]
        for st in range(6):
            Bb = 2816
            ix = dv.a(Bb * 8, S([app("azgo/replay.py", 55, "sample"), app("azgo/train.py", 30, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]), "input")
            xs = dv.a(Bb * PL * BD, S([app("azgo/replay.py", 56, "sample"), app("azgo/train.py", 30, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]), "input")
            ps = dv.a(Bb * 82 * 4, S([app("azgo/replay.py", 57, "sample"), app("azgo/train.py", 30, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]), "input")
            zs = dv.a(Bb * 4, S([app("azgo/replay.py", 58, "sample"), app("azgo/train.py", 30, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]), "input")
            ag = py_only_ag(dv)
            pl, vt = tower(Bb, TRW(33), True, ag)
            ls = dv.a(Bb * 82 * 4, S([L("torch/nn/functional.py", 1985, "log_softmax")] + TRW(34)), "act")
            pm = dv.a(Bb * 82 * 4, S(TRW(34)), "tmp")
            psum = dv.a(Bb * 4, S(TRW(34)), "tmp")
            dv.f(pm)
            vm = dv.a(Bb * 4, S([L("torch/nn/functional.py", 3383, "mse_loss")] + TRW(35)), "tmp")
            loss = dv.a(4, S(TRW(36)), "act")
            ag.node("LogSoftmaxBackward0", "x", [ls, pl, vt, psum, vm], [Bb * 82 * 4])
            ag.backward(grads)
            for k, v in psz.items():
                if k not in grads:
                    grads[k] = dv.a(v, NOSTACK, "grad")
            OPT = [L("torch/optim/optimizer.py", 391, "wrapper"), app("azgo/train.py", 39, "train_steps"), app("main.py", 135, "run")] + MAIN[1:]
            if not mom:
                mom.extend(dv.a(v, S([L("torch/optim/sgd.py", 406, "_multi_tensor_sgd"), L("torch/optim/sgd.py", 241, "sgd"), L("torch/optim/sgd.py", 80, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt") for v in psz.values())
            WD = S([L("torch/optim/sgd.py", 375, "_multi_tensor_sgd"), L("torch/optim/sgd.py", 241, "sgd"), L("torch/optim/sgd.py", 80, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT)
            tmp = [dv.a(v, WD, "tmp") for v in psz.values()]
            dv.fl(tmp)
            ZG = S([L("torch/optim/optimizer.py", 822, "zero_grad"), L("torch/_compile.py", 24, "inner"), app("azgo/train.py", 32, "train_steps"), app("main.py", 135, "run")] + MAIN[1:])
            for k in list(grads):
                dv.f(grads.pop(k), ZG)
            dv.fl([loss, ix, xs, ps, zs])
            dv.wait(rng.randint(60000, 90000))
    info = dict(param_bytes=sum(psz.values()) + (NB + 1) * 2 * CH * 4, buffer_bytes=NBUF * PL * BD + NBUF * 82 * 4 + NBUF * 4,
                phases=phases, cycles=cycles, stalls=[list(s) for s in A.stalls])
    d = write([A])
    return dict(name="m10_alphazero_go9_rtx3080.pickle", data=d, devs=[A], info=info)
