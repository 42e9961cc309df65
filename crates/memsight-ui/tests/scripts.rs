//! Chinese, Japanese and emoji in a path, a stack frame and a profiler operator name: drawn as
//! characters where a CJK font is installed (CI installs `fonts-wqy-microhei`), as boxes where
//! none is, and never a panic — in the headless renderer `memsight screenshot` uses and in a
//! harness with no system fonts at all. Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use std::path::{Path, PathBuf};

use egui::vec2;
use egui_kittest::Harness;
use memsight_core::r#gen::PickleWriter;
use memsight_core::r#gen::profiler::{ProfilerGenOptions, write_rank};
use memsight_ui::headless::{ScreenshotOptions, prepared_app, render};
use memsight_ui::{MemsightApp, Source};

const FRAME_FILE: &str = "训练脚本/模型.py";
const FRAME_NAME: &str = "前向_フォワード_🚀";
const OPERATOR: &str = "自定义算子_カスタム_🔥";

/// A fresh folder under the system's temporary directory, named in Chinese.
fn chinese_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir()
        .join(format!("memsight-{test}-{}", std::process::id()))
        .join("中文目录");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary folder");
    dir
}

/// `内存快照.pkl`: one 1 MiB block allocated (and kept) under a frame with Chinese, Japanese and
/// an emoji, inside one 2 MiB segment.
fn write_snapshot(dir: &Path) -> PathBuf {
    const BASE: i128 = 0x7f00_0000_0000;
    let mut w = PickleWriter::new(Vec::new(), 4).expect("in memory");
    let frame = |w: &mut PickleWriter<Vec<u8>>| {
        w.begin_list();
        w.item().expect("in memory");
        w.begin_dict();
        w.entry("filename", |w| w.str(FRAME_FILE))
            .expect("in memory");
        w.entry("line", |w| w.int(42)).expect("in memory");
        w.entry("name", |w| w.str(FRAME_NAME)).expect("in memory");
        w.end_dict();
        w.end_list_item();
        w.end_list();
    };
    w.begin_dict();
    w.entry("segments", |w| {
        w.begin_list();
        w.item().expect("in memory");
        w.begin_dict();
        w.entry("device", |w| w.int(0)).expect("in memory");
        w.entry("address", |w| w.int(BASE)).expect("in memory");
        w.entry("total_size", |w| w.int(2 << 20))
            .expect("in memory");
        w.entry("stream", |w| w.int(0)).expect("in memory");
        w.entry("segment_type", |w| w.str("large"))
            .expect("in memory");
        w.entry("segment_pool_id", |w| w.pair(0, 0))
            .expect("in memory");
        w.entry("blocks", |w| {
            w.begin_list();
            for (offset, size, state) in [
                (0, 1 << 20, "active_allocated"),
                (1 << 20, 1 << 20, "inactive"),
            ] {
                w.item().expect("in memory");
                w.begin_dict();
                w.entry("address", |w| w.int(BASE + offset))
                    .expect("in memory");
                w.entry("size", |w| w.int(size)).expect("in memory");
                w.entry("requested_size", |w| w.int(size))
                    .expect("in memory");
                w.entry("state", |w| w.str(state)).expect("in memory");
                w.end_dict();
                w.end_list_item();
            }
            w.end_list();
        })
        .expect("in memory");
        w.end_dict();
        w.end_list_item();
        w.end_list();
    })
    .expect("in memory");
    w.entry("device_traces", |w| {
        w.begin_list();
        w.item().expect("in memory");
        w.begin_list();
        for (action, size) in [("segment_alloc", 2 << 20), ("alloc", 1 << 20)] {
            w.item().expect("in memory");
            w.begin_dict();
            w.entry("action", |w| w.str(action)).expect("in memory");
            w.entry("addr", |w| w.int(BASE)).expect("in memory");
            w.entry("size", |w| w.int(size)).expect("in memory");
            w.entry("stream", |w| w.int(0)).expect("in memory");
            w.entry("frames", frame).expect("in memory");
            w.end_dict();
            w.end_list_item();
        }
        w.end_list();
        w.end_list_item();
        w.end_list();
    })
    .expect("in memory");
    w.end_dict();
    let path = dir.join("内存快照.pkl");
    std::fs::write(&path, w.finish().expect("in memory")).expect("write the snapshot");
    path
}

