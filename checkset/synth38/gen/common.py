"""Shared helpers of the ten programs: interned frames and stacks, a per-device context, C++ frame
chains for the file recorded with C++ stacks, and writing a snapshot dict as _dump_snapshot does."""
import sim

MB = sim.MB
GB = sim.GB
KB = sim.KB

_FR = {}
_ST = {}


def F(path, line, name):
    k = (path, line, name)
    d = _FR.get(k)
    if d is None:
        d = _FR[k] = {"name": name, "filename": path, "line": line}
    return d


def S(*parts):
    """A shared stack (innermost first).  parts: (path, line, name) tuples or lists of them."""
    flat = []

    def add(x):
        if isinstance(x, list):
            for y in x:
                add(y)
        elif x is not None:
            flat.append(x)
    add(list(parts))
    k = tuple(flat)
    s = _ST.get(k)
    if s is None:
        s = _ST[k] = [F(*t) for t in flat]
    return s


class Lib:
    """Frames under one site-packages prefix; ci/wci: module.py lines of _call_impl /
    _wrapped_call_impl for the torch version."""
    LINES = {"2.0": (1501, None), "2.1": (1527, 1518), "2.2": (1520, 1511), "2.3": (1541, 1532), "2.4": (1562, 1553),
             "2.5": (1747, 1736), "2.6": (1750, 1739), "2.7": (1762, 1751)}

    def __init__(self, prefix, torch_ver="2.4"):
        self.p = prefix
        self.v = torch_ver
        self.ci, self.wci = self.LINES[torch_ver]

    def __call__(self, rel, line, name):
        return (self.p + rel, line, name)

    def call(self):
        out = [self("torch/nn/modules/module.py", self.ci, "_call_impl")]
        if self.wci:
            out.append(self("torch/nn/modules/module.py", self.wci, "_wrapped_call_impl"))
        return out

    def mod(self, rel, line, name="forward"):
        return [self(rel, line, name)] + self.call()

    # common leaf ops of torch.nn
    def linear(self):
        return self.mod("torch/nn/modules/linear.py", 125 if self.v in ("2.4", "2.5", "2.6", "2.7") else 114)

    def conv2d(self):
        return [self("torch/nn/modules/conv.py", 549 if self.v >= "2.5" else 456, "_conv_forward"),
                ] + self.mod("torch/nn/modules/conv.py", 554 if self.v >= "2.5" else 460)

    def conv3d(self):
        return [self("torch/nn/modules/conv.py", 720 if self.v >= "2.5" else 605, "_conv_forward"),
                ] + self.mod("torch/nn/modules/conv.py", 725 if self.v >= "2.5" else 610)

    def group_norm(self):
        return [self("torch/nn/functional.py", 2965 if self.v >= "2.5" else 2561, "group_norm"),
                ] + self.mod("torch/nn/modules/normalization.py", 313 if self.v >= "2.5" else 288)

    def layer_norm(self):
        return [self("torch/nn/functional.py", 2900 if self.v >= "2.5" else 2546, "layer_norm"),
                ] + self.mod("torch/nn/modules/normalization.py", 217 if self.v >= "2.5" else 201)

    def silu(self):
        return [self("torch/nn/functional.py", 2380 if self.v >= "2.5" else 2072, "silu"),
                ] + self.mod("torch/nn/modules/activation.py", 432 if self.v >= "2.5" else 396)

    def gelu(self):
        return self.mod("torch/nn/modules/activation.py", 734 if self.v >= "2.5" else 682)

    def dropout(self):
        return [self("torch/nn/functional.py", 1425 if self.v >= "2.5" else 1266, "dropout"),
                ] + self.mod("torch/nn/modules/dropout.py", 70 if self.v >= "2.5" else 59)

    def embedding(self):
        return [self("torch/nn/functional.py", 2551 if self.v >= "2.5" else 2233, "embedding"),
                ] + self.mod("torch/nn/modules/sparse.py", 190 if self.v >= "2.5" else 162)

    def convert(self):
        """model.to(device): Module._apply -> convert (nested twice)."""
        if self.v >= "2.5":
            return [self("torch/nn/modules/module.py", 1340, "convert"),
                    self("torch/nn/modules/module.py", 927, "_apply"),
                    self("torch/nn/modules/module.py", 900, "_apply"),
                    self("torch/nn/modules/module.py", 900, "_apply"),
                    self("torch/nn/modules/module.py", 1355, "to")]
        return [self("torch/nn/modules/module.py", 1160, "convert"),
                self("torch/nn/modules/module.py", 833, "_apply"),
                self("torch/nn/modules/module.py", 810, "_apply"),
                self("torch/nn/modules/module.py", 810, "_apply"),
                self("torch/nn/modules/module.py", 1174, "to")]


