//! The report's plot, written by hand: cumulative distributions of latency samples on a
//! logarithmic time axis, one panel per measurement, one line per implementation.

use std::fmt::Write;
use std::time::Duration;

use testbed::svg::escape;

/// One line of a panel.
pub struct Series<'a> {
    pub label: String,
    pub color: &'a str,
    pub dashed: bool,
    pub samples: &'a [Duration],
}

/// One panel.
pub struct Panel<'a> {
    pub title: String,
    pub series: Vec<Series<'a>>,
}

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 390.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 26.0;
const TOP: f64 = 64.0;
/// Room below the plot for the axis title and up to three legend rows.
const BOTTOM: f64 = 112.0;

fn decade_label(exp: i32) -> String {
    match exp {
        e if e < -3 => format!("{} µs", 10f64.powi(e + 3)),
        -3 => "1 µs".into(),
        -2 => "10 µs".into(),
        -1 => "100 µs".into(),
        0 => "1 ms".into(),
        1 => "10 ms".into(),
        2 => "100 ms".into(),
        3 => "1 s".into(),
        4 => "10 s".into(),
        e => format!("{} s", 10f64.powi(e - 3)),
    }
}

/// The plot as an SVG document: `panels` side by side sharing one time axis, a title above.
pub fn cdf_plot(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    let all: Vec<f64> = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .flat_map(|s| s.samples.iter())
        .map(|d| (d.as_secs_f64() * 1e3).max(0.01))
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo_exp, hi_exp) = if all.is_empty() {
        (-1, 3)
    } else {
        let lo_exp = lo.log10().floor() as i32;
        (lo_exp, (hi.log10().ceil() as i32).max(lo_exp + 1))
    };
    let width = PANEL_W * panels.len().max(1) as f64;
    let height = PANEL_H + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">"##
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{:.1}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>
<text x="{:.1}" y="40" text-anchor="middle" fill="#555555">{}</text>"##,
        width / 2.0,
        escape(title),
        width / 2.0,
        escape(subtitle)
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut svg, panel, i as f64 * PANEL_W, lo_exp, hi_exp);
    }
    svg.push_str("</svg>\n");
    svg
}

fn draw_panel(svg: &mut String, panel: &Panel, x0: f64, lo_exp: i32, hi_exp: i32) {
    let plot_x = x0 + LEFT;
    let plot_w = PANEL_W - LEFT - RIGHT;
    let plot_y = TOP + 20.0;
    let plot_h = PANEL_H - TOP - BOTTOM;
    let span = f64::from(hi_exp - lo_exp);
    let x_of = |ms: f64| plot_x + (ms.max(0.01).log10() - f64::from(lo_exp)) / span * plot_w;
    let y_of = |q: f64| plot_y + (1.0 - q) * plot_h;

    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13" font-weight="bold">{}</text>"##,
        plot_x + plot_w / 2.0,
        plot_y - 10.0,
        escape(&panel.title)
    );
    // Grid: decades (labelled) and 2, 5 within each decade.
    for exp in lo_exp..=hi_exp {
        let x = x_of(10f64.powi(exp));
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#cccccc"/>
<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333333">{}</text>"##,
            plot_y,
            plot_y + plot_h,
            plot_y + plot_h + 16.0,
            decade_label(exp)
        );
        if exp < hi_exp {
            for m in [2.0, 5.0] {
                let x = x_of(m * 10f64.powi(exp));
                let _ = writeln!(
                    svg,
                    r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eeeeee"/>"##,
                    plot_y,
                    plot_y + plot_h
                );
            }
        }
    }
    for q in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let y = y_of(q);
        let _ = writeln!(
            svg,
            r##"<line x1="{plot_x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#cccccc"/>
<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333333">{}%</text>"##,
            plot_x + plot_w,
            plot_x - 6.0,
            y + 4.0,
            (q * 100.0).round()
        );
    }
    // The p99 line, labelled inside the plot, and the 50 ms goal.
    let y99 = y_of(0.99);
    let _ = writeln!(
        svg,
        r##"<line x1="{plot_x:.1}" y1="{y99:.1}" x2="{:.1}" y2="{y99:.1}" stroke="#999999" stroke-dasharray="2 3"/>
<text x="{:.1}" y="{:.1}" fill="#777777" font-size="10">p99</text>"##,
        plot_x + plot_w,
        plot_x + 4.0,
        y99 + 11.0
    );
    if (f64::from(lo_exp)..=f64::from(hi_exp)).contains(&50f64.log10()) {
        let x = x_of(50.0);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{plot_y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#b03030" stroke-dasharray="4 3"/>
<text x="{:.1}" y="{:.1}" fill="#b03030" font-size="10" text-anchor="end">50 ms</text>"##,
            plot_y + plot_h,
            x - 3.0,
            plot_y + plot_h / 2.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{plot_x:.1}" y="{plot_y:.1}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#333333"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333333">latency (log scale)</text>
<text transform="translate({:.1} {:.1}) rotate(-90)" text-anchor="middle" fill="#333333">share of samples at or below</text>"##,
        plot_x + plot_w / 2.0,
        plot_y + plot_h + 34.0,
        x0 + 14.0,
        plot_y + plot_h / 2.0
    );
    for (k, s) in panel.series.iter().enumerate() {
        let mut sorted: Vec<f64> = s.samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        sorted.sort_by(f64::total_cmp);
        if !sorted.is_empty() {
            let n = sorted.len() as f64;
            let mut path = format!("M{:.1},{:.1}", x_of(sorted[0]), y_of(0.0));
            for (i, v) in sorted.iter().enumerate() {
                let x = x_of(*v);
                let _ = write!(
                    path,
                    " L{x:.1},{:.1} L{x:.1},{:.1}",
                    y_of(i as f64 / n),
                    y_of((i + 1) as f64 / n)
                );
            }
            let dash = if s.dashed {
                r##" stroke-dasharray="6 3""##
            } else {
                ""
            };
            let _ = writeln!(
                svg,
                r##"<path d="{path}" fill="none" stroke="{}" stroke-width="2"{dash}/>"##,
                s.color
            );
        }
        // Legend, below the axis title.
        let ly = plot_y + plot_h + 58.0 + k as f64 * 17.0;
        let lx = plot_x;
        let dash = if s.dashed {
            r##" stroke-dasharray="6 3""##
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/>
<text x="{:.1}" y="{:.1}" fill="#222222">{} (n={})</text>"##,
            lx,
            lx + 22.0,
            s.color,
            lx + 28.0,
            ly + 4.0,
            escape(&s.label),
            s.samples.len()
        );
    }
}
