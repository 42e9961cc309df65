"""m07: BERT4Rec on MovieLens-20M (26,744 items, hidden 256, 2 blocks, 8 heads, max_len 200,
batch 256, AdamW), recorded with max_entries=40000 and dumped at the end of an epoch: the ring
buffer keeps only the last ~80 steps.  Healthy."""
import random

import sim
from common import S, Lib, Dev, Tape, op, backward, write, NOSTACK, start_recording, MB, GB

APP = "/home/ana/BERT4Rec-VAE-Pytorch/"
L = Lib("/home/ana/.venvs/rec/lib/python3.10/site-packages/", "2.4")
MAXE = 40000


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(707)
    clock = sim.Clock(1766012000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(23.68 * GB), clock=clock, extra_keys=True, base=0x7F0A22000000)
    dv = Dev(A)
    NI, Hd, SQ, B, NH, FF = 26744 + 2, 256, 200, 256, 8, 1024
    psz = {"tok": NI * Hd, "pos": SQ * Hd, "ln0.w": Hd, "ln0.b": Hd}
    for l in range(2):
        for n in ("q", "k", "v", "o"):
            psz["l%d.%s.w" % (l, n)] = Hd * Hd
            psz["l%d.%s.b" % (l, n)] = Hd
        psz.update({"l%d.ff1.w" % l: Hd * FF, "l%d.ff1.b" % l: FF, "l%d.ff2.w" % l: FF * Hd, "l%d.ff2.b" % l: Hd,
                    "l%d.ln1.w" % l: Hd, "l%d.ln1.b" % l: Hd, "l%d.ln2.w" % l: Hd, "l%d.ln2.b" % l: Hd})
    psz.update({"out.w": Hd * NI, "out.b": NI})
    psz = {k: v * 4 for k, v in psz.items()}
    TO = S(L.convert() + [fa("trainers/base.py", 38, "__init__"), fa("trainers/bert.py", 15, "__init__"), fa("main.py", 21, "train"), fa("main.py", 104, "<module>")])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)      # _record_memory_history(max_entries=40000) in main.py before trainer.train()
    EPOCH = [fa("trainers/base.py", 91, "train_one_epoch"), fa("trainers/base.py", 64, "train"), fa("main.py", 25, "train"), fa("main.py", 104, "<module>")]
    LOSS = [fa("trainers/bert.py", 41, "calculate_loss"), fa("trainers/base.py", 88, "train_one_epoch")] + EPOCH[1:]
    MODEL = [fa("models/bert.py", 22, "forward")] + L.call() + LOSS
    BERT = lambda line: [fa("models/bert_modules/bert.py", line, "forward")] + L.call() + MODEL
    grads = {}
    opt = []
    info = dict(param_bytes=sum(psz.values()), steps=0, evals=0)

    def block(tape, l, ntok):
        TB = lambda line: [fa("models/bert_modules/transformer.py", line, "forward")] + L.call() + BERT(45)
        SUB = lambda line: [fa("models/bert_modules/utils/sublayer.py", line, "forward")] + L.call()
        MHA = lambda line: [fa("models/bert_modules/attention/multi_head.py", line, "forward")] + L.call()
        p = "l%d." % l
        h = ntok * Hd * 4
        op(dv, tape, h, S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + SUB(18) + TB(29)), True)
        for n, line in (("q", 31), ("k", 31), ("v", 31)):
            tape.param(p + n + ".w", psz[p + n + ".w"])
            tape.param(p + n + ".b", psz[p + n + ".b"])
            op(dv, tape, h, S(L.linear() + [fa("models/bert_modules/attention/multi_head.py", 30, "<listcomp>")] + MHA(30) + [fa("models/bert_modules/transformer.py", 29, "<lambda>")] + SUB(18) + TB(29)), True)
        SG = lambda line: [fa("models/bert_modules/attention/single.py", line, "forward")] + L.call() + [fa("models/bert_modules/attention/multi_head.py", 34, "forward")] + L.call() + [fa("models/bert_modules/transformer.py", 29, "<lambda>")] + SUB(18) + TB(29)
        sc = dv.a(B * NH * SQ * SQ * 4, S(SG(15)), "tmp")
        sc2 = dv.a(B * NH * SQ * SQ * 4, S(SG(19)), "tmp")
        dv.f(sc)
        op(dv, tape, B * NH * SQ * SQ * 4, S([L("torch/nn/functional.py", 1888, "softmax")] + SG(21)), True)
        dv.f(sc2)
        op(dv, tape, B * NH * SQ * SQ, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + SG(24)), True)
        op(dv, tape, B * NH * SQ * SQ * 4, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + SG(24)), True)
        op(dv, tape, h, S(SG(26)), True)
        op(dv, tape, h, S(MHA(37) + [fa("models/bert_modules/transformer.py", 29, "<lambda>")] + SUB(18) + TB(29)), True)
        tape.param(p + "o.w", psz[p + "o.w"])
        tape.param(p + "o.b", psz[p + "o.b"])
        op(dv, tape, h, S(L.linear() + MHA(39) + [fa("models/bert_modules/transformer.py", 29, "<lambda>")] + SUB(18) + TB(29)), True)
        op(dv, tape, ntok * Hd, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + SUB(18) + TB(29)), True)
        op(dv, tape, h, S(SUB(18) + TB(29)), True)
        tape.param(p + "ln1.w", psz[p + "ln1.w"])
        tape.param(p + "ln1.b", psz[p + "ln1.b"])
        op(dv, tape, h, S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + SUB(18) + TB(30)), True)
        FFN = lambda line: [fa("models/bert_modules/utils/feed_forward.py", line, "forward")] + L.call() + SUB(18) + TB(30)
        tape.param(p + "ff1.w", psz[p + "ff1.w"])
        tape.param(p + "ff1.b", psz[p + "ff1.b"])
        op(dv, tape, ntok * FF * 4, S(L.linear() + FFN(15)), True)
        op(dv, tape, ntok * FF * 4, S([fa("models/bert_modules/utils/gelu.py", 12, "forward")] + L.call() + FFN(15)), True)
        tape.param(p + "ff2.w", psz[p + "ff2.w"])
        tape.param(p + "ff2.b", psz[p + "ff2.b"])
        op(dv, tape, h, S(L.linear() + FFN(15)), True)
        op(dv, tape, ntok * Hd, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + SUB(18) + TB(30)), True)
        op(dv, tape, h, S(SUB(18) + TB(30)), True)
        tape.param(p + "ln2.w", psz[p + "ln2.w"])
        tape.param(p + "ln2.b", psz[p + "ln2.b"])
        op(dv, tape, ntok * Hd, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + TB(31)), True)
        op(dv, tape, h, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + TB(31)), True)

    def train_step():
        tape = Tape()
        ntok = B * SQ
        DL = [fa("trainers/base.py", 84, "train_one_epoch")] + EPOCH[1:]
        seqs = dv.a(ntok * 8, S([fa("trainers/base.py", 84, "<listcomp>")] + DL))
        labels = dv.a(ntok * 8, S([fa("trainers/base.py", 84, "<listcomp>")] + DL))
        mask = dv.a(B * SQ * SQ, S(BERT(38)))               # (B, 1, T, T) bool attention mask
        EMB = lambda line: [fa("models/bert_modules/embedding/bert.py", line, "forward")] + L.call() + BERT(41)
        tape.param("tok", psz["tok"])
        tape.param("pos", psz["pos"])
        op(dv, tape, ntok * Hd * 4, S(L.embedding() + EMB(31)), True)
        op(dv, tape, ntok * Hd * 4, S(EMB(31)), True)
        op(dv, tape, ntok * Hd, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(32)), True)
        op(dv, tape, ntok * Hd * 4, S([L("torch/nn/functional.py", 1295, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(32)), True)
        for l in range(2):
            block(tape, l, ntok)
        # masked positions only (torch.gather of the padded masked_positions) -> output layer -> CE
        nm = B * 40          # max_predictions_per_seq = 40 positions a sequence, padded (weights 0)
        sel = dv.a(ntok, S([fa("trainers/bert.py", 38, "calculate_loss")] + LOSS[1:]))
        op(dv, tape, nm * Hd * 4, S([fa("trainers/bert.py", 39, "calculate_loss")] + LOSS[1:]), True)
        tape.param("out.w", psz["out.w"])
        tape.param("out.b", psz["out.b"])
        op(dv, tape, nm * NI * 4, S(L.linear() + [fa("models/bert.py", 26, "predict")] + [fa("trainers/bert.py", 40, "calculate_loss")] + LOSS[1:]), True)
        CE = [L("torch/nn/functional.py", 3104, "cross_entropy")] + L.mod("torch/nn/modules/loss.py", 1188) + LOSS
        op(dv, tape, nm * NI * 4, S(CE), True)
        loss = dv.a(4, S(CE), "tmp")
        backward(dv, tape, grads)
        dv.f(loss, NOSTACK)
        dv.fl([seqs, labels, mask, sel])
        # optimizer.step(): AdamW (foreach); clip_grad_norm_ first
        OPT = [L("torch/optim/optimizer.py", 484, "wrapper"), fa("trainers/base.py", 92, "train_one_epoch")] + EPOCH[1:]
        CG = [L("torch/nn/utils/clip_grad.py", 82, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper"), fa("trainers/base.py", 90, "train_one_epoch")] + EPOCH[1:]
        nr = [dv.a(4, S(CG), "tmp") for _ in psz]
        tot = dv.a(len(psz) * 4, S([L("torch/nn/utils/clip_grad.py", 86, "clip_grad_norm_")] + CG[1:]), "tmp")
        dv.fl(nr)
        if not opt:
            for k, v in psz.items():
                opt.append(dv.a(v, S([L("torch/optim/adamw.py", 112, "_init_group"), L("torch/optim/adamw.py", 196, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT), "opt"))
                opt.append(dv.a(v, S([L("torch/optim/adamw.py", 115, "_init_group"), L("torch/optim/adamw.py", 196, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adamw.py", 586, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 335, "adamw"), L("torch/optim/adamw.py", 207, "step"), L("torch/optim/optimizer.py", 89, "_use_grad")] + OPT
        t = [dv.a(v, S(FE), "tmp") for v in psz.values()]
        dv.fl(t)
        dv.f(tot)
        ZG = S([L("torch/optim/optimizer.py", 925, "zero_grad"), fa("trainers/base.py", 82, "train_one_epoch")] + EPOCH[1:])
        for k in list(grads):
            if grads[k] is not None:
                dv.f(grads[k], ZG)
                grads[k] = None
        dv.wait(rng.randint(45000, 52000))

    def evaluate():
        """Validation: full ranking of every item for 128 users a batch under no_grad."""
        VAL = [fa("trainers/base.py", 121, "validate"), fa("trainers/base.py", 66, "train"), fa("main.py", 25, "train"), fa("main.py", 104, "<module>")]
        for bi in range(40):
            nb = 128
            ntok = nb * SQ
            x = dv.a(ntok * 8, S(VAL))
            hs = []
            for s in (ntok * Hd * 4, ntok * Hd * 4, nb * NH * SQ * SQ * 4, nb * NH * SQ * SQ * 4, ntok * Hd * 4, ntok * FF * 4, ntok * FF * 4, ntok * Hd * 4):
                hs.append(dv.a(s, S([fa("models/bert.py", 22, "forward")] + L.call() + [fa("trainers/bert.py", 52, "calculate_metrics")] + VAL)))
                if len(hs) > 3:
                    dv.f(hs.pop(0))
            dv.fl(hs)
            sc = dv.a(nb * NI * 4, S(L.linear() + [fa("models/bert.py", 26, "predict"), fa("trainers/bert.py", 53, "calculate_metrics")] + VAL))
            g = dv.a(nb * 101 * 4, S([fa("trainers/bert.py", 55, "calculate_metrics")] + VAL))
            rk = dv.a(nb * 101 * 8, S([fa("trainers/utils.py", 19, "recalls_and_ndcgs_for_ks"), fa("trainers/bert.py", 56, "calculate_metrics")] + VAL))
            dv.fl([sc, x, g, rk])
            dv.wait(8000)

    for step in range(1, 221):
        train_step()
        info["steps"] += 1
        if step % 100 == 0:
            evaluate()
            info["evals"] += 1
    full = len(A.trace)
    d = write([A], max_entries=MAXE)
    info["full_events"] = full
    return dict(name="m07_bert4rec_ml20m_ring.pickle", data=d, devs=[A], info=info)
