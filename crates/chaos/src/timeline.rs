//! The timeline picture, an SVG written by hand: one lane per replica showing which term
//! (colour) held a valid lease when, with pauses, kills, link faults, Redis faults, refused
//! writes and violations marked; folded into strips of equal length.

use std::fmt::Write as _;

use crate::checker::Violation;
use crate::history::Window;
use crate::nemesis::{Impairment, Journal};
use crate::resource::Write;
use crate::time::{MS, Micros, SEC};
use testbed::svg::escape;

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 16.0;
const PALETTE: [&str; 10] = [
    "#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#76b7b2", "#edc948", "#9c755f", "#e15759",
    "#86bcb6", "#bab0ac",
];

/// What the picture shows.
pub struct Picture<'a> {
    /// Number of replicas.
    pub replicas: usize,
    /// The terms.
    pub windows: &'a [Window],
    /// What the nemesis did.
    pub journal: &'a Journal,
    /// The resource's writes.
    pub writes: &'a [Write],
    /// Safety violations.
    pub violations: &'a [Violation],
    /// The stretch drawn.
    pub from: Micros,
    /// Its end.
    pub to: Micros,
    /// A title.
    pub title: String,
}

impl Picture<'_> {
    /// The SVG document.
    pub fn render(&self) -> String {
        let total = (self.to - self.from).max(SEC);
        let strip = [20, 30, 60, 120, 300, 600]
            .into_iter()
            .map(|s| s * SEC)
            .find(|s| total / s < 40)
            .unwrap_or(600 * SEC);
        let strips = usize::try_from((total + strip - 1) / strip)
            .unwrap_or(1)
            .max(1);
        let lanes_top = 40.0;
        let strip_height = lanes_top + LANE * self.replicas as f64 + 34.0;
        let legend = 78.0;
        let height = legend + strip_height * strips as f64 + 10.0;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="10">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="#222" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="10" y="18" font-size="14" font-weight="bold">{}</text>
"##,
            escape(&self.title)
        );
        self.legend(&mut svg, 34.0);
        for k in 0..strips {
            let start = self.from + strip * k as i64;
            let y = legend + strip_height * k as f64;
            self.strip(&mut svg, start, start + strip, y, lanes_top);
        }
        svg.push_str("</svg>\n");
        svg
    }

    fn legend(&self, svg: &mut String, y: f64) {
        let items: [(&str, &str); 10] = [
            ("#4e79a7", "valid lease (one colour per term)"),
            ("url(#hatch)", "leasehold paused (SIGSTOP)"),
            ("#d0d0d0", "process down (killed / restarting)"),
            ("#ff9f1c", "command paused"),
            ("#1f77b4", "link delayed / redis slow"),
            ("#7b3294", "link dropped (reset)"),
            ("#000000", "link blackholed"),
            ("#e15759", "redis down"),
            ("#d7191c", "refused write"),
            ("#ffe8a3", "fault active"),
        ];
        let mut x = 10.0;
        let mut y = y;
        for (fill, label) in items {
            let width = 18.0 + label.chars().count() as f64 * 6.0 + 14.0;
            if x + width > WIDTH - RIGHT {
                x = 10.0;
                y += 15.0;
            }
            let _ = writeln!(
                svg,
                r##"<rect x="{x:.1}" y="{:.1}" width="14" height="10" fill="{fill}" stroke="#555" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{}</text>"##,
                y,
                x + 18.0,
                y + 9.0,
                escape(label)
            );
            x += width;
        }
        let _ = writeln!(
            svg,
            r##"<text x="10" y="{:.1}">Red triangles: safety violations. Lane labels: replicas; top lane: faults (code at injection); second: redis. Time in seconds since the start.</text>"##,
            y + 22.0
        );
    }

    fn strip(&self, svg: &mut String, from: Micros, to: Micros, y: f64, lanes_top: f64) {
        let scale = (WIDTH - LEFT - RIGHT) / (to - from) as f64;
        let x = |t: Micros| LEFT + ((t.clamp(from, to) - from) as f64) * scale;
        let visible = |a: Micros, b: Micros| b > from && a < to;
        let lane_y = |r: usize| y + lanes_top + LANE * r as f64;
        let fault_y = y + 4.0;
        let redis_y = y + 20.0;
        // Lanes and labels.
        let _ = writeln!(
            svg,
            r##"<text x="8" y="{:.1}">faults</text><text x="8" y="{:.1}">redis</text>"##,
            fault_y + 10.0,
            redis_y + 10.0
        );
        for r in 0..self.replicas {
            let ly = lane_y(r);
            let _ = writeln!(
                svg,
                r##"<rect x="{LEFT}" y="{ly:.1}" width="{:.1}" height="{:.1}" fill="#f6f6f6"/><text x="8" y="{:.1}">r{r}</text>"##,
                WIDTH - LEFT - RIGHT,
                LANE - 2.0,
                ly + 11.0
            );
        }
        // Faults.
        for f in &self.journal.faults {
            if f.skipped.is_some() || !visible(f.inject, f.clear.max(f.inject + MS)) {
                continue;
            }
            let (a, b) = (x(f.inject), x(f.clear.max(f.inject + MS)));
            let target = f.target.map(|t| format!(" r{t}")).unwrap_or_default();
            let _ = writeln!(
                svg,
                r##"<rect x="{a:.1}" y="{fault_y:.1}" width="{:.1}" height="14" fill="#ffe8a3"><title>#{} {}{}</title></rect><text x="{:.1}" y="{:.1}" font-size="9">{}</text>"##,
                (b - a).max(1.0),
                f.index,
                escape(f.kind().label()),
                escape(&target),
                a + 1.0,
                fault_y + 10.0,
                escape(f.kind().code())
            );
            let lane_bottom = lane_y(self.replicas) - 2.0;
            let _ = writeln!(
                svg,
                r##"<line x1="{a:.1}" y1="{:.1}" x2="{a:.1}" y2="{lane_bottom:.1}" stroke="#c9a227" stroke-width="0.6" stroke-dasharray="2,2"/>"##,
                fault_y + 14.0
            );
        }
        // Redis.
        for s in &self.journal.redis {
            if !visible(s.from, s.to) {
                continue;
            }
            let fill = match s.what {
                Impairment::RedisPaused => "#ff9f1c",
                Impairment::RedisSlow => "#1f77b4",
                Impairment::RedisDownLost => "#8b0000",
                _ => "#e15759",
            };
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{redis_y:.1}" width="{:.1}" height="12" fill="{fill}"><title>redis {}</title></rect>"##,
                x(s.from),
                (x(s.to) - x(s.from)).max(1.0),
                escape(s.what.label())
            );
        }
        // Terms.
        for (n, w) in self.windows.iter().enumerate() {
            if !visible(w.start, w.end) {
                continue;
            }
            let ly = lane_y(w.replica);
            let reason = w.reason.clone().unwrap_or_else(|| "none logged".into());
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>r{}#{} token {} for {} ms; step-down: {}</title></rect>"##,
                x(w.start),
                ly + 1.0,
                (x(w.end) - x(w.start)).max(0.5),
                LANE - 4.0,
                PALETTE[n % PALETTE.len()],
                w.replica,
                w.incarnation,
                w.token,
                (w.end - w.start) / MS,
                escape(&reason)
            );
        }
        // Process faults.
        for s in self.journal.pauses.iter().chain(&self.journal.downs) {
            let Some(r) = s.replica else { continue };
            if !visible(s.from, s.to) {
                continue;
            }
            let fill = if s.what == Impairment::Paused {
                "url(#hatch)"
            } else {
                "#d0d0d0"
            };
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="#333" stroke-width="0.4"><title>r{r} {}</title></rect>"##,
                x(s.from),
                lane_y(r) + 1.0,
                (x(s.to) - x(s.from)).max(1.0),
                LANE - 4.0,
                escape(s.what.label())
            );
        }
        for s in &self.journal.child_pauses {
            let Some(r) = s.replica else { continue };
            if visible(s.from, s.to) {
                let _ = writeln!(
                    svg,
                    r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="3" fill="#ff9f1c"/>"##,
                    x(s.from),
                    lane_y(r) + LANE - 5.0,
                    (x(s.to) - x(s.from)).max(1.0)
                );
            }
        }
        // Links.
        for s in &self.journal.links {
            let Some(r) = s.replica else { continue };
            if !visible(s.from, s.to) {
                continue;
            }
            let fill = match s.what {
                Impairment::LinkDrop => "#7b3294",
                Impairment::LinkBlackhole => "#000000",
                _ => "#1f77b4",
            };
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="3" fill="{fill}"><title>r{r} link {}</title></rect>"##,
                x(s.from),
                lane_y(r) + 1.0,
                (x(s.to) - x(s.from)).max(1.0),
                escape(s.what.label())
            );
        }
        // Refused writes, merged into runs per replica.
        let mut runs: Vec<(usize, Micros, Micros)> = Vec::new();
        for w in self.writes.iter().filter(|w| !w.accepted) {
            let Some(r) = w
                .identity
                .strip_prefix('r')
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            match runs.iter_mut().rev().find(|(rr, _, _)| *rr == r) {
                Some(run) if w.at - run.2 < 100 * MS => run.2 = w.at,
                _ => runs.push((r, w.at, w.at)),
            }
        }
        for (r, a, b) in runs {
            if r < self.replicas && visible(a, b + MS) {
                let _ = writeln!(
                    svg,
                    r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="4" fill="#d7191c"/>"##,
                    x(a),
                    lane_y(r) + LANE - 7.0,
                    (x(b) - x(a)).max(1.5)
                );
            }
        }
        // Violations.
        for v in self.violations {
            if !visible(v.at, v.at + 1) {
                continue;
            }
            let vx = x(v.at);
            let _ = writeln!(
                svg,
                r##"<path d="M{vx:.1},{:.1} l-5,-9 l10,0 z" fill="#d7191c"><title>{}</title></path>"##,
                y + lanes_top - 1.0,
                escape(&v.detail)
            );
        }
        // Axis.
        let axis_y = lane_y(self.replicas) + 2.0;
        let step = if to - from <= 30 * SEC {
            5 * SEC
        } else if to - from <= 120 * SEC {
            10 * SEC
        } else {
            30 * SEC
        };
        let mut t = from - (from - self.from).rem_euclid(step);
        if t < from {
            t += step;
        }
        while t <= to {
            let tx = x(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#555"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}s</text>"##,
                axis_y + 4.0,
                axis_y + 14.0,
                (t - self.from) / SEC
            );
            t += step;
        }
    }
}
