"""m05: a music stem-separation service (Demucs: htdemucs, the htdemucs_ft bag of four fine-tuned
HTDemucs models, and htdemucs_6s, all resident), _record_memory_history(enabled="state") switched on at start-up; a slow-job watchdog
dumps the pool in the middle of a job: segments with block stacks, empty trace.  Healthy."""
import random

import sim
from common import S, Lib, Dev, write, MB, GB

APP = "/opt/stemsplit/"
L = Lib("/opt/stemsplit/.venv/lib/python3.11/site-packages/", "2.4")
DM = "demucs/"


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(505)
    clock = sim.Clock(1769500000000000, rng, (2, 8))
    A = sim.Allocator(device=0, capacity=int(22.06 * GB), clock=clock, extra_keys=True, base=0x7F6A10000000)
    dv = Dev(A)
    # ---- four HTDemucs models (drums, bass, other, vocals), ~42M parameters each
    shapes = []

    def dconv(ch):
        out = []
        for _ in range(2):                       # DConv: conv, GN, conv (GLU), GN, LayerScale
            out += [ch // 8 * ch * 3, ch // 8, ch // 8, ch // 8, ch * 2 * ch // 8, ch * 2, ch * 2, ch * 2, ch]
        return out
    for ch_in, ch in ((4, 48), (48, 96), (96, 192), (192, 384)):
        for branch in (0, 1):                    # frequency and time encoders
            k = 8
            shapes += [ch * (ch_in if branch == 0 else max(2, ch_in // 2)) * k, ch, ch, ch,
                       2 * ch * ch, 2 * ch, 2 * ch, 2 * ch] + dconv(ch)
    shapes += [512 * 384, 512, 384 * 512, 384, 512 * 384, 512, 384 * 512, 384]
    for _ in range(5):                           # cross-domain transformer: both branches
        for _ in range(2):
            shapes += [3 * 512 * 512, 3 * 512, 512 * 512, 512, 512 * 2048, 2048, 2048 * 512, 512,
                       512, 512, 512, 512, 512, 512, 512, 512]
    for ch_out, ch in ((16, 48), (48, 96), (96, 192), (192, 384)):
        for branch in (0, 1):
            shapes += [ch * 2 * ch * 3, ch * 2, ch * 2, ch * 2, ch * (ch_out if branch == 0 else ch_out // 2) * 8,
                       ch_out if branch == 0 else ch_out // 2, ch, ch]
    shapes += [512 * 16, 512, 512 * 8, 512]
    n_per_model = sum(shapes)
    LOAD = lambda line: S([L("torch/nn/modules/module.py", 1160, "convert"), L("torch/nn/modules/module.py", 833, "_apply"),
                           L("torch/nn/modules/module.py", 810, "_apply"), L("torch/nn/modules/module.py", 810, "_apply"),
                           L("torch/nn/modules/module.py", 1174, "to"), fa("stemsplit/engine.py", 47, "__init__"),
                           fa("stemsplit/app.py", line, "create_app"), fa("stemsplit/app.py", 88, "<module>")])
    # presets kept resident: "fast" = htdemucs (1 model), "quality" = htdemucs_ft (bag of 4),
    # "six" = htdemucs_6s (1 model, 6 sources: guitar and piano heads)
    params = []
    for m, line in ((0, 31), (1, 33), (2, 33), (3, 33), (4, 33), (5, 35)):
        for n in shapes:
            params.append(dv.a(n * 4, LOAD(line), "param"))
        if m == 5:
            params.append(dv.a(512 * 8 * 4, LOAD(line), "param"))
            params.append(dv.a(512 * 24 * 4, LOAD(line), "param"))
    # STFT windows are not cached; nothing else lives between requests
    WORK = [fa("stemsplit/engine.py", 71, "separate"), fa("stemsplit/worker.py", 52, "_run_job"),
            ("/usr/lib/python3.11/concurrent/futures/thread.py", 58, "run"),
            ("/usr/lib/python3.11/concurrent/futures/thread.py", 83, "_worker"),
            ("/usr/lib/python3.11/threading.py", 982, "run"),
            ("/usr/lib/python3.11/threading.py", 1045, "_bootstrap_inner"),
            ("/usr/lib/python3.11/threading.py", 1002, "_bootstrap")]
    AP = lambda line, name="apply_model": [L(DM + "apply.py", line, name)]
    SEG = 343980
    info = dict(songs=[], param_bytes=sum(b.req for b in params), models=6)

    def chunk_forward(outer):
        """HTDemucs.forward on one padded segment under no_grad."""
        HT = lambda line: [L(DM + "htdemucs.py", line, "forward")] + L.call()
        st = lambda inner, line: S(inner + HT(line), outer)
        win = dv.a(4096 * 4, st([L("torch/functional.py", 665, "stft"), L(DM + "spec.py", 25, "spectro"), L(DM + "htdemucs.py", 437, "_spec")], 561))
        z = dv.a(2 * 2049 * 340 * 8, st([L("torch/functional.py", 665, "stft"), L(DM + "spec.py", 25, "spectro"), L(DM + "htdemucs.py", 437, "_spec")], 561))
        dv.f(win)
        mag = dv.a(4 * 2048 * 336 * 4, st([L(DM + "htdemucs.py", 462, "_magnitude")], 562))
        dv.f(z)
        live = [mag]
        x, xt = mag, None
        skips = []
        for i, (ch, F_, Tn) in enumerate(((48, 512, 336), (96, 128, 336), (192, 32, 336), (384, 8, 336))):
            xt_n = SEG // (4 ** (i + 1))
            a = dv.a(ch * F_ * Tn * 4, st([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(DM + "hdemucs.py", 146, "forward")] + L.call(), 600))
            b = dv.a(ch * F_ * Tn * 4 * 2, st([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(DM + "hdemucs.py", 159, "forward")] + L.call(), 600))
            dv.f(a)
            c = dv.a(ch * F_ * Tn * 4, st([L("torch/nn/functional.py", 1556, "glu"), L(DM + "hdemucs.py", 160, "forward")] + L.call(), 600))
            dv.f(b)
            t1 = dv.a(ch * xt_n * 4, st([L("torch/nn/modules/conv.py", 306, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 310) + [L(DM + "hdemucs.py", 146, "forward")] + L.call(), 597))
            t2 = dv.a(ch * xt_n * 4, st([L("torch/nn/functional.py", 1556, "glu"), L(DM + "hdemucs.py", 160, "forward")] + L.call(), 597))
            dv.f(t1)
            skips += [c, t2]
        # cross-domain transformer at the bottom
        CT = [L(DM + "transformer.py", 742, "forward")] + L.call()
        for l in range(5):
            ts = []
            for n in (2688 * 512, 1344 * 512, 8 * 2688 * 2688, 2688 * 512, 2688 * 2048, 1344 * 2048):
                ts.append(dv.a(n * 4, st([L("torch/nn/functional.py", 5373, "multi_head_attention_forward")] + L.mod("torch/nn/modules/activation.py", 1275) + [L(DM + "transformer.py", 394, "forward")] + L.call() + CT, 620)))
                if len(ts) > 3:
                    dv.f(ts.pop(0))
            dv.fl(ts)
        for i, (ch, F_, Tn) in enumerate(((384, 8, 336), (192, 32, 336), (96, 128, 336), (48, 512, 336))):
            xt_n = SEG // (4 ** (4 - i))
            d1 = dv.a(ch * 2 * F_ * Tn * 4, st([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(DM + "hdemucs.py", 266, "forward")] + L.call(), 640))
            dv.fl([skips.pop(), skips.pop()])
            d2 = dv.a(ch * F_ * 4 * Tn * 4 // 2, st([L("torch/nn/modules/conv.py", 952, "forward")] + L.call() + [L(DM + "hdemucs.py", 271, "forward")] + L.call(), 640))
            dv.f(d1)
            live.append(d2)
            if len(live) > 2:
                dv.f(live.pop(1))
        out_f = dv.a(16 * 2048 * 336 * 4, st([L(DM + "htdemucs.py", 476, "_mask")], 650))
        zi = dv.a(4 * 2 * 2049 * 340 * 8, st([L("torch/functional.py", 750, "istft"), L(DM + "spec.py", 41, "ispectro"), L(DM + "htdemucs.py", 448, "_ispec")], 653))
        dv.f(out_f)
        y = dv.a(4 * 2 * SEG * 4, st([L("torch/functional.py", 750, "istft"), L(DM + "spec.py", 41, "ispectro"), L(DM + "htdemucs.py", 448, "_ispec")], 653))
        dv.f(zi)
        yt = dv.a(4 * 2 * SEG * 4, st([], 666))
        res = dv.a(4 * 2 * SEG * 4, st([], 667))
        dv.fl([y, yt] + live)
        return res

    dump_at = (2, 1, 7)       # the slow-job watchdog dumps during the third song, bass model, 8th chunk
    done = False
    for song in range(3):
        secs = rng.choice([187, 243, 296, 221])
        n = secs * 44100
        info["songs"].append(secs)
        mix = dv.a(2 * n * 4, S([fa("stemsplit/engine.py", 66, "separate")] + WORK[1:]), "act")
        ref = dv.a(2 * n * 4, S([fa("stemsplit/engine.py", 67, "separate")] + WORK[1:]), "act")
        est = dv.a(4 * 2 * n * 4, S(AP(186) + WORK), "act")
        for m in range(4):
            out = dv.a(4 * 2 * n * 4, S(AP(230) + AP(205) + WORK), "act")
            sw = dv.a(n * 4, S(AP(231) + AP(205) + WORK), "act")
            off = 0
            k = 0
            while off < n:
                ch = dv.a(2 * SEG * 4, S([L(DM + "utils.py", 73, "padded")] + AP(247) + AP(205) + WORK), "act")
                r = chunk_forward([L(DM + "apply.py", 254, "apply_model"), L(DM + "apply.py", 205, "apply_model")] + WORK)
                tw = dv.a(4 * 2 * SEG * 4, S(AP(257) + AP(205) + WORK), "tmp")
                if (song, m, k) == dump_at:
                    info["dump"] = dict(song_seconds=secs, model=m, chunk=k, samples=n)
                    done = True
                    break
                dv.fl([ch, r, tw])
                off += int(SEG * 0.75)
                k += 1
                dv.wait(rng.randint(60000, 90000))
            if done:
                break
            nrm = dv.a(4 * 2 * n * 4, S(AP(262) + AP(205) + WORK), "tmp")
            dv.fl([out, sw])
            sc = dv.a(4 * 2 * n * 4, S(AP(208) + WORK), "tmp")
            dv.f(nrm)
            dv.f(sc)
        if done:
            break
        # engine: un-normalise, move stems to host, write files
        un = dv.a(4 * 2 * n * 4, S([fa("stemsplit/engine.py", 74, "separate")] + WORK[1:]), "tmp")
        dv.fl([est, mix, ref])
        dv.wait(2000000)
        dv.f(un)
        dv.wait(30000000)
    d = write([A], state_only=True)
    info["n_param_tensors"] = len(params)
    return dict(name="m05_demucs_stems_service_state.pickle", data=d, devs=[A], info=info)
