//! The legend: which colour is which category or call site, with a click to highlight its bands.

use egui::{Color32, FontId, Rect, Sense, Ui, pos2, vec2};
use memsight_core::category::Category;
use memsight_core::frames::display_frames;

use crate::palette::{self, ColorBy};
use crate::prepared::Prepared;

use super::{LegendKey, LifecycleState};

/// One legend row: its colour, the short label drawn, what its hover says, what it stands for.
pub(super) struct LegendRow {
    color: Color32,
    label: String,
    detail: String,
    key: LegendKey,
}

/// The legend's rows for the colouring shown: the call sites that fill most of the chart (each at
/// least 2 %), the categories, or the file's owners (at most 12).
pub(super) fn legend_rows(data: &Prepared, state: &LifecycleState) -> Vec<LegendRow> {
    let snapshot = &data.loaded.snapshot;
    let device = state.laid.as_ref().map_or(0, |l| l.key.device);
    match state.color_by {
        ColorBy::Category => Category::ALL
            .iter()
            .map(|&c| LegendRow {
                color: palette::category_color(c, 0),
                label: c.words(),
                detail: format!("category: {}", c.words()),
                key: LegendKey::Category(c),
            })
            .collect(),
        ColorBy::Owner => data
            .owner_names
            .iter()
            .take(12)
            .enumerate()
            .map(|(k, o)| LegendRow {
                color: palette::owner_color(Some(k), 0),
                label: o.clone(),
                detail: format!("owner: {o}"),
                key: LegendKey::Owner(k),
            })
            .collect(),
        ColorBy::CallSite => {
            let stacks: Vec<_> = match &state.legend_stacks {
                Some(fixed) => fixed.iter(),
                None => state
                    .laid
                    .as_ref()
                    .map_or([].iter(), |laid| laid.top_stacks.iter()),
            }
            .filter(|(_, share)| *share >= 0.02)
            .copied()
            .collect();
            let headlines: Vec<String> = stacks
                .iter()
                .map(|&(stack, _)| {
                    memsight_core::frames::headline_frame(snapshot, stack)
                        .unwrap_or_else(|| "(no stack)".to_string())
                })
                .collect();
            stacks
                .iter()
                .zip(&headlines)
                .map(|(&(stack, share), headline)| {
                    // Two sites with one headline (one line, called from two places or running two
                    // operators) are told apart by the first frame where their stacks differ.
                    let twin = stacks
                        .iter()
                        .zip(&headlines)
                        .find(|((other, _), h)| *other != stack && *h == headline)
                        .map(|((other, _), _)| *other);
                    let headline =
                        match twin.and_then(|other| first_difference(snapshot, stack, other)) {
                            Some(frame) => format!("{} · {frame}", short_site(headline, 44)),
                            None => headline.clone(),
                        };
                    let frames: Vec<String> = display_frames(snapshot, stack, false)
                        .into_iter()
                        .take(8)
                        .map(|l| l.text)
                        .collect();
                    LegendRow {
                        color: data.site_color(device, stack, 0),
                        label: format!("{}  {:.0} %", short_site(&headline, 84), share * 100.0),
                        detail: format!(
                            "{:.1} % of the allocated area in view\n{}",
                            share * 100.0,
                            if frames.is_empty() {
                                "no stack recorded".to_string()
                            } else {
                                frames.join("\n")
                            }
                        ),
                        key: LegendKey::CallSite(stack),
                    }
                })
                .collect()
        }
    }
}

/// The first frame of `stack`, innermost first and internal frames included, where it differs
/// from `other`, shortened (`None` when one is a prefix of the other).
pub(super) fn first_difference(
    snapshot: &memsight_core::model::Snapshot,
    stack: memsight_core::model::StackId,
    other: memsight_core::model::StackId,
) -> Option<String> {
    let (a, b) = (
        display_frames(snapshot, stack, true),
        display_frames(snapshot, other, true),
    );
    let i = a.iter().zip(&b).position(|(x, y)| x.text != y.text)?;
    Some(distinguishing(&a[i].text, &b[i].text, 36))
}

