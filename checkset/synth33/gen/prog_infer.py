"""Inference programs: m02 Swin-UNETR sliding window (OOM), m03 OpenFold (C++ frames), m04
speculative decoding on two GPUs, m05 torch_npu Qwen2.5 serving, m09 YOLOv8 state-only."""
import random

import sim
from sim import MB, GB, KB
from common import S, Lib, Run, write
from prog_train import fwd, backward, zero_grad, BF, FP

I8 = 1


# ====================================================================================== m02
def m02_swinunetr():
    rng = random.Random(202)
    clk = sim.Clock(1734355200000000, rng)
    total = 16_945_512_448            # V100-SXM2-16GB
    A = sim.Allocator(device=0, capacity=total, other_usage=402 * MB, clock=clk, extra_keys=True,
                      base=0x7F4410000000)
    R = Run(A)
    L = Lib("/opt/conda/lib/python3.10/site-packages/", "2.4")
    MN = lambda rel: L("monai/" + rel, 0, "")[0]
    USER = "/workspace/btcv/infer_totalseg.py"
    st_p = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
             L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"), (USER, 58, "main"), (USER, 131, "<module>"))
    for s in [48 * 1 * 8 * FP] + [(3 * 48 * 48 + 48 * 48 * 4 + 48 * 192 * 2) * FP] * 2 + [(3 * 96 * 96 + 96 * 96 * 4 + 96 * 384 * 2) * FP] * 2 + \
            [(3 * 192 * 192 + 192 * 192 * 4 + 192 * 768 * 2) * FP] * 2 + [(3 * 384 * 384 + 384 * 384 * 4 + 384 * 1536 * 2) * FP] * 2 + \
            [48 * 48 * 27 * FP] * 6 + [96 * 96 * 27 * FP] * 4 + [192 * 192 * 27 * FP] * 4 + [384 * 384 * 27 * FP] * 4 + [768 * 768 * 27 * FP] * 4 + \
            [768 * 384 * 8 * FP, 384 * 192 * 8 * FP, 192 * 96 * 8 * FP, 96 * 48 * 8 * FP, 14 * 48 * FP] + [2197 * 3 * FP] * 24:
        R.a(s, st_p, "param")
    # swin transformer weights are split in many tensors; add them to reach 62.2M params
    for i in range(40):
        R.a(1_000_000 * FP // 40 * 40 // 40 * 13, st_p, "param")
    clk.wait(1_500_000)
    R.record()
    vols = [("case_0003", 148), ("case_0017", 212), ("case_0021", 96), ("case_0034", 260), ("case_0040", 180), ("s0457_wholebody", 1100)]
    NC, ROI, SWB = 14, 96, 4
    u_inf = lambda: [(USER, 104, "run_case"), (USER, 122, "main"), (USER, 131, "<module>")]
    sw = lambda line: [(MN("inferers/utils.py"), line, "sliding_window_inference")] + u_inf()
    model = lambda *inner: S(list(inner), (MN("networks/nets/swin_unetr.py"), 0, "") if False else [], L.call(), sw(229))
    SN = MN("networks/nets/swin_unetr.py")
    st_win = S(sw(217))
    st_imp = S(MN("data/utils.py") and (MN("inferers/utils.py"), 172, "sliding_window_inference"), u_inf())
    st_out = S(sw(264))
    st_cnt = S(sw(265))
    st_acc = S(sw(287))
    st_div = S(sw(300))
    st_in = S((USER, 98, "run_case"), (USER, 122, "main"), (USER, 131, "<module>"))
    st_arg = S((USER, 107, "run_case"), (USER, 122, "main"), (USER, 131, "<module>"))
    st_cpu = S((USER, 108, "run_case"), (USER, 122, "main"), (USER, 131, "<module>"))
    vit = lambda line, stage: S([(SN, line, "forward")] + L.call() + [(SN, 1003, "forward")] + L.call() + [(SN, stage, "forward")] + L.call() + [(SN, 1048, "forward")] + L.call() + [(SN, 322, "forward")] + L.call() + sw(229))
    dec = lambda line: S([L("torch/nn/modules/conv.py", 605, "_conv_forward"), L("torch/nn/modules/conv.py", 608, "forward")] + L.call() + [(MN("networks/blocks/dynunet_block.py"), 0, "") if False else (MN("networks/blocks/unetr_block.py"), 93, "forward")] + L.call() + [(SN, line, "forward")] + L.call() + sw(229))
    info = {}
    for name, Dz in vols:
        clk.wait(2_000_000)
        x = R.a(512 * 512 * Dz * FP, st_in, "input")
        imp = R.a(ROI ** 3 * FP, st_imp, "tmp")
        nz = -(-(max(Dz - ROI, 0)) // 48) + 1
        nxy = -(-(512 - ROI) // 48) + 1
        nwin = nxy * nxy * nz
        out = cnt = None
        for wb in range(0, nwin, SWB):
            nb = min(SWB, nwin - wb)
            w = R.a(nb * ROI ** 3 * FP, st_win, "tmp")
            # model forward under no_grad: transient activations
            h = None
            for sz, st in ((nb * 48 * 48 ** 3 * FP, vit(522, 1003)), (nb * 343 * 3 * 343 * 343 * FP, vit(201, 1003)),
                           (nb * 343 * 3 * 343 * 343 * FP, vit(214, 1003)), (nb * 48 * 48 ** 3 * FP, vit(232, 1003)),
                           (nb * 96 * 24 ** 3 * FP, vit(522, 1004)), (nb * 64 * 6 * 343 * 343 * FP, vit(214, 1004)),
                           (nb * 192 * 12 ** 3 * FP, vit(522, 1005)), (nb * 384 * 6 ** 3 * FP, vit(522, 1006)),
                           (nb * 768 * 3 ** 3 * FP, vit(522, 1007)),
                           (nb * 384 * 6 ** 3 * FP, dec(1060)), (nb * 192 * 12 ** 3 * FP, dec(1061)),
                           (nb * 96 * 24 ** 3 * FP, dec(1062)), (nb * 48 * 48 ** 3 * FP, dec(1063)),
                           (nb * 48 * 96 ** 3 * FP, dec(1064)), (nb * 48 * 96 ** 3 * FP, dec(1064))):
                b = R.a(sz, st, "tmp")
                if h is not None:
                    R.f(h)
                h = b
            po = R.a(nb * NC * ROI ** 3 * FP, S([L("torch/nn/modules/conv.py", 605, "_conv_forward"), L("torch/nn/modules/conv.py", 608, "forward")] + L.call() + [(MN("networks/blocks/dynunet_block.py"), 48, "forward")] + L.call() + [(SN, 1065, "forward")] + L.call() + sw(229)), "tmp")
            R.f(h)
            if out is None:
                info[name] = dict(alloc_before=A.allocated, request=NC * 512 * 512 * Dz * FP, reserved_before=A.reserved)
                try:
                    out = R.a(NC * 512 * 512 * Dz * FP, st_out, "output")
                except sim.OOMError as e:
                    info["oom"] = dict(size=e.size, free=e.free, allocated=A.allocated, reserved=A.reserved, case=name)
                    return dict(name="m02_swinunetr_totalseg_v100.pickle",
                                data=write([A], "cuda", rec=R.rec), allocs=[A], rec=R.rec, info=info)
                cnt = R.a(512 * 512 * Dz * FP, st_cnt, "output")
            for i in range(nb):
                t = R.a(NC * ROI ** 3 * FP, st_acc, "tmp")
                R.f(t)
            R.f(po)
            R.f(w)
            clk.wait(rng.randint(60_000, 90_000))
        R.f(cnt, st_div)
        R.f(imp, st_div)
        lab = R.a(512 * 512 * Dz * 8, st_arg, "tmp")
        R.f(out, st_arg)
        R.f(lab, st_cpu)
        R.f(x, st_cpu)
    raise RuntimeError("no oom")


# ====================================================================================== m03
CPP_HEAD = [("??", 0, "torch::unwind::unwind()"), ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
            ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
            ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
            ("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)"),
            ("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)"),
            ("", 0, "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
            ("??", 0, "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
            ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)"),
            ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
            ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)")]
OPS = {
    "bmm": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_bmm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
            ("??", 0, "at::meta::structured_bmm::meta(at::Tensor const&, at::Tensor const&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_bmm(at::Tensor const&, at::Tensor const&)"),
            ("??", 0, "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"),
            ("??", 0, "at::native::_matmul_impl(at::Tensor&, at::Tensor const&, at::Tensor const&)"),
            ("??", 0, "at::native::matmul(at::Tensor const&, at::Tensor const&)"),
            ("RegisterCompositeImplicitAutograd.cpp", 0, "at::(anonymous namespace)::(anonymous namespace)::wrapper_CompositeImplicitAutograd__matmul(at::Tensor const&, at::Tensor const&)"),
            ("??", 0, "at::_ops::matmul::call(at::Tensor const&, at::Tensor const&)"),
            ("python_torch_functions_2.cpp", 0, "torch::autograd::THPVariable_matmul(_object*, _object*, _object*)")],
    "addmm": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
              ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_addmm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
              ("??", 0, "at::meta::structured_addmm::meta(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)"),
              ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_addmm(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)"),
              ("??", 0, "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)"),
              ("??", 0, "at::native::linear(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&)"),
              ("??", 0, "at::_ops::linear::call(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&)"),
              ("python_nn_functions.cpp", 0, "torch::autograd::THPVariable_linear(_object*, _object*, _object*)")],
    "softmax": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
                ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_softmax_cuda_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
                ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA__softmax(at::Tensor const&, long, bool)"),
                ("??", 0, "at::_ops::_softmax::call(at::Tensor const&, long, bool)"),
                ("??", 0, "at::native::softmax(at::Tensor const&, long, std::optional<c10::ScalarType>)"),
                ("??", 0, "at::_ops::softmax_int::call(at::Tensor const&, long, std::optional<c10::ScalarType>)"),
                ("python_torch_functions_1.cpp", 0, "torch::autograd::THPVariable_softmax(_object*, _object*, _object*)")],
    "add": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_ufunc_add_CUDA_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
            ("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"), ("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_add_Tensor(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"),
            ("??", 0, "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"),
            ("python_variable_methods.cpp", 0, "torch::autograd::THPVariable_add(_object*, _object*, _object*)")],
    "mul": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_mul_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
            ("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"), ("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)"),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_mul_Tensor(at::Tensor const&, at::Tensor const&)"),
            ("??", 0, "at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)"),
            ("python_variable_methods.cpp", 0, "torch::autograd::THPVariable_mul(_object*, _object*, _object*)")],
    "sigmoid": [("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
                ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::structured_sigmoid_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
                ("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"),
                ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_sigmoid(at::Tensor const&)"),
                ("??", 0, "at::_ops::sigmoid::call(at::Tensor const&)"),
                ("python_torch_functions_0.cpp", 0, "torch::autograd::THPVariable_sigmoid(_object*, _object*, _object*)")],
    "layer_norm": [("??", 0, "at::native::layer_norm_cuda(at::Tensor const&, c10::ArrayRef<long>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double)"),
                   ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__native_layer_norm(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double)"),
                   ("??", 0, "at::_ops::native_layer_norm::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double)"),
                   ("??", 0, "at::native::layer_norm_symint(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double, bool)"),
                   ("??", 0, "at::_ops::layer_norm::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double, bool)"),
                   ("python_torch_functions_1.cpp", 0, "torch::autograd::THPVariable_layer_norm(_object*, _object*, _object*)")],
    "clone": [("??", 0, "at::native::clone(at::Tensor const&, std::optional<c10::MemoryFormat>)"),
              ("??", 0, "at::_ops::clone::call(at::Tensor const&, std::optional<c10::MemoryFormat>)"),
              ("??", 0, "at::native::contiguous(at::Tensor const&, c10::MemoryFormat)"),
              ("python_variable_methods.cpp", 0, "torch::autograd::THPVariable_contiguous(_object*, _object*, _object*)")],
}
PY_TAIL = [("??", 0, "_PyEval_EvalFrameDefault"), ("??", 0, "_PyFunction_Vectorcall")]
PY_END = [("??", 0, "_PyEval_EvalFrameDefault"), ("??", 0, "PyEval_EvalCode"), ("??", 0, "_PyRun_SimpleFileObject"),
          ("??", 0, "_PyRun_AnyFileObject"), ("??", 0, "Py_RunMain"), ("??", 0, "Py_BytesMain"),
          ("./csu/../sysdeps/nptl/libc_start_call_main.h", 58, "__libc_start_call_main"),
          ("./csu/../csu/libc-start.c", 392, "__libc_start_main_impl"), ("??", 0, "_start")]


