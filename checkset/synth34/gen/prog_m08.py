"""m08: a ticket-triage service generating short JSON answers with Mistral-7B-Instruct (fp16) and
transformers' quantized KV cache (quanto, 4 bits, residual_length 128) on one 24 GB L4, one batch
of up to 8 prompts at a time (300-3,900 tokens, left-padded).  Every decode step dequantizes the
whole cache of each layer, concatenates it and expands it for grouped-query attention: large
temporaries whose sizes change with every batch and every token, interleaved with the long-lived
quantized caches -> the pool fragments: reserved climbs far above allocated."""
import random

import sim
from common import S, Lib, Dev, write, MB, GB

APP = "/app/triage/"
L = Lib("/app/.venv/lib/python3.11/site-packages/", "2.4")
MI = "transformers/models/mistral/modeling_mistral.py"
CU = "transformers/cache_utils.py"
QT = "optimum/quanto/"


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(808)
    clock = sim.Clock(1772001000000000, rng, (2, 6))
    A = sim.Allocator(device=0, capacity=int(22.03 * GB), other_usage=int(0.43 * GB), clock=clock, extra_keys=True, base=0x7EFB40000000)
    dv = Dev(A)
    A.free_us_per_gb = 90000           # cudaFree cost when segments are released
    H, KVH, HD, I, NL, V = 4096, 8, 128, 14336, 32, 32768
    # weights (fp16), loaded before recording
    shapes = [V * H]
    for _ in range(NL):
        shapes += [H * H, KVH * HD * H, KVH * HD * H, H * H, I * H, I * H, H * I, H, H]
    shapes += [H, V * H]
    LOAD = S([L("accelerate/utils/modeling.py", 329, "set_module_tensor_to_device"), L("transformers/modeling_utils.py", 949, "_load_state_dict_into_meta_model"),
              L("transformers/modeling_utils.py", 4310, "_load_pretrained_model"), L("transformers/modeling_utils.py", 3960, "from_pretrained"),
              fa("triage/engine.py", 38, "__init__"), fa("triage/server.py", 52, "lifespan")])
    weights = [dv.a(n * 2, LOAD, "param") for n in shapes]
    from common import start_recording
    start_recording(A)
    info = dict(param_bytes=sum(n * 2 for n in shapes), batches=[])

    SRV = [fa("triage/engine.py", 77, "generate_batch"), fa("triage/server.py", 118, "_worker"),
           ("/usr/lib/python3.11/asyncio/events.py", 84, "_run")]
    GEN = [L("transformers/generation/utils.py", 3011, "_sample"), L("transformers/generation/utils.py", 2047, "generate"),
           L("torch/utils/_contextlib.py", 116, "decorate_context")] + SRV
    CAUSAL = [L(MI, 1054, "forward")] + L.call() + GEN
    MODEL = lambda line: [L(MI, line, "forward")] + L.call() + CAUSAL
    LAYER = lambda line: [L(MI, line, "forward")] + L.call() + MODEL(824)
    ATT = lambda line: [L(MI, line, "forward")] + L.call() + LAYER(589)
    UPD = lambda line: [L(CU, line, "update"), L(MI, 527, "forward")] + L.call() + LAYER(589)
    QZ = lambda line, cl: [L(QT + "tensor/weights/qbits.py" if False else QT + "tensor/qbits.py", line, "quantize"), L(CU, 881, "_quantize"), L(CU, cl, "update"), L(MI, 527, "forward")] + L.call() + LAYER(589)
    DQ = lambda cl: [L(QT + "tensor/qbits.py", 284, "dequantize"), L(CU, 886, "_dequantize"), L(CU, cl, "update"), L(MI, 527, "forward")] + L.call() + LAYER(589)

    def quantize(n_elems, cl):
        """int4 packed data + fp16 scale and zero-point per group of 64 (along the head dim)."""
        g = n_elems // 64
        t = dv.a(n_elems, S(QZ(196, cl)), "tmp")               # uint8 codes before packing
        pk = dv.a(n_elems // 2, S(QZ(214, cl)), "kv_cache")
        sc = dv.a(g * 2, S(QZ(203, cl)), "kv_cache")
        zp = dv.a(g * 2, S(QZ(205, cl)), "kv_cache")
        dv.f(t)
        return [pk, sc, zp]

    def dequant(n_elems, cl):
        u = dv.a(n_elems, S([L(QT + "tensor/packed.py", 48, "unpack")] + DQ(cl)), "tmp")
        o = dv.a(n_elems * 2, S(DQ(cl)), "tmp")
        dv.f(u)
        return o

    peak_gap = []
    for bi in range(8):
        nb = rng.choice([4, 6, 8, 8, 8])
        lens = [rng.randint(300, 3900) for _ in range(nb)]
        Lp = max(lens)
        ntok = rng.randint(10, 16)
        info["batches"].append(dict(batch=nb, prompt_len=Lp, new_tokens=ntok))
        # tokenizer output to device
        ids = dv.a(nb * Lp * 8, S([L("transformers/tokenization_utils_base.py", 798, "to"), fa("triage/engine.py", 70, "generate_batch")] + SRV[1:]))
        am = dv.a(nb * Lp * 8, S([L("transformers/tokenization_utils_base.py", 798, "to"), fa("triage/engine.py", 70, "generate_batch")] + SRV[1:]))
        cache = []          # per layer: [k quantized blocks], [v quantized blocks], k residual, v residual
        # ---- prefill
        x = dv.a(nb * Lp * H * 2, S(L.embedding() + MODEL(786)))
        mask = dv.a(nb * Lp * Lp * 2, S([L("transformers/modeling_attn_mask_utils.py", 387, "_prepare_4d_causal_attention_mask_with_cache_position"), L(MI, 954, "_update_causal_mask"), L(MI, 799, "forward")] + L.call() + CAUSAL))
        for l in range(NL):
            n1 = dv.a(nb * Lp * H * 2, S([L(MI, 90, "forward")] + L.call() + LAYER(582)))
            q = dv.a(nb * Lp * H * 2, S(L.linear() + ATT(492)))
            k = dv.a(nb * Lp * KVH * HD * 2, S(L.linear() + ATT(493)))
            v = dv.a(nb * Lp * KVH * HD * 2, S(L.linear() + ATT(494)))
            dv.f(n1)
            qr = dv.a(nb * Lp * H * 2, S([L(MI, 183, "apply_rotary_pos_emb")] + ATT(510)))
            kr = dv.a(nb * Lp * KVH * HD * 2, S([L(MI, 184, "apply_rotary_pos_emb")] + ATT(510)))
            dv.fl([q, k])
            ne = nb * KVH * Lp * HD
            kq = quantize(ne, 837)
            vq = quantize(ne, 838)
            r0 = dv.a(0, S(UPD(839)), "kv_cache")
            r1 = dv.a(0, S(UPD(840)), "kv_cache")
            cache.append([kq, vq, r0, r1])
            ke = dv.a(nb * Lp * H * 2, S([L(MI, 82, "repeat_kv")] + ATT(530)))
            ve = dv.a(nb * Lp * H * 2, S([L(MI, 82, "repeat_kv")] + ATT(531)))
            ao = dv.a(nb * Lp * H * 2, S(ATT(551)))
            dv.fl([qr, kr, v, ke, ve])
            o = dv.a(nb * Lp * H * 2, S(L.linear() + ATT(561)))
            dv.f(ao)
            x2 = dv.a(nb * Lp * H * 2, S(LAYER(599)))
            dv.fl([o, x])
            x = x2
            n2 = dv.a(nb * Lp * H * 2, S([L(MI, 90, "forward")] + L.call() + LAYER(602)))
            MLP = [L(MI, 164, "forward")] + L.call() + LAYER(603)
            gt = dv.a(nb * Lp * I * 2, S(L.linear() + MLP))
            ac = dv.a(nb * Lp * I * 2, S([L("torch/nn/modules/activation.py", 432, "forward")] + L.call() + MLP))
            dv.f(gt)
            up = dv.a(nb * Lp * I * 2, S(L.linear() + MLP))
            pr = dv.a(nb * Lp * I * 2, S(MLP))
            dv.fl([ac, up])
            dn = dv.a(nb * Lp * H * 2, S(L.linear() + MLP))
            dv.fl([pr, n2])
            x2 = dv.a(nb * Lp * H * 2, S(LAYER(604)))
            dv.fl([dn, x])
            x = x2
        nrm = dv.a(nb * Lp * H * 2, S([L(MI, 90, "forward")] + L.call() + MODEL(868)))
        dv.f(x)
        lastp = dv.a(nb * H * 2, S(CAUSAL[:0] + [L(MI, 1074, "forward")] + L.call() + GEN))
        lg = dv.a(nb * V * 2, S(L.linear() + [L(MI, 1074, "forward")] + L.call() + GEN))
        lgf = dv.a(nb * V * 4, S([L(MI, 1075, "forward")] + L.call() + GEN))
        dv.fl([nrm, lastp, lg, mask])
        SMP = [L("transformers/generation/utils.py", 3033, "_sample")] + GEN[1:]
        nxt = dv.a(nb * 8, S(SMP))
        dv.f(lgf)
        dv.wait(380000 * nb * Lp // 16000)
        # ---- decode
        L_ = Lp
        res_len = 0
        for t in range(ntok):
            L_ += 1
            am2 = dv.a(nb * L_ * 8, S([L("transformers/generation/utils.py", 1372, "_update_model_kwargs_for_generation"), L("transformers/generation/utils.py", 3048, "_sample")] + GEN[1:]))
            dv.f(am)
            am = am2
            x = dv.a(nb * H * 2, S(L.embedding() + MODEL(786)))
            for l in range(NL):
                kq, vq, r0, r1 = cache[l]
                n1 = dv.a(nb * H * 2, S([L(MI, 90, "forward")] + L.call() + LAYER(582)))
                q = dv.a(nb * H * 2, S(L.linear() + ATT(492)))
                kv = [dv.a(nb * KVH * HD * 2, S(L.linear() + ATT(493))), dv.a(nb * KVH * HD * 2, S(L.linear() + ATT(494)))]
                dv.f(n1)
                nq = (L_ - 1 - res_len)
                dk = dequant(nb * KVH * nq * HD, 842)
                dvv = dequant(nb * KVH * nq * HD, 843)
                ck = dv.a(nb * KVH * L_ * HD * 2, S([L(CU, 846, "update"), L(MI, 527, "forward")] + L.call() + LAYER(589)))
                cv = dv.a(nb * KVH * L_ * HD * 2, S([L(CU, 847, "update"), L(MI, 527, "forward")] + L.call() + LAYER(589)))
                dv.fl([dk, dvv])
                nr0 = dv.a(nb * KVH * (res_len + 1) * HD * 2, S(UPD(856)), "kv_cache")
                nr1 = dv.a(nb * KVH * (res_len + 1) * HD * 2, S(UPD(857)), "kv_cache")
                dv.fl([r0, r1])
                cache[l][2], cache[l][3] = nr0, nr1
                ke = dv.a(nb * L_ * H * 2, S([L(MI, 82, "repeat_kv")] + ATT(530)))
                ve = dv.a(nb * L_ * H * 2, S([L(MI, 82, "repeat_kv")] + ATT(531)))
                dv.fl([ck, cv])
                ao = dv.a(nb * H * 2, S(ATT(551)))
                dv.fl([ke, ve, q] + kv)
                o = dv.a(nb * H * 2, S(L.linear() + ATT(561)))
                dv.f(ao)
                x2 = dv.a(nb * H * 2, S(LAYER(599)))
                dv.fl([o, x])
                MLP = [L(MI, 164, "forward")] + L.call() + LAYER(603)
                gt = dv.a(nb * I * 2, S(L.linear() + MLP))
                up = dv.a(nb * I * 2, S(L.linear() + MLP))
                dn = dv.a(nb * H * 2, S(L.linear() + MLP))
                dv.fl([gt, up])
                x = dv.a(nb * H * 2, S(LAYER(604)))
                dv.fl([dn, x2])
                gap = A.reserved - A.allocated
            res_len += 1
            lg = dv.a(nb * V * 4, S([L(MI, 1075, "forward")] + L.call() + GEN))
            dv.f(x)
            n2 = dv.a(nb * 8, S(SMP))
            dv.fl([lg, nxt])
            nxt = n2
            dv.wait(rng.randint(26000, 34000))
        # the batch is done: the DynamicCache-like QuantizedCache goes with generate()'s return
        for kq, vq, r0, r1 in cache:
            dv.fl(kq + vq + [r0, r1])
        outs = dv.a(nb * (Lp + ntok) * 8, S([L("transformers/generation/utils.py", 3063, "_sample")] + GEN[1:]))
        dv.fl([ids, am, nxt])
        dv.wait(90000)
        dv.f(outs)
        dv.wait(rng.randint(200000, 2500000))
    d = write([A])
    return dict(name="m08_mistral7b_kvquant_triage.pickle", data=d, devs=[A], info=info)
