//! The one place colours are chosen; views never hard-code them.

use egui::Color32;
use memsight_core::category::Category;

pub const BACKGROUND: Color32 = Color32::from_rgb(250, 250, 250);
pub const AXIS: Color32 = Color32::from_gray(90);
pub const GRID: Color32 = Color32::from_gray(225);
/// `egui_plot`'s grid: major lines in this colour, minor ones fainter.
pub const PLOT_GRID: Color32 = Color32::from_gray(175);
pub const MERGED_BAND: Color32 = Color32::from_gray(150);
pub const RESERVED_LINE: Color32 = Color32::from_rgb(40, 40, 40);
/// The what-if replay's reserved line (dashed).
pub const PREDICTED_LINE: Color32 = Color32::from_rgb(230, 85, 13);
pub const SEGMENT_TICK: Color32 = Color32::from_rgb(40, 40, 40);
pub const OOM: Color32 = Color32::from_rgb(220, 30, 30);
pub const SNAPSHOT_MARK: Color32 = Color32::from_rgb(30, 90, 200);
pub const SELECTION: Color32 = Color32::from_rgb(255, 140, 0);
pub const SELECTED_EVENT: Color32 = Color32::from_rgb(30, 90, 200);
pub const PENDING_FREE: Color32 = Color32::from_rgb(230, 120, 40);
pub const ROUNDING_WASTE: Color32 = Color32::from_rgb(200, 60, 60);
pub const FREE_SPACE: Color32 = Color32::WHITE;
pub const SEGMENT_OUTLINE: Color32 = Color32::from_gray(120);
pub const STEP_SHADE: Color32 = Color32::from_rgba_premultiplied(0, 0, 40, 14);
pub const STEP_LABEL: Color32 = Color32::from_gray(80);
pub const OVERVIEW_CURVE: Color32 = Color32::from_rgb(70, 110, 180);
/// The overview strip: the curve's area, and the shade outside the zoomed view.
pub const OVERVIEW_FILL: Color32 = Color32::from_rgba_premultiplied(50, 80, 130, 60);
pub const OVERVIEW_OUTSIDE: Color32 = Color32::from_rgba_premultiplied(0, 0, 0, 22);
pub const RANGE: Color32 = Color32::from_rgb(200, 150, 0);
pub const RANGE_DRAG: Color32 = Color32::from_rgba_premultiplied(60, 45, 0, 40);
pub const DIM: Color32 = Color32::from_rgba_premultiplied(235, 235, 235, 215);
pub const BOX_ZOOM: Color32 = Color32::from_rgba_premultiplied(30, 90, 200, 40);
pub const ERROR_TEXT: Color32 = Color32::from_rgb(190, 20, 20);
pub const WARNING_TEXT: Color32 = Color32::from_rgb(160, 100, 0);
pub const OK_TEXT: Color32 = Color32::from_rgb(20, 120, 40);

/// A stable hue per call stack, so one call site keeps one colour (a leak shows as one hue);
/// the shade varies by allocation so neighbours from the same site stay apart.
pub fn band_color(stack: u32, allocation: u32) -> Color32 {
    let hue = (f64::from(stack.wrapping_mul(2_654_435_761)) / f64::from(u32::MAX)).fract();
    let value = [0.88, 0.78, 0.94, 0.83][(allocation % 4) as usize];
    hsv(hue as f32, 0.55, value)
}

/// Hues for the call sites that fill most of a device's chart, far apart in order: the first
/// twelve sites of the legend never share a hue (hashed hues put three greens among six rows).
const SITE_HUES: [f32; 12] = [
    0.58, 0.08, 0.33, 0.78, 0.0, 0.5, 0.15, 0.92, 0.66, 0.25, 0.42, 0.85,
];

/// The colour of a call site's band: its own hue from `SITE_HUES` where it is one of the sites
/// that fill most of the chart (`slot`), else [`band_color`]'s hashed hue.
pub fn site_color(slot: Option<u8>, stack: u32, allocation: u32) -> Color32 {
    match slot.and_then(|k| SITE_HUES.get(usize::from(k))) {
        Some(&hue) => {
            let value = [0.88, 0.78, 0.94, 0.83][(allocation % 4) as usize];
            hsv(hue, 0.55, value)
        }
        None => band_color(stack, allocation),
    }
}

/// How many call sites get a hue of their own ([`site_color`]).
pub const SITE_SLOTS: usize = SITE_HUES.len();

/// What the allocation bands are coloured by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ColorBy {
    /// One hue per call stack: a leak shows as one hue.
    #[default]
    CallSite,
    /// One hue per category (parameter, gradient, …): what the memory is for.
    Category,
    /// One hue per owner (msMemScope's `owner`, at its second level: `PTA@gradient`).
    Owner,
}

/// Hues for owners, far apart in order: an owner's place among the file's owners (sorted by name)
/// picks one, so the chart, its legend and the owners window agree.
const OWNER_HUES: [f32; 10] = [0.58, 0.08, 0.33, 0.78, 0.0, 0.5, 0.15, 0.92, 0.66, 0.25];