def cpp(op, py):
    """C++ allocation stack: allocator, operator chain, then each Python frame with its
    interpreter frames, then the process start."""
    out = list(CPP_HEAD) + OPS[op] + [("??", 0, "cfunction_call"), ("??", 0, "_PyObject_MakeTpCall")]
    for fr in py:
        out.append(fr)
        if fr[2] == "<module>":
            break
        out += PY_TAIL
    return S(out + PY_END)


def m03_openfold():
    rng = random.Random(303)
    clk = sim.Clock(1734519900000000, rng)
    A = sim.Allocator(device=0, capacity=80 * GB, other_usage=530 * MB, clock=clk, extra_keys=True,
                      base=0x7FA0C0000000)
    R = Run(A)
    L = Lib("/opt/conda/envs/openfold/lib/python3.10/site-packages/", "2.4")
    OF = "/opt/openfold/openfold/"
    USER = "/opt/openfold/run_pretrained_openfold.py"
    st_p = cpp("clone", [L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
                         L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"),
                         (USER, 241, "main"), (USER, 493, "<module>")])
    nparam = 0
    for i in range(48):
        for s in (256 * 256 * 4 * FP, 256 * 1024 * FP, 1024 * 256 * FP, 128 * 512 * FP, 512 * 128 * FP, 128 * 128 * 4 * FP,
                  128 * 128 * 4 * FP, 128 * 512 * FP, 512 * 128 * FP, 256 * 32 * 2 * FP, 32 * 32 * 128 * FP, 128 * 128 * 6 * FP):
            R.a(s, st_p, "param")
            nparam += s
    for s in (22 * 256 * FP, 49 * 256 * FP, 65 * 128 * FP, 384 * 384 * 12 * FP, 384 * 128 * 8 * FP, 256 * 384 * FP):
        R.a(s, st_p, "param")
    clk.wait(3_000_000)
    R.record()
    N, M, CM, CZ = 620, 256, 256, 128
    u = [(USER, 98, "run_model"), (USER, 331, "main"), (USER, 493, "<module>")]
    model_it = lambda line: [(OF + "model/model.py", line, "iteration"), (OF + "model/model.py", 568, "forward")] + L.call() + u
    evo = lambda line, sub: [(OF + "model/evoformer.py", sub, "forward")] + L.call() + \
        [(OF + "model/evoformer.py", line, "forward")] + L.call() + \
        [(OF + "utils/checkpointing.py", 73, "checkpoint_blocks"), (OF + "model/evoformer.py", 1150, "forward")] + L.call() + model_it(396)
    attn = lambda line, caller: [(OF + "model/primitives.py", line, "_attention"), (OF + "model/primitives.py", 513, "forward")] + L.call() + caller
    lin = lambda caller: [L("torch/nn/modules/linear.py", 117, "forward"), (OF + "model/primitives.py", 0, "") if False else L("torch/nn/modules/linear.py", 117, "forward")][:1] + L.call() + caller
    m_sz = M * N * CM * FP
    z_sz = N * N * CZ * FP

    def mha(H, B_, Q, C, caller, chunk_label):
        # q, k, v, g projections; logits; bias add in place; softmax; output
        q = R.a(B_ * Q * H * C * FP, cpp("addmm", lin(caller)), "tmp")
        k = R.a(B_ * Q * H * C * FP, cpp("addmm", lin(caller)), "tmp")
        v = R.a(B_ * Q * H * C * FP, cpp("addmm", lin(caller)), "tmp")
        a = R.a(B_ * H * Q * Q * FP, cpp("bmm", attn(240, caller)), "attn_logits")
        s = R.a(B_ * H * Q * Q * FP, cpp("softmax", [(OF + "model/primitives.py", 215, "softmax_no_cast"), (OF + "model/primitives.py", 245, "_attention"), (OF + "model/primitives.py", 513, "forward")] + L.call() + caller), "attn_probs")
        R.f(a)
        o = R.a(B_ * Q * H * C * FP, cpp("bmm", attn(248, caller)), "tmp")
        R.fl([s, q, k])
        g = R.a(B_ * Q * H * C * FP, cpp("sigmoid", [(OF + "model/primitives.py", 470, "_wrap_up")] + L.call() + caller), "tmp")
        R.f(v)
        og = R.a(B_ * Q * H * C * FP, cpp("mul", [(OF + "model/primitives.py", 471, "_wrap_up")] + L.call() + caller), "tmp")
        R.fl([g, o])
        out = R.a(B_ * Q * CM * FP if caller is None else B_ * Q * (CM if H == 8 else CZ) * FP, cpp("addmm", lin(caller)), "tmp")
        R.f(og)
        return out

    m = R.a(m_sz, cpp("add", [(OF + "model/embedders.py", 120, "forward")] + L.call() + model_it(350)), "state")
    z = R.a(z_sz, cpp("add", [(OF + "model/embedders.py", 131, "forward")] + L.call() + model_it(350)), "state")
    peak_note = {}
    for cyc in range(4):
        for blk in range(48):
            # MSA row attention with pair bias
            c_row = [(OF + "model/msa.py", 280, "forward")] + L.call() + evo(420, 610)
            ln = R.a(m_sz, cpp("layer_norm", [L("torch/nn/functional.py", 2576, "layer_norm"), (OF + "model/primitives.py", 355, "forward")] + L.call() + c_row), "tmp")
            zb = R.a(N * N * 8 * FP, cpp("addmm", lin([(OF + "model/msa.py", 221, "_prep_inputs")] + c_row)), "tmp")
            o = mha(8, M, N, 32, [(OF + "model/msa.py", 289, "forward")] + L.call() + evo(420, 610), "msa_row")
            R.fl([zb, ln])
            nm = R.a(m_sz, cpp("add", evo(420, 611)), "state")
            R.fl([o, m])
            m = nm
            # MSA column attention (over M sequences per column)
            c_col = [(OF + "model/msa.py", 377, "forward")] + L.call() + evo(420, 614)
            ln = R.a(m_sz, cpp("layer_norm", [L("torch/nn/functional.py", 2576, "layer_norm"), (OF + "model/primitives.py", 355, "forward")] + L.call() + c_col), "tmp")
            o = mha(8, N, M, 32, [(OF + "model/msa.py", 386, "forward")] + L.call() + evo(420, 614), "msa_col")
            R.f(ln)
            nm = R.a(m_sz, cpp("add", evo(420, 615)), "state")
            R.fl([o, m])
            m = nm
            # outer product mean -> pair update
            c_opm = [(OF + "model/outer_product_mean.py", 128, "forward")] + L.call() + evo(432, 690)
            a_ = R.a(M * N * 32 * FP, cpp("addmm", lin(c_opm)), "tmp")
            b_ = R.a(M * N * 32 * FP, cpp("addmm", lin(c_opm)), "tmp")
            op = R.a(N * N * 32 * 32 * FP, cpp("bmm", [(OF + "model/outer_product_mean.py", 85, "_opm")] + c_opm), "tmp")
            R.fl([a_, b_])
            oz = R.a(z_sz, cpp("addmm", lin([(OF + "model/outer_product_mean.py", 90, "_opm")] + c_opm)), "tmp")
            R.f(op)
            nz = R.a(z_sz, cpp("add", evo(432, 691)), "state")
            R.fl([oz, z])
            z = nz
            # triangle multiplicative updates (outgoing, incoming)
            for line, sub in ((700, 433), (704, 434)):
                c_tm = [(OF + "model/triangular_multiplicative_update.py", 398, "forward")] + L.call() + evo(sub, line)
                ts = [R.a(z_sz, cpp("addmm", lin(c_tm)), "tmp") for _ in range(4)]
                x = R.a(z_sz, cpp("bmm", [(OF + "model/triangular_multiplicative_update.py", 72, "_combine_projections"), (OF + "model/triangular_multiplicative_update.py", 410, "forward")] + L.call() + evo(sub, line)), "tmp")
                R.fl(ts)
                oz = R.a(z_sz, cpp("addmm", lin(c_tm)), "tmp")
                R.f(x)
                nz = R.a(z_sz, cpp("add", evo(sub, line + 1)), "state")
                R.fl([oz, z])
                z = nz
            # triangle attention, starting and ending node: unchunked (chunk_size=None)
            for line, sub in ((712, 436), (724, 437)):
                c_ta = [(OF + "model/triangular_attention.py", 137, "forward")] + L.call() + evo(sub, line)
                ln = R.a(z_sz, cpp("layer_norm", [L("torch/nn/functional.py", 2576, "layer_norm"), (OF + "model/primitives.py", 355, "forward")] + L.call() + [(OF + "model/triangular_attention.py", 118, "forward")] + L.call() + evo(sub, line)), "tmp")
                tb = R.a(N * N * 4 * FP, cpp("addmm", lin([(OF + "model/triangular_attention.py", 124, "forward")] + L.call() + evo(sub, line))), "tmp")
                o = mha(4, N, N, 32, c_ta, "tri")
                R.fl([tb, ln])
                nz = R.a(z_sz, cpp("add", evo(sub, line + 1)), "state")
                R.fl([o, z])
                z = nz
            # pair transition
            c_pt = [(OF + "model/pair_transition.py", 66, "_transition"), (OF + "model/pair_transition.py", 98, "forward")] + L.call() + evo(440, 742)
            t1 = R.a(N * N * 512 * FP, cpp("addmm", lin(c_pt)), "tmp")
            t2 = R.a(z_sz, cpp("addmm", lin(c_pt)), "tmp")
            R.f(t1)
            nz = R.a(z_sz, cpp("add", evo(440, 743)), "state")
            R.fl([t2, z])
            z = nz
            clk.wait(rng.randint(30_000, 45_000))
        clk.wait(200_000)
    # structure module (small), outputs
    s = R.a(N * 384 * FP, cpp("addmm", lin([(OF + "model/structure_module.py", 780, "forward")] + L.call() + model_it(418))), "output")
    pos = R.a(N * 14 * 3 * FP, cpp("mul", [(OF + "model/structure_module.py", 861, "forward")] + L.call() + model_it(418)), "output")
    plddt = R.a(N * 50 * FP, cpp("addmm", lin([(OF + "model/heads.py", 101, "forward")] + L.call() + [(OF + "model/model.py", 590, "forward")] + L.call() + u)), "output")
    return dict(name="m03_openfold_monomer_cpp.pickle", data=write([A], "cuda", rec=R.rec), allocs=[A], rec=R.rec,
                info=dict(N=N, M=M))


