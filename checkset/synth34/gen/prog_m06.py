"""m06: rank 1 of a two-GPU DDP fine-tune of Pythia-1B resuming from a checkpoint that rank 0
saved.  torch.load without map_location restores every tensor to the device it was saved from
(cuda:0), so rank 1 fills GPU 0 -- which rank 0 is using -- and runs out of memory there while its
own GPU 1 holds only its parameters.  The except handler dumps the snapshot (both devices)."""
import random

import sim
from common import S, Lib, Dev, write, MB, GB

APP = "/scratch/lvdberg/pythia-ft/"
L = Lib("/scratch/lvdberg/envs/ft/lib/python3.11/site-packages/", "2.3")
NX = "transformers/models/gpt_neox/modeling_gpt_neox.py"


def fa(f, line, name):
    return (APP + f, line, name)


MAIN = [fa("train/finetune.py", 263, "<module>")]


def build():
    rng = random.Random(606)
    clock = sim.Clock(1771230000000000, rng, (3, 9))
    total = 25438126080                     # RTX 3090: 23.69 GiB
    A0 = sim.Allocator(device=0, capacity=total, other_usage=17541300224, clock=clock, extra_keys=True, base=0x7F8C1E000000)
    A1 = sim.Allocator(device=1, capacity=total, other_usage=498073600, clock=clock, extra_keys=True, base=0x7F8A36000000)
    d0, d1 = Dev(A0), Dev(A1)
    H, I, V, NL = 2048, 8192, 50304, 16
    # parameters in module order; (name, numel, decay)
    plist = [("gpt_neox.embed_in.weight", V * H, True)]
    for l in range(NL):
        p = "gpt_neox.layers.%d." % l
        plist += [(p + "input_layernorm.weight", H, False), (p + "input_layernorm.bias", H, False),
                  (p + "post_attention_layernorm.weight", H, False), (p + "post_attention_layernorm.bias", H, False),
                  (p + "attention.query_key_value.weight", 3 * H * H, True), (p + "attention.query_key_value.bias", 3 * H, False),
                  (p + "attention.dense.weight", H * H, True), (p + "attention.dense.bias", H, False),
                  (p + "mlp.dense_h_to_4h.weight", I * H, True), (p + "mlp.dense_h_to_4h.bias", I, False),
                  (p + "mlp.dense_4h_to_h.weight", H * I, True), (p + "mlp.dense_4h_to_h.bias", H, False)]
    plist += [("gpt_neox.final_layer_norm.weight", H, False), ("gpt_neox.final_layer_norm.bias", H, False),
              ("embed_out.weight", V * H, True)]
    # ---- rank 1: build the model and move it to its GPU (recording on from the start of main)
    TO = S([L("torch/nn/modules/module.py", 1150, "convert"), L("torch/nn/modules/module.py", 825, "_apply"),
            L("torch/nn/modules/module.py", 802, "_apply"), L("torch/nn/modules/module.py", 802, "_apply"),
            L("torch/nn/modules/module.py", 1160, "to"), L("transformers/modeling_utils.py", 2724, "to"),
            fa("train/finetune.py", 172, "main")] + MAIN)
    params1 = []
    for name, n, dec in plist:
        params1.append(d1.a(n * 4, TO, "param"))
        if name.endswith("attention.dense.bias"):
            # non-persistent buffers of GPTNeoXAttention: causal mask (bool), masked_bias, rotary inv_freq
            params1.append(d1.a(2048 * 2048, TO, "buffer"))
            params1.append(d1.a(4, TO, "buffer"))
            params1.append(d1.a(32 * 4, TO, "buffer"))
        d1.wait(rng.randint(150, 900))
    d1.wait(900000)
    # ---- model = DDP(model, device_ids=[1]): broadcast of rank 0's module states in 250 MiB
    # coalesced chunks, then the reducer's gradient buckets (1 MiB first bucket, then 25 MiB)
    DDPI = [L("torch/nn/parallel/distributed.py", 871, "__init__"), fa("train/finetune.py", 176, "main")] + MAIN
    SYNC = S([L("torch/distributed/utils.py", 285, "_sync_module_states"), L("torch/nn/parallel/distributed.py", 1006, "_sync_params_and_buffers")] + DDPI)
    sizes = [b.req for b in params1]
    chunk, acc = [], 0
    for sz in sizes:
        if acc + sz > 250 * MB and chunk:
            f = d1.a(acc, SYNC, "tmp")
            d1.wait(int(acc / 9e3))
            d1.f(f)
            chunk, acc = [], 0
        chunk.append(sz)
        acc += sz
    if chunk:
        f = d1.a(acc, SYNC, "tmp")
        d1.f(f)
    BK = S([L("torch/nn/parallel/distributed.py", 1182, "_ddp_init_helper"), L("torch/nn/parallel/distributed.py", 881, "__init__"), fa("train/finetune.py", 176, "main")] + MAIN)
    buckets = []
    cap, acc = 1 * MB, 0
    for name, n, dec in reversed(plist):
        acc += n * 4
        if acc >= cap:
            buckets.append(d1.a(acc, BK, "ddp_bucket"))
            acc, cap = 0, 25 * MB
    if acc:
        buckets.append(d1.a(acc, BK, "ddp_bucket"))
    d1.wait(2500000)                        # optimizer / scheduler construction, checkpoint lookup
    # ---- torch.load("ckpt/step_12000/state.pt") with no map_location: storages go to cuda:0
    LOADST = S([L("torch/_utils.py", 88, "_to"), L("torch/storage.py", 148, "to"), L("torch/storage.py", 136, "cuda"),
                L("torch/serialization.py", 360, "_cuda_deserialize"), L("torch/serialization.py", 389, "default_restore_location"),
                L("torch/serialization.py", 1392, "restore_location"), L("torch/serialization.py", 1422, "load_tensor"),
                L("torch/serialization.py", 1446, "persistent_load"), L("torch/serialization.py", 1460, "_load"),
                L("torch/serialization.py", 1025, "load"), fa("train/ckpt.py", 41, "load_checkpoint"),
                fa("train/finetune.py", 190, "main")] + MAIN)
    order = [(name + " (model)", n) for name, n, dec in plist]
    decay = [(name, n) for name, n, dec in plist if dec]
    nodecay = [(name, n) for name, n, dec in plist if not dec]
    for name, n in decay + nodecay:
        order.append((name + " exp_avg", n))
        order.append((name + " exp_avg_sq", n))
    loaded = []
    info = {}
    for name, n in order:
        try:
            b = d0.a(n * 4, LOADST, "ckpt_on_wrong_device")
        except sim.OOMError as e:
            info["oom"] = dict(tensor=name, size=e.size, free=e.free)
            break
        loaded.append((name, b))
        d0.wait(int(n * 4 / 2.6e3) + rng.randint(200, 900))     # ~2.6 GB/s from the page cache
    info["loaded"] = len(loaded)
    info["loaded_bytes"] = sum(b.req for _, b in loaded)
    info["model_bytes"] = sum(n * 4 for _, n, _ in plist)
    info["ckpt_bytes"] = 3 * info["model_bytes"]
    info["params1_bytes"] = sum(b.req for b in params1)
    info["last_loaded"] = loaded[-1][0]
    info["bucket_bytes"] = sum(b.req for b in buckets)
    info["buckets"] = len(buckets)
    d = write([A0, A1])
    return dict(name="m06_pythia1b_resume_rank1_2gpu.pickle", data=d, devs=[A0, A1], info=info)
