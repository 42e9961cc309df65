"""m09: Stable Video Diffusion img2vid-xt (fp16, diffusers) making 25 frames at 576x1024 with 25
Euler steps and classifier-free guidance on an A6000 (48 GB).  The script leaves decode_chunk_size
at its default (None -> num_frames), so the temporal VAE decodes all 25 frames in one call: its
full-resolution activations (up to 7.03 GiB each) make the run's peak, about three times what the
denoising loop needs."""
import random

import sim
from common import S, Lib, Dev, write, start_recording, MB, GB

APP = "/home/rtanaka/svd-batch/"
L = Lib("/home/rtanaka/miniforge3/envs/svd/lib/python3.10/site-packages/", "2.4")
PIPE = "diffusers/pipelines/stable_video_diffusion/pipeline_stable_video_diffusion.py"
UN = "diffusers/models/unets/unet_spatio_temporal_condition.py"
UB = "diffusers/models/unets/unet_3d_blocks.py"
RN = "diffusers/models/resnet.py"
TR = "diffusers/models/transformers/transformer_temporal.py"
AT = "diffusers/models/attention_processor.py"
VD = "diffusers/models/autoencoders/autoencoder_kl_temporal_decoder.py"


def fa(f, line, name):
    return (APP + f, line, name)


def build():
    rng = random.Random(909)
    clock = sim.Clock(1769080000000000, rng, (2, 7))
    A = sim.Allocator(device=0, capacity=int(47.53 * GB), other_usage=int(0.46 * GB), clock=clock, extra_keys=True, base=0x7F52A0000000)
    dv = Dev(A)
    # ---- weights (fp16), loaded with pipe.to("cuda") before recording
    unet_p, vae_p, clip_p = 1524623082, 97739049, 632076800
    TO = S(L.convert() + [L("diffusers/pipelines/pipeline_utils.py", 431, "to"), fa("make_clips.py", 37, "load_pipeline"), fa("make_clips.py", 118, "main"), fa("make_clips.py", 141, "<module>")])
    weights = []
    for total, n in ((unet_p, 686), (vae_p, 260), (clip_p, 392)):
        each = total // n
        for i in range(n):
            sz = each * 2 if i < n - 1 else (total - each * (n - 1)) * 2
            weights.append(dv.a(sz, TO, "param"))
    start_recording(A)
    info = dict(param_bytes=sum(b.req for b in weights))
    F_, Hh, Ww, CF = 25, 576, 1024, 2
    lh, lw = Hh // 8, Ww // 8
    CALL = [L("torch/utils/_contextlib.py", 116, "decorate_context"), fa("make_clips.py", 96, "render"), fa("make_clips.py", 131, "main"), fa("make_clips.py", 141, "<module>")]
    P = lambda line: [L(PIPE, line, "__call__")] + CALL

    def t(n, st, cat="act"):
        return dv.a(n, S(st), cat)

    # ---- image conditioning: CLIP image embeddings and the VAE latent of the input frame
    px = t(3 * 224 * 224 * 2, [L(PIPE, 146, "_encode_image")] + P(423))
    emb = []
    for s in (257 * 1280 * 2,) * 6:
        emb.append(t(s, [L("transformers/models/clip/modeling_clip.py", 1310, "forward")] + L.call() + [L(PIPE, 150, "_encode_image")] + P(423)))
        if len(emb) > 2:
            dv.f(emb.pop(0))
    dv.fl(emb)
    img_emb = t(CF * 1024 * 2, [L(PIPE, 160, "_encode_image")] + P(423))
    dv.f(px)
    im = t(3 * Hh * Ww * 2, [L("diffusers/image_processor.py", 599, "preprocess")] + P(429))
    enc = []
    for ch, f in ((128, 1), (128, 1), (256, 2), (512, 4), (512, 8)):
        enc.append(t(ch * (Hh // f) * (Ww // f) * 2, [L(RN, 372, "forward")] + L.call() + [L("diffusers/models/autoencoders/vae.py", 143, "forward")] + L.call() + [L(PIPE, 171, "_encode_vae_image")] + P(436)))
        if len(enc) > 2:
            dv.f(enc.pop(0))
    dv.fl(enc)
    img_lat = t(CF * F_ * 4 * lh * lw * 2, [L(PIPE, 445, "__call__")] + CALL)
    dv.f(im)
    tid = t(CF * 3 * 2, [L(PIPE, 210, "_get_add_time_ids")] + P(451))
    lat = t(F_ * 4 * lh * lw * 2, [L("diffusers/utils/torch_utils.py", 81, "randn_tensor"), L(PIPE, 330, "prepare_latents")] + P(471))
    # ---- UNetSpatioTemporalConditionModel, 25 steps on 2 x 25 frames
    BF = CF * F_

    def unet(step):
        st = lambda inner, line: [*inner, L(UN, line, "forward")] + L.call() + P(503)
        lin = t(BF * 4 * lh * lw * 2, [L(PIPE, 496, "__call__")] + CALL)
        sc = t(BF * 4 * lh * lw * 2, [L("diffusers/schedulers/scheduling_euler_discrete.py", 395, "scale_model_input"), L(PIPE, 497, "__call__")] + CALL)
        dv.f(lin)
        x_in = t(BF * 8 * lh * lw * 2, [L(PIPE, 500, "__call__")] + CALL)
        dv.f(sc)
        x = t(BF * 320 * lh * lw * 2, st([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460), 444))
        dv.f(x_in)
        skips = [x]
        levels = [(320, 1), (640, 2), (1280, 4), (1280, 8)]
        for li, (ch, f) in enumerate(levels):
            hw = (lh // f) * (lw // f)
            for r in range(2):
                n = BF * ch * hw * 2
                BLK = [L(UB, 2191 if li < 3 else 2123, "forward")] + L.call()
                h1 = t(n, st([L(RN, 345, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + BLK, 467))
                h2 = t(n, st([L(RN, 372, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + BLK, 467))
                dv.f(h1)
                tt = t(n, st([L(RN, 652, "forward")] + L.call() + BLK, 467))
                h3 = t(n, st([L(RN, 668, "forward")] + L.call() + BLK, 467))
                dv.fl([h2, tt])
                if li < 3:
                    TB = [L(TR, 357, "forward")] + L.call() + BLK
                    q = t(n, st([L(AT, 1279, "__call__"), L(AT, 549, "forward")] + L.call() + [L("diffusers/models/attention.py", 512, "forward")] + L.call() + TB, 467))
                    k = t(n, st([L(AT, 1280, "__call__"), L(AT, 549, "forward")] + L.call() + [L("diffusers/models/attention.py", 512, "forward")] + L.call() + TB, 467))
                    v = t(n, st([L(AT, 1281, "__call__"), L(AT, 549, "forward")] + L.call() + [L("diffusers/models/attention.py", 512, "forward")] + L.call() + TB, 467))
                    o = t(n, st([L(AT, 1297, "__call__"), L(AT, 549, "forward")] + L.call() + [L("diffusers/models/attention.py", 512, "forward")] + L.call() + TB, 467))
                    dv.fl([q, k, v])
                    ff = t(n * 8, st([L("diffusers/models/activations.py", 88, "forward")] + L.call() + [L("diffusers/models/attention.py", 1165, "forward")] + L.call() + TB, 467))
                    ff2 = t(n, st([L("diffusers/models/attention.py", 1166, "forward")] + L.call() + TB, 467))
                    dv.fl([ff, o])
                    mix = t(n, st([L(TR, 371, "forward")] + L.call() + BLK, 467))
                    dv.fl([ff2, h3])
                    h3 = mix
                skips.append(h3)
            if li < 3:
                ds = t(BF * ch * hw * 2 // 4, st([L("diffusers/models/downsampling.py", 175, "forward")] + L.call() + [L(UB, 2200, "forward")] + L.call(), 467))
                skips.append(ds)
        # mid block
        mid = [t(BF * 1280 * (lh // 8) * (lw // 8) * 2, st([L(UB, 2080, "forward")] + L.call(), 479)) for _ in range(3)]
        dv.fl(mid[:2])
        x = mid[2]
        for li, (ch, f) in enumerate(reversed(levels)):
            hw = (lh // f) * (lw // f)
            for r in range(3):
                sk = skips.pop()
                n = BF * ch * hw * 2
                cat = t(n * 2, st([L(UB, 2268, "forward")] + L.call(), 491))
                dv.fl([x, sk])
                h1 = t(n * 2, st([L(RN, 345, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + [L(UB, 2271, "forward")] + L.call(), 491))
                h2 = t(n, st([L(RN, 372, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + [L(UB, 2271, "forward")] + L.call(), 491))
                dv.f(h1)
                scut = t(n, st([L(RN, 388, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + [L(UB, 2271, "forward")] + L.call(), 491))
                dv.f(cat)
                x = t(n, st([L(RN, 391, "forward")] + L.call() + [L(RN, 646, "forward")] + L.call() + [L(UB, 2271, "forward")] + L.call(), 491))
                dv.fl([h2, scut])
            if li < 3:
                up = t(BF * ch * hw * 2 * 4, st([L("diffusers/models/upsampling.py", 160, "forward")] + L.call() + [L(UB, 2290, "forward")] + L.call(), 491))
                dv.f(x)
                x = up
        out = t(BF * 4 * lh * lw * 2, st([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460), 506))
        dv.f(x)
        # CFG and scheduler step
        g = t(F_ * 4 * lh * lw * 2, [L(PIPE, 513, "__call__")] + CALL, "tmp")
        dv.f(out)
        nl = t(F_ * 4 * lh * lw * 2, [L("diffusers/schedulers/scheduling_euler_discrete.py", 578, "step"), L(PIPE, 516, "__call__")] + CALL, "tmp")
        dv.f(g)
        return nl

    for step in range(25):
        nl = unet(step)
        dv.f(lat)
        lat = nl
        dv.wait(rng.randint(2400000, 2700000))
    dec_start = len(A.trace)
    # ---- decode_latents(latents, num_frames, decode_chunk_size=25): one VAE decode call
    DL = [L(PIPE, 244, "decode_latents"), L(PIPE, 538, "__call__")] + CALL
    DEC = lambda line: [L(VD, line, "forward")] + L.call() + [L(VD, 375, "decode"), L("diffusers/utils/accelerate_utils.py", 46, "wrapper"), L(PIPE, 257, "decode_latents"), L(PIPE, 538, "__call__")] + CALL
    z = t(F_ * 4 * lh * lw * 2, DL)
    x = t(F_ * 512 * lh * lw * 2, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + DEC(101), "vae_decode")
    dv.f(z)

    def tres(cin, cout, hw, BLKST):
        """SpatioTemporalResBlock: spatial ResnetBlock2D, then a TemporalResnetBlock, then AlphaBlender."""
        n_in = F_ * cin * hw * 2
        n = F_ * cout * hw * 2
        nonlocal x
        g1 = t(n_in, [L("torch/nn/functional.py", 2576, "group_norm")] + L.mod("torch/nn/modules/normalization.py", 288) + [L(RN, 345, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        a1 = t(n_in, [L("torch/nn/functional.py", 2072, "silu")] + L.mod("torch/nn/modules/activation.py", 396) + [L(RN, 346, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(g1)
        c1 = t(n, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(RN, 372, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(a1)
        g2 = t(n, [L("torch/nn/functional.py", 2576, "group_norm")] + L.mod("torch/nn/modules/normalization.py", 288) + [L(RN, 376, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(c1)
        a2 = t(n, [L("torch/nn/functional.py", 2072, "silu")] + L.mod("torch/nn/modules/activation.py", 396) + [L(RN, 381, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(g2)
        c2 = t(n, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(RN, 384, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(a2)
        if cin != cout:
            sc = t(n, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(RN, 388, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
            dv.f(x)
            x = sc
        s = t(n, [L(RN, 391, "forward")] + L.call() + [L(RN, 725, "forward")] + L.call() + BLKST, "vae_decode")
        dv.fl([c2, x])
        # temporal block on (B, C, T, H, W): permute copy, conv3d, norm, silu, conv3d, add; blend
        pt = t(n, [L(RN, 736, "forward")] + L.call() + BLKST, "vae_decode")
        h = pt
        for line in (610, 611, 614, 617):
            h2 = t(n, [L(RN, line, "forward")] + L.call() + [L(RN, 739, "forward")] + L.call() + BLKST, "vae_decode")
            if h is not pt:
                dv.f(h)
            h = h2
        r = t(n, [L(RN, 620, "forward")] + L.call() + [L(RN, 739, "forward")] + L.call() + BLKST, "vae_decode")
        dv.f(h)
        m1 = t(n, [L("diffusers/models/attention.py", 808, "forward")] + L.call() + [L(RN, 745, "forward")] + L.call() + BLKST, "vae_decode")
        dv.fl([r])
        m2 = t(n, [L("diffusers/models/attention.py", 808, "forward")] + L.call() + [L(RN, 745, "forward")] + L.call() + BLKST, "vae_decode")
        dv.fl([pt, s, m1])
        x = m2

    # mid block at 72x128 (resnet, attention, resnet)
    MID = [L(VD, 44, "forward")] + L.call() + DEC(104)
    tres(512, 512, lh * lw, MID)
    for line in (1297, 1298):
        a = t(F_ * 512 * lh * lw * 2, [L(AT, line, "__call__"), L(AT, 549, "forward")] + L.call() + MID, "vae_decode")
        dv.f(a)
    tres(512, 512, lh * lw, MID)
    # up blocks: (in, out, resolution factor before upsampling)
    for bi, (cin, cout, f) in enumerate(((512, 512, 8), (512, 512, 4), (512, 256, 2), (256, 128, 1))):
        UPB = [L(VD, 82, "forward")] + L.call() + DEC(108)
        hw = (Hh // f) * (Ww // f)
        for r in range(3):
            tres(cin if r == 0 else cout, cout, hw, UPB)
        if f > 1:
            up = t(F_ * cout * hw * 4 * 2, [L("torch/nn/functional.py", 4045, "interpolate"), L("diffusers/models/upsampling.py", 167, "forward")] + L.call() + [L(VD, 87, "forward")] + L.call() + DEC(108), "vae_decode")
            dv.f(x)
            x = t(F_ * cout * hw * 4 * 2, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L("diffusers/models/upsampling.py", 180, "forward")] + L.call() + [L(VD, 87, "forward")] + L.call() + DEC(108), "vae_decode")
            dv.f(up)
    hw = Hh * Ww
    g = t(F_ * 128 * hw * 2, [L("torch/nn/functional.py", 2576, "group_norm")] + L.mod("torch/nn/modules/normalization.py", 288) + DEC(111), "vae_decode")
    dv.f(x)
    a = t(F_ * 128 * hw * 2, [L("torch/nn/functional.py", 2072, "silu")] + L.mod("torch/nn/modules/activation.py", 396) + DEC(112), "vae_decode")
    dv.f(g)
    o = t(F_ * 3 * hw * 2, [L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + DEC(113), "vae_decode")
    dv.f(a)
    o2 = t(F_ * 3 * hw * 2, [L("torch/nn/modules/conv.py", 605, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 610) + DEC(120), "vae_decode")
    dv.f(o)
    frames = t(F_ * 3 * hw * 2, [L(PIPE, 261, "decode_latents"), L(PIPE, 538, "__call__")] + CALL)
    dv.f(o2)
    ff = t(F_ * 3 * hw * 4, [L(PIPE, 266, "decode_latents"), L(PIPE, 538, "__call__")] + CALL)
    dv.f(frames)
    # video_processor.postprocess_video -> numpy/PIL on the host
    dv.wait(1800000)
    dv.fl([ff, lat, img_lat, img_emb, tid])
    info["decode_start_index"] = dec_start
    d = write([A])
    return dict(name="m09_svd_xt_img2vid_a6000.pickle", data=d, devs=[A], info=info)
