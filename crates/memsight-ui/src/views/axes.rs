//! What the plots share about their axes: 1-2-5 steps, and grid lines at binary steps for bytes
//! (1, 2, 4, 8 … GiB read better than 1, 2, 5), as `egui_plot` grid marks.

/// A plot that only draws: no zoom, drag, scroll or reset of its own and no hover label (the
/// view and the tooltips are the caller's, so several plots can share one view).
pub fn drawing_only(plot: egui_plot::Plot<'_>) -> egui_plot::Plot<'_> {
    plot.allow_zoom(false)
        .allow_drag(false)
        .allow_scroll(false)
        .allow_boxed_zoom(false)
        .allow_double_click_reset(false)
        .allow_axis_zoom_drag(false)
        .show_x(false)
        .show_y(false)
}

/// A step of roughly `target` in 1-2-5 multiples.
pub fn nice_step(target: f64) -> f64 {
    let magnitude = 10f64.powf(target.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= target)
        .unwrap_or(10.0 * magnitude)
}

/// Marks every `minor` (faded by `egui_plot`) and every `step` (labelled) over `lo..=hi`.
pub fn grid_marks(lo: f64, hi: f64, step: f64, minor: f64) -> Vec<egui_plot::GridMark> {
    let mut marks = Vec::new();
    for every in [minor, step] {
        if every <= 0.0 || (hi - lo) / every > 1000.0 {
            continue;
        }
        let mut v = (lo / every).ceil() * every;
        while v <= hi {
            marks.push(egui_plot::GridMark {
                value: v,
                step_size: every,
            });
            v += every;
        }
    }
    marks
}

/// Grid lines at binary steps for bytes: 1, 2, 4, 8 … GiB read better than 1, 2, 5. With
/// `label_top`, the top of the plot is labelled too (where nothing is drawn above it).
pub fn byte_grid(input: &egui_plot::GridInput, label_top: bool) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    let step = 2f64.powf(((hi - lo) / 5.0).max(1.0).log2().ceil());
    let mut marks = grid_marks(lo, hi, step, step / 4.0);
    // The top of the chart says its value too, where the last labelled line is far below it.
    let highest = (hi / step).floor() * step;
    if label_top && hi - highest > (hi - lo) * 0.12 {
        // The finer lines just under the top would print their labels over the top's
        // ("645 MiB" over "640 MiB"): they go.
        marks.retain(|m| hi - m.value > (hi - lo) * 0.06);
        marks.push(egui_plot::GridMark {
            value: hi,
            step_size: step,
        });
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_label_has_no_line_close_under_it() {
        // 645 MiB shown: labelled lines every 256 MiB, finer ones every 64 MiB; the top says
        // 645 MiB, and the 640 MiB line under it (its label would overprint) is gone.
        let mib = 1024.0 * 1024.0;
        let input = egui_plot::GridInput {
            bounds: (0.0, 645.0 * mib),
            base_step_size: mib,
        };
        let marks = byte_grid(&input, true);
        let top = 645.0 * mib;
        let at = |v: f64| move |m: &&egui_plot::GridMark| (m.value - v).abs() < 1.0;
        assert!(marks.iter().any(|m| at(top)(&m)), "the top is labelled");
        assert!(
            marks
                .iter()
                .filter(|m| !at(top)(m))
                .all(|m| top - m.value > 0.06 * top),
            "{:?}",
            marks.iter().map(|m| m.value / mib).collect::<Vec<_>>()
        );
        assert!(
            marks.iter().any(|m| at(576.0 * mib)(&m)),
            "the lines below stay"
        );
    }
}
