"""m02: a SigLIP-so400m image-embedding service that captures one CUDA graph per batch size it
meets (torch.cuda.graph without a shared pool): every new batch size creates a private pool that
stays reserved while the graph is kept in the runner's dict."""
import random

import sim
from common import S, Lib, Dev, write, MB, GB, start_recording

APP = "/srv/embedsvc/"
L = Lib("/opt/conda/lib/python3.11/site-packages/", "2.4")
TF = "transformers/models/siglip/modeling_siglip.py"
SIDE = 94467251923456       # warm-up side stream (cudaStream_t)
CAP = 94467253078336        # torch.cuda.graph's capture stream


def fa(f, line, name):
    return (APP + f, line, name)


SERVE = [fa("embedsvc/server.py", 141, "_serve_batch"), fa("embedsvc/batcher.py", 88, "_loop"),
         ("/opt/conda/lib/python3.11/threading.py", 982, "run"),
         ("/opt/conda/lib/python3.11/threading.py", 1045, "_bootstrap_inner"),
         ("/opt/conda/lib/python3.11/threading.py", 1002, "_bootstrap")]
RUN = [fa("embedsvc/graph_runner.py", 97, "__call__"), fa("embedsvc/server.py", 136, "_serve_batch")] + SERVE[1:]
WARM = [fa("embedsvc/graph_runner.py", 61, "_capture"), fa("embedsvc/graph_runner.py", 92, "__call__"),
        fa("embedsvc/server.py", 136, "_serve_batch")] + SERVE[1:]
CAPT = [fa("embedsvc/graph_runner.py", 66, "_capture"), fa("embedsvc/graph_runner.py", 92, "__call__"),
        fa("embedsvc/server.py", 136, "_serve_batch")] + SERVE[1:]


