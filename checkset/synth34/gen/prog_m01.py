"""m01: DreamerV3 (NM512/dreamerv3-torch) on Atari 100k, recorded with C++ stacks
(_record_memory_history(stacks="all")).  Healthy."""
import random

import sim
from common import (F, S, Lib, Dev, Tape, op, backward, cpp_fwd, cpp_bwd, cpp_plain, write, Ann, start_recording,
                    MB, GB)

R = "/home/jkim/dreamerv3-torch/"
L = Lib("/home/jkim/miniconda3/envs/dreamer/lib/python3.10/site-packages/", "2.5")


def fr(f, line, name):
    return (R + f, line, name)


# Python frames of the program (innermost first)
MAIN = [fr("dreamer.py", 339, "main"), fr("dreamer.py", 364, "<module>")]
SIM = [fr("tools.py", 183, "simulate")] + MAIN
CALL = [fr("dreamer.py", 85, "__call__")] + SIM
TRAIN = [fr("dreamer.py", 179, "_train"), fr("dreamer.py", 73, "__call__")] + SIM
WM = [fr("models.py", 118, "_train")] + TRAIN
WM_BWD = [fr("tools.py", 783, "__call__"), fr("models.py", 152, "_train")] + TRAIN
BEH = [fr("dreamer.py", 188, "_train"), fr("dreamer.py", 73, "__call__")] + SIM


def bwd_of(op_, node):
    return cpp_bwd(op_, node)