class Dev:
    """One device's allocator plus helpers."""

    def __init__(self, A):
        self.A = A

    def a(self, size, st, cat="act"):
        return self.A.malloc(int(size), st, cat=cat)

    def f(self, b, st=None):
        if b is not None:
            self.A.free(b, st)

    def fl(self, bs, st=None):
        for b in bs:
            if b is not None:
                self.A.free(b, st)

    def wait(self, us):
        if self.A.clock is not None:
            self.A.clock.wait(us)


# --------------------------------------------------------------------------- C++ frames
CU = "c10::cuda::CUDACachingAllocator::Native::"
CORE = [("??", 0, "torch::unwind::unwind()"),
        ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
        ("memory_snapshot.cpp", 0, "torch::cuda::(anonymous namespace)::gather_with_cpp()"),
        ("CUDACachingAllocator.cpp", 0, CU + "DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
        ("", 0, CU + "NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)"),
        ("", 0, CU + "NativeCachingAllocator::allocate(unsigned long)")]
EMPTY = [("??", 0, "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
         ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)"),
         ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
         ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)")]
EMPTY_STRIDED = [("??", 0, "at::detail::empty_strided_generic(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType)"),
                 ("??", 0, "at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>)"),
                 ("??", 0, "at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)"),
                 ("??", 0, "at::native::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)")]
T1 = "at::Tensor const&"


def _op(name, sig, reg="RegisterCUDA.cpp", vt="VariableType_0.cpp", structured=True):
    """Operator chain for at::<name>(sig) from kernel wrapper to at::_ops::<name>::call."""
    out = []
    if structured:
        out += [(reg, 0, "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)"),
                (reg, 0, "at::(anonymous namespace)::structured_%s_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)" % name)]
    out += [(reg, 0, "at::(anonymous namespace)::wrapper_CUDA_%s(%s)" % (name, sig)),
            ("??", 0, "at::_ops::%s::redispatch(c10::DispatchKeySet, %s)" % (name, sig)),
            (vt, 0, "torch::autograd::VariableType::(anonymous namespace)::%s(c10::DispatchKeySet, %s)" % (name, sig)),
            ("??", 0, "at::_ops::%s::call(%s)" % (name, sig))]
    return out


OPS = {
    "addmm": _op("addmm", "%s, %s, %s, c10::Scalar const&, c10::Scalar const&" % (T1, T1, T1), vt="VariableType_2.cpp"),
    "mm": _op("mm", "%s, %s" % (T1, T1), vt="VariableType_3.cpp"),
    "bmm": _op("bmm", "%s, %s" % (T1, T1), vt="VariableType_1.cpp"),
    "mul": [("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"),
            ("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")] + _op("mul_Tensor", "%s, %s" % (T1, T1)),
    "add": [("??", 0, "at::TensorIteratorBase::allocate_or_resize_outputs()"),
            ("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")] + _op("add_Tensor", "%s, %s, c10::Scalar const&" % (T1, T1)),
    "silu": [("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")] + _op("silu", T1, vt="VariableType_4.cpp"),
    "sigmoid": [("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")] + _op("sigmoid", T1, vt="VariableType_1.cpp"),
    "tanh": [("??", 0, "at::TensorIteratorBase::build(at::TensorIteratorConfig&)")] + _op("tanh", T1, vt="VariableType_0.cpp"),
    "softmax": _op("_softmax", "%s, long, bool" % T1, vt="VariableType_2.cpp"),
    "log_softmax": _op("_log_softmax", "%s, long, bool" % T1, vt="VariableType_3.cpp"),
    "cat": _op("cat", "c10::IListRef<at::Tensor> const&, long", vt="VariableType_1.cpp"),
    "layer_norm": [("??", 0, "at::native::layer_norm_cuda(%s, c10::ArrayRef<long>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double)" % T1)]
    + _op("native_layer_norm", "%s, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double" % T1, structured=False, vt="VariableType_4.cpp"),
    "conv": [("??", 0, "at::native::cudnn_convolution(%s, %s, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, long, bool, bool, bool)" % (T1, T1))]
    + _op("cudnn_convolution", "%s, %s, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::SymInt, bool, bool, bool" % (T1, T1), structured=False, vt="VariableType_3.cpp")
    + [("??", 0, "at::native::_convolution(%s, %s, std::optional<at::Tensor> const&, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, bool, c10::ArrayRef<long>, long, bool, bool, bool, bool)" % (T1, T1)),
       ("??", 0, "at::_ops::convolution::call(%s, %s, std::optional<at::Tensor> const&, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, bool, c10::ArrayRef<c10::SymInt>, c10::SymInt)" % (T1, T1)),
       ("??", 0, "at::native::conv2d_symint(%s, %s, std::optional<at::Tensor> const&, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::SymInt)" % (T1, T1))],
    "empty_like": EMPTY_STRIDED[:0] + [("??", 0, "at::native::empty_like(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1),
                                       ("??", 0, "at::_ops::empty_like::call(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1)],
    "zeros_like": [("??", 0, "at::native::zeros_like(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1),
                   ("??", 0, "at::_ops::zeros_like::call(%s, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % T1)],
    "foreach_mul": [("??", 0, "at::native::foreach_tensor_mul_scalar_kernel_cuda(c10::ArrayRef<at::Tensor>, c10::Scalar const&)"),
                    ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_Scalar__foreach_mul(c10::ArrayRef<at::Tensor>, c10::Scalar const&)"),
                    ("??", 0, "at::_ops::_foreach_mul_Scalar::call(c10::ArrayRef<at::Tensor>, c10::Scalar const&)")],
    "foreach_sqrt": [("??", 0, "at::native::foreach_tensor_sqrt_cuda(c10::ArrayRef<at::Tensor>)"),
                     ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA___foreach_sqrt(c10::ArrayRef<at::Tensor>)"),
                     ("??", 0, "at::_ops::_foreach_sqrt::call(c10::ArrayRef<at::Tensor>)")],
    "foreach_norm": [("??", 0, "at::native::foreach_tensor_norm_cuda(c10::ArrayRef<at::Tensor>, c10::Scalar const&, std::optional<c10::ScalarType>)"),
                     ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA_Scalar__foreach_norm(c10::ArrayRef<at::Tensor>, c10::Scalar const&, std::optional<c10::ScalarType>)"),
                     ("??", 0, "at::_ops::_foreach_norm_Scalar::call(c10::ArrayRef<at::Tensor>, c10::Scalar const&, std::optional<c10::ScalarType>)")],
    "gru": [("??", 0, "at::native::_thnn_fused_gru_cell_cuda(%s, %s, %s, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&)" % (T1, T1, T1)),
            ("RegisterCUDA.cpp", 0, "at::(anonymous namespace)::wrapper_CUDA___thnn_fused_gru_cell(%s, %s, %s, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&)" % (T1, T1, T1)),
            ("??", 0, "at::_ops::_thnn_fused_gru_cell::call(%s, %s, %s, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&)" % (T1, T1, T1))],
}

PY_ENTRY = {"mm": "torch::autograd::THPVariable_matmul", "addmm": "torch::autograd::THPVariable_linear",
            "bmm": "torch::autograd::THPVariable_bmm", "mul": "torch::autograd::THPVariable_mul",
            "add": "torch::autograd::THPVariable_add", "silu": "torch::autograd::THPVariable_silu",
            "sigmoid": "torch::autograd::THPVariable_sigmoid", "tanh": "torch::autograd::THPVariable_tanh",
            "softmax": "torch::autograd::THPVariable_softmax", "log_softmax": "torch::autograd::THPVariable_log_softmax",
            "cat": "torch::autograd::THPVariable_cat", "layer_norm": "torch::autograd::THPVariable_layer_norm",
            "conv": "torch::autograd::THPVariable_conv2d", "empty_like": "torch::autograd::THPVariable_empty_like",
            "zeros_like": "torch::autograd::THPVariable_zeros_like", "foreach_mul": "torch::autograd::THPVariable__foreach_mul",
            "foreach_sqrt": "torch::autograd::THPVariable__foreach_sqrt", "foreach_norm": "torch::autograd::THPVariable__foreach_norm",
            "gru": "torch::autograd::THPVariable__thnn_fused_gru_cell"}
PY_FILE = {"conv": "python_nn_functions.cpp", "addmm": "python_nn_functions.cpp", "silu": "python_nn_functions.cpp"}

MAIN_TAIL = [("??", 0, "_PyEval_EvalFrameDefault"), ("??", 0, "PyEval_EvalCode"),
             ("??", 0, "run_eval_code_obj"), ("??", 0, "run_mod"), ("??", 0, "pyrun_file"),
             ("??", 0, "_PyRun_SimpleFileObject"), ("??", 0, "_PyRun_AnyFileObject"),
             ("??", 0, "pymain_run_file_obj"), ("??", 0, "pymain_run_file"), ("??", 0, "Py_RunMain"),
             ("??", 0, "pymain_main"), ("??", 0, "Py_BytesMain"),
             ("./csu/../sysdeps/nptl/libc_start_call_main.h", 58, "__libc_start_call_main"),
             ("./csu/../csu/libc-start.c", 392, "__libc_start_main_impl"), ("??", 0, "_start")]
THREAD_TAIL = [("??", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
               ("??", 0, "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
               ("??", 0, "torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
               ("/opt/conda/conda-bld/gcc-compiler_1654084175708/work/gcc/libstdc++-v3/src/c++11/thread.cc", 82, "execute_native_thread_routine"),
               ("./nptl/pthread_create.c", 447, "start_thread"),
               ("../sysdeps/unix/sysv/linux/x86_64/clone3.S", 78, "__clone3")]


def cpp_fwd(op, py):
    """C++ stack of a forward op called from Python frames py (innermost first): the C++ frames
    down to _start, then the Python frames, as torch >= 2.5 writes them."""
    ent = PY_ENTRY[op]
    return S(CORE, EMPTY, OPS[op],
             [(PY_FILE.get(op, "python_variable_methods.cpp"), 0, ent + "(_object*, _object*, _object*)"),
              ("??", 0, "cfunction_call")], MAIN_TAIL, py)


def cpp_bwd(op, node):
    """C++ stack of an op run by the autograd engine for backward node `node` (no Python)."""
    return S(CORE, EMPTY, OPS[op],
             [("??", 0, "torch::autograd::generated::%s::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)" % node),
              ("??", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)")],
             THREAD_TAIL)


def cpp_plain(py, what="empty"):
    """torch.empty / zeros style allocation from Python."""
    return S(CORE, EMPTY, [("??", 0, "at::native::%s_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)" % what),
                           ("python_torch_functions_0.cpp", 0, "torch::autograd::THPVariable_%s(_object*, _object*, _object*)" % what),
                           ("??", 0, "cfunction_call")], MAIN_TAIL, py)


# --------------------------------------------------------------------------- writing
def write(devs, kind="cuda", n_dev_lists=None, settings=True, annotations=None, state_only=False,
          max_entries=None, settings_extra=None):
    segs = []
    for A in devs:
        segs.extend(A.segment_dicts())
    segs.sort(key=lambda s: (s["device"], s["address"]))
    ndev = n_dev_lists or (max(A.device for A in devs) + 1)
    traces = [[] for _ in range(ndev)]
    for A in devs:
        t = A.trace
        if max_entries:
            t = sim.ring(t, max_entries)
        traces[A.device] = [] if state_only else t
    d = {"segments": segs, "device_traces": traces}
    if kind == "cuda" and settings:
        st = dict(sim.CUDA_SETTINGS)
        if settings_extra:
            st.update(settings_extra)
        d["allocator_settings"] = st
    if annotations is not None:
        d["external_annotations"] = annotations
    return d


class Ann:
    """record_function annotations (external_annotations) on the device clock."""

    def __init__(self, clock, device=0):
        self.c = clock
        self.dev = device
        self.items = []

    def start(self, name):
        self.items.append({"stage": "START", "name": name, "device": self.dev, "time_us": self.c.tick()})

    def end(self, name):
        self.items.append({"stage": "END", "name": name, "device": self.dev, "time_us": self.c.tick()})


# --------------------------------------------------------------------------- forward / backward
NOSTACK = S()   # autograd-thread allocations in a Python-only recording: no frames


class Tape:
    """What one forward pass saved for backward, in order."""

    def __init__(self):
        self.items = []

    def save(self, b, gsize=None, bst=None):
        self.items.append(("act", b, b.req if gsize is None else gsize, bst))

    def param(self, key, size, bst=None):
        self.items.append(("param", key, size, bst))

    def mark(self, fn):
        """A callable run when backward reaches this point (e.g. free a non-saved buffer)."""
        self.items.append(("call", fn, 0, None))


def op(dv, tape, size, st, keep=True, bst=None, cat="act", gsize=None):
    """Allocate an op output; keep=True saves it for backward."""
    b = dv.a(size, st, cat)
    if keep and tape is not None:
        tape.save(b, gsize, bst)
    return b


def backward(dv, tape, grads, default_bst=NOSTACK, grad_cat="grad", hold=None):
    """Walk the tape backwards: each saved activation gives way to a gradient temporary of its
    input's size; parameters get their .grad on first touch (kept until zero_grad)."""
    gin = None
    for kind, x, gsize, bst in reversed(tape.items):
        st = bst if bst is not None else default_bst
        if kind == "act":
            g = dv.a(gsize, st, "tmp") if gsize else None
            if gin is not None:
                dv.f(gin, st)
            gin = g
            dv.f(x, st)
        elif kind == "param":
            if grads.get(x) is None:
                grads[x] = dv.a(gsize, st, grad_cat)
        else:
            x()
    if gin is not None:
        dv.f(gin, default_bst)
    tape.items = []


def start_recording(A):
    """_record_memory_history switched on now: the trace starts empty, and blocks and segments
    made before carry no stack."""
    A.trace = []
    for s in A.segments.values():
        s.frames = []
        for b in s.blocks:
            b.frames = []
