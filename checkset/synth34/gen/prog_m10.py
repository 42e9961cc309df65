"""m10: taming-transformers VQGAN (f16, 16,384 codes) fine-tuned on a 256x256 dataset with
PyTorch Lightning: two optimizers (autoencoder Adam, discriminator Adam), LPIPS (frozen VGG16)
perceptual loss, batch 6, fp32, V100-32GB.  Recording starts at the first training batch; six
batches are recorded.  Healthy."""
import random

import sim
from common import S, Lib, Dev, Tape, op, backward, write, start_recording, Ann, NOSTACK, MB, GB

APP = "/home/pmartin/taming-transformers/"
L = Lib("/home/pmartin/miniconda3/envs/taming/lib/python3.9/site-packages/", "2.1")
PL = "pytorch_lightning/"
MD = APP + "taming/modules/diffusionmodules/model.py"


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(1010)
    clock = sim.Clock(1765401000000000, rng, (3, 9))
    A = sim.Allocator(device=0, capacity=int(31.74 * GB), clock=clock, extra_keys=True, base=0x7F93C8000000)
    dv = Dev(A)
    ann = Ann(clock)
    B, R = 6, 256
    # parameter groups (fp32): (name, bytes) — encoder, decoder, quantizer, discriminator, LPIPS
    def conv(cin, cout, k=3):
        return [cout * cin * k * k * 4, cout * 4]

    def res(cin, cout):
        out = [cin * 4, cin * 4] + conv(cin, cout) + [cout * 4, cout * 4] + conv(cout, cout)
        if cin != cout:
            out += conv(cin, cout, 1)
        return out
    enc, dec = [], []
    enc += conv(3, 128)
    chs = [128, 128, 128, 256, 256, 512]
    for i in range(5):
        for r in range(2):
            enc += res(chs[i] if r == 0 else chs[i + 1], chs[i + 1])
        if i < 4:
            enc += conv(chs[i + 1], chs[i + 1])
    enc += res(512, 512) + [512 * 4 * 2] + conv(512, 512, 1) * 3 + res(512, 512) + [512 * 4 * 2] + conv(512, 256)
    dec += conv(256, 512) + res(512, 512) + [512 * 4 * 2] + conv(512, 512, 1) * 3 + res(512, 512)
    for i in range(4, -1, -1):
        for r in range(3):
            dec += res(chs[i + 1], chs[i]) if r == 0 else res(chs[i], chs[i])
        if i > 0:
            dec += conv(chs[i], chs[i])
    dec += [128 * 4 * 2] + conv(128, 3)
    quant = [16384 * 256 * 4] + conv(256, 256, 1) + conv(256, 256, 1)
    disc = conv(3, 64, 4) + conv(64, 128, 4)[:1] + [128 * 4, 128 * 4] + conv(128, 256, 4)[:1] + [256 * 4, 256 * 4] + conv(256, 512, 4)[:1] + [512 * 4, 512 * 4] + conv(512, 1, 4)
    lpips = []
    for cin, cout in ((3, 64), (64, 64), (64, 128), (128, 128), (128, 256), (256, 256), (256, 256), (256, 512), (512, 512), (512, 512), (512, 512), (512, 512), (512, 512)):
        lpips += conv(cin, cout)
    lpips += [64 * 4, 128 * 4, 256 * 4, 512 * 4, 512 * 4]
    TO = S(L.convert() + [L("lightning_fabric/utilities/device_dtype_mixin.py", 79, "to"), L(PL + "strategies/strategy.py", 168, "model_to_device"),
                          L(PL + "trainer/trainer.py", 948, "_run"), L(PL + "trainer/trainer.py", 544, "fit"), fa("main.py", 575, "<module>")])
    groups = {"ae": enc + dec + quant, "disc": disc, "lpips": lpips}
    params = {g: [dv.a(n, TO, "param") for n in v] for g, v in groups.items()}
    start_recording(A)
    info = dict(param_bytes=sum(sum(v) for v in groups.values()), ae_param_bytes=sum(groups["ae"]),
                disc_param_bytes=sum(disc), lpips_param_bytes=sum(lpips))

    LOOP = [L(PL + "loops/optimization/automatic.py", 319, "_training_step"), L(PL + "loops/optimization/automatic.py", 146, "closure"),
            L(PL + "loops/optimization/automatic.py", 131, "closure"), L(PL + "loops/optimization/automatic.py", 200, "__call__")]
    OUTER = [L(PL + "core/optimizer.py", 153, "step"), L(PL + "loops/training_epoch_loop.py", 240, "advance"),
             L(PL + "loops/fit_loop.py", 355, "advance"), L(PL + "trainer/trainer.py", 989, "_run_stage"),
             L(PL + "trainer/trainer.py", 948, "_run"), L(PL + "trainer/trainer.py", 544, "fit"), fa("main.py", 575, "<module>")]
    TS = lambda line, oi: [fa("taming/models/vqgan.py", line, "training_step")] + [L(PL + "strategies/strategy.py", 390, "training_step"), L(PL + "trainer/call.py", 309, "_call_strategy_hook")] + LOOP + [L("torch/optim/optimizer.py", 373, "wrapper"), L(PL + "plugins/precision/precision.py", 117, "optimizer_step")] + OUTER

    grads = {}
    opt_state = {}
    log_buffers = []

    def ae_forward(tape, oi, gk):
        """VQModel.forward: encoder -> quant_conv -> VectorQuantizer -> post_quant_conv -> decoder."""
        FW = lambda line: [fa("taming/models/vqgan.py", line, "forward")] + L.call() + TS(85 if oi == 0 else 99, oi)
        gi = [0]

        def p():
            tape.param((gk, gi[0]), 4)
            gi[0] += 1

        def resblock(ch, hw, where):
            n = B * ch * hw * 4
            st = lambda line: S([(MD, line, "forward")] + L.call() + where)
            op(dv, tape, n, st(125))   # norm1
            op(dv, tape, n, st(126))   # nonlinearity (x * sigmoid(x))
            op(dv, tape, n, st(126))
            op(dv, tape, n, st(127))   # conv1
            op(dv, tape, n, st(131))   # norm2
            op(dv, tape, n, st(132))
            op(dv, tape, n, st(132))
            op(dv, tape, n, st(134))   # conv2
            op(dv, tape, n, st(143))   # x + h
        ENC = [(MD, 437, "forward")] + L.call() + FW(49)
        DEC = [(MD, 541, "forward")] + L.call() + FW(52)
        op(dv, tape, B * 128 * R * R * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + ENC))
        hw = R * R
        for i in range(5):
            for r in range(2):
                resblock(chs[i + 1], hw, ENC)
            if i < 4:
                hw //= 4
                op(dv, tape, B * chs[i + 1] * hw * 4, S([(MD, 194, "forward")] + L.call() + ENC))
        for k in range(6):
            op(dv, tape, B * 512 * hw * 4, S([(MD, 452, "forward")] + L.call() + FW(49)))
        z = op(dv, tape, B * 256 * hw * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + FW(50)))
        # VectorQuantizer: distances to 16,384 codes, argmin, one-hot gather, straight-through
        VQ = lambda line: S([fa("taming/modules/vqvae/quantize.py", line, "forward")] + L.call() + FW(51))
        d = dv.a(B * hw * 16384 * 4, VQ(227), "tmp")
        d2 = dv.a(B * hw * 16384 * 4, VQ(229), "tmp")
        dv.f(d)
        idx = dv.a(B * hw * 8, VQ(235), "act")
        dv.f(d2)
        zq = op(dv, tape, B * 256 * hw * 4, VQ(239))
        op(dv, tape, B * 256 * hw * 4, VQ(243))
        op(dv, tape, B * 256 * hw * 4, VQ(246))
        op(dv, tape, B * 256 * hw * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + FW(52)))
        for k in range(6):
            op(dv, tape, B * 512 * hw * 4, S([(MD, 545, "forward")] + L.call() + FW(52)))
        for i in range(4, -1, -1):
            for r in range(3):
                resblock(chs[i], hw, DEC)
            if i > 0:
                hw *= 4
                op(dv, tape, B * chs[i] * hw * 4, S([L("torch/nn/functional.py", 3983, "interpolate"), (MD, 171, "forward")] + L.call() + DEC))
                op(dv, tape, B * chs[i] * hw * 4, S([(MD, 173, "forward")] + L.call() + DEC))
        op(dv, tape, B * 128 * hw * 4, S([(MD, 569, "forward")] + L.call() + DEC))
        # the reconstruction is kept by training_step for the discriminator's turn (detached)
        xrec = dv.a(B * 3 * hw * 4, S([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + DEC), "act")
        for _ in range(len(groups["ae"])):
            p()
        return xrec, idx

    def lpips_fwd(tape, line):
        """LPIPS(input, reconstruction): VGG16 features of both; the reconstruction branch keeps its graph."""
        LP = lambda l2: S([fa("taming/modules/losses/lpips.py", l2, "forward")] + L.call() + [fa("taming/modules/losses/vqperceptual.py", line, "forward")] + L.call())
        feats = []
        for j, (ch, f) in enumerate(((64, 1), (64, 1), (128, 2), (128, 2), (256, 4), (256, 4), (256, 4), (512, 8), (512, 8), (512, 8), (512, 16), (512, 16), (512, 16))):
            n = B * ch * (R // f) ** 2 * 4
            a = dv.a(n, LP(38), "tmp")           # input branch (no graph: frozen VGG, input needs no grad)
            feats.append(a)
            op(dv, tape, n, LP(38))               # reconstruction branch conv (saved)
            op(dv, tape, n, LP(38))               # relu (saved)
        diffs = [op(dv, tape, B * (R // 4) ** 2 * 4, LP(45)) for _ in range(5)]
        dv.fl(feats)

    def disc_fwd(tape, x_is_rec, line, oi, keep=True):
        DS = lambda: S([L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [fa("taming/modules/discriminator/model.py", 66, "forward")] + L.call() + [fa("taming/modules/losses/vqperceptual.py", line, "forward")] + L.call() + TS(89 if oi == 0 else 102, oi)[1:])
        out = []
        for ch, s in ((64, 128), (128, 64), (256, 32), (512, 31), (1, 30)):
            for _ in range(1 if ch in (64, 1) else 3):
                if keep:
                    out.append(op(dv, tape, B * ch * s * s * 4, DS()))
                else:
                    out.append(dv.a(B * ch * s * s * 4, DS(), "tmp"))
        if not keep:
            dv.fl(out)

    def opt_step(name, keys, pbytes, oi):
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), L(PL + "plugins/precision/precision.py", 117, "optimizer_step")] + OUTER
        ann.start("Optimizer.step#Adam.step")
        if name not in opt_state:
            st = []
            for n in pbytes:
                st.append(dv.a(n, S([L("torch/optim/adam.py", 163, "_init_group"), L("torch/optim/adam.py", 146, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                st.append(dv.a(n, S([L("torch/optim/adam.py", 165, "_init_group"), L("torch/optim/adam.py", 146, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
            opt_state[name] = st
        tmp = [dv.a(n, S([L("torch/optim/adam.py", 538, "_multi_tensor_adam"), L("torch/optim/adam.py", 281, "adam"), L("torch/optim/adam.py", 166, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "tmp") for n in pbytes]
        dv.fl(tmp)
        ann.end("Optimizer.step#Adam.step")
        ZG = S([L("torch/optim/optimizer.py", 825, "zero_grad"), L(PL + "loops/optimization/automatic.py", 255, "_make_zero_grad_fn")] + LOOP[1:] + OUTER)
        ann.start("Optimizer.zero_grad#Adam.zero_grad")
        for k in keys:
            if grads.get(k) is not None:
                dv.f(grads[k], ZG)
                grads[k] = None
        ann.end("Optimizer.zero_grad#Adam.zero_grad")

    ae_keys = [("ae", i) for i in range(len(groups["ae"]))]
    disc_keys = [("disc", i) for i in range(len(disc))]
    for step in range(6):
        x = dv.a(B * 3 * R * R * 4, S([L("lightning_fabric/utilities/apply_func.py", 101, "apply_to_collection"), L(PL + "core/module.py", 357, "_apply_batch_transfer_handler")] + OUTER[1:]))
        x2 = dv.a(B * 3 * R * R * 4, S([fa("taming/models/vqgan.py", 76, "get_input"), fa("taming/models/vqgan.py", 82, "training_step")] + TS(82, 0)[1:]))
        dv.f(x)
        # ---- optimizer 0: autoencoder (reconstruction + LPIPS + codebook + adversarial with adaptive weight)
        tape = Tape()
        xrec, idx = ae_forward(tape, 0, "ae")
        for k_ in range(len(groups["ae"])):
            grads.setdefault(("ae", k_), None)
        # taping parameters: re-key the generic param entries to real sizes
        items = []
        for kind, x_, gsz, bst in tape.items:
            if kind == "param":
                items.append(("param", x_, groups["ae"][x_[1]], bst))
            else:
                items.append((kind, x_, gsz, bst))
        tape.items = items
        VP = lambda line: S([fa("taming/modules/losses/vqperceptual.py", line, "forward")] + L.call() + TS(85, 0)[1:])
        op(dv, tape, B * 3 * R * R * 4, VP(71))                 # |x - xrec|
        lpips_fwd(tape, 73)
        op(dv, tape, B * 3 * R * R * 4, VP(74))
        disc_fwd(tape, True, 89, 0)
        # calculate_adaptive_weight: torch.autograd.grad(nll_loss / g_loss, last_layer, retain_graph=True)
        AW = S([fa("taming/modules/losses/vqperceptual.py", 56, "calculate_adaptive_weight"), fa("taming/modules/losses/vqperceptual.py", 94, "forward")] + L.call() + TS(85, 0)[1:])
        g1 = dv.a(128 * 3 * 9 * 4, AW, "tmp")
        g2 = dv.a(128 * 3 * 9 * 4, S([fa("taming/modules/losses/vqperceptual.py", 57, "calculate_adaptive_weight"), fa("taming/modules/losses/vqperceptual.py", 94, "forward")] + L.call() + TS(85, 0)[1:]), "tmp")
        dv.fl([g1, g2])
        # self.log_dict(...): Lightning's result collection keeps one running tensor per logged key
        if step == 0:
            LG = S([L(PL + "trainer/connectors/logger_connector/result.py", 265, "update"), L(PL + "trainer/connectors/logger_connector/result.py", 418, "update_metrics"), L(PL + "core/module.py", 519, "log"), L(PL + "core/module.py", 636, "log_dict"), fa("taming/models/vqgan.py", 89, "training_step")] + TS(89, 0)[1:])
            for _ in range(9):
                log_buffers.append(dv.a(4, LG, "log_state"))
                log_buffers.append(dv.a(4, LG, "log_state"))
        backward(dv, tape, grads)
        dv.f(idx)
        opt_step("ae", ae_keys, groups["ae"], 0)
        # ---- optimizer 1: discriminator on real and detached reconstructions
        tape = Tape()
        disc_fwd(tape, False, 102, 1)
        disc_fwd(tape, True, 103, 1)
        for i, nb in enumerate(disc):
            tape.param(("disc", i), nb)
        for i in range(4):
            op(dv, tape, B * 900 * 4, S([fa("taming/modules/losses/vqperceptual.py", 20, "hinge_d_loss"), fa("taming/modules/losses/vqperceptual.py", 106, "forward")] + L.call() + TS(99, 1)[1:]))
        backward(dv, tape, grads)
        opt_step("disc", disc_keys, disc, 1)
        dv.fl([xrec, x2])
        dv.wait(rng.randint(900000, 1000000))
    d = write([A], annotations=ann.items)
    info["log_state_bytes"] = sum(b.req for b in log_buffers)
    return dict(name="m10_vqgan_f16_lightning.pickle", data=d, devs=[A], info=info)
