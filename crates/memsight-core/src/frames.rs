//! Call stacks as people read them: internal frames (C++, Python's own machinery, `PyTorch`
//! internals) filtered out, repeated frames collapsed.

use crate::model::{Frame, Snapshot, StackId};

/// One line of a displayed stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameLine {
    /// `name (file:line)`, or `name` for C++ frames.
    pub text: String,
    /// How many identical consecutive frames this line stands for.
    pub repeat: u32,
    pub internal: bool,
}

/// Whether a frame belongs to the machinery rather than to the user's code.
pub fn is_internal(snapshot: &Snapshot, frame: &Frame) -> bool {
    // Windows paths (`D:\venv\Lib\site-packages\…`) follow the same rules.
    let raw = snapshot.str(frame.filename);
    let file: std::borrow::Cow<str> = if raw.contains('\\') {
        raw.replace('\\', "/").into()
    } else {
        raw.into()
    };
    let file = file.as_ref();
    is_native(file)
        || is_thread_entry(snapshot.str(frame.name))
        || file.starts_with('<')
        || file.contains("/torch/")
        || file.starts_with("torch/")
        || file.contains("site-packages/")
        || file.contains("/lib/python")
}

/// Whether `file` is in `PyTorch`'s own package (`…/site-packages/torch/nn/modules/module.py`,
/// `torch/utils/checkpoint.py`), not a checkout `torch.hub` keeps under `~/.cache/torch/hub/`.
pub(crate) fn is_pytorch_s_own(file: &str) -> bool {
    let file = file.replace('\\', "/");
    (file.starts_with("torch/") || file.contains("/torch/")) && !file.contains("/torch/hub/")
}

/// Whether a frame's file is native code (or names none): no Python line.
pub(crate) fn is_native(file: &str) -> bool {
    // Object files, assembly and shared objects are native too: `thread48.o` holds
    // `execute_native_thread_routine` (the thread autograd's engine runs on), `clone3.S` a
    // thread's start, `libc.so.6` the C library.
    file == "??"
        || file.is_empty()
        || [".cpp", ".cc", ".cu", ".h", ".hpp", ".c", ".o", ".S", ".s"]
            .iter()
            .any(|ext| file.ends_with(ext))
        || file.contains(".so")
}

/// Whether a frame is a line of Python (the program's, a library's or `PyTorch`'s own).
pub fn is_python(snapshot: &Snapshot, frame: &Frame) -> bool {
    !is_native(snapshot.str(frame.filename))
}

/// Functions that start a thread or a process, from libc or libstdc++: the outermost frames of a
/// native stack, which say where a thread began, never who asked for the memory.
fn is_thread_entry(name: &str) -> bool {
    const ENTRIES: [&str; 7] = [
        "execute_native_thread_routine",
        "start_thread",
        "clone",
        "__clone",
        "__clone3",
        "clone3",
        "__libc_start_main",
    ];
    ENTRIES.contains(&name) || name.starts_with("__libc_start_call_main")
}

/// Whether a frame is the recorder's or the allocator's own (`torch::unwind`,
/// `CapturedTraceback::gather`, `DeviceCachingAllocator::malloc` …): the same at the top of every
/// C++ stack, so they say nothing about who asked for the memory.
fn is_recording_machinery(snapshot: &Snapshot, frame: &Frame) -> bool {
    let name = snapshot.str(frame.name);
    [
        "unwind",
        "CapturedTraceback",
        "gather_with_cpp",
        "CachingAllocator",
    ]
    .iter()
    .any(|m| name.contains(m))
}

/// The frames of `stack`, innermost first, consecutive repeats collapsed; without the internal
/// ones unless `with_internal`. Falls back to every frame when all are internal, less the
/// recorder's and the allocator's own frames on top (the caller's operator comes first).
pub fn display_frames(snapshot: &Snapshot, stack: StackId, with_internal: bool) -> Vec<FrameLine> {
    let mut all: Vec<(&Frame, bool)> = snapshot
        .stack_frames(stack)
        .map(|f| (f, is_internal(snapshot, f)))
        .collect();
    let all_internal = all.iter().all(|&(_, internal)| internal);
    if all_internal && !with_internal {
        let machinery = all
            .iter()
            .take_while(|(f, _)| is_recording_machinery(snapshot, f))
            .count();
        if machinery < all.len() {
            all.drain(..machinery);
        }
    }
    let keep_internal = with_internal || all_internal;
    let mut lines: Vec<FrameLine> = Vec::new();
    for (frame, internal) in all {
        if internal && !keep_internal {
            continue;
        }
        let text = frame_text(snapshot, frame);
        match lines.last_mut() {
            Some(last) if last.text == text => last.repeat += 1,
            _ => lines.push(FrameLine {
                text,
                repeat: 1,
                internal,
            }),
        }
    }
    lines
}