def build():
    rng = random.Random(101)
    clock = sim.Clock(1767342811000000, rng, (3, 11))
    A = sim.Allocator(device=0, capacity=24 * GB, clock=clock, extra_keys=True, base=0x7F1C00000000)
    dv = Dev(A)
    ann = Ann(clock)

    # ---------------- parameters (alive before recording) -----------------
    pshapes = {}

    def P(name, n):
        pshapes[name] = n * 4
    for i, (co, ci) in enumerate([(32, 3), (64, 32), (128, 64), (256, 128)]):
        P("enc.conv%d" % i, co * ci * 16)
        P("enc.ln%d.w" % i, co)
        P("enc.ln%d.b" % i, co)
    P("rssm.W", 512)
    P("rssm.img_in", 1042 * 512)
    P("rssm.img_in_ln.w", 512)
    P("rssm.img_in_ln.b", 512)
    P("rssm.gru", 1024 * 1536)
    P("rssm.gru_ln.w", 1536)
    P("rssm.gru_ln.b", 1536)
    P("rssm.img_out", 512 * 512)
    P("rssm.img_out_ln.w", 512)
    P("rssm.img_out_ln.b", 512)
    P("rssm.imgs_stat", 512 * 1024)
    P("rssm.imgs_stat.b", 1024)
    P("rssm.obs_out", 4608 * 512)
    P("rssm.obs_out_ln.w", 512)
    P("rssm.obs_out_ln.b", 512)
    P("rssm.obs_stat", 512 * 1024)
    P("rssm.obs_stat.b", 1024)
    P("dec.lin", 1536 * 4096)
    P("dec.lin.b", 4096)
    for i, (ci, co) in enumerate([(256, 128), (128, 64), (64, 32), (32, 3)]):
        P("dec.convT%d" % i, ci * co * 16)
        if co != 3:
            P("dec.ln%d.w" % i, co)
            P("dec.ln%d.b" % i, co)
        else:
            P("dec.convT%d.b" % i, co)
    for h, nout in (("reward", 255), ("cont", 1), ("actor", 18), ("critic", 255), ("slow", 255)):
        P(h + ".l0", 1536 * 512)
        P(h + ".ln0.w", 512)
        P(h + ".ln0.b", 512)
        P(h + ".l1", 512 * 512)
        P(h + ".ln1.w", 512)
        P(h + ".ln1.b", 512)
        P(h + ".out", 512 * nout)
        P(h + ".out.b", nout)
    groups = {"model": [k for k in pshapes if k.split(".")[0] in ("enc", "rssm", "dec", "reward", "cont")],
              "actor": [k for k in pshapes if k.startswith("actor")],
              "critic": [k for k in pshapes if k.startswith("critic")]}
    # the parameters were moved to the device before recording: written with the same stack
    to_st = S(L.convert(), fr("dreamer.py", 298, "main"), fr("dreamer.py", 364, "<module>"))
    params = {}
    for k in pshapes:
        params[k] = dv.a(pshapes[k], to_st, "param")
    # replay buffer lives on the host; the agent's state for the one env
    start_recording(A)

    grads = {}
    opt_state = {g: None for g in groups}
    gi = [0]

    def gkey(name):
        return name

    # -------------------------------------------------------------- helpers
    def lin(tape, n_rows, n_out, py, keep=True, bias=True, pkey=None):
        if pkey:
            tape.param(pkey, pshapes[pkey], bwd_of("mm", "MmBackward0" if not bias else "AddmmBackward0"))
        return op(dv, tape, n_rows * n_out * 4, cpp_fwd("addmm" if bias else "mm", py), keep,
                  bwd_of("mm", "AddmmBackward0" if bias else "MmBackward0"))

    def ln(tape, n, py, pkey=None):
        if pkey:
            tape.param(pkey + ".w", pshapes[pkey + ".w"], bwd_of("layer_norm", "NativeLayerNormBackward0"))
            tape.param(pkey + ".b", pshapes[pkey + ".b"], bwd_of("layer_norm", "NativeLayerNormBackward0"))
        return op(dv, tape, n * 4, cpp_fwd("layer_norm", py), True, bwd_of("layer_norm", "NativeLayerNormBackward0"))

    def act(tape, n, py, kind="silu"):
        return op(dv, tape, n * 4, cpp_fwd(kind, py), True, bwd_of(kind, {"silu": "SiluBackward0", "sigmoid": "SigmoidBackward0", "tanh": "TanhBackward0"}[kind]))

    def mlp(tape, rows, head, layers_py, nout):
        # networks.py MLP.forward: Linear -> LayerNorm -> SiLU, twice; then the distribution head
        for i in range(2):
            pyl = [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 714, "forward")] + L.call() + layers_py
            lin(tape, rows, 512, pyl, pkey="%s.l%d" % (head, i), bias=False)
            pyn = [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 714, "forward")] + L.call() + layers_py
            ln(tape, rows * 512, pyn, pkey="%s.ln%d" % (head, i))
            pya = [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 714, "forward")] + L.call() + layers_py
            act(tape, rows * 512, pya)
        pyo = [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [fr("networks.py", 724, "forward")] + L.call() + layers_py
        tape.param(head + ".out", pshapes[head + ".out"], bwd_of("mm", "AddmmBackward0"))
        tape.param(head + ".out.b", pshapes[head + ".out.b"], bwd_of("mm", "AddmmBackward0"))
        return op(dv, tape, rows * nout * 4, cpp_fwd("addmm", pyo), True, bwd_of("mm", "AddmmBackward0"))

    def img_step(tape, rows, py_outer, tmp_list):
        """RSSM.img_step (networks.py): cat(stoch, action) -> img_in -> GRU -> img_out -> stats."""
        pyc = [fr("networks.py", 214, "img_step")] + py_outer
        op(dv, tape, rows * 1042 * 4, cpp_fwd("cat", pyc), True, None)
        lin(tape, rows, 512, [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 218, "img_step")] + py_outer, bias=False, pkey="rssm.img_in")
        ln(tape, rows * 512, [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 218, "img_step")] + py_outer, pkey="rssm.img_in_ln")
        act(tape, rows * 512, [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 218, "img_step")] + py_outer)
        # GRUCell (networks.py) : parts = layers(cat(inputs, state)); LN; split; sigmoid/tanh
        gru = [fr("networks.py", 221, "img_step")] + py_outer
        op(dv, tape, rows * 1024 * 4, cpp_fwd("cat", [fr("networks.py", 872, "forward")] + L.call() + gru), True, None)
        lin(tape, rows, 1536, [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 873, "forward")] + L.call() + gru, bias=False, pkey="rssm.gru")
        ln(tape, rows * 1536, [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 873, "forward")] + L.call() + gru, pkey="rssm.gru_ln")
        act(tape, rows * 512, [fr("networks.py", 875, "forward")] + L.call() + gru, "sigmoid")
        op(dv, tape, rows * 512 * 4, cpp_fwd("mul", [fr("networks.py", 876, "forward")] + L.call() + gru), True, bwd_of("mul", "MulBackward0"))
        act(tape, rows * 512, [fr("networks.py", 876, "forward")] + L.call() + gru, "tanh")
        act(tape, rows * 512, [fr("networks.py", 877, "forward")] + L.call() + gru, "sigmoid")
        op(dv, tape, rows * 512 * 4, cpp_fwd("mul", [fr("networks.py", 878, "forward")] + L.call() + gru), True, bwd_of("mul", "MulBackward0"))
        deter = op(dv, tape, rows * 512 * 4, cpp_fwd("add", [fr("networks.py", 878, "forward")] + L.call() + gru), True, bwd_of("add", "AddBackward0"))
        lin(tape, rows, 512, [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 225, "img_step")] + py_outer, bias=False, pkey="rssm.img_out")
        ln(tape, rows * 512, [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 225, "img_step")] + py_outer, pkey="rssm.img_out_ln")
        act(tape, rows * 512, [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 225, "img_step")] + py_outer)
        pys = [fr("networks.py", 290, "_suff_stats_layer"), fr("networks.py", 226, "img_step")] + py_outer
        tape.param("rssm.imgs_stat", pshapes["rssm.imgs_stat"], bwd_of("mm", "AddmmBackward0"))
        lg = op(dv, tape, rows * 1024 * 4, cpp_fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + pys), True, bwd_of("mm", "AddmmBackward0"))
        # unimix: probs = softmax(logits); mix with uniform; log -> logits
        pyu = [fr("networks.py", 296, "_suff_stats_layer"), fr("networks.py", 226, "img_step")] + py_outer
        op(dv, tape, rows * 1024 * 4, cpp_fwd("softmax", pyu), True, bwd_of("softmax", "SoftmaxBackward0"))
        op(dv, tape, rows * 1024 * 4, cpp_fwd("add", pyu), True, bwd_of("add", "AddBackward0"))
        # sample: OneHotDist.mode/sample + straight-through
        pyd = [fr("tools.py", 431, "sample"), fr("networks.py", 228, "img_step")] + py_outer
        t = op(dv, None, rows * 1024 * 4, cpp_fwd("empty_like", pyd), False)
        st = op(dv, tape, rows * 1024 * 4, cpp_fwd("add", [fr("tools.py", 434, "sample"), fr("networks.py", 228, "img_step")] + py_outer), True, bwd_of("add", "AddBackward0"))
        dv.f(t)
        return deter, st

    # ------------------------------------------------------------ env steps
    def env_step(n):
        """Policy for one observation (Dreamer._policy): encoder, obs_step, actor; no grad."""
        py = [fr("dreamer.py", 112, "_policy"), fr("dreamer.py", 93, "__call__")] + SIM
        tmp = []
        x = dv.a(64 * 64 * 3 * 4, cpp_fwd("mul", [fr("models.py", 181, "preprocess"), fr("dreamer.py", 107, "_policy"), fr("dreamer.py", 93, "__call__")] + SIM))
        for co, hw in ((32, 32), (64, 16), (128, 8), (256, 4)):
            c = dv.a(co * hw * hw * 4, cpp_fwd("conv", L.conv2d() + [fr("networks.py", 1018, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 566, "forward")] + L.call() + [fr("networks.py", 336, "forward")] + L.call() + [fr("dreamer.py", 108, "_policy"), fr("dreamer.py", 93, "__call__")] + SIM))
            dv.f(x)
            x = c
        for s in (1042, 512, 512, 1024, 1536, 1536, 512, 512, 512, 512, 4608, 512, 512, 1024, 1024, 1536, 512, 512, 18, 18):
            tmp.append(dv.a(s * 4, cpp_fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + py)))
            if len(tmp) > 3:
                dv.f(tmp.pop(0))
        dv.fl(tmp)
        dv.f(x)
        dv.wait(2200)

    # ------------------------------------------------------------ world model train
    def wm_train(first):
        tape = Tape()
        B, T = 16, 64
        BT = B * T
        img = dv.a(BT * 64 * 64 * 3 * 4, cpp_fwd("mul", [fr("models.py", 181, "preprocess"), fr("models.py", 115, "_train")] + TRAIN), "act")
        ENC = [fr("networks.py", 566, "forward")] + L.call() + [fr("networks.py", 336, "forward")] + L.call() + WM
        x = img
        for i, (co, hw) in enumerate(((32, 32), (64, 16), (128, 8), (256, 4))):
            n = BT * co * hw * hw
            tape.param("enc.conv%d" % i, pshapes["enc.conv%d" % i], bwd_of("conv", "ConvolutionBackward0"))
            cpy = L.conv2d() + [fr("networks.py", 1018, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + ENC
            op(dv, tape, n * 4, cpp_fwd("conv", cpy), True, bwd_of("conv", "ConvolutionBackward0"))
            lpy = [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [fr("networks.py", 1001, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + ENC
            tape.param("enc.ln%d.w" % i, pshapes["enc.ln%d.w" % i], bwd_of("layer_norm", "NativeLayerNormBackward0"))
            tape.param("enc.ln%d.b" % i, pshapes["enc.ln%d.b" % i], bwd_of("layer_norm", "NativeLayerNormBackward0"))
            # ImgChLayerNorm permutes to channels-last and back: a contiguous copy
            p1 = dv.a(n * 4, cpp_fwd("empty_like", [fr("networks.py", 999, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + ENC), "tmp")
            op(dv, tape, n * 4, cpp_fwd("layer_norm", lpy), True, bwd_of("layer_norm", "NativeLayerNormBackward0"))
            dv.f(p1)
            apy = [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + ENC
            act(tape, n, apy)
        # RSSM.observe: static_scan over 64 time steps (networks.py obs_step)
        OBS = [fr("networks.py", 189, "obs_step"), fr("networks.py", 137, "<lambda>"), fr("tools.py", 594, "static_scan"), fr("networks.py", 135, "observe"), fr("models.py", 119, "_train")] + TRAIN
        IMG = [fr("networks.py", 180, "obs_step"), fr("networks.py", 137, "<lambda>"), fr("tools.py", 594, "static_scan"), fr("networks.py", 135, "observe"), fr("models.py", 119, "_train")] + TRAIN
        outs = []
        for t in range(T):
            img_step(tape, B, IMG, None)
            op(dv, tape, B * 4608 * 4, cpp_fwd("cat", OBS), True, None)
            tape.param("rssm.obs_out", pshapes["rssm.obs_out"], bwd_of("mm", "MmBackward0"))
            op(dv, tape, B * 512 * 4, cpp_fwd("mm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 190, "obs_step")] + OBS[1:]), True, bwd_of("mm", "MmBackward0"))
            ln(tape, B * 512, [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 190, "obs_step")] + OBS[1:], pkey="rssm.obs_out_ln")
            act(tape, B * 512, [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + [fr("networks.py", 190, "obs_step")] + OBS[1:])
            tape.param("rssm.obs_stat", pshapes["rssm.obs_stat"], bwd_of("mm", "AddmmBackward0"))
            op(dv, tape, B * 1024 * 4, cpp_fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [fr("networks.py", 290, "_suff_stats_layer"), fr("networks.py", 191, "obs_step")] + OBS[1:]), True, bwd_of("mm", "AddmmBackward0"))
            op(dv, tape, B * 1024 * 4, cpp_fwd("softmax", [fr("networks.py", 296, "_suff_stats_layer"), fr("networks.py", 191, "obs_step")] + OBS[1:]), True, bwd_of("softmax", "SoftmaxBackward0"))
            op(dv, tape, B * 1024 * 4, cpp_fwd("add", [fr("tools.py", 434, "sample"), fr("networks.py", 193, "obs_step")] + OBS[1:]), True, bwd_of("add", "AddBackward0"))
            dv.wait(40)
        # static_scan stacks the per-step outputs: post/prior stoch, deter, logits
        SCAN = [fr("tools.py", 610, "static_scan"), fr("networks.py", 135, "observe"), fr("models.py", 119, "_train")] + TRAIN
        for s in (1024, 512, 1024, 1024, 512, 1024):
            op(dv, tape, BT * s * 4, cpp_fwd("cat", SCAN), True, None)
        FEAT = [fr("networks.py", 262, "get_feat"), fr("models.py", 125, "_train")] + TRAIN
        feat = op(dv, tape, BT * 1536 * 4, cpp_fwd("cat", FEAT), True, None)
        # KL losses (networks.py kl_loss): two KLs over (BT, 32, 32)
        KL = [fr("networks.py", 345, "kl_loss"), fr("models.py", 121, "_train")] + TRAIN
        for _ in range(6):
            op(dv, tape, BT * 1024 * 4, cpp_fwd("log_softmax" if _ % 3 == 0 else "mul", KL), True, bwd_of("mul", "MulBackward0"))
        # heads: decoder (image), reward, cont
        DEC = [fr("networks.py", 647, "forward")] + L.call() + [fr("networks.py", 428, "forward")] + L.call() + [fr("models.py", 129, "_train")] + TRAIN
        tape.param("dec.lin", pshapes["dec.lin"], bwd_of("mm", "AddmmBackward0"))
        tape.param("dec.lin.b", pshapes["dec.lin.b"], bwd_of("mm", "AddmmBackward0"))
        op(dv, tape, BT * 4096 * 4, cpp_fwd("addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [fr("networks.py", 640, "forward")] + L.call() + DEC[2:]), True, bwd_of("mm", "AddmmBackward0"))
        for i, (co, hw) in enumerate(((128, 8), (64, 16), (32, 32), (3, 64))):
            n = BT * co * hw * hw
            tape.param("dec.convT%d" % i, pshapes["dec.convT%d" % i], bwd_of("conv", "ConvolutionBackward0"))
            cpy = [L("torch/nn/modules/conv.py", 1162, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + DEC
            op(dv, tape, n * 4, cpp_fwd("conv", cpy), True, bwd_of("conv", "ConvolutionBackward0"))
            if co != 3:
                tape.param("dec.ln%d.w" % i, pshapes["dec.ln%d.w" % i], bwd_of("layer_norm", "NativeLayerNormBackward0"))
                tape.param("dec.ln%d.b" % i, pshapes["dec.ln%d.b" % i], bwd_of("layer_norm", "NativeLayerNormBackward0"))
                p1 = dv.a(n * 4, cpp_fwd("empty_like", [fr("networks.py", 999, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + DEC), "tmp")
                op(dv, tape, n * 4, cpp_fwd("layer_norm", [L("torch/nn/functional.py", 2900, "layer_norm"), L("torch/nn/modules/normalization.py", 217, "forward")] + L.call() + [fr("networks.py", 1001, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + DEC), True, bwd_of("layer_norm", "NativeLayerNormBackward0"))
                dv.f(p1)
                act(tape, n, [L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + [L("torch/nn/modules/container.py", 250, "forward")] + L.call() + DEC)
            else:
                tape.param("dec.convT3.b", pshapes["dec.convT3.b"], bwd_of("conv", "ConvolutionBackward0"))
        # image loss: MSEDist log_prob: (mean - target)^2 summed
        LP = [fr("tools.py", 343, "log_prob"), fr("models.py", 138, "_train")] + TRAIN
        op(dv, tape, BT * 64 * 64 * 3 * 4, cpp_fwd("add", LP), True, bwd_of("add", "SubBackward0"))
        op(dv, tape, BT * 64 * 64 * 3 * 4, cpp_fwd("mul", LP), True, bwd_of("mul", "PowBackward0"))
        HEAD = [fr("networks.py", 727, "forward")] + L.call() + [fr("models.py", 131, "_train")] + TRAIN
        mlp(tape, BT, "reward", HEAD, 255)
        TW = [fr("tools.py", 412, "log_prob"), fr("models.py", 138, "_train")] + TRAIN
        for _ in range(3):
            op(dv, tape, BT * 255 * 4, cpp_fwd("mul" if _ else "log_softmax", TW), True, bwd_of("mul", "MulBackward0"))
        mlp(tape, BT, "cont", HEAD, 1)
        dv.wait(15000)
        # backward (tools.Optimizer.__call__: loss.backward(); clip_grad_norm_; opt.step)
        backward(dv, tape, grads)
        dv.f(img, S())
        return feat

    def opt_step(group, first):
        keys = groups[group]
        name = {"model": "Adam", "actor": "Adam", "critic": "Adam"}[group]
        OPT = [fr("tools.py", 789, "__call__"), fr({"model": "models.py", "actor": "models.py", "critic": "models.py"}[group], {"model": 152, "actor": 402, "critic": 408}[group], "_train")] + (TRAIN if group == "model" else BEH)
        # clip_grad_norm_: per-grad norms via _foreach_norm, stacked, total
        CG = [L("torch/nn/utils/clip_grad.py", 91, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper")] + OPT
        norms = [dv.a(4, cpp_fwd("foreach_norm", CG), "tmp") for _ in keys]
        tot = dv.a(len(keys) * 4, cpp_fwd("cat", [L("torch/nn/utils/clip_grad.py", 94, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper")] + OPT), "tmp")
        dv.fl(norms)
        n2 = dv.a(4, cpp_fwd("mul", [L("torch/nn/utils/clip_grad.py", 94, "clip_grad_norm_"), L("torch/nn/utils/clip_grad.py", 30, "_no_grad_wrapper")] + OPT), "tmp")
        dv.f(tot)
        ann.start("Optimizer.step#%s.step" % name)
        STEP = [L("torch/optim/optimizer.py", 487, "wrapper"), L("torch/optim/optimizer.py", 79, "_use_grad")]
        if opt_state[group] is None:
            st = []
            INIT = [L("torch/optim/adam.py", 157, "_init_group"), L("torch/optim/adam.py", 213, "step")] + STEP[1:] + STEP[:1] + OPT
            INIT2 = [L("torch/optim/adam.py", 161, "_init_group"), L("torch/optim/adam.py", 213, "step")] + STEP[1:] + STEP[:1] + OPT
            for k in keys:
                st.append(dv.a(pshapes[k], cpp_fwd("zeros_like", INIT), "opt"))
                st.append(dv.a(pshapes[k], cpp_fwd("zeros_like", INIT2), "opt"))
            opt_state[group] = st
        # _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)
        FE = [L("torch/optim/adam.py", 605, "_multi_tensor_adam"), L("torch/optim/adam.py", 794, "adam"), L("torch/optim/optimizer.py", 154, "maybe_fallback"), L("torch/optim/adam.py", 247, "step")] + STEP[1:] + STEP[:1] + OPT
        sq = [dv.a(pshapes[k], cpp_fwd("foreach_sqrt", FE), "tmp") for k in keys]
        dv.fl(sq)
        ann.end("Optimizer.step#%s.step" % name)
        dv.f(n2)
        # opt.zero_grad(set_to_none=True) happens in tools.Optimizer before backward next time
        ZG = [L("torch/optim/optimizer.py", 975, "zero_grad"), fr("tools.py", 781, "__call__")]
        ann.start("Optimizer.zero_grad#%s.zero_grad" % name)
        ann.end("Optimizer.zero_grad#%s.zero_grad" % name)
        for k in keys:
            if grads.get(k) is not None:
                dv.f(grads[k], S(ZG, OPT[1:]))
                grads[k] = None

    # ------------------------------------------------------------ behaviour (imagination)
    def behavior_train(feat):
        tape = Tape()
        H, N = 15, 1024
        IM = [fr("models.py", 469, "step"), fr("tools.py", 594, "static_scan"), fr("models.py", 474, "_imagine"), fr("models.py", 380, "_train")] + BEH
        ACT = [fr("models.py", 466, "step"), fr("tools.py", 594, "static_scan"), fr("models.py", 474, "_imagine"), fr("models.py", 380, "_train")] + BEH
        start = [dv.a(N * 1024 * 4, cpp_fwd("empty_like", [fr("models.py", 462, "<lambda>"), fr("models.py", 463, "_imagine"), fr("models.py", 380, "_train")] + BEH), "act"),
                 dv.a(N * 512 * 4, cpp_fwd("empty_like", [fr("models.py", 462, "<lambda>"), fr("models.py", 463, "_imagine"), fr("models.py", 380, "_train")] + BEH), "act")]
        for h in range(H):
            op(dv, tape, N * 1536 * 4, cpp_fwd("cat", [fr("networks.py", 262, "get_feat")] + ACT), True, None)
            mlp(tape, N, "actor", [fr("networks.py", 727, "forward")] + L.call() + ACT, 18)
            op(dv, tape, N * 18 * 4, cpp_fwd("add", [fr("tools.py", 434, "sample")] + ACT), True, bwd_of("add", "AddBackward0"))
            img_step(tape, N, IM, None)
            dv.wait(300)
        SC = [fr("tools.py", 610, "static_scan"), fr("models.py", 474, "_imagine"), fr("models.py", 380, "_train")] + BEH
        for s in (1536, 1024, 512, 18):
            op(dv, tape, H * N * s * 4, cpp_fwd("cat", SC), True, None)
        # reward on imagined features (world model frozen: RequiresGrad off), critic values
        RW = [fr("networks.py", 727, "forward")] + L.call() + [fr("models.py", 386, "_train")] + BEH
        mlp(tape, H * N, "reward", RW, 255)
        CR = [fr("networks.py", 727, "forward")] + L.call() + [fr("models.py", 389, "_compute_target"), fr("models.py", 387, "_train")] + BEH
        # the critic's value baseline is computed without a graph (critic not in RequiresGrad)
        tmp = []
        for n_ in (512, 512, 512, 512, 512, 512, 255):
            tmp.append(dv.a(H * N * n_ * 4, cpp_fwd("mm" if n_ == 512 else "addmm", [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + CR), "tmp"))
            if len(tmp) > 2:
                dv.f(tmp.pop(0))
        dv.f(tmp.pop(0))
        base = tmp.pop(0)
        # lambda returns, actor loss (reinforce with log-probs)
        RET = [fr("tools.py", 707, "lambda_return"), fr("models.py", 420, "_compute_target"), fr("models.py", 387, "_train")] + BEH
        for _ in range(4):
            op(dv, tape, H * N * 4, cpp_fwd("add", RET), True, bwd_of("add", "AddBackward0"))
        AL = [fr("models.py", 437, "_compute_actor_loss"), fr("models.py", 391, "_train")] + BEH
        op(dv, tape, H * N * 18 * 4, cpp_fwd("log_softmax", AL), True, bwd_of("log_softmax", "LogSoftmaxBackward0"))
        op(dv, tape, H * N * 4, cpp_fwd("mul", AL), True, bwd_of("mul", "MulBackward0"))
        dv.f(base)
        dv.wait(9000)
        backward(dv, tape, grads)
        dv.fl(start, S())
        opt_step("actor", False)
        # critic: value head on detached imag feat, two-hot loss, slow-critic regulariser
        tape2 = Tape()
        VF = [fr("networks.py", 727, "forward")] + L.call() + [fr("models.py", 397, "_train")] + BEH
        mlp(tape2, H * N, "critic", VF, 255)
        VL = [fr("tools.py", 412, "log_prob"), fr("models.py", 398, "_train")] + BEH
        op(dv, tape2, H * N * 255 * 4, cpp_fwd("log_softmax", VL), True, bwd_of("log_softmax", "LogSoftmaxBackward0"))
        op(dv, tape2, H * N * 255 * 4, cpp_fwd("mul", VL), True, bwd_of("mul", "MulBackward0"))
        SL = [L("torch/nn/modules/linear.py", 125, "forward")] + L.call() + [fr("networks.py", 724, "forward")] + L.call() + [fr("models.py", 400, "_train")] + BEH
        s1 = dv.a(H * N * 512 * 4, cpp_fwd("mm", SL), "tmp")
        s2 = dv.a(H * N * 255 * 4, cpp_fwd("addmm", SL), "tmp")
        dv.f(s1)
        op(dv, tape2, H * N * 255 * 4, cpp_fwd("mul", VL), True, bwd_of("mul", "MulBackward0"))
        dv.f(s2)
        dv.wait(4000)
        backward(dv, tape2, grads)
        opt_step("critic", False)
        # slow critic update: torch._foreach_lerp_ in place: no allocation

    # ------------------------------------------------------------ the run
    it = 0
    for rnd in range(4):
        for _ in range(6):
            env_step(it)
            it += 1
        feat = wm_train(rnd == 0)
        opt_step("model", rnd == 0)
        behavior_train(feat)
        dv.wait(1500)
        # the RSSM posterior 'post' is kept by Dreamer._train as start for imagination; freed now
    for _ in range(5):
        env_step(it)
        it += 1
    d = write([A], annotations=ann.items)
    return dict(name="m01_dreamerv3_atari100k_cpp.pickle", data=d, devs=[A],
                info=dict(param_bytes=sum(pshapes.values())))