/// `text` in at most `max_chars`, keeping the part where it differs from `other`: its head
/// where they differ early, its tail where they differ late (two C++ frames that read
/// `at::(anonymous namespace)::…` alike for 36 characters), else the characters around the
/// first difference.
fn distinguishing(text: &str, other: &str, max_chars: usize) -> String {
    let head = short_site(text, max_chars);
    if head != short_site(other, max_chars) {
        return head;
    }
    let a: Vec<char> = text.chars().collect();
    let b: Vec<char> = other.chars().collect();
    let keep = max_chars.saturating_sub(1).max(1);
    let same_tail = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    if same_tail < keep && a.len() > keep {
        return std::iter::once('…')
            .chain(a[a.len() - keep..].iter().copied())
            .collect();
    }
    // Two ellipses around the window: the whole stays within `max_chars`.
    let keep = keep.saturating_sub(1).max(1);
    let first = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let from = first
        .saturating_sub(keep / 2)
        .min(a.len().saturating_sub(keep));
    let window: String = a[from..(from + keep).min(a.len())].iter().collect();
    format!("…{window}…")
}

/// A call site's headline as a legend fits it: each `(path:line)` cut to `(file:line)`, then the
/// whole cut at the end to `max_chars`, so the function and file stay readable (never cut in the
/// middle of a path, where six sites in one folder would read the same).
pub fn short_site(headline: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(headline.len());
    let mut rest = headline;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(')') else { break };
        let inner = &rest[..close];
        match inner.rfind(':') {
            Some(colon) if inner[..colon].contains(['/', '\\']) => {
                let path = &inner[..colon];
                out.push_str(path.rsplit(['/', '\\']).next().unwrap_or(path));
                out.push_str(&inner[colon..]);
            }
            _ => out.push_str(inner),
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    if out.chars().count() > max_chars {
        out = out
            .chars()
            .take(max_chars.saturating_sub(1))
            .chain(['…'])
            .collect();
    }
    out
}

/// The legend over the chart, in the top corner where the data is lowest; folded to one button
/// where it would cover more than a fifth of the chart. Hovering a row shows the whole call
/// site; a click keeps its bands and dims the rest (a second click clears). Returns whether the
/// pointer is over the legend (its clicks are not the chart's).
pub(super) fn legend_ui(
    ui: &mut Ui,
    data: &Prepared,
    state: &mut LifecycleState,
    chart_rect: Rect,
) -> bool {
    let rows = legend_rows(data, state);
    state.legend_drawn.clear();
    if rows.is_empty() {
        return false;
    }
    let painter = ui.painter_at(chart_rect);
    let font = FontId::proportional(11.0);
    let row_h = 15.0;
    let galleys: Vec<_> = rows
        .iter()
        .map(|r| painter.layout_no_wrap(r.label.clone(), font.clone(), palette::AXIS))
        .collect();
    let width = galleys.iter().map(|g| g.size().x).fold(0.0, f32::max) + 24.0;
    let size = vec2(width, row_h * (rows.len() + 1) as f32 + 4.0);
    // Folded where it would cover more than an eighth of the plot (a fifth let it hide a quarter
    // of a 900×600 window's plot, the reserved line included).
    let covers_much = size.x * size.y > chart_rect.area() * 0.125;
    let folded = state.legend_folded.unwrap_or(covers_much);
    state.legend_was_folded = Some(folded);
    if crate::views::exporting(ui.ctx()) {
        // A picture shows the legend as the screen does, without the button that folds it.
        if !folded {
            export_legend(&painter, state, chart_rect, &rows, galleys, size.x);
        }
        return false;
    }
    let left = legend_goes_left(state, chart_rect, size.x);
    let header = if folded {
        format!("legend ({}): show", rows.len())
    } else {
        "legend: fold".to_string()
    };
    let header_galley = painter.layout_no_wrap(header, font.clone(), palette::AXIS);
    let size = if folded {
        vec2(header_galley.size().x + 12.0, row_h + 4.0)
    } else {
        size
    };
    let x = if left {
        chart_rect.left() + 6.0
    } else {
        chart_rect.right() - size.x - 6.0
    };
    let backing = Rect::from_min_size(pos2(x, chart_rect.top() + 6.0), size);
    painter.rect_filled(backing, 2.0, palette::LEGEND_BACKING);
    let header_rect = Rect::from_min_size(backing.min, vec2(backing.width(), row_h + 2.0));
    painter.galley(
        header_rect.min + vec2(6.0, 2.0),
        header_galley,
        palette::AXIS,
    );
    let id = ui.scope_id().with("lifecycle-legend");
    let header_response = ui
        .interact(header_rect, id.with("header"), Sense::click())
        .on_hover_text(if folded {
            "show the legend"
        } else {
            "fold the legend"
        });
    if header_response.clicked() {
        state.legend_folded = Some(!folded);
    }
    let mut hovered = header_response.hovered();
    state.legend_drawn = vec![(header_rect, String::new())];
    if !folded {
        for (k, (row, galley)) in rows.iter().zip(galleys).enumerate() {
            let rect = Rect::from_min_size(
                pos2(backing.left(), header_rect.bottom() + row_h * k as f32),
                vec2(backing.width(), row_h),
            );
            let chosen = state.legend_highlight == Some(row.key);
            if chosen {
                painter.rect_filled(rect, 0.0, palette::SELECTION.gamma_multiply(0.25));
            }
            let swatch =
                Rect::from_min_size(pos2(rect.left() + 4.0, rect.top() + 2.0), vec2(10.0, 10.0));
            painter.rect_filled(swatch, 1.0, row.color);
            painter.galley(pos2(rect.left() + 18.0, rect.top()), galley, palette::AXIS);
            let response = ui
                .interact(rect, id.with(k), Sense::click())
                .on_hover_ui(|ui| {
                    ui.label(&row.detail);
                    ui.weak(if chosen {
                        "click: show every band again"
                    } else {
                        "click: keep these bands, dim the rest"
                    });
                });
            hovered |= response.hovered();
            state.legend_drawn.push((rect, row.label.clone()));
            if response.clicked() {
                state.legend_highlight = (!chosen).then_some(row.key);
            }
        }
    }
    hovered
}

/// The unfolded legend as an exported picture shows it: its rows, where the screen has them, and
/// no fold button.
fn export_legend(
    painter: &egui::Painter,
    state: &LifecycleState,
    chart_rect: Rect,
    rows: &[LegendRow],
    galleys: Vec<std::sync::Arc<egui::Galley>>,
    width: f32,
) {
    let row_h = 15.0;
    let size = vec2(width, row_h * rows.len() as f32 + 4.0);
    let x = if legend_goes_left(state, chart_rect, width) {
        chart_rect.left() + 6.0
    } else {
        chart_rect.right() - size.x - 6.0
    };
    let backing = Rect::from_min_size(pos2(x, chart_rect.top() + 6.0), size);
    painter.rect_filled(backing, 2.0, palette::LEGEND_BACKING);
    for (k, (row, galley)) in rows.iter().zip(galleys).enumerate() {
        let top = backing.top() + 2.0 + row_h * k as f32;
        let swatch = Rect::from_min_size(pos2(backing.left() + 4.0, top + 2.0), vec2(10.0, 10.0));
        painter.rect_filled(swatch, 1.0, row.color);
        painter.galley(pos2(backing.left() + 18.0, top), galley, palette::AXIS);
    }
}

/// Whether a legend `width` wide goes in the top-left corner: where the reserved line under it
/// reaches less high than under the top-right one.
pub(super) fn legend_goes_left(state: &LifecycleState, chart_rect: Rect, width: f32) -> bool {
    let Some(laid) = &state.laid else {
        return false;
    };
    let n = laid.columns.len().max(1);
    let col = |x: f32| {
        (((x - chart_rect.left()) / chart_rect.width()) * n as f32).clamp(0.0, n as f32 - 1.0)
            as usize
    };
    let top_under = |left: f32| {
        laid.columns[col(left)..=col(left + width)]
            .iter()
            .map(|c| laid.y_of(chart_rect, c.reserved_max_bytes as f64))
            .fold(chart_rect.bottom(), f32::min)
    };
    top_under(chart_rect.left() + 6.0) > top_under(chart_rect.right() - width - 6.0)
}

#[cfg(test)]
mod tests {
    use super::distinguishing;

    #[test]
    fn two_frames_alike_at_their_start_are_told_apart_by_what_differs() {
        let a = "at::(anonymous namespace)::wrapper_CUDA_mm_out_out (RegisterCUDA.cpp:1200)";
        let b = "at::(anonymous namespace)::wrapper_CUDA_addmm_out (RegisterCUDA.cpp:1300)";
        let (da, db) = (distinguishing(a, b, 36), distinguishing(b, a, 36));
        assert_ne!(da, db);
        assert!(
            da.chars().count() <= 36 && db.chars().count() <= 36,
            "{da} / {db}"
        );
        assert!(da.ends_with("1200)"), "{da}");
        // Different early: the head, as before; short: whole.
        assert_eq!(
            distinguishing("forward (a.py:1)", "backward (a.py:1)", 36),
            "forward (a.py:1)"
        );
        // Alike at both ends: the characters around the difference.
        let (x, y) = (
            format!("{}A{}", "p".repeat(40), "q".repeat(40)),
            format!("{}B{}", "p".repeat(40), "q".repeat(40)),
        );
        let dx = distinguishing(&x, &y, 36);
        assert!(dx.contains('A') && dx.chars().count() <= 36, "{dx}");
    }
}