/// The colour of the `index`-th owner (`None`: no owner, grey), the shade varying by allocation.
pub fn owner_color(index: Option<usize>, allocation: u32) -> Color32 {
    let Some(index) = index else {
        return Color32::from_gray([175, 160, 190, 168][(allocation % 4) as usize]);
    };
    let value = [0.88, 0.78, 0.94, 0.83][(allocation % 4) as usize];
    // Past ten owners the hues repeat, darker.
    let value = if index >= OWNER_HUES.len() {
        value * 0.7
    } else {
        value
    };
    hsv(OWNER_HUES[index % OWNER_HUES.len()], 0.6, value)
}

/// One fixed hue per category, far apart; the shade varies by allocation as for call sites.
pub fn category_color(category: Category, allocation: u32) -> Color32 {
    let hue = match category {
        Category::Parameter => 0.60,
        Category::Gradient => 0.08,
        Category::OptimizerState => 0.78,
        Category::WeightCopy => 0.90,
        Category::Activation => 0.33,
        // Every hue is taken: a dark brown, told from the gradients' orange by its value.
        Category::Input => {
            let value = [0.58, 0.50, 0.62, 0.54][(allocation % 4) as usize];
            return hsv(0.09, 0.65, value);
        }
        Category::Retained => 0.0,
        Category::Temporary => 0.15,
        Category::LongLived => 0.70,
        Category::Workspace => 0.50,
        Category::Communication => 0.25,
        Category::KvCache => 0.42,
        Category::Unknown => {
            return Color32::from_gray([175, 160, 190, 168][(allocation % 4) as usize]);
        }
    };
    let value = [0.88, 0.78, 0.94, 0.83][(allocation % 4) as usize];
    hsv(hue, 0.6, value)
}

/// `c` washed out towards grey, for runs of merged bands: allocations merged below a pixel take
/// their largest one's hue, washed out so a merged run never passes for a single allocation.
pub fn merged(c: Color32) -> Color32 {
    let mix = |x: u8| ((u16::from(x) * 2 + u16::from(MERGED_BAND.r()) * 3) / 5) as u8;
    Color32::from_rgb(mix(c.r()), mix(c.g()), mix(c.b()))
}

#[expect(
    clippy::many_single_char_names,
    reason = "the textbook HSV-to-RGB names"
)]
fn hsv(h: f32, s: f32, v: f32) -> Color32 {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - f * s), v * (1.0 - (1.0 - f) * s));
    let (r, g, b) = match i as i32 % 6 {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    };
    let byte = |x: f32| (x * 255.0).round().clamp(0.0, 255.0) as u8;
    Color32::from_rgb(byte(r), byte(g), byte(b))
}

/// The two recordings of a comparison: A and B.
pub const COMPARE_A: Color32 = Color32::from_rgb(40, 100, 200);
pub const COMPARE_B: Color32 = Color32::from_rgb(220, 110, 20);
/// The clicked call site's blocks on both charts of a comparison.
pub const COMPARE_HIGHLIGHT: Color32 = Color32::from_rgb(200, 0, 120);
/// Profiler curves: operator (PTA+GE) allocated, reserved, active; the process (APP); others.
pub const CURVE_ALLOCATED: Color32 = Color32::from_rgb(40, 100, 200);
pub const CURVE_RESERVED: Color32 = Color32::from_rgb(30, 30, 30);
pub const CURVE_ACTIVE: Color32 = Color32::from_rgb(40, 160, 90);
pub const CURVE_APP: Color32 = Color32::from_rgb(210, 60, 40);
pub const MARK: Color32 = Color32::from_rgb(200, 0, 160);
pub const HOVER_LINE: Color32 = Color32::from_gray(140);
/// The fragmentation track: bytes reserved and not allocated (area), the largest free block
/// (line).
pub const UNUSED_RESERVED: Color32 = Color32::from_rgb(253, 208, 162);
pub const LARGEST_FREE: Color32 = Color32::from_rgb(166, 54, 3);
/// The lines between panels (and separators): visible on the light background.
pub const DIVIDER: Color32 = Color32::from_gray(150);
/// Ticks under the lifecycle chart at the events the search matches.
pub const SEARCH_HIT: Color32 = Color32::from_rgb(214, 39, 40);
pub const LEGEND_BACKING: Color32 = Color32::from_rgba_premultiplied(235, 235, 235, 220);

/// A colour per rank (overlaid curves) or per extra component, far apart for small indices.
pub fn series_color(index: usize) -> Color32 {
    let hue = (index as f64 * 0.618_033_988_75).fract() as f32;
    hsv(hue, 0.75, 0.75)
}

/// A run's heat map: a rank's peak from light (the run's least) to dark (its most).
pub fn heat(fraction: f32) -> Color32 {
    let f = fraction.clamp(0.0, 1.0);
    let mix = |light: f32, dark: f32| (light + (dark - light) * f).round() as u8;
    Color32::from_rgb(mix(239.0, 8.0), mix(243.0, 69.0), mix(255.0, 148.0))
}

/// A heat-map cell's text on `fraction`'s colour: dark on light, light on dark.
pub fn heat_text(fraction: f32) -> Color32 {
    if fraction > 0.55 {
        Color32::WHITE
    } else {
        Color32::from_gray(30)
    }
}