/// One frame as people read it: `name (file:line)`, or `name` where the file is unknown.
pub fn frame_text(snapshot: &Snapshot, frame: &Frame) -> String {
    let name = snapshot.str(frame.name);
    let file = snapshot.str(frame.filename);
    if file == "??" {
        name.to_string()
    } else {
        format!("{name} ({file}:{})", frame.line)
    }
}

/// A library file's path from its package on (`bitsandbytes/autograd/_functions.py`,
/// `torch/cuda/graphs.py`): a file name alone does not say which library it is. Where neither
/// an install directory (`site-packages/`) nor `torch/` is in the path, the file name.
pub fn package_path(file: &str) -> &str {
    file.rsplit_once("-packages/")
        .map(|(_, p)| p)
        .or_else(|| file.find("/torch/").map(|at| &file[at + 1..]))
        .unwrap_or_else(|| file.rsplit('/').next().unwrap_or(file))
}

/// The innermost frame of the user's code that every one of `stacks` passes through, as
/// `name (file:line)`: the line a dozen leaking call sites share (`losses.append(model(x))`'s
/// forward), where there is one.
pub fn common_user_frame(snapshot: &Snapshot, stacks: &[StackId]) -> Option<String> {
    let (first, rest) = stacks.split_first()?;
    let user_lines = |stack: StackId| -> Vec<String> {
        display_frames(snapshot, stack, false)
            .into_iter()
            .filter(|l| !l.internal)
            .map(|l| l.text)
            .collect()
    };
    let others: Vec<Vec<String>> = rest.iter().map(|&s| user_lines(s)).collect();
    user_lines(*first)
        .into_iter()
        .find(|line| others.iter().all(|o| o.contains(line)))
}

/// The one frame that names a stack in a summary line: the innermost frame of the user's code
/// (where that is a script's top level, `<module>`, with the innermost library frame before it);
/// for a stack that is all native (autograd's engine thread has no Python frames), the operator
/// it runs — an autograd backward function or an `at::_ops::` call — without its argument list.
pub fn headline_frame(snapshot: &Snapshot, stack: StackId) -> Option<String> {
    let lines = display_frames(snapshot, stack, false);
    let first = lines.first()?;
    if !first.internal {
        // A script's or notebook cell's top level names every allocation it makes through a
        // library alike: the innermost library frame (outside torch) tells them apart.
        if first.text.starts_with("<module> (")
            && let Some(library) = snapshot.stack_frames(stack).find(|f| {
                let file = snapshot.str(f.filename).replace('\\', "/");
                file.contains("site-packages/")
                    && !file.contains("/torch/")
                    && !file.contains("/torch_npu/")
            })
        {
            let file = snapshot.str(library.filename).replace('\\', "/");
            let short = package_path(&file);
            return Some(format!(
                "{} ({short}:{}) in {}",
                snapshot.str(library.name),
                library.line,
                first.text
            ));
        }
        return Some(first.text.clone());
    }
    // The recorder's and the allocator's frames name no operator (unless they are all there is).
    let mut names: Vec<&str> = snapshot
        .stack_frames(stack)
        .filter(|f| !is_recording_machinery(snapshot, f))
        .map(|f| snapshot.str(f.name))
        .filter(|n| !is_thread_entry(n))
        .collect();
    if names.is_empty() {
        names = snapshot
            .stack_frames(stack)
            .map(|f| snapshot.str(f.name))
            .collect();
    }
    // Kernel plumbing (output allocation, registration wrappers) names no operator either,
    // though its names carry the operator's (`structured_log_softmax_backward_…::set_output…`).
    let is_operator = |n: &&&str| !KERNEL_PLUMBING.iter().any(|p| n.contains(p));
    let operator = names
        .iter()
        .filter(is_operator)
        .find(|n| n.contains("_backward") || n.contains("Backward"))
        .or_else(|| {
            names
                .iter()
                .filter(is_operator)
                .find(|n| n.contains("at::_ops::"))
        })
        .unwrap_or(&names[0]);
    Some(function_name(operator))
}

/// Parts of C++ frame names that allocate a kernel's output or register it.
const KERNEL_PLUMBING: [&str; 6] = [
    "set_output",
    "create_out",
    "wrap_kernel_functor",
    "wrapper_",
    "structured_",
    "at::detail::",
];

/// A C++ frame's function name without its return type, argument list or anonymous
/// namespaces: `at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, …)` is
/// `at::detail::_empty_generic<long>` (cutting at the first parenthesis left `at::` of
/// `at::(anonymous namespace)::…`).
fn function_name(name: &str) -> String {
    let name = name.replace("(anonymous namespace)::", "");
    let head = name.split('(').next().unwrap_or(&name);
    // The return type ends at the last space outside template brackets.
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in head.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    head[start..].to_string()
}

