"""m03: torch_npu DIN (Deep Interest Network) CTR training, rank 5 of 8 under DDP/HCCL, device 5.
The metric code gathers each step's predictions and labels with async all_gather and appends the
work handles to a list it never empties: every handle keeps its input and output tensors."""
import random

import sim
from common import S, Lib, Dev, Tape, op, backward, write, MB, GB, start_recording

HOME = "/home/王磊/"
APP = HOME + "推荐排序/din训练/"
L = Lib(HOME + "miniconda3/envs/pt21/lib/python3.9/site-packages/", "2.1")
STREAM = 2864615360
DEV = 5


def fa(f, line, name):
    return (APP + f, line, name)




def build():
    rng = random.Random(303)
    A = sim.Allocator(device=DEV, stream=STREAM, npu=True, capacity=int(60.9 * GB), time_us=False,
                      base=0x12C040000000)
    dv = Dev(A)
    B, T, E = 4096, 50, 64
    D = 2 * E
    ep_main = lambda line: [fa("训练.py", line, "训练一轮"), fa("训练.py", 229, "主函数"), fa("训练.py", 251, "<module>")]
    # parameters and DDP buckets (before recording)
    TO = S([L("torch_npu/utils/_module.py", 76, "convert"), L("torch/nn/modules/module.py", 797, "_apply"),
            L("torch/nn/modules/module.py", 797, "_apply"), L("torch_npu/utils/_module.py", 78, "to"),
            fa("训练.py", 176, "构建模型"), fa("训练.py", 219, "主函数"), fa("训练.py", 251, "<module>")])
    shapes = {"物品嵌入": 1200000 * E, "类目嵌入": 12000 * E, "城市嵌入": 400 * 16, "年龄嵌入": 10 * 16,
              "性别嵌入": 3 * 16, "用户画像嵌入": 200000 * 16,
              "att.fc1.w": 4 * D * 80, "att.fc1.b": 80, "att.dice1.alpha": 80, "att.fc2.w": 80 * 40, "att.fc2.b": 40,
              "att.dice2.alpha": 40, "att.fc3.w": 40, "att.fc3.b": 1,
              "mlp.fc1.w": 320 * 200, "mlp.fc1.b": 200, "mlp.dice1.alpha": 200, "mlp.fc2.w": 200 * 80, "mlp.fc2.b": 80,
              "mlp.dice2.alpha": 80, "mlp.out.w": 80, "mlp.out.b": 1}
    psize = {k: v * 4 for k, v in shapes.items()}
    params = {k: dv.a(v, TO, "param") for k, v in psize.items()}
    DDP = S([L("torch/nn/parallel/distributed.py", 1029, "_ddp_init_helper"), L("torch/nn/parallel/distributed.py", 804, "__init__"),
             fa("训练.py", 181, "构建模型"), fa("训练.py", 219, "主函数"), fa("训练.py", 251, "<module>")])
    # reducer buckets (25 MiB cap; the item table alone is one bucket)
    bucket_sizes = [psize["物品嵌入"], psize["用户画像嵌入"] + psize["类目嵌入"], sum(v for k, v in psize.items() if k not in ("物品嵌入", "用户画像嵌入", "类目嵌入"))]
    buckets = [dv.a(s, DDP, "ddp_bucket") for s in bucket_sizes]
    start_recording(A)

    grads = {}
    opt_state = []
    leaked = []
    MOD = "模型/din.py"

    def m(line, name="forward"):
        return fa(MOD, line, name)

    FWD = [m(97)] + L.call() + [L("torch/nn/parallel/distributed.py", 1325, "_run_ddp_forward"),
                               L("torch/nn/parallel/distributed.py", 1387, "forward")] + L.call() + [fa("训练.py", 139, "训练一步")] + ep_main(188)

    def emb_stack(line):
        return S([L("torch/nn/functional.py", 2233, "embedding")] + L.mod("torch/nn/modules/sparse.py", 162) + [m(line)] + FWD[1:])

    def step(k):
        tape = Tape()
        LOAD = [fa("数据/加载.py", 58, "搬到设备"), fa("训练.py", 136, "训练一步")] + ep_main(188)
        ids = [dv.a(B * T * 8, S(LOAD)), dv.a(B * T * 8, S(LOAD)), dv.a(B * 8, S(LOAD)), dv.a(B * 8, S(LOAD)),
               dv.a(B * 3 * 8, S(LOAD)), dv.a(B * T, S(LOAD)), dv.a(B * 8, S(LOAD))]
        labels = ids[-1]
        # embeddings (saved indices only: embedding backward needs the ids)
        tape.param("物品嵌入", psize["物品嵌入"])
        tape.param("类目嵌入", psize["类目嵌入"])
        he = op(dv, tape, B * T * E * 4, emb_stack(84), True)
        hc = op(dv, tape, B * T * E * 4, emb_stack(85), True)
        hist = op(dv, tape, B * T * D * 4, S([m(86)] + FWD[1:]), True)
        te = op(dv, tape, B * E * 4, emb_stack(87), True)
        tc = op(dv, tape, B * E * 4, emb_stack(88), True)
        q = op(dv, tape, B * D * 4, S([m(89)] + FWD[1:]), True)
        for kk in ("城市嵌入", "年龄嵌入", "性别嵌入", "用户画像嵌入"):
            tape.param(kk, psize[kk])
        up = op(dv, tape, B * 64 * 4, S([m(90)] + FWD[1:]), True)
        # local activation unit: cat([q, k, q - k, q * k]) -> fc 80 -> Dice -> fc 40 -> Dice -> fc 1
        sub = dv.a(B * T * D * 4, S([m(61, "局部激活"), m(92)] + FWD[1:]), "tmp")
        mul = op(dv, tape, B * T * D * 4, S([m(61, "局部激活"), m(92)] + FWD[1:]), True)
        allc = op(dv, tape, B * T * 4 * D * 4, S([m(61, "局部激活"), m(92)] + FWD[1:]), True)
        dv.f(sub)
        for i, w in ((1, 80), (2, 40)):
            tape.param("att.fc%d.w" % i, psize["att.fc%d.w" % i])
            tape.param("att.fc%d.b" % i, psize["att.fc%d.b" % i])
            op(dv, tape, B * T * w * 4, S(L.linear() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(62 + i, "局部激活"), m(92)] + FWD[1:]), True)
            tape.param("att.dice%d.alpha" % i, psize["att.dice%d.alpha" % i])
            DICE = [m(31)] + L.call() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(62 + i, "局部激活"), m(92)] + FWD[1:]
            bn = op(dv, tape, B * T * w * 4, S([L("torch/nn/functional.py", 2478, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 171) + [m(30)] + L.call() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(62 + i, "局部激活"), m(92)] + FWD[1:]), True)
            op(dv, tape, B * T * w * 4, S([m(31)] + DICE[1:]), True)
            op(dv, tape, B * T * w * 4, S([m(32)] + DICE[1:]), True)
        tape.param("att.fc3.w", psize["att.fc3.w"])
        tape.param("att.fc3.b", psize["att.fc3.b"])
        sc = op(dv, tape, B * T * 4, S(L.linear() + [m(65, "局部激活"), m(92)] + FWD[1:]), True)
        msk = op(dv, tape, B * T * 4, S([m(67, "局部激活"), m(92)] + FWD[1:]), True)
        pooled = op(dv, tape, B * D * 4, S([m(93)] + FWD[1:]), True)
        cat = op(dv, tape, B * 320 * 4, S([m(94)] + FWD[1:]), True)
        for i, w in ((1, 200), (2, 80)):
            tape.param("mlp.fc%d.w" % i, psize["mlp.fc%d.w" % i])
            tape.param("mlp.fc%d.b" % i, psize["mlp.fc%d.b" % i])
            op(dv, tape, B * w * 4, S(L.linear() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(95)] + FWD[1:]), True)
            tape.param("mlp.dice%d.alpha" % i, psize["mlp.dice%d.alpha" % i])
            op(dv, tape, B * w * 4, S([L("torch/nn/functional.py", 2478, "batch_norm")] + L.mod("torch/nn/modules/batchnorm.py", 171) + [m(30)] + L.call() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(95)] + FWD[1:]), True)
            op(dv, tape, B * w * 4, S([m(32)] + L.call() + [L("torch/nn/modules/container.py", 215, "forward")] + L.call() + [m(95)] + FWD[1:]), True)
        tape.param("mlp.out.w", psize["mlp.out.w"])
        tape.param("mlp.out.b", psize["mlp.out.b"])
        logit = op(dv, tape, B * 4, S(L.linear() + [m(96)] + FWD[1:]), True)
        # predictions: torch.sigmoid(logit) -- the tensor the metric code will gather
        pred = dv.a(B * 4, S([m(97)] + FWD[1:]), "act")
        # loss: BCE on probabilities (labels cast to float)
        LS = [fa("训练.py", 141, "训练一步")] + ep_main(188)
        lf = dv.a(B * 4, S([fa("训练.py", 140, "训练一步")] + ep_main(188)), "act")
        loss = dv.a(4, S([L("torch/nn/functional.py", 3127, "binary_cross_entropy")] + LS), "tmp")
        # backward through the DDP reducer (grads copied into the buckets, all-reduced, copied back)
        gl = dv.a(B * 4, S(), "tmp")
        dv.f(loss, S())
        backward(dv, tape, grads)
        dv.f(gl, S())
        # optimizer: Adam (foreach); state made at the first step
        OPT = [L("torch/optim/optimizer.py", 373, "wrapper"), fa("训练.py", 148, "训练一步")] + ep_main(188)
        keys = list(psize)
        if not opt_state:
            for kk in keys:
                opt_state.append(dv.a(psize[kk], S([L("torch/optim/adam.py", 163, "_init_group"), L("torch/optim/adam.py", 146, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
                opt_state.append(dv.a(psize[kk], S([L("torch/optim/adam.py", 165, "_init_group"), L("torch/optim/adam.py", 146, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT), "opt"))
        FE = [L("torch/optim/adam.py", 538, "_multi_tensor_adam"), L("torch/optim/adam.py", 281, "adam"), L("torch/optim/adam.py", 166, "step"), L("torch/optim/optimizer.py", 76, "_use_grad")] + OPT
        tmp = [dv.a(psize[kk], S(FE), "tmp") for kk in keys]
        dv.fl(tmp)
        ZG = S([L("torch/optim/optimizer.py", 825, "zero_grad"), fa("训练.py", 133, "训练一步")] + ep_main(188))
        # metrics: async gather of predictions and labels (指标/异步汇总.py)
        MET = [fa("指标/异步汇总.py", 41, "异步汇总预测"), fa("训练.py", 150, "训练一步")] + ep_main(188)
        lab = dv.a(B * 4, S([fa("指标/异步汇总.py", 38, "异步汇总预测"), fa("训练.py", 150, "训练一步")] + ep_main(188)), "leak")
        g1 = dv.a(8 * B * 4, S(MET), "leak")
        g2 = dv.a(8 * B * 4, S([fa("指标/异步汇总.py", 42, "异步汇总预测"), fa("训练.py", 150, "训练一步")] + ep_main(188)), "leak")
        A.ev_cat[id(A.trace[-1])] = "leak"
        leaked.append((pred, lab, g1, g2))
        # the model's own references go; the work handles keep pred/lab/g1/g2
        dv.f(lf)
        dv.fl(ids)
        return ZG

    zg = None
    info = dict(steps=0)
    for k in range(160):
        if zg is not None:
            for kk in list(grads):
                if grads[kk] is not None:
                    dv.f(grads[kk], zg)
                    grads[kk] = None
        zg = step(k)
        info["steps"] += 1
    # dump taken by the rank's hook after step 160 (grads of the last step still set)
    info["leak_blocks_per_step"] = 4
    info["leak_bytes_per_step"] = sum(b.req for b in leaked[0])
    info["param_bytes"] = sum(psize.values())
    info["bucket_bytes"] = sum(bucket_sizes)
    d = write([A], kind="npu", n_dev_lists=8)
    return dict(name="m03_din_ctr_rank5_npu5.pkl", data=d, devs=[A], info=info)
