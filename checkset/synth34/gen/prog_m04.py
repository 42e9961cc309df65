"""m04: ELECTRA-base pre-training (generator + discriminator, tied embeddings) with fp16 autocast,
GradScaler, AdamW and gradient accumulation over 2 micro-batches; recorded in the 2023 format
(torch 2.0: no time_us, no allocator_settings, Python stacks).  Healthy."""
import random

import sim
from common import S, Lib, Dev, Tape, op, backward, write, NOSTACK, MB, GB, start_recording

APP = "/workspace/electra-pretrain/"
L = Lib("/opt/conda/lib/python3.10/site-packages/", "2.0")
EL = "transformers/models/electra/modeling_electra.py"


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(404)
    A = sim.Allocator(device=0, capacity=int(39.4 * GB), time_us=False, seg_frames=False, base=0x7F4C30000000)
    dv = Dev(A)
    B, SQ, V = 16, 512, 30522
    NT = B * SQ
    # ---------------- parameters ----------------
    psz = {}

    def P(k, n):
        psz[k] = n * 4
    P("emb.word", V * 768)       # shared by generator and discriminator
    P("emb.pos", 512 * 768)
    P("emb.type", 2 * 768)
    for m in ("gen", "disc"):
        P(m + ".emb.ln.w", 768)
        P(m + ".emb.ln.b", 768)
    P("gen.emb_proj.w", 768 * 256)
    P("gen.emb_proj.b", 256)
    for m, H, I in (("gen", 256, 1024), ("disc", 768, 3072)):
        for l in range(12):
            p = "%s.l%d." % (m, l)
            for n in ("q", "k", "v", "o"):
                P(p + n + ".w", H * H)
                P(p + n + ".b", H)
            P(p + "ln1.w", H)
            P(p + "ln1.b", H)
            P(p + "i.w", H * I)
            P(p + "i.b", I)
            P(p + "out.w", I * H)
            P(p + "out.b", H)
            P(p + "ln2.w", H)
            P(p + "ln2.b", H)
    P("gen.pred.dense.w", 256 * 768)
    P("gen.pred.dense.b", 768)
    P("gen.pred.ln.w", 768)
    P("gen.pred.ln.b", 768)
    P("gen.lm_head.b", V)
    P("disc.head.dense.w", 768 * 768)
    P("disc.head.dense.b", 768)
    P("disc.head.out.w", 768)
    P("disc.head.out.b", 1)
    TO = S(L.convert() + [fa("run_pretraining.py", 212, "main"), fa("run_pretraining.py", 398, "<module>")])
    params = {k: dv.a(v, TO, "param") for k, v in psz.items()}
    start_recording(A)

    grads = {}
    opt_state = []
    TRAIN = [fa("run_pretraining.py", 301, "train"), fa("run_pretraining.py", 395, "main"), fa("run_pretraining.py", 398, "<module>")]

    def mstack(inner, model, outer_line):
        outer = [L(EL, 1312 if model == "gen" else 1195, "forward")] + L.call() + [fa("run_pretraining.py", outer_line, "train_step")] + TRAIN
        return S(inner, outer)

    def layer(tape, model, l, H, heads, I, outer_line):
        p = "%s.l%d." % (model, l)
        LAY = [L(EL, 559, "forward")] + L.call() + [L(EL, 619, "forward")] + L.call()
        SELF = [L(EL, 483, "forward")] + L.call()

        def st(inner):
            return mstack(inner + LAY, model, outer_line)
        ATT = lambda line: [L(EL, line, "forward")] + L.call() + SELF
        AMP = [L("torch/nn/modules/linear.py", 114, "forward")] + L.call()
        h2 = NT * H * 2
        for n, line in (("q", 247), ("k", 249), ("v", 250)):
            tape.param(p + n + ".w", psz[p + n + ".w"])
            tape.param(p + n + ".b", psz[p + n + ".b"])
            op(dv, tape, H * H * 2, st(AMP + ATT(line)), True, gsize=None)            # autocast fp16 weight copy
            op(dv, tape, h2, st(AMP + ATT(line)), True)
        sc = dv.a(B * heads * SQ * SQ * 2, st(ATT(277)), "tmp")
        sc2 = dv.a(B * heads * SQ * SQ * 2, st(ATT(301)), "tmp")
        dv.f(sc)
        sc3 = dv.a(B * heads * SQ * SQ * 2, st(ATT(304)), "tmp")
        dv.f(sc2)
        op(dv, tape, B * heads * SQ * SQ * 4, st([L("torch/nn/functional.py", 1843, "softmax")] + ATT(307)), True)  # fp32 under autocast
        dv.f(sc3)
        op(dv, tape, B * heads * SQ * SQ, st([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + ATT(311)), True)
        op(dv, tape, B * heads * SQ * SQ * 4, st([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + ATT(311)), True)
        op(dv, tape, B * heads * SQ * SQ * 2, st(ATT(317)), True)                     # probs cast to fp16 for the matmul
        op(dv, tape, h2, st(ATT(317)), True)
        op(dv, tape, h2, st(ATT(319)), True)                                          # permute().contiguous()
        OUT = lambda line: [L(EL, line, "forward")] + L.call() + [L(EL, 484, "forward")] + L.call()
        tape.param(p + "o.w", psz[p + "o.w"])
        tape.param(p + "o.b", psz[p + "o.b"])
        op(dv, tape, H * H * 2, st(AMP + OUT(340)), True)
        op(dv, tape, h2, st(AMP + OUT(340)), True)
        op(dv, tape, h2, st([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + OUT(341)), True)
        op(dv, tape, NT * H * 4, st(OUT(342)), True)                                  # residual add (fp32)
        tape.param(p + "ln1.w", psz[p + "ln1.w"])
        tape.param(p + "ln1.b", psz[p + "ln1.b"])
        op(dv, tape, NT * H * 4, st([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + OUT(342)), True)
        INT = [L(EL, 416, "forward")] + L.call() + [L(EL, 580, "feed_forward_chunk"), L("transformers/pytorch_utils.py", 237, "apply_chunking_to_forward"), L(EL, 575, "forward")] + L.call()
        tape.param(p + "i.w", psz[p + "i.w"])
        tape.param(p + "i.b", psz[p + "i.b"])
        op(dv, tape, H * I * 2, mstack(AMP + INT + [L(EL, 619, "forward")] + L.call(), model, outer_line), True)
        op(dv, tape, NT * I * 2, mstack(AMP + INT + [L(EL, 619, "forward")] + L.call(), model, outer_line), True)
        op(dv, tape, NT * I * 2, mstack([L("transformers/activations.py", 78, "forward")] + L.call() + [L(EL, 417, "forward")] + L.call() + INT[len(L.call()) + 1:] + [L(EL, 619, "forward")] + L.call(), model, outer_line), True)
        OUT2 = lambda line: [L(EL, line, "forward")] + L.call() + [L(EL, 581, "feed_forward_chunk"), L("transformers/pytorch_utils.py", 237, "apply_chunking_to_forward"), L(EL, 575, "forward")] + L.call() + [L(EL, 619, "forward")] + L.call()
        tape.param(p + "out.w", psz[p + "out.w"])
        tape.param(p + "out.b", psz[p + "out.b"])
        op(dv, tape, I * H * 2, mstack(AMP + OUT2(430), model, outer_line), True)
        op(dv, tape, h2, mstack(AMP + OUT2(430), model, outer_line), True)
        op(dv, tape, h2, mstack([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + OUT2(431), model, outer_line), True)
        op(dv, tape, NT * H * 4, mstack(OUT2(432), model, outer_line), True)
        tape.param(p + "ln2.w", psz[p + "ln2.w"])
        tape.param(p + "ln2.b", psz[p + "ln2.b"])
        op(dv, tape, NT * H * 4, mstack([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + OUT2(432), model, outer_line), True)

    def embeddings(tape, model, outer_line):
        EMB = lambda line: [L(EL, line, "forward")] + L.call() + [L(EL, 880 if model == "disc" else 880, "forward")] + L.call()
        tape.param("emb.word", psz["emb.word"])
        tape.param("emb.pos", psz["emb.pos"])
        tape.param("emb.type", psz["emb.type"])
        for line in (192, 193, 196):
            op(dv, tape, NT * 768 * 4, mstack([L("torch/nn/functional.py", 2210, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + EMB(line), model, outer_line), True)
        op(dv, tape, NT * 768 * 4, mstack(EMB(198), model, outer_line), True)
        tape.param(model + ".emb.ln.w", psz[model + ".emb.ln.w"])
        tape.param(model + ".emb.ln.b", psz[model + ".emb.ln.b"])
        op(dv, tape, NT * 768 * 4, mstack([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + EMB(202), model, outer_line), True)
        op(dv, tape, NT * 768, mstack([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(203), model, outer_line), True)
        op(dv, tape, NT * 768 * 4, mstack([L("torch/nn/functional.py", 1252, "dropout")] + L.mod("torch/nn/modules/dropout.py", 59) + EMB(203), model, outer_line), True)
        if model == "gen":
            tape.param("gen.emb_proj.w", psz["gen.emb_proj.w"])
            tape.param("gen.emb_proj.b", psz["gen.emb_proj.b"])
            PJ = [L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + [L(EL, 885, "forward")] + L.call()
            op(dv, tape, 768 * 256 * 2, mstack(PJ, model, outer_line), True)
            op(dv, tape, NT * 768 * 2, mstack(PJ, model, outer_line), True)
            op(dv, tape, NT * 256 * 2, mstack(PJ, model, outer_line), True)

    def micro(k):
        tape = Tape()
        DATA = [fa("data/masking.py", 44, "mask_tokens"), fa("run_pretraining.py", 268, "train_step")] + TRAIN
        ids = dv.a(NT * 8, S([fa("run_pretraining.py", 262, "train_step")] + TRAIN))
        am = dv.a(NT * 8, S([fa("run_pretraining.py", 262, "train_step")] + TRAIN))
        pm = dv.a(NT * 4, S(DATA))
        mk = dv.a(NT, S([fa("data/masking.py", 45, "mask_tokens")] + DATA[1:]))
        dv.f(pm)
        labels = dv.a(NT * 8, S([fa("data/masking.py", 47, "mask_tokens")] + DATA[1:]))
        mids = dv.a(NT * 8, S([fa("data/masking.py", 52, "mask_tokens")] + DATA[1:]))
        ext = dv.a(B * SQ * 2, S([L("transformers/modeling_utils.py", 870, "get_extended_attention_mask"), L(EL, 868, "forward")] + L.call() + [L(EL, 1312, "forward")] + L.call() + [fa("run_pretraining.py", 270, "train_step")] + TRAIN))
        # generator
        embeddings(tape, "gen", 270)
        for l in range(12):
            layer(tape, "gen", l, 256, 4, 1024, 270)
        PR = lambda line: [L(EL, line, "forward")] + L.call() + [L(EL, 1313, "forward")] + L.call()
        tape.param("gen.pred.dense.w", psz["gen.pred.dense.w"])
        tape.param("gen.pred.dense.b", psz["gen.pred.dense.b"])
        for line in (720, 721):
            op(dv, tape, NT * 768 * 2, mstack([L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + PR(line), "gen", 270), True)
        tape.param("gen.pred.ln.w", psz["gen.pred.ln.w"])
        tape.param("gen.pred.ln.b", psz["gen.pred.ln.b"])
        op(dv, tape, NT * 768 * 4, mstack([L("torch/nn/functional.py", 2515, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 190) + PR(722), "gen", 270), True)
        tape.param("gen.lm_head.b", psz["gen.lm_head.b"])
        LMH = [L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + [L(EL, 1314, "forward")] + L.call() + [fa("run_pretraining.py", 270, "train_step")] + TRAIN
        op(dv, tape, V * 768 * 2, S(LMH), True)                                     # fp16 copy of the tied word embeddings
        logits = op(dv, tape, NT * V * 2, S(LMH), True)
        CE = [L("torch/nn/functional.py", 3029, "cross_entropy"), L(EL, 1320, "forward")] + L.call() + [fa("run_pretraining.py", 270, "train_step")] + TRAIN
        op(dv, tape, NT * V * 4, S(CE), True)                                         # log_softmax in fp32 (autocast)
        gl = dv.a(4, S(CE), "tmp")
        # sample replaced tokens (no grad): gumbel-max over the masked positions
        nm = int(NT * 0.15) + rng.randint(-40, 40)
        SMP = [fa("run_pretraining.py", 274, "train_step")] + TRAIN
        s1 = dv.a(nm * V * 2, S([fa("run_pretraining.py", 273, "train_step")] + TRAIN), "tmp")
        s2 = dv.a(nm * V * 4, S([fa("modeling/sampling.py", 17, "gumbel_noise"), fa("run_pretraining.py", 274, "train_step")] + TRAIN), "tmp")
        s3 = dv.a(nm * V * 4, S(SMP), "tmp")
        dv.f(s2)
        s4 = dv.a(nm * 8, S(SMP), "tmp")
        dv.f(s3)
        dv.f(s1)
        fake = dv.a(NT * 8, S([fa("run_pretraining.py", 276, "train_step")] + TRAIN))
        dv.f(s4)
        isr = dv.a(NT * 4, S([fa("run_pretraining.py", 278, "train_step")] + TRAIN))
        # discriminator
        embeddings(tape, "disc", 280)
        for l in range(12):
            layer(tape, "disc", l, 768, 12, 3072, 280)
        DH = lambda line: [L(EL, line, "forward")] + L.call() + [L(EL, 1209, "forward")] + L.call()
        tape.param("disc.head.dense.w", psz["disc.head.dense.w"])
        tape.param("disc.head.dense.b", psz["disc.head.dense.b"])
        op(dv, tape, 768 * 768 * 2, mstack([L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + DH(700), "disc", 280), True)
        op(dv, tape, NT * 768 * 2, mstack([L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + DH(700), "disc", 280), True)
        op(dv, tape, NT * 768 * 2, mstack([L("transformers/activations.py", 78, "forward")] + L.call() + DH(701), "disc", 280), True)
        tape.param("disc.head.out.w", psz["disc.head.out.w"])
        tape.param("disc.head.out.b", psz["disc.head.out.b"])
        op(dv, tape, NT * 2, mstack([L("torch/nn/modules/linear.py", 114, "forward")] + L.call() + DH(702), "disc", 280), True)
        BCE = [L("torch/nn/functional.py", 3163, "binary_cross_entropy_with_logits"), fa("modeling/losses.py", 31, "discriminator_loss"), fa("run_pretraining.py", 282, "train_step")] + TRAIN
        op(dv, tape, NT * 4, S(BCE), True)
        dl = dv.a(4, S(BCE), "tmp")
        loss = dv.a(4, S([fa("run_pretraining.py", 284, "train_step")] + TRAIN), "tmp")
        scaled = dv.a(4, S([L("torch/cuda/amp/grad_scaler.py", 200, "scale"), fa("run_pretraining.py", 286, "train_step")] + TRAIN), "tmp")
        # backward
        backward(dv, tape, grads)
        dv.fl([gl, dl, loss, scaled], NOSTACK)
        dv.fl([ids, am, mk, labels, mids, ext, fake, isr])

    STEP = [fa("run_pretraining.py", 314, "train")] + TRAIN[1:]
    info = dict(param_bytes=sum(psz.values()))
    nopt = 0
    for s in range(3):
        for k in range(2):
            micro(k)
        # scaler.unscale_(opt); clip_grad_norm_; scaler.step(opt); scaler.update(); opt.zero_grad()
        UN = [L("torch/cuda/amp/grad_scaler.py", 285, "unscale_"), fa("run_pretraining.py", 309, "train")] + TRAIN[1:]
        inv = dv.a(4, S([L("torch/cuda/amp/grad_scaler.py", 281, "unscale_")] + UN[1:]), "tmp")
        fi = dv.a(4, S([L("torch/cuda/amp/grad_scaler.py", 282, "unscale_")] + UN[1:]), "tmp")
        CG = [L("torch/nn/utils/clip_grad.py", 55, "clip_grad_norm_"), fa("run_pretraining.py", 310, "train")] + TRAIN[1:]
        norms = [dv.a(4, S(CG), "tmp") for _ in psz]
        tn = dv.a(len(psz) * 4, S([L("torch/nn/utils/clip_grad.py", 55, "clip_grad_norm_")] + CG[1:]), "tmp")
        dv.fl(norms)
        cc = dv.a(4, S([L("torch/nn/utils/clip_grad.py", 57, "clip_grad_norm_")] + CG[1:]), "tmp")
        dv.f(tn)
        SS = [L("torch/cuda/amp/grad_scaler.py", 315, "_maybe_opt_step"), L("torch/cuda/amp/grad_scaler.py", 374, "step"), fa("run_pretraining.py", 311, "train")] + TRAIN[1:]
        OPT = [L("torch/optim/optimizer.py", 280, "wrapper")] + SS
        if not opt_state:
            for k, v in psz.items():
                opt_state.append(dv.a(v, S([L("torch/optim/adamw.py", 120, "_init_group"), L("torch/optim/adamw.py", 171, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
                opt_state.append(dv.a(v, S([L("torch/optim/adamw.py", 124, "_init_group"), L("torch/optim/adamw.py", 171, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adamw.py", 522, "_multi_tensor_adamw"), L("torch/optim/adamw.py", 312, "adamw"), L("torch/optim/adamw.py", 199, "step"), L("torch/optim/optimizer.py", 33, "_use_grad")] + OPT
        tmp = [dv.a(v, S(FE), "tmp") for v in psz.values()]
        dv.fl(tmp)
        nopt += 1
        # scaler.update(): a new scale tensor replaces the old one
        dv.fl([inv, fi, cc])
        ZG = S([L("torch/optim/optimizer.py", 246, "zero_grad"), fa("run_pretraining.py", 313, "train")] + TRAIN[1:])
        for k in list(grads):
            if grads[k] is not None:
                dv.f(grads[k], ZG)
                grads[k] = None
    d = write([A], settings=False)
    info["opt_steps"] = nopt
    return dict(name="m04_electra_base_pretrain_2023.pickle", data=d, devs=[A], info=info)