/// A stack as plain text, one frame a line (for the clipboard).
pub fn stack_text(snapshot: &Snapshot, stack: StackId, with_internal: bool) -> String {
    display_frames(snapshot, stack, with_internal)
        .iter()
        .map(|l| {
            if l.repeat > 1 {
                format!("{} (×{})", l.text, l.repeat)
            } else {
                l.text.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `stack` runs inside a function decorated with `@torch.no_grad()` or
/// `@torch.inference_mode()` (their wrapper, `decorate_context` in `torch/utils/_contextlib.py`).
pub(crate) fn under_a_no_grad_decorator(snapshot: &Snapshot, stack: StackId) -> bool {
    snapshot.stack_frames(stack).any(|f| {
        snapshot.str(f.name) == "decorate_context"
            && snapshot
                .str(f.filename)
                .replace('\\', "/")
                .ends_with("utils/_contextlib.py")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(frames: &[(&str, i64, &str)]) -> Snapshot {
        let mut s = Snapshot::default();
        let mut ids = Vec::new();
        for &(file, line, name) in frames {
            s.strings.push(file.into());
            s.strings.push(name.into());
            let n = s.strings.len() as u32;
            s.frames.push(Frame {
                filename: n - 2,
                line,
                name: n - 1,
            });
            ids.push(s.frames.len() as u32 - 1);
        }
        s.stacks.push(ids.into_boxed_slice());
        s
    }

    #[test]
    fn internal_frames_go_and_repeats_collapse() {
        let s = snapshot(&[
            ("??", 0, "c10::cuda::malloc"),
            (
                "CUDACachingAllocator.cpp",
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
            ),
            (
                "/usr/lib/python3.11/site-packages/torch/nn/functional.py",
                2380,
                "linear",
            ),
            ("model.py", 54, "forward"),
            ("model.py", 54, "forward"),
            ("train.py", 9, "main"),
        ]);
        let user: Vec<(String, u32)> = display_frames(&s, 0, false)
            .into_iter()
            .map(|l| (l.text, l.repeat))
            .collect();
        assert_eq!(
            user,
            vec![
                ("forward (model.py:54)".to_string(), 2),
                ("main (train.py:9)".to_string(), 1)
            ]
        );
        assert_eq!(display_frames(&s, 0, true).len(), 5);
        assert_eq!(
            stack_text(&s, 0, false),
            "forward (model.py:54) (×2)\nmain (train.py:9)"
        );
    }

    #[test]
    fn cpp_names_lose_return_types_arguments_and_anonymous_namespaces() {
        assert_eq!(
            function_name(
                "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*)"
            ),
            "at::detail::_empty_generic<long>"
        );
        assert_eq!(
            function_name(
                "at::(anonymous namespace)::wrapper_CUDA__log_softmax_backward_data(at::Tensor const&)"
            ),
            "at::wrapper_CUDA__log_softmax_backward_data"
        );
        assert_eq!(
            function_name("torch::autograd::generated::details::pow_backward(at::Tensor)"),
            "torch::autograd::generated::details::pow_backward"
        );
    }

    /// The peak of `cuda_2023_no_time` (event 3697) was allocated on autograd's engine thread, C++
    /// frames only: its headline read `at::` (the first parenthesis was an anonymous
    /// namespace's). The frames, innermost first, as the file has them (arguments cut here).
    #[test]
    fn a_native_backward_stack_is_named_by_its_operator() {
        let s = snapshot(&[
            ("??", 0, "torch::unwind::unwind()"),
            (
                "??",
                0,
                "torch::CapturedTraceback::gather(bool, bool, bool)",
            ),
            (
                "CUDACachingAllocator.cpp",
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
            ),
            (
                "",
                0,
                "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>)",
            ),
            ("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>)"),
            (
                "RegisterCUDA.cpp",
                0,
                "at::(anonymous namespace)::create_out(c10::ArrayRef<long>)",
            ),
            (
                "RegisterCUDA.cpp",
                0,
                "at::(anonymous namespace)::structured_log_softmax_backward_cuda_out_functional::set_output_raw_strided(long)",
            ),
            (
                "RegisterCUDA.cpp",
                0,
                "at::(anonymous namespace)::wrapper_CUDA__log_softmax_backward_data(at::Tensor const&)",
            ),
            (
                "??",
                0,
                "at::_ops::_log_softmax_backward_data::redispatch(c10::DispatchKeySet)",
            ),
            (
                "??",
                0,
                "torch::autograd::generated::LogSoftmaxBackward0::apply(std::vector<at::Tensor>&&)",
            ),
        ]);
        assert_eq!(
            headline_frame(&s, 0).as_deref(),
            Some("at::_ops::_log_softmax_backward_data::redispatch")
        );
    }

    /// Issue 32: on files never tuned on, a backward block's place read
    /// `execute_native_thread_routine (thread48.o:0)` or `clone3 (clone3.S:78)`: where autograd's
    /// engine thread began, not who asked. Those frames are native; the operator names the place.
    #[test]
    fn thread_entries_are_never_the_place() {
        let s = snapshot(&[
            ("??", 0, "torch::unwind::unwind()"),
            (
                "??",
                0,
                "at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)",
            ),
            (
                "??",
                0,
                "torch::autograd::generated::DivBackward0::apply(std::vector<at::Tensor>&&)",
            ),
            (
                "??",
                0,
                "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
            ),
            ("thread48.o", 0, "execute_native_thread_routine"),
            ("pthread_create.c", 442, "start_thread"),
            ("../sysdeps/unix/sysv/linux/x86_64/clone3.S", 78, "clone3"),
        ]);
        let headline = headline_frame(&s, 0).expect("a headline");
        assert_eq!(headline, "torch::autograd::generated::DivBackward0::apply");
        assert!(display_frames(&s, 0, false).iter().all(|l| l.internal));
        // A thread start with no operator above it still names no thread entry.
        let bare = snapshot(&[
            ("??", 0, "at::native::empty_cuda"),
            ("thread48.o", 0, "execute_native_thread_routine"),
            ("clone3.S", 81, "__clone3"),
        ]);
        assert_eq!(
            headline_frame(&bare, 0).as_deref(),
            Some("at::native::empty_cuda")
        );
    }

    #[test]
    fn an_all_internal_stack_still_shows_something() {
        let s = snapshot(&[("??", 0, "at::empty")]);
        assert_eq!(display_frames(&s, 0, false).len(), 1);
    }

    #[test]
    fn a_cpp_only_stack_starts_at_the_operator_not_the_recorder() {
        // The top of a segment_alloc's stack in a CUDA file recorded with C++ frames only.
        let s = snapshot(&[
            ("??", 0, "torch::unwind::unwind()"),
            (
                "??",
                0,
                "torch::CapturedTraceback::gather(bool, bool, bool)",
            ),
            (
                "memory_snapshot.cpp",
                0,
                "torch::cuda::(anonymous namespace)::gather_with_cpp()",
            ),
            (
                "CUDACachingAllocator.cpp",
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
            ),
            (
                "??",
                0,
                "at::detail::empty_strided_cuda(c10::ArrayRef<long>)",
            ),
            (
                "??",
                0,
                "at::_ops::empty_strided::call(c10::ArrayRef<long>)",
            ),
        ]);
        let lines = display_frames(&s, 0, false);
        assert_eq!(
            lines.first().map(|l| l.text.as_str()),
            Some("at::detail::empty_strided_cuda(c10::ArrayRef<long>)")
        );
        assert_eq!(lines.len(), 2);
        // Asked for, the internal frames are all there.
        assert_eq!(display_frames(&s, 0, true).len(), 6);
        // The headline names the operator, not the allocator.
        assert_eq!(
            headline_frame(&s, 0).as_deref(),
            Some("at::_ops::empty_strided::call")
        );
        // A stack of nothing but machinery keeps it (something is shown).
        let only = snapshot(&[("??", 0, "torch::unwind::unwind()")]);
        assert_eq!(display_frames(&only, 0, false).len(), 1);
    }

    /// A notebook cell's line names every allocation made through a library alike: the innermost
    /// library frame outside torch tells them apart, with its package (`cuda_2023_no_time`'s
    /// cell line 21 reaches both bitsandbytes' 4-bit matmul and Llama's own code).
    #[test]
    fn a_top_level_line_is_told_apart_by_its_library_and_package() {
        let site = "/root/env/lib/python3.10/site-packages";
        let s = snapshot(&[
            (&format!("{site}/torch/nn/functional.py"), 2380, "linear"),
            (
                &format!("{site}/bitsandbytes/autograd/_functions.py"),
                509,
                "forward",
            ),
            (
                &format!("{site}/transformers/models/llama/modeling_llama.py"),
                216,
                "forward",
            ),
            ("/tmp/ipykernel_114/3105878423.py", 21, "<module>"),
        ]);
        assert_eq!(
            headline_frame(&s, 0).as_deref(),
            Some(
                "forward (bitsandbytes/autograd/_functions.py:509) in <module> \
                 (/tmp/ipykernel_114/3105878423.py:21)"
            )
        );
    }

    #[test]
    fn windows_paths_follow_the_same_rules() {
        let s = snapshot(&[
            (
                r"D:\venv\Lib\site-packages\einops\_backends.py",
                291,
                "einsum",
            ),
            (r"D:\work\model.py", 39, "forward"),
        ]);
        let lines = display_frames(&s, 0, false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].text, r"forward (D:\work\model.py:39)");
    }
}
