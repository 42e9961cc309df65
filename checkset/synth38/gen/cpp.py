"""C++ frame chains for the file recorded with C++ stacks (torch >= 2.1 _record_memory_history(
stacks="all")): allocator frames, operator chains, then the Python frames interleaved with the
interpreter's frames, then the process entry, as real files write them."""
from common import S, CORE, MAIN_TAIL, THREAD_TAIL

T1 = "at::Tensor const&"
OPT_T = "std::optional<at::Tensor> const&"
EMPTY_STRIDED = [("??", 0, "at::detail::empty_strided_generic(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType)"),
                 ("??", 0, "at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>)")]
EMPTY = [("??", 0, "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
         ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)")]
TI = [("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"),
      ("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")]


def ops(name, sig, vt="VariableType_0.cpp"):
    return [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_%s(%s)" % (name, sig)),
            ("??", 0, "at::_ops::%s::redispatch(c10::DispatchKeySet, %s)" % (name, sig)),
            (vt, 0, "torch::autograd::VariableType::(anonymous namespace)::%s(c10::DispatchKeySet, %s)" % (name, sig)),
            ("??", 0, "at::_ops::%s::call(%s)" % (name, sig))]


K = {
    "fft_r2c": EMPTY + [("??", 0, "at::native::_fft_r2c_cufft(%s, c10::ArrayRef<long>, long, bool)" % T1)]
    + ops("_fft_r2c", "%s, c10::ArrayRef<long>, long, bool" % T1, "VariableType_2.cpp")
    + [("??", 0, "at::native::fft_rfftn_symint(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1),
       ("??", 0, "at::_ops::fft_rfftn::call(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1)],
    "fft_c2r": EMPTY + [("??", 0, "at::native::_fft_c2r_cufft(%s, c10::ArrayRef<long>, long, long)" % T1)]
    + ops("_fft_c2r", "%s, c10::ArrayRef<long>, long, c10::SymInt" % T1, "VariableType_1.cpp")
    + [("??", 0, "at::native::fft_irfftn_symint(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1),
       ("??", 0, "at::_ops::fft_irfftn::call(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1)],
    "fft_ws_r2c": EMPTY + [("??", 0, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
                           ("??", 0, "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
                           ("??", 0, "at::native::(anonymous namespace)::_exec_fft(at::Tensor&, %s, c10::ArrayRef<long>, c10::ArrayRef<long>, bool)" % T1),
                           ("??", 0, "at::native::_fft_r2c_cufft(%s, c10::ArrayRef<long>, long, bool)" % T1)]
    + ops("_fft_r2c", "%s, c10::ArrayRef<long>, long, bool" % T1, "VariableType_2.cpp")
    + [("??", 0, "at::native::fft_rfftn_symint(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1),
       ("??", 0, "at::_ops::fft_rfftn::call(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1)],
    "fft_ws_c2r": EMPTY + [("??", 0, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
                           ("??", 0, "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
                           ("??", 0, "at::native::(anonymous namespace)::_exec_fft(at::Tensor&, %s, c10::ArrayRef<long>, c10::ArrayRef<long>, bool)" % T1),
                           ("??", 0, "at::native::_fft_c2r_cufft(%s, c10::ArrayRef<long>, long, long)" % T1)]
    + ops("_fft_c2r", "%s, c10::ArrayRef<long>, long, c10::SymInt" % T1, "VariableType_1.cpp")
    + [("??", 0, "at::native::fft_irfftn_symint(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1),
       ("??", 0, "at::_ops::fft_irfftn::call(%s, c10::OptionalArrayRef<c10::SymInt>, c10::OptionalArrayRef<long>, std::optional<c10::basic_string_view<char> >)" % T1)],
    "zeros": EMPTY + [("??", 0, "at::native::zeros_symint(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)"),
                      ("??", 0, "at::_ops::zeros::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)")],
    "bmm": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_bmm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("bmm", "%s, %s" % (T1, T1), "VariableType_1.cpp")
    + [("??", 0, "at::native::bmm_symint(%s, %s)" % (T1, T1)),
       ("??", 0, "at::native::einsum(c10::basic_string_view<char>, c10::ArrayRef<at::Tensor>, c10::OptionalArrayRef<long>)"),
       ("??", 0, "at::_ops::einsum::call(c10::basic_string_view<char>, c10::ArrayRef<at::Tensor>, c10::OptionalArrayRef<long>)")],
    "addmm": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_addmm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("addmm", "%s, %s, %s, c10::Scalar const&, c10::Scalar const&" % (T1, T1, T1), "VariableType_2.cpp")
    + [("??", 0, "at::native::linear(%s, %s, %s)" % (T1, T1, OPT_T)),
       ("??", 0, "at::_ops::linear::call(%s, %s, %s)" % (T1, T1, OPT_T))],
    "conv": EMPTY_STRIDED + [("??", 0, "at::native::cudnn_convolution(%s, %s, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, long, bool, bool, bool)" % (T1, T1))]
    + ops("cudnn_convolution", "%s, %s, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::SymInt, bool, bool, bool" % (T1, T1), "VariableType_3.cpp")
    + [("??", 0, "at::native::_convolution(%s, %s, %s, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, bool, c10::ArrayRef<long>, long, bool, bool, bool, bool)" % (T1, T1, OPT_T)),
       ("??", 0, "at::_ops::convolution::call(%s, %s, %s, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, bool, c10::ArrayRef<c10::SymInt>, c10::SymInt)" % (T1, T1, OPT_T)),
       ("??", 0, "at::native::conv3d_symint(%s, %s, %s, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::SymInt)" % (T1, T1, OPT_T))],
    "add": TI + ops("add_Tensor", "%s, %s, c10::Scalar const&" % (T1, T1)),
    "sub": TI + ops("sub_Tensor", "%s, %s, c10::Scalar const&" % (T1, T1)),
    "mul": TI + ops("mul_Tensor", "%s, %s" % (T1, T1)),
    "gelu": TI + ops("gelu", "%s, c10::basic_string_view<char>" % T1, "VariableType_4.cpp"),
    "pad": EMPTY + [("??", 0, "at::native::constant_pad_nd(%s, c10::ArrayRef<long>, c10::Scalar const&)" % T1),
                    ("??", 0, "at::_ops::constant_pad_nd::call(%s, c10::ArrayRef<c10::SymInt>, c10::Scalar const&)" % T1),
                    ("??", 0, "at::native::_pad_enum_symint(%s, c10::ArrayRef<c10::SymInt>, long, std::optional<double>)" % T1)],
    "norm": TI + [("??", 0, "at::native::linalg_vector_norm_out(%s, c10::Scalar const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>, at::Tensor&)" % T1)]
    + ops("linalg_vector_norm", "%s, c10::Scalar const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>" % T1, "VariableType_3.cpp"),
    "copy": EMPTY_STRIDED + [("??", 0, "at::native::_to_copy(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)" % T1),
                             ("??", 0, "at::_ops::_to_copy::call(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)" % T1),
                             ("??", 0, "at::native::contiguous(%s, c10::MemoryFormat)" % T1)],
    "zeros_like": EMPTY_STRIDED + [("??", 0, "at::native::zeros_like(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1),
                                   ("??", 0, "at::_ops::zeros_like::call(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1)],
    "foreach": EMPTY_STRIDED + [("??", 0, "at::native::foreach_tensor_mul_scalar_kernel_cuda(c10::ArrayRef<at::Tensor>, c10::Scalar const&)"),
                                ("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_Scalar__foreach_mul(c10::ArrayRef<at::Tensor>, c10::Scalar const&)"),
                                ("??", 0, "at::_ops::_foreach_mul_Scalar::call(c10::ArrayRef<at::Tensor>, c10::Scalar const&)")],
}
ENTRY = {"fft_r2c": ("python_fft_functions.cpp", "torch::autograd::THPFFTVariable_fft_rfftn"),
         "fft_ws_r2c": ("python_fft_functions.cpp", "torch::autograd::THPFFTVariable_fft_rfftn"),
         "fft_c2r": ("python_fft_functions.cpp", "torch::autograd::THPFFTVariable_fft_irfftn"),
         "fft_ws_c2r": ("python_fft_functions.cpp", "torch::autograd::THPFFTVariable_fft_irfftn"),
         "zeros": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_zeros"),
         "bmm": ("python_torch_functions_1.cpp", "torch::autograd::THPVariable_einsum"),
         "addmm": ("python_nn_functions.cpp", "torch::autograd::THPVariable_linear"),
         "conv": ("python_torch_functions_1.cpp", "torch::autograd::THPVariable_conv3d"),
         "add": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_add>"),
         "sub": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_sub>"),
         "mul": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_mul>"),
         "gelu": ("python_nn_functions.cpp", "torch::autograd::THPVariable_gelu"),
         "pad": ("python_nn_functions.cpp", "torch::autograd::THPVariable_pad"),
         "norm": ("python_linalg_functions.cpp", "torch::autograd::THPVariable_linalg_vector_norm"),
         "copy": ("python_variable_methods.cpp", "torch::autograd::THPVariable_contiguous"),
         "zeros_like": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_zeros_like"),
         "foreach": ("python_torch_functions_0.cpp", "torch::autograd::THPVariable__foreach_mul")}


def interleave(py):
    out = []
    for i, f in enumerate(py):
        out.append(f)
        out.append(("??", 0, "_PyEval_EvalFrameDefault"))
        if i + 1 < len(py):
            out.append(("??", 0, "_PyFunction_Vectorcall" if i % 2 else "_PyObject_FastCallDictTstate"))
    return out


def fwd(op, py):
    fn, ent = ENTRY[op]
    return S(CORE, K[op], [(fn, 0, ent + "(_object*, _object*, _object*)"), ("??", 0, "cfunction_call")],
             interleave(py), MAIN_TAIL[1:])


def bwd(op, node):
    """An op run by the autograd engine's device thread for backward node `node`."""
    return S(CORE, K[op],
             [("??", 0, "torch::autograd::generated::%s::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)" % node),
              ("??", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)")],
             THREAD_TAIL)


def accumulate_grad():
    return S(CORE, EMPTY_STRIDED,
             [("??", 0, "at::native::clone(%s, std::optional<c10::MemoryFormat>)" % T1),
              ("??", 0, "at::_ops::clone::call(%s, std::optional<c10::MemoryFormat>)" % T1),
              ("accumulate_grad.h", 0, "torch::autograd::AccumulateGrad::accumulateGrad<torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)::{lambda(at::Tensor&&)#1}>(at::Tensor const&, at::Tensor&, at::Tensor const&, unsigned long, std::function<void (at::Tensor&&)> const&)"),
              ("accumulate_grad.cpp", 0, "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)")],
             THREAD_TAIL)


# ---------------------------------------------------------------------------- batch 36 additions
# Operator chains of a Llama-style decoder (linear without bias, RMSNorm, rotary, SDPA flash, SiLU).
K.update({
    "mm": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_mm_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("mm", "%s, %s" % (T1, T1), "VariableType_3.cpp")
    + [("??", 0, "at::native::_matmul_impl(at::Tensor&, %s, %s)" % (T1, T1)),
       ("??", 0, "at::native::matmul(%s, %s)" % (T1, T1)),
       ("??", 0, "at::native::linear(%s, %s, %s)" % (T1, T1, OPT_T)),
       ("??", 0, "at::_ops::linear::call(%s, %s, %s)" % (T1, T1, OPT_T))],
    "embedding": EMPTY + [("??", 0, "at::native::index_select_cuda(%s, long, %s)" % (T1, T1))]
    + ops("index_select", "%s, long, %s" % (T1, T1), "VariableType_2.cpp")
    + [("??", 0, "at::native::embedding_symint(%s, %s, c10::SymInt, bool, bool)" % (T1, T1)),
       ("??", 0, "at::_ops::embedding::call(%s, %s, c10::SymInt, bool, bool)" % (T1, T1))],
    "to": EMPTY_STRIDED + [("??", 0, "at::native::_to_copy(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)" % T1),
                           ("??", 0, "at::_ops::_to_copy::call(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)" % T1),
                           ("??", 0, "at::native::to(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, bool, std::optional<c10::MemoryFormat>)" % T1),
                           ("??", 0, "at::_ops::to_dtype::call(%s, c10::ScalarType, bool, bool, std::optional<c10::MemoryFormat>)" % T1)],
    "pow": TI + ops("pow_Tensor_Scalar", "%s, c10::Scalar const&" % T1, "VariableType_1.cpp"),
    "mean": EMPTY_STRIDED + [("??", 0, "at::meta::make_reduction(%s, at::Tensor const&, c10::OptionalArrayRef<long>, bool, c10::ScalarType)" % T1)]
    + ops("mean_dim", "%s, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>" % T1, "VariableType_2.cpp"),
    "rsqrt": TI + ops("rsqrt", T1, "VariableType_4.cpp"),
    "silu": TI + ops("silu", T1, "VariableType_4.cpp"),
    "neg": TI + ops("neg", T1, "VariableType_0.cpp"),
    "cat": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_cat_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("cat", "c10::IListRef<at::Tensor> const&, long", "VariableType_1.cpp"),
    "sdpa": EMPTY + [("??", 0, "at::native::_scaled_dot_product_flash_attention_cuda(%s, %s, %s, double, bool, bool, std::optional<double>)" % (T1, T1, T1))]
    + ops("_scaled_dot_product_flash_attention", "%s, %s, %s, double, bool, bool, std::optional<double>" % (T1, T1, T1), "VariableType_0.cpp")
    + [("??", 0, "at::native::scaled_dot_product_attention(%s, %s, %s, %s, double, bool, std::optional<double>, bool)" % (T1, T1, T1, OPT_T)),
       ("??", 0, "at::_ops::scaled_dot_product_attention::call(%s, %s, %s, %s, double, bool, std::optional<double>, bool)" % (T1, T1, T1, OPT_T))],
    "sdpa_bwd": EMPTY + [("??", 0, "at::native::_scaled_dot_product_flash_attention_backward_cuda(%s, %s, %s, %s, %s, %s, %s, %s, long, long, double, bool, %s, %s, std::optional<double>)" % ((T1,) * 10))]
    + ops("_scaled_dot_product_flash_attention_backward", "%s, %s, %s, %s, %s, %s, %s, %s, c10::SymInt, c10::SymInt, double, bool, %s, %s, std::optional<double>" % ((T1,) * 10), "VariableType_0.cpp"),
    "index": EMPTY + [("??", 0, "at::native::index_out_cuda(%s, c10::List<std::optional<at::Tensor> > const&, at::Tensor&)" % T1)]
    + ops("index_Tensor", "%s, c10::List<std::optional<at::Tensor> > const&" % T1, "VariableType_3.cpp"),
    "logsigmoid": TI + ops("log_sigmoid_forward", T1, "VariableType_2.cpp"),
    "embedding_bwd": EMPTY + [("??", 0, "at::native::embedding_dense_backward_cuda(%s, %s, long, long, bool)" % (T1, T1))]
    + ops("embedding_dense_backward", "%s, %s, c10::SymInt, c10::SymInt, bool" % (T1, T1), "VariableType_4.cpp"),
})
ENTRY.update({
    "mm": ("python_nn_functions.cpp", "torch::autograd::THPVariable_linear"),
    "embedding": ("python_torch_functions_1.cpp", "torch::autograd::THPVariable_embedding"),
    "to": ("python_variable_methods.cpp", "torch::autograd::THPVariable_to"),
    "pow": ("python_variable_methods.cpp", "torch::autograd::THPVariable_pow"),
    "mean": ("python_variable_methods.cpp", "torch::autograd::THPVariable_mean"),
    "rsqrt": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_rsqrt"),
    "silu": ("python_nn_functions.cpp", "torch::autograd::THPVariable_silu"),
    "neg": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_neg>"),
    "cat": ("python_torch_functions_0.cpp", "torch::autograd::THPVariable_cat"),
    "sdpa": ("python_nn_functions.cpp", "torch::autograd::THPVariable_scaled_dot_product_attention"),
    "index": ("python_variable_indexing.cpp", "torch::autograd::THPVariable_getitem"),
    "logsigmoid": ("python_nn_functions.cpp", "torch::autograd::THPVariable_logsigmoid"),
})


def ckpt_fwd(op, py):
    """An op re-run by torch.utils.checkpoint's recomputation inside backward: Python frames of the
    re-run forward on top of the autograd engine thread."""
    fn, ent = ENTRY[op]
    return S(CORE, K[op], [(fn, 0, ent + "(_object*, _object*, _object*)"), ("??", 0, "cfunction_call")],
             interleave(py),
             [("??", 0, "torch::autograd::PyNode::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)")],
             THREAD_TAIL)


# ---------------------------------------------------------------------------- batch 37 additions
# Operator chains of a hashed-feature EmbeddingBag CTR model with sparse gradients (SparseAdam).
K.update({
    "ebag": EMPTY + [("??", 0, "at::native::_embedding_bag_cuda(%s, %s, %s, bool, long, bool, %s, bool, long)" % (T1, T1, T1, OPT_T))]
    + ops("_embedding_bag", "%s, %s, %s, bool, long, bool, %s, bool, long" % (T1, T1, T1, OPT_T), "VariableType_2.cpp")
    + [("??", 0, "at::native::embedding_bag(%s, %s, %s, bool, long, bool, %s, bool, std::optional<long>)" % (T1, T1, T1, OPT_T)),
       ("??", 0, "at::_ops::embedding_bag_padding_idx::call(%s, %s, %s, bool, long, bool, %s, bool, std::optional<long>)" % (T1, T1, T1, OPT_T))],
    "ebag_bwd": EMPTY + [("??", 0, "at::native::index_select_cuda(%s, long, %s)" % (T1, T1)),
                         ("??", 0, "at::_ops::index_select::call(%s, long, %s)" % (T1, T1)),
                         ("??", 0, "at::native::_embedding_bag_sparse_backward_symint(%s, %s, %s, %s, %s, c10::SymInt, bool, long, %s, long)" % (T1, T1, T1, T1, T1, OPT_T)),
                         ("??", 0, "at::native::_embedding_bag_backward_symint(%s, %s, %s, %s, %s, %s, c10::SymInt, bool, long, bool, %s, long)" % ((T1,) * 6 + (OPT_T,))),
                         ("??", 0, "at::_ops::_embedding_bag_backward::call(%s, %s, %s, %s, %s, %s, c10::SymInt, bool, long, bool, %s, long)" % ((T1,) * 6 + (OPT_T,)))],
    "ebag_bwd_idx": EMPTY + [("??", 0, "at::native::clone(%s, std::optional<c10::MemoryFormat>)" % T1),
                             ("??", 0, "at::native::_embedding_bag_sparse_backward_symint(%s, %s, %s, %s, %s, c10::SymInt, bool, long, %s, long)" % (T1, T1, T1, T1, T1, OPT_T)),
                             ("??", 0, "at::native::_embedding_bag_backward_symint(%s, %s, %s, %s, %s, %s, c10::SymInt, bool, long, bool, %s, long)" % ((T1,) * 6 + (OPT_T,))),
                             ("??", 0, "at::_ops::_embedding_bag_backward::call(%s, %s, %s, %s, %s, %s, c10::SymInt, bool, long, bool, %s, long)" % ((T1,) * 6 + (OPT_T,)))],
    "coalesce": EMPTY + [("??", 0, "at::native::_coalesce_sparse_cuda(%s)" % T1)]
    + ops("_coalesce", T1, "VariableType_0.cpp")
    + [("??", 0, "at::native::coalesce(%s)" % T1), ("??", 0, "at::_ops::coalesce::call(%s)" % T1)],
    "sparse_mask": EMPTY
    + [("??", 0, "at::native::index_select_cuda(%s, long, %s)" % (T1, T1)),
       ("??", 0, "at::_ops::index_select::call(%s, long, %s)" % (T1, T1)),
       ("??", 0, "at::native::sparse_mask(%s, %s)" % (T1, T1))]
    + ops("sparse_mask", "%s, %s" % (T1, T1), "VariableType_4.cpp"),
    "relu": TI + [("??", 0, "at::native::clamp_min(%s, c10::Scalar const&)" % T1)] + ops("relu", T1, "VariableType_3.cpp"),
    "threshold_bwd": TI + ops("threshold_backward", "%s, %s, c10::Scalar const&" % (T1, T1), "VariableType_4.cpp"),
    "bce": TI + ops("binary_cross_entropy_with_logits", "%s, %s, %s, %s, long" % (T1, T1, OPT_T, OPT_T), "VariableType_1.cpp"),
    "remainder": TI + ops("remainder_Scalar", "%s, c10::Scalar const&" % T1, "VariableType_2.cpp"),
    "pow2": TI + ops("pow_Tensor_Scalar", "%s, c10::Scalar const&" % T1, "VariableType_1.cpp"),
    "sum": EMPTY_STRIDED + [("??", 0, "at::meta::make_reduction(%s, at::Tensor const&, c10::OptionalArrayRef<long>, bool, c10::ScalarType)" % T1)]
    + ops("sum_dim_IntList", "%s, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>" % T1, "VariableType_3.cpp"),
})
ENTRY.update({
    "ebag": ("python_torch_functions_1.cpp", "torch::autograd::THPVariable_embedding_bag"),
    "coalesce": ("python_variable_methods.cpp", "torch::autograd::THPVariable_coalesce"),
    "sparse_mask": ("python_variable_methods.cpp", "torch::autograd::THPVariable_sparse_mask"),
    "relu": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_relu"),
    "bce": ("python_torch_functions_0.cpp", "torch::autograd::THPVariable_binary_cross_entropy_with_logits"),
    "remainder": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_remainder>"),
    "pow2": ("python_variable_methods.cpp", "torch::autograd::THPVariable_pow"),
})


# ---------------------------------------------------------------------------- batch 38 additions
# fairseq transformer (fp32): softmax / log_softmax, native dropout, layer norm, efficient SDPA,
# the backward kernels of these, and sqrt (fairseq's Adam denominator).
K.update({
    "softmax": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_softmax_cuda_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("_softmax", "%s, long, bool" % T1, "VariableType_2.cpp")
    + [("??", 0, "at::native::softmax(%s, long, std::optional<c10::ScalarType>)" % T1),
       ("??", 0, "at::_ops::softmax_int::call(%s, long, std::optional<c10::ScalarType>)" % T1)],
    "log_softmax": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_log_softmax_cuda_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("_log_softmax", "%s, long, bool" % T1, "VariableType_3.cpp")
    + [("??", 0, "at::native::log_softmax(%s, long, std::optional<c10::ScalarType>)" % T1),
       ("??", 0, "at::_ops::log_softmax_int::call(%s, long, std::optional<c10::ScalarType>)" % T1)],
    "dropout": EMPTY_STRIDED + [("??", 0, "at::native::empty_like(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1),
                                ("??", 0, "at::native::native_dropout_cuda(%s, double, std::optional<bool>)" % T1)]
    + ops("native_dropout", "%s, double, std::optional<bool>" % T1, "VariableType_3.cpp")
    + [("??", 0, "at::native::dropout(%s, double, bool)" % T1), ("??", 0, "at::_ops::dropout::call(%s, double, bool)" % T1)],
    "layer_norm": EMPTY_STRIDED + [("??", 0, "at::native::empty_like(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1),
                                   ("??", 0, "at::native::layer_norm_cuda(%s, c10::ArrayRef<long>, %s, %s, double)" % (T1, OPT_T, OPT_T))]
    + ops("native_layer_norm", "%s, c10::ArrayRef<c10::SymInt>, %s, %s, double" % (T1, OPT_T, OPT_T), "VariableType_4.cpp")
    + [("??", 0, "at::native::layer_norm_symint(%s, c10::ArrayRef<c10::SymInt>, %s, %s, double, bool)" % (T1, OPT_T, OPT_T)),
       ("??", 0, "at::_ops::layer_norm::call(%s, c10::ArrayRef<c10::SymInt>, %s, %s, double, bool)" % (T1, OPT_T, OPT_T))],
    "sdpa_eff": EMPTY + [("??", 0, "at::native::_efficient_attention_forward(%s, %s, %s, %s, %s, %s, std::optional<long>, std::optional<long>, double, long, bool, %s, %s, std::optional<double>, std::optional<long>)" % (T1, T1, T1, OPT_T, OPT_T, OPT_T, OPT_T, OPT_T))]
    + ops("_efficient_attention_forward", "%s, %s, %s, %s, %s, %s, std::optional<c10::SymInt>, std::optional<c10::SymInt>, double, long, bool, %s, %s, std::optional<double>, std::optional<long>" % (T1, T1, T1, OPT_T, OPT_T, OPT_T, OPT_T, OPT_T), "VariableType_1.cpp")
    + [("??", 0, "at::native::_scaled_dot_product_efficient_attention_cuda(%s, %s, %s, %s, bool, double, bool, std::optional<double>)" % (T1, T1, T1, OPT_T))]
    + ops("_scaled_dot_product_efficient_attention", "%s, %s, %s, %s, bool, double, bool, std::optional<double>" % (T1, T1, T1, OPT_T), "VariableType_0.cpp")
    + [("??", 0, "at::native::scaled_dot_product_attention(%s, %s, %s, %s, double, bool, std::optional<double>, bool)" % (T1, T1, T1, OPT_T)),
       ("??", 0, "at::_ops::scaled_dot_product_attention::call(%s, %s, %s, %s, double, bool, std::optional<double>, bool)" % (T1, T1, T1, OPT_T))],
    "sdpa_eff_bwd": EMPTY + [("??", 0, "at::native::_efficient_attention_backward(%s, %s, %s, %s, %s, %s, %s, %s, std::optional<long>, std::optional<long>, %s, double, %s, %s, long, bool, std::optional<double>, std::optional<long>)" % ((T1,) * 6 + (OPT_T, OPT_T, T1, T1, T1)))]
    + ops("_efficient_attention_backward", "%s, %s, %s, %s, %s, %s, %s, %s, c10::SymInt, c10::SymInt, %s, double, %s, %s, long, bool, std::optional<double>, std::optional<long>" % ((T1,) * 6 + (OPT_T, OPT_T, T1, T1, T1)), "VariableType_1.cpp"),
    "softmax_bwd": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_softmax_backward_cuda_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("_softmax_backward_data", "%s, %s, long, c10::ScalarType" % (T1, T1), "VariableType_2.cpp"),
    "log_softmax_bwd": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_log_softmax_backward_cuda_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("_log_softmax_backward_data", "%s, %s, long, c10::ScalarType" % (T1, T1), "VariableType_3.cpp"),
    "layer_norm_bwd": EMPTY_STRIDED + [("??", 0, "at::native::layer_norm_backward_cuda(%s, %s, c10::ArrayRef<long>, %s, %s, %s, %s, std::array<bool, 3ul>)" % (T1, T1, T1, T1, OPT_T, OPT_T))]
    + ops("native_layer_norm_backward", "%s, %s, c10::ArrayRef<c10::SymInt>, %s, %s, %s, %s, std::array<bool, 3ul>" % (T1, T1, T1, T1, OPT_T, OPT_T), "VariableType_4.cpp"),
    "dropout_bwd": TI + ops("native_dropout_backward", "%s, %s, double" % (T1, T1), "VariableType_2.cpp"),
    "gather_bwd": EMPTY + [("??", 0, "at::native::zeros_symint(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)"),
                           ("??", 0, "at::_ops::zeros::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)"),
                           ("??", 0, "at::native::gather_backward(%s, long, %s, %s, bool)" % (T1, T1, T1))],
    "sqrt": TI + ops("sqrt", T1, "VariableType_1.cpp"),
    "gather": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_gather_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("gather", "%s, long, %s, bool" % (T1, T1), "VariableType_2.cpp"),
    "stack": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_cat_out_cuda_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("cat", "c10::IListRef<at::Tensor> const&, long", "VariableType_1.cpp")
    + [("??", 0, "at::native::stack(c10::ArrayRef<at::Tensor>, long)"), ("??", 0, "at::_ops::stack::call(c10::ArrayRef<at::Tensor>, long)")],
    "index_select": EMPTY + [("??", 0, "at::native::index_select_cuda(%s, long, %s)" % (T1, T1))]
    + ops("index_select", "%s, long, %s" % (T1, T1), "VariableType_2.cpp"),
    "cumsum": EMPTY_STRIDED + [("RegisterCUDA_0.cpp", 0, "at::(anonymous namespace)::structured_cumsum_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)")]
    + ops("cumsum", "%s, long, std::optional<c10::ScalarType>" % T1, "VariableType_0.cpp"),
})
ENTRY.update({
    "softmax": ("python_variable_methods.cpp", "torch::autograd::THPVariable_softmax"),
    "log_softmax": ("python_variable_methods.cpp", "torch::autograd::THPVariable_log_softmax"),
    "dropout": ("python_torch_functions_1.cpp", "torch::autograd::THPVariable_dropout"),
    "layer_norm": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_layer_norm"),
    "sdpa_eff": ("python_nn_functions.cpp", "torch::autograd::THPVariable_scaled_dot_product_attention"),
    "sqrt": ("python_variable_methods.cpp", "torch::autograd::THPVariable_sqrt"),
    "gather": ("python_variable_methods.cpp", "torch::autograd::THPVariable_gather"),
    "stack": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_stack"),
    "index_select": ("python_variable_methods.cpp", "torch::autograd::THPVariable_index_select"),
    "cumsum": ("python_variable_methods.cpp", "torch::autograd::THPVariable_cumsum"),
})
K.update({"eq": TI + ops("eq_Scalar", "%s, c10::Scalar const&" % T1, "VariableType_2.cpp")})
ENTRY.update({"eq": ("python_variable_methods.cpp", "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_eq>")})
ENTRY.update({"sum": ("python_variable_methods.cpp", "torch::autograd::THPVariable_sum"),
              "norm": ("python_torch_functions_2.cpp", "torch::autograd::THPVariable_norm")})