def build():
    rng = random.Random(202)
    clock = sim.Clock(1768899000000000, rng, (2, 7))
    A = sim.Allocator(device=0, capacity=int(44.52 * GB), clock=clock, extra_keys=True, base=0x7F3E80000000)
    dv = Dev(A)
    A.free_us_per_gb = 90000           # cudaFree cost when segments are released
    H, N, MLP, LAYERS = 1152, 729, 4304, 27
    # parameters (bf16), loaded before recording
    LOAD = S([L("torch/nn/modules/module.py", 1160, "convert"), L("torch/nn/modules/module.py", 833, "_apply"),
              L("torch/nn/modules/module.py", 810, "_apply"), L("torch/nn/modules/module.py", 810, "_apply"),
              L("torch/nn/modules/module.py", 1174, "to"), L("transformers/modeling_utils.py", 2905, "to"),
              fa("embedsvc/server.py", 58, "load_model"), fa("embedsvc/server.py", 201, "main"),
              fa("embedsvc/server.py", 224, "<module>")])
    shapes = [H * 3 * 14 * 14, H, N * H]
    for _ in range(LAYERS):
        shapes += [H, H, H * H, H, H * H, H, H * H, H, H * H, H, H, H, MLP * H, MLP, H * MLP, H]
    shapes += [H, H, H, 3 * H * H, 3 * H, H * H, H, H, H, MLP * H, MLP, H * MLP, H]
    params = [dv.a(n * 2, LOAD, "param") for n in shapes]
    param_bytes = sum(n * 2 for n in shapes)
    start_recording(A)

    def forward(b, outer, keep_out):
        """One no-grad forward of the vision tower for batch b; returns the blocks kept (outputs)."""
        h1 = b * N * H * 2
        m1 = b * N * MLP * 2
        pe = dv.a(h1, S([L("torch/nn/modules/conv.py", 456, "_conv_forward")] + L.mod("torch/nn/modules/conv.py", 460) + [L(TF, 311, "forward")] + L.call() + [L(TF, 1092, "forward")] + L.call() + [L(TF, 1181, "forward")] + L.call(), outer))
        x = dv.a(h1, S([L(TF, 314, "forward")] + L.call() + [L(TF, 1092, "forward")] + L.call() + [L(TF, 1181, "forward")] + L.call(), outer))
        dv.f(pe)
        for li in range(LAYERS):
            LAY = [L(TF, 866, "forward")] + L.call() + [L(TF, 660, "forward")] + L.call()
            ENC = [L(TF, 1098, "forward")] + L.call() + [L(TF, 1181, "forward")] + L.call()
            ln1 = dv.a(h1, S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + [L(TF, 638, "forward")] + L.call() + LAY, ENC, outer))
            qkv = []
            for ln_ in (436, 437, 438):
                qkv.append(dv.a(h1, S(L.linear() + [L(TF, ln_, "forward")] + L.call() + [L(TF, 641, "forward")] + L.call() + LAY, ENC, outer)))
            dv.f(ln1)
            att = dv.a(h1, S([L(TF, 456, "forward")] + L.call() + [L(TF, 641, "forward")] + L.call() + LAY, ENC, outer))
            dv.fl(qkv)
            o = dv.a(h1, S(L.linear() + [L(TF, 466, "forward")] + L.call() + [L(TF, 641, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(att)
            x2 = dv.a(h1, S([L(TF, 647, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(o)
            dv.f(x)
            x = x2
            ln2 = dv.a(h1, S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + [L(TF, 650, "forward")] + L.call() + LAY, ENC, outer))
            f1 = dv.a(m1, S(L.linear() + [L(TF, 591, "forward")] + L.call() + [L(TF, 651, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(ln2)
            g = dv.a(m1, S([L("transformers/activations.py", 56, "forward")] + L.call() + [L(TF, 592, "forward")] + L.call() + [L(TF, 651, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(f1)
            f2 = dv.a(h1, S(L.linear() + [L(TF, 593, "forward")] + L.call() + [L(TF, 651, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(g)
            x2 = dv.a(h1, S([L(TF, 652, "forward")] + L.call() + LAY, ENC, outer))
            dv.f(f2)
            dv.f(x)
            x = x2
        # post_layernorm -> last_hidden_state; MAP head -> pooler_output
        last = dv.a(h1, S([L("torch/nn/functional.py", 2576, "layer_norm")] + L.mod("torch/nn/modules/normalization.py", 202) + [L(TF, 1101, "forward")] + L.call() + [L(TF, 1181, "forward")] + L.call(), outer))
        dv.f(x)
        HEAD = [L(TF, 1148, "forward")] + L.call() + [L(TF, 1103, "forward")] + L.call() + [L(TF, 1181, "forward")] + L.call()
        t = [dv.a(b * H * 2, S(L.mod("torch/nn/modules/activation.py", 1275) + HEAD, outer)),
             dv.a(b * H * 2, S(L.linear() + [L(TF, 1151, "forward")] + L.call() + HEAD, outer))]
        f1 = dv.a(b * MLP * 2, S(L.linear() + [L(TF, 591, "forward")] + L.call() + [L(TF, 1152, "forward")] + L.call() + HEAD, outer))
        g = dv.a(b * MLP * 2, S([L("transformers/activations.py", 56, "forward")] + L.call() + [L(TF, 592, "forward")] + L.call() + [L(TF, 1152, "forward")] + L.call() + HEAD, outer))
        dv.f(f1)
        f2 = dv.a(b * H * 2, S(L.linear() + [L(TF, 593, "forward")] + L.call() + [L(TF, 1152, "forward")] + L.call() + HEAD, outer))
        dv.f(g)
        pooled = dv.a(b * H * 2, S([L(TF, 1152, "forward")] + L.call() + HEAD, outer))
        dv.f(f2)
        dv.fl(t)
        if keep_out:
            return [last, pooled]
        dv.fl([last, pooled])
        return []

    graphs = {}
    info = dict(captures=[], param_bytes=param_bytes)
    nbatch = 0
    # request rate ramps over the day: batch sizes drawn from the queue length
    for step in range(900):
        if step < 300:
            b = min(32, max(1, int(rng.expovariate(1 / 4.0)) + 1))
        elif step < 650:
            b = min(32, max(1, int(rng.gauss(12, 6))))
        else:
            b = min(32, max(1, int(rng.gauss(22, 7))))
        dv.wait(rng.randint(3000, 40000))
        PRE = [fa("embedsvc/preprocess.py", 39, "to_device_batch"), fa("embedsvc/server.py", 131, "_serve_batch")] + SERVE[1:]
        u8 = dv.a(b * 3 * 384 * 384, S([fa("embedsvc/preprocess.py", 34, "to_device_batch"), fa("embedsvc/server.py", 131, "_serve_batch")] + SERVE[1:]))
        f32 = dv.a(b * 3 * 384 * 384 * 4, S(PRE))
        dv.f(u8)
        px = dv.a(b * 3 * 384 * 384 * 2, S([fa("embedsvc/preprocess.py", 41, "to_device_batch"), fa("embedsvc/server.py", 131, "_serve_batch")] + SERVE[1:]))
        dv.f(f32)
        if b not in graphs:
            # GraphRunner._capture(bs): static input, 3 warm-up passes on a side stream, capture
            st_in = dv.a(b * 3 * 384 * 384 * 2, S([fa("embedsvc/graph_runner.py", 55, "_capture"), fa("embedsvc/graph_runner.py", 92, "__call__"), fa("embedsvc/server.py", 136, "_serve_batch")] + SERVE[1:]), "graph_static")
            A.stream = SIDE
            for _ in range(3):
                forward(b, WARM, False)
            A.stream = CAP
            cid = len(graphs) + 1
            A.pool = (cid, 0)
            r0 = A.reserved
            outs = forward(b, CAPT, True)
            A.pool = (0, 0)
            A.stream = 0
            graphs[b] = (st_in, outs)
            info["captures"].append(dict(batch=b, pool=cid, reserved=A.reserved - r0))
            dv.wait(180000)
        # replay: copy_ into the static input, g.replay(), clone the pooled output
        emb = dv.a(b * H * 4, S([fa("embedsvc/graph_runner.py", 99, "__call__"), fa("embedsvc/server.py", 136, "_serve_batch")] + SERVE[1:]))
        dv.f(px)
        nrm = dv.a(b * H * 4, S([L("torch/nn/functional.py", 4794, "normalize"), fa("embedsvc/server.py", 138, "_serve_batch")] + SERVE[1:]))
        dv.f(emb)
        dv.wait(900 + 120 * b)
        dv.f(nrm)
        nbatch += 1
        if step % 150 == 149:
            # the service's memory watchdog: empty_cache() when reserved exceeds 6 GiB
            if A.reserved > 6 * GB:
                A.empty_cache(S([L("torch/cuda/memory.py", 162, "empty_cache"), fa("embedsvc/watchdog.py", 27, "check"), fa("embedsvc/server.py", 144, "_serve_batch")] + SERVE[1:]))
                info.setdefault("empty_cache_at", []).append(len(A.trace))
    d = write([A])
    return dict(name="m02_siglip_embed_service_graphs.pickle", data=d, devs=[A], info=info)