# ====================================================================================== m04
def m04_specdec():
    rng = random.Random(404)
    clk = sim.Clock(1734611000000000, rng)
    A0 = sim.Allocator(device=0, capacity=80 * GB, other_usage=560 * MB, clock=clk, extra_keys=True, base=0x7F1E00000000)
    A1 = sim.Allocator(device=1, capacity=80 * GB, other_usage=560 * MB, clock=clk, extra_keys=True, base=0x7F0A00000000)
    R = Run([A0, A1])
    L = Lib("/home/ml/.venv/lib/python3.11/site-packages/", "2.4")
    LL = L("transformers/models/llama/modeling_llama.py", 0, "")[0]
    CU = L("transformers/cache_utils.py", 0, "")[0]
    GU = L("transformers/generation/utils.py", 0, "")[0]
    CG = L("transformers/generation/candidate_generator.py", 0, "")[0]
    USER = "/home/ml/specdec/serve_assisted.py"
    st_load = lambda dev: S(L("transformers/modeling_utils.py", 949, "_load_state_dict_into_meta_model"), L("transformers/modeling_utils.py", 4391, "_load_pretrained_model"),
                            L("transformers/modeling_utils.py", 3916, "from_pretrained"), L("transformers/models/auto/auto_factory.py", 564, "from_pretrained"),
                            (USER, 31 if dev == 0 else 36, "load_models"), (USER, 95, "main"), (USER, 120, "<module>"))
    cfg = {0: dict(NL=40, D=5120, FF=13824, KV=5120, H=40), 1: dict(NL=22, D=2048, FF=5632, KV=256, H=32)}
    V = 32000
    for dev in (0, 1):
        R.cur = dev
        c = cfg[dev]
        R.a(V * c["D"] * BF, st_load(dev), "param")
        for i in range(c["NL"]):
            for s in (c["D"] * c["D"], c["KV"] * c["D"], c["KV"] * c["D"], c["D"] * c["D"], c["FF"] * c["D"], c["FF"] * c["D"], c["FF"] * c["D"], c["D"], c["D"]):
                R.a(s * BF, st_load(dev), "param")
        R.a(c["D"] * BF, st_load(dev), "param")
        R.a(V * c["D"] * BF, st_load(dev), "param")
        R.a(64 * 4, st_load(dev), "param")
    clk.wait(5_000_000)
    R.record()
    u_req = [(USER, 58, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")]
    gen = [(GU, 2024, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + u_req
    tgt = lambda line: [(GU, line, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + u_req
    drf = [(GU, 3052, "_sample"), (GU, 2057, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context"),
           (CG, 216, "get_candidates"), (GU, 3926, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + u_req
    lin = L("torch/nn/modules/linear.py", 117, "forward")

    def stacks(outer, fwd_line):
        top = [(LL, 1189, "forward")] + L.call() + outer
        model = [(LL, 1001, "forward")] + L.call() + top
        dl = lambda line: [(LL, line, "forward")] + L.call() + model
        at = lambda line: [(LL, line, "forward")] + L.call() + dl(733)
        st = dict(
            norm=S((LL, 111, "forward"), L.call(), dl(730)),
            q=S(lin, L.call(), at(621)), k=S(lin, L.call(), at(622)), v=S(lin, L.call(), at(623)),
            rope=S((LL, 218, "apply_rotary_pos_emb"), at(633)),
            catk=S((CU, 389, "update"), at(638)), catv=S((CU, 390, "update"), at(638)),
            sdpa=S(at(656)), o=S(lin, L.call(), at(669)),
            mlp=S((LL, 309, "forward"), L.call(), dl(755)), res=S(dl(756)),
            emb=S(L("torch/nn/functional.py", 2264, "embedding"), L("torch/nn/modules/sparse.py", 164, "forward"), L.call(), (LL, 945, "forward"), L.call(), top),
            head=S(lin, L.call(), (LL, 1206, "forward"), L.call(), outer),
            fl=S((LL, 1207, "forward"), L.call(), outer))
        return st

    S_pre_t, S_ver_t, S_d = stacks(tgt(3911) and [(GU, 3942, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + u_req, 0), None, stacks(drf, 0)
    S_pre_t = stacks([(GU, 3942, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context")] + u_req, 0)
    st_in = S((USER, 52, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>"))
    st_in_d = S((CG, 180, "get_candidates"), (GU, 3926, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context"), u_req)
    st_acc = S((GU, 3988, "_assisted_decoding"), (GU, 2032, "generate"), L("torch/utils/_contextlib.py", 116, "decorate_context"), u_req)

    def forward(dev, st, cache, T, Lpast):
        """One forward of T new tokens with Lpast cached; cache grows by torch.cat."""
        R.cur = dev
        c = cfg[dev]
        h = R.a(T * c["D"] * BF, st["emb"], "tmp")
        for li in range(c["NL"]):
            n = R.a(T * c["D"] * BF, st["norm"], "tmp")
            q = R.a(T * c["D"] * BF, st["q"], "tmp")
            kv = R.a(T * c["KV"] * BF, st["k"], "tmp")
            vv = R.a(T * c["KV"] * BF, st["v"], "tmp")
            R.f(n)
            kc, vc = cache[li]
            nk = R.a((Lpast + T) * c["KV"] * BF, st["catk"], "kv_cache")
            nv = R.a((Lpast + T) * c["KV"] * BF, st["catv"], "kv_cache")
            if kc is not None:
                R.f(kc, st["catk"])
                R.f(vc, st["catv"])
            R.fl([kv, vv])
            cache[li] = (nk, nv)
            ao = R.a(T * c["D"] * BF, st["sdpa"], "tmp")
            R.f(q)
            o = R.a(T * c["D"] * BF, st["o"], "tmp")
            R.f(ao)
            h2 = R.a(T * c["D"] * BF, st["res"], "tmp")
            R.fl([o, h])
            g = R.a(T * c["FF"] * BF, st["mlp"], "tmp")
            u_ = R.a(T * c["FF"] * BF, st["mlp"], "tmp")
            m = R.a(T * c["D"] * BF, st["mlp"], "tmp")
            R.fl([g, u_])
            h = R.a(T * c["D"] * BF, st["res"], "tmp")
            R.fl([m, h2])
        lg = R.a(T * V * BF, st["head"], "tmp")
        R.f(h)
        lf = R.a(T * V * FP, st["fl"], "tmp")
        R.f(lg)
        return lf

    reqs = [(612, 40), (1347, 32), (905, 36)]
    info = {}
    for P, newtok in reqs:
        clk.wait(800_000)
        R.cur = 0
        ids0 = R.a(P * 8, st_in, "tmp")
        R.cur = 1
        ids1 = R.a(P * 8, st_in_d, "tmp")
        tc = [(None, None)] * cfg[0]["NL"]
        dc = [(None, None)] * cfg[1]["NL"]
        lf = forward(0, S_pre_t, tc, P, 0)
        R.cur = 0
        R.f(lf)
        Lt = P
        Ld = 0
        done = 0
        first = True
        while done < newtok:
            # draft proposes K=5 tokens autoregressively on cuda:1
            R.cur = 1
            T = P + done - Ld if first or Ld < P + done else 1
            lfd = forward(1, S_d, dc, P + done - Ld, Ld)
            Ld = P + done
            R.cur = 1
            R.f(lfd)
            for k in range(4):
                lfd = forward(1, S_d, dc, 1, Ld)
                Ld += 1
                R.cur = 1
                R.f(lfd)
            first = False
            # target verifies the 5 candidates (+1) on cuda:0
            lf = forward(0, S_pre_t, tc, 6, Lt)
            R.cur = 0
            R.f(lf)
            acc = rng.choice([1, 2, 3, 4, 5, 6])
            acc = min(acc, newtok - done)
            done += acc
            # crop both caches to the accepted length (views: no memory released)
            Lt = P + done
            Ld = min(Ld, P + done)
            R.cur = 0
            t = R.a(8 * (Lt + 1), st_acc, "tmp")
            R.f(t)
            clk.wait(rng.randint(20_000, 40_000))
        # request done: caches dropped
        R.cur = 0
        for kc, vc in tc:
            R.f(kc, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
            R.f(vc, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
        R.f(ids0, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
        R.cur = 1
        for kc, vc in dc:
            R.f(kc, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
            R.f(vc, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
        R.f(ids1, S((USER, 61, "generate_reply"), (USER, 104, "main"), (USER, 120, "<module>")))
    return dict(name="m04_specdec_llama2_13b_2gpu.pickle", data=write([A0, A1], "cuda", rec=R.rec),
                allocs=[A0, A1], rec=R.rec, info=dict(reqs=reqs))


# ====================================================================================== m05
def m05_npu_qwen():
    rng = random.Random(505)
    STREAM = 2034563712
    A = sim.Allocator(device=3, stream=STREAM, npu=True, capacity=64 * GB, other_usage=1800 * MB,
                      time_us=False, base=0x12C0C0000000 + 3 * (1 << 36), seg_frames=False)
    R = Run(A)
    L = Lib("/root/miniconda3/envs/qwen/lib/python3.9/site-packages/", "2.1")
    Q = L("transformers/models/qwen2/modeling_qwen2.py", 0, "")[0]
    ENG = "/home/wangwei/qwen服务/推理引擎.py"
    KV = "/home/wangwei/qwen服务/量化缓存.py"
    MAIN = "/home/wangwei/qwen服务/启动服务.py"
    u_main = [(MAIN, 88, "主函数"), (MAIN, 97, "<module>")]
    st_load = S(L("torch_npu/utils/_module.py", 76, "convert") if False else L("torch/nn/modules/module.py", 1158, "convert"),
                L("torch/nn/modules/module.py", 810, "_apply"), L("torch/nn/modules/module.py", 833, "_apply"),
                L("torch/nn/modules/module.py", 1160, "to"), L("torch_npu/utils/_module.py", 78, "to"),
                (ENG, 41, "加载模型"), (MAIN, 71, "主函数"), (MAIN, 97, "<module>"))
    NL, D, FF, KVD, V = 28, 3584, 18944, 512, 152064
    R.a(V * D * BF, st_load, "param")
    for i in range(NL):
        for s in (D * D, D, KVD * D, KVD, KVD * D, KVD, D * D, FF * D, FF * D, FF * D, D, D):
            R.a(s * BF, st_load, "param")
    R.a(D * BF, st_load, "param")
    R.a(V * D * BF, st_load, "param")
    R.record()
    loop = [(ENG, 212, "调度循环"), (MAIN, 90, "主函数"), (MAIN, 97, "<module>")]
    pre = lambda line: [(ENG, line, "预填充"), (ENG, 181, "处理新请求")] + loop
    dec = lambda line: [(ENG, line, "解码一步")] + loop
    lin = L("torch/nn/modules/linear.py", 114, "forward")
    mk_model = lambda outer: [(Q, 932, "forward")] + L.call() + outer
    dl = lambda line, outer: [(Q, line, "forward")] + L.call() + mk_model(outer)
    at = lambda line, outer: [(Q, line, "forward")] + L.call() + dl(658, outer)
    mlp = lambda outer: [(Q, 223, "forward")] + L.call() + dl(672, outer)
    kvq = lambda line, fn: [(KV, line, fn)]

    class Req:
        pass
    reqs = []
    plens = [412, 2875, 733, 6120, 1530, 388, 4710, 902, 7350, 1266, 3391, 545, 6840, 2210, 980, 5275]
    for i, P in enumerate(plens):
        r = Req()
        r.P, r.new, r.kv, r.i = P, rng.randint(36, 64), [], i
        reqs.append(r)
    active, pending = [], list(reqs)
    info = dict(prefill_segment_allocs=0)
    st_fin = S((ENG, 236, "释放请求"), loop)
    while pending or active:
        while pending and len(active) < 4:
            r = pending.pop(0)
            P = r.P
            p_out = pre(118)
            ids = R.a(P * 8, S((ENG, 109, "预填充"), (ENG, 181, "处理新请求"), loop), "tmp")
            h = R.a(P * D * BF, S(L("torch/nn/functional.py", 2233, "embedding"), L("torch/nn/modules/sparse.py", 162, "forward"), L.call(), (Q, 889, "forward"), L.call(), mk_model(p_out)), "tmp")
            for li in range(NL):
                n = R.a(P * D * BF, S((Q, 79, "forward"), L.call(), dl(655, p_out)), "tmp")
                q = R.a(P * D * BF, S(lin, L.call(), at(560, p_out)), "tmp")
                k = R.a(P * KVD * BF, S(lin, L.call(), at(561, p_out)), "tmp")
                v = R.a(P * KVD * BF, S(lin, L.call(), at(562, p_out)), "tmp")
                R.f(n)
                ao = R.a(P * D * BF, S(L("torch_npu/npu/_fusion_attention.py", 0, "")[0:0] and [] or [(Q, 598, "forward")] + L.call() + dl(658, p_out)), "tmp")
                R.f(q)
                # this layer's cache for the request: (2, prompt + max_new_tokens, kv_dim), bf16
                cap = P + 512
                kvb = R.a(2 * cap * KVD * BF, S((KV, 47, "分配缓存"), (KV, 58, "写入缓存"), (ENG, 127, "预填充"), (ENG, 181, "处理新请求"), loop), "kv_cache")
                r.kv.append(kvb)
                R.fl([k, v], S((KV, 60, "写入缓存"), (ENG, 127, "预填充"), (ENG, 181, "处理新请求"), loop))
                o = R.a(P * D * BF, S(lin, L.call(), at(612, p_out)), "tmp")
                R.f(ao)
                h2 = R.a(P * D * BF, S(dl(659, p_out)), "tmp")
                R.fl([o, h])
                n2 = R.a(P * D * BF, S((Q, 79, "forward"), L.call(), dl(671, p_out)), "tmp")
                g = R.a(P * FF * BF, S(lin, L.call(), mlp(p_out)), "tmp")
                a_ = R.a(P * FF * BF, S(L("torch/nn/modules/activation.py", 393, "forward"), L.call(), mlp(p_out)), "tmp")
                R.f(g)
                u_ = R.a(P * FF * BF, S(lin, L.call(), mlp(p_out)), "tmp")
                m = R.a(P * FF * BF, S(mlp(p_out)), "tmp")
                R.fl([a_, u_, n2])
                dn = R.a(P * D * BF, S(lin, L.call(), mlp(p_out)), "tmp")
                R.f(m)
                h = R.a(P * D * BF, S(dl(673, p_out)), "tmp")
                R.fl([dn, h2])
            last = R.a(D * BF, S((ENG, 121, "预填充"), (ENG, 181, "处理新请求"), loop), "tmp")
            R.f(h)
            lg = R.a(V * 4, S(lin, L.call(), (ENG, 122, "预填充"), (ENG, 181, "处理新请求"), loop), "tmp")
            R.fl([last, lg, ids])
            r.L = P
            active.append(r)
        # one batched decode step for the active requests
        Bn = len(active)
        d_out = dec(153)
        h = R.a(Bn * D * BF, S(L("torch/nn/functional.py", 2233, "embedding"), L("torch/nn/modules/sparse.py", 162, "forward"), L.call(), (Q, 889, "forward"), L.call(), mk_model(d_out)), "tmp")
        maxL = max(r.L for r in active)
        for li in range(NL):
            q = R.a(Bn * (D + 2 * KVD) * BF, S(lin, L.call(), at(560, d_out)), "tmp")
            dq = R.a(Bn * 2 * KVD * BF, S((KV, 71, "追加缓存"), (ENG, 149, "解码一步"), loop), "tmp")
            ao = R.a(Bn * D * BF, S([(Q, 598, "forward")] + L.call() + dl(658, d_out)), "tmp")
            R.fl([dq, q])
            m = R.a(Bn * FF * BF * 3, S(mlp(d_out)), "tmp")
            R.fl([m, ao])
        R.f(h)
        lg = R.a(Bn * V * 4, S(lin, L.call(), (ENG, 155, "解码一步"), loop), "tmp")
        R.f(lg)
        for r in list(active):
            r.L += 1
            r.new -= 1
            if r.new == 0:
                R.fl(r.kv, st_fin)
                active.remove(r)
    return dict(name="m05_npu_qwen25_7b_serve_card3.pkl", data=write([A], "npu", rec=R.rec, n_dev_lists=8),
                allocs=[A], rec=R.rec, info=dict(plens=plens))


# ====================================================================================== m09
def m09_yolov8_state():
    """State-only: the pool at the dump (a callback at on_train_batch_end), empty trace."""
    rng = random.Random(909)
    clk = sim.Clock(1734700000000000, rng)
    A = sim.Allocator(device=0, capacity=24 * GB, other_usage=640 * MB, clock=clk, extra_keys=True,
                      base=0x7F8840000000)
    R = Run(A)
    L = Lib("/home/kim/miniconda3/envs/yolo/lib/python3.11/site-packages/", "2.4")
    UL = lambda rel: L("ultralytics/" + rel, 0, "")[0]
    TR = UL("engine/trainer.py")
    USER = "/home/kim/detect/train_yolov8m.py"
    u = [(TR, 208, "train"), (UL("engine/model.py"), 802, "train"), (USER, 27, "<module>")]
    u_do = [(TR, 381, "_do_train")] + u
    st_p = S(L("torch/nn/modules/module.py", 1318, "convert"), L("torch/nn/modules/module.py", 900, "_apply"),
             L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 927, "_apply"), L("torch/nn/modules/module.py", 1333, "to"),
             (TR, 247, "_setup_train"), (TR, 298, "_do_train"), u)
    st_ema = S(L("torch/_tensor.py", 110, "__deepcopy__"), ("/home/kim/miniconda3/envs/yolo/lib/python3.11/copy.py", 153, "deepcopy"),
               ("/home/kim/miniconda3/envs/yolo/lib/python3.11/copy.py", 231, "_deepcopy_dict"), ("/home/kim/miniconda3/envs/yolo/lib/python3.11/copy.py", 146, "deepcopy"),
               (UL("utils/torch_utils.py"), 520, "__init__"), (TR, 269, "_setup_train"), (TR, 298, "_do_train"), u)
    # YOLOv8m: 25.9M parameters in 258 tensors; BN running stats
    sizes = []
    for ch, k in ((48, 27), (96, 432), (96, 864), (192, 1728), (192, 1728), (384, 3456), (384, 3456), (576, 5184), (576, 5184)):
        for r in range(12):
            sizes.append(ch * k * FP // 2)
            sizes += [ch * FP] * 4
    tot = sum(sizes)
    scale = 25_902_640 * FP / tot
    sizes = [max(512, int(s * scale) // 4 * 4) for s in sizes]
    pblk, ema = [], []
    nbuf = 0
    for i, s in enumerate(sizes):
        pblk.append(R.a(s, st_p, "param"))
        if i % 5 == 4:
            for bs_ in (sizes[i - 1], sizes[i - 1], 8):
                R.a(bs_, st_p, "buffer")
                nbuf += 1
    for i, s in enumerate(sizes):
        ema.append(R.a(s, st_ema, "ema"))
        if i % 5 == 4:
            for bs_ in (sizes[i - 1], sizes[i - 1], 8):
                R.a(bs_, st_ema, "ema")
    st_mom = S(L("torch/optim/sgd.py", 412, "_multi_tensor_sgd"), L("torch/optim/sgd.py", 312, "sgd"), L("torch/optim/sgd.py", 127, "step"),
               L("torch/optim/optimizer.py", 79, "_use_grad"), L("torch/optim/optimizer.py", 484, "wrapper"),
               L("torch/amp/grad_scaler.py", 380, "_maybe_opt_step"), L("torch/amp/grad_scaler.py", 457, "step"),
               (TR, 561, "optimizer_step"), (TR, 393, "_do_train"), u)
    st_ematmp = S((UL("utils/torch_utils.py"), 537, "update"), (TR, 565, "optimizer_step"), (TR, 393, "_do_train"), u)
    st_zg = S(L("torch/optim/optimizer.py", 952, "zero_grad"), L("torch/_compile.py", 31, "inner"), (TR, 563, "optimizer_step"), (TR, 393, "_do_train"), u)
    st_scale = S(L("torch/amp/grad_scaler.py", 170, "_lazy_init_scale_growth_tracker"), L("torch/amp/grad_scaler.py", 195, "scale"), (TR, 384, "_do_train"), u)
    st_img = S((TR, 376, "_do_train"), u)
    st_pre = S((UL("models/yolo/detect/train.py"), 60, "preprocess_batch"), (TR, 376, "_do_train"), u)
    mdl = lambda line: [(UL("nn/modules/conv.py"), line, "forward")] + L.call() + [(UL("nn/tasks.py"), 136, "_predict_once"), (UL("nn/tasks.py"), 114, "predict"), (UL("nn/tasks.py"), 96, "forward")] + L.call() + [(TR, 379, "_do_train")] + u
    conv = S(L("torch/nn/modules/conv.py", 454, "_conv_forward"), L("torch/nn/modules/conv.py", 458, "forward"), L.call(), mdl(50))
    bn = S(L("torch/nn/functional.py", 2512, "batch_norm"), L("torch/nn/modules/batchnorm.py", 176, "forward"), L.call(), mdl(50))
    act = S(L("torch/nn/functional.py", 2102, "silu"), L("torch/nn/modules/activation.py", 396, "forward"), L.call(), mdl(50))
    loss = S((UL("utils/loss.py"), 242, "__call__"), (UL("nn/tasks.py"), 289, "loss"), (UL("nn/tasks.py"), 95, "forward"), L.call(), (TR, 379, "_do_train"), u)
    tl = S((TR, 387, "_do_train"), u)
    grads = [None] * len(sizes)
    mom = None
    scale = R.a(4, st_scale, "scaler")
    gt = R.a(4, st_scale, "scaler")
    tloss = None
    B = 16
    # (channels, stride) of the saved activations of one forward
    layout = [(48, 2), (96, 4), (96, 4), (96, 4), (192, 8), (192, 8), (192, 8), (384, 16), (384, 16), (576, 32), (576, 32), (576, 32),
              (384, 16), (384, 16), (192, 8), (192, 8), (192, 16), (384, 16), (384, 32), (576, 32), (144, 8), (144, 16), (144, 32)]
    accumulate = 4
    for it in range(27):
        imgsz = rng.randrange(320, 961, 32)
        img = R.a(B * 3 * 640 * 640, st_img, "input")
        x = R.a(B * 3 * imgsz * imgsz * BF, st_pre, "input")
        R.f(img, st_pre)
        saved = []
        for ch, s in layout:
            hw = (imgsz // s) ** 2
            for st in (conv, bn, act):
                saved.append(R.a(B * ch * hw * BF, st, "act"))
        for r in range(6):
            saved.append(R.a(B * 8400 * 144 * FP * (imgsz * imgsz) // (640 * 640), loss, "act"))
        lv = R.a(12, loss, "act")
        clk.wait(80_000)
        gin = None
        for b in reversed(saved):
            g = R.a(b.req, [], "tmp")
            if gin is not None:
                R.f(gin, [])
            gin = g
            R.f(b, [])
        R.f(gin, [])
        for i, s in enumerate(sizes):
            if grads[i] is None:
                grads[i] = R.a(s, [], "grad")
        R.f(lv, [])
        nt = R.a(12, tl, "tloss")
        if tloss is not None:
            R.f(tloss, tl)
        tloss = nt
        R.f(x, tl)
        if (it + 1) % accumulate == 0:
            if mom is None:
                mom = [R.a(s, st_mom, "opt") for s in sizes]
            for i, s in enumerate(sizes):
                R.f(grads[i], st_zg)
                grads[i] = None
            for i, s in enumerate(sizes):
                t = R.a(s, st_ematmp, "tmp")
                R.f(t, st_ematmp)
        clk.wait(120_000)
    d = write([A], "cuda", rec=R.rec, state_only=True)
    return dict(name="m09_yolov8m_multiscale_state.pickle", data=d, allocs=[A], rec=R.rec,
                info=dict(sizes=sizes, last_it=26))