/// A profiler rank in `dir/rank_日本語/` whose operator table has a row named [`OPERATOR`].
fn write_profiler_rank(dir: &Path) -> PathBuf {
    let rank = dir.join("rank_日本語");
    std::fs::create_dir_all(&rank).expect("rank folder");
    write_rank(
        &rank,
        &ProfilerGenOptions {
            samples: 2_000,
            ..ProfilerGenOptions::default()
        },
    )
    .expect("write the rank");
    let table = rank.join("operator_memory.csv");
    let text = std::fs::read_to_string(&table).expect("operator table");
    let row = text.lines().nth(1).expect("a generated operator row");
    // The largest row (512 MiB), so it heads the operator table, sorted by size.
    let (_, rest) = row.split_once(',').expect("a CSV row");
    let (_, after_size) = rest.split_once(',').expect("a size cell");
    std::fs::write(
        &table,
        format!("{text}{OPERATOR},524288.0,{after_size}\r\n"),
    )
    .expect("append a row");
    rank
}

/// True when fontconfig knows a font with Chinese characters.
fn cjk_font_installed() -> bool {
    std::process::Command::new("fc-list")
        .arg(":lang=zh")
        .output()
        .is_ok_and(|out| !out.stdout.is_empty())
}

/// An image snapshot of `image` where a CJK font is installed; elsewhere a counted skip (CI
/// installs one and insists, through `MEMSIGHT_REQUIRE_CJK_FONT`).
fn snapshot_if_cjk_font(image: &image::RgbaImage, name: &str) {
    if cjk_font_installed() {
        egui_kittest::image_snapshot_options(image, name, &common::snapshot_options());
    } else {
        assert!(
            std::env::var_os("MEMSIGHT_REQUIRE_CJK_FONT").is_none(),
            "no CJK font installed: run scripts/install-deps.sh"
        );
        memsight_core::testing::skip(&format!(
            "no CJK font for the image snapshot {name} (apt-get install fonts-wqy-microhei)"
        ));
    }
}

fn screenshot(source: &Source, options: &ScreenshotOptions) -> image::RgbaImage {
    let app = prepared_app(source, options).unwrap_or_else(|e| panic!("{e}"));
    render(app, options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn chinese_path_and_frames_render_headless() {
    let path = write_snapshot(&chinese_dir("snapshot"));
    let options = ScreenshotOptions {
        width: 1000.0,
        height: 640.0,
        select_event: Some(1),
        ..ScreenshotOptions::default()
    };
    let image = screenshot(&Source::Path(path), &options);
    snapshot_if_cjk_font(&image, "cjk_path_and_frames");
}

#[test]
fn chinese_operator_names_render_headless() {
    let rank = write_profiler_rank(&chinese_dir("profiler"));
    let source = Source::Profiler(vec![rank]);
    let image = screenshot(&source, &ScreenshotOptions::default());
    snapshot_if_cjk_font(&image, "cjk_operator_name");
}

#[test]
fn without_system_fonts_unknown_characters_are_boxes_not_a_panic() {
    let path = write_snapshot(&chinese_dir("no-fonts"));
    let options = ScreenshotOptions {
        select_event: Some(1),
        ..ScreenshotOptions::default()
    };
    let app = prepared_app(&Source::Path(path), &options).unwrap_or_else(|e| panic!("{e}"));
    // No font provider: only egui's bundled fonts, which have no CJK and no emoji.
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .allow_missing_glyphs()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    for _ in 0..5 {
        harness.step();
    }
    assert!(
        harness.state().errors().is_empty(),
        "{:?}",
        harness.state().errors()
    );
}
