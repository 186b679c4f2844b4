//! A run's timeline as a picture (`timeline.png` beside the summary): writes
//! acknowledged and failed per second at the top, the latency of acknowledged
//! writes in the middle (p50 and max, log scale), and at the bottom one lane
//! per kind of fault with its windows, in one colour per kind named in the
//! legend. A short run has its windows shaded across the two charts as well;
//! over a long one they would cover the charts, so they stay in their lanes.
//!
//! The numbers come from `buckets`, which is pure and tested; `render` only
//! draws them. A long run is cut into buckets of several seconds, so that no
//! chart has more points than it has room for (its rates stay per second).
//! Lines are drawn a segment at a time: plotters joins a thick polyline with
//! miters, which at the sharp turns of a dense series reach far beyond the
//! plot. Text needs a font: DejaVu Sans from Debian's `fonts-dejavu-core`,
//! read at the first render. Without it the picture is drawn all the same,
//! without any text.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::history::{FaultWindow, Outcome, Write};

/// The width of the narrowest bucket, in ms: the picture's rates are per
/// second.
pub const BUCKET_MS: u64 = 1_000;

/// The most buckets a picture holds, about one per two pixels of a chart; a
/// longer run gets wider buckets, whole seconds each.
pub const BUCKETS_MAX: u64 = 600;

/// The longest run, in seconds, whose fault windows are also shaded across
/// the charts.
const SHADE_ACROSS_MAX_S: f64 = 900.0;

/// The font the text is drawn in, from Debian's `fonts-dejavu-core`.
const FONT_FILE: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// The picture's width, in pixels; its height is the charts' and the lanes'.
const WIDTH: u32 = 1600;
/// The height of each of the two charts, in pixels.
const CHART_HEIGHT: u32 = 420;
/// The height of one fault lane, and of the lanes' axis and margins, in pixels.
const LANE_HEIGHT: u32 = 22;
const LANES_FRAME_HEIGHT: u32 = 80;

/// Lines: acknowledged writes and p50 latencies in blue, failures and max
/// latencies in red.
const ACKED: RGBColor = RGBColor(31, 78, 160);
const FAILED: RGBColor = RGBColor(200, 30, 30);
/// One shade per kind of fault, in the order the kinds first struck (the
/// Okabe-Ito palette, told apart by most colour-blind eyes too, and two
/// more; kinds beyond them share).
const FAULT_COLOURS: [RGBColor; 10] = [
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 158, 115),
    RGBColor(240, 228, 66),
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(120, 120, 120),
    RGBColor(110, 60, 160),
    RGBColor(40, 40, 40),
];
/// How opaque a fault's shading is across the charts, and in its lane.
const SHADE: f64 = 0.3;
const LANE_SHADE: f64 = 0.8;
/// The width of the legend's strip, in pixels.
const LEGEND_WIDTH: u32 = 220;

/// What one bucket of the run saw: the writes completed in it (acknowledged
/// or failed, when the client was told) and the latency (`completed_ms -
/// invoked_ms`) of the acknowledged ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Where the bucket starts, in seconds since the run started.
    pub start_s: u64,
    pub acked: u64,
    pub failed: u64,
    /// The median latency, nearest rank (the lower of two middles); `None`
    /// when no write was acknowledged in the bucket.
    pub latency_p50_ms: Option<u64>,
    pub latency_max_ms: Option<u64>,
}

/// When the run ends, in ms since it started: the last write's completion or
/// the last fault's heal, whichever is later; `None` for an empty history.
fn end_ms(writes: &[Write], faults: &[FaultWindow]) -> Option<u64> {
    writes
        .iter()
        .map(|w| w.completed_ms)
        .chain(faults.iter().map(|f| f.end_ms.max(f.start_ms)))
        .max()
}

/// The bucket width, in ms, for a run ending at `end_ms`: a second, or as many
/// whole seconds as keep the buckets to `BUCKETS_MAX`.
pub fn bucket_ms_for(end_ms: u64) -> u64 {
    let seconds = end_ms / 1_000 + 1;
    seconds.div_ceil(BUCKETS_MAX).max(1) * BUCKET_MS
}

/// The run cut into buckets of `bucket_ms`, from its start to its end (see
/// `end_ms`); each write counts in the bucket it completed in. No buckets for
/// an empty history.
pub fn buckets(writes: &[Write], faults: &[FaultWindow], bucket_ms: u64) -> Vec<Bucket> {
    let Some(end_ms) = end_ms(writes, faults) else {
        return Vec::new();
    };
    let count = (end_ms / bucket_ms + 1) as usize;
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); count];
    let mut out: Vec<Bucket> = (0..count)
        .map(|i| Bucket {
            start_s: i as u64 * bucket_ms / 1_000,
            ..Bucket::default()
        })
        .collect();
    for write in writes {
        let i = (write.completed_ms / bucket_ms) as usize;
        match write.outcome {
            Outcome::Acked { .. } | Outcome::AckedByLeader { .. } => {
                out[i].acked += 1;
                latencies[i].push(write.completed_ms.saturating_sub(write.invoked_ms));
            }
            Outcome::Failed(_) => out[i].failed += 1,
        }
    }
    for (bucket, mut latencies) in out.iter_mut().zip(latencies) {
        latencies.sort_unstable();
        if !latencies.is_empty() {
            bucket.latency_p50_ms = Some(latencies[(latencies.len() - 1) / 2]);
            bucket.latency_max_ms = latencies.last().copied();
        }
    }
    out
}

/// Draws the run's timeline into a PNG at `path`.
pub fn render(writes: &[Write], faults: &[FaultWindow], path: &Path) -> Result<(), String> {
    let bucket_ms = bucket_ms_for(end_ms(writes, faults).unwrap_or(0));
    let kinds = colours_by_kind(faults).len() as u32;
    draw(
        &buckets(writes, faults, bucket_ms),
        bucket_ms,
        faults,
        Target::File(path),
        (
            WIDTH,
            2 * CHART_HEIGHT + LANES_FRAME_HEIGHT + LANE_HEIGHT * kinds.max(1),
        ),
        font_registered(),
    )
}

/// Registers DejaVu Sans as plotters' "sans-serif" once per process; whether
/// there is a font to draw text in.
fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| match std::fs::read(FONT_FILE) {
        // plotters keeps fonts for the life of the process: the bytes are
        // leaked once, here.
        Ok(bytes) => register_font(
            "sans-serif",
            FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        )
        .is_ok(),
        Err(_) => false,
    })
}

/// Where a picture is drawn: a PNG file, or rows of RGB pixels.
enum Target<'a> {
    File(&'a Path),
    #[cfg_attr(not(test), allow(dead_code))]
    Pixels(&'a mut [u8]),
}

/// The segments of a line through `points`, each its own path (see the
/// module's note on miters); `None` breaks the line.
fn segments(
    points: &[Option<(f64, f64)>],
    style: ShapeStyle,
) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
    points.windows(2).filter_map(move |pair| match pair {
        [Some(a), Some(b)] => Some(PathElement::new(vec![*a, *b], style)),
        _ => None,
    })
}

/// A drawing area of the picture.
type Area<'b> = DrawingArea<BitMapBackend<'b>, Shift>;

/// What every part of one drawing shares.
struct Frame<'f> {
    /// The picture's name, for errors.
    name: String,
    /// Whether text (labels, legend) is drawn.
    text: bool,
    /// A bucket's width and the run's end, in s.
    width_s: f64,
    end_s: f64,
    /// The fault windows also shaded across the charts (none in a long run).
    across: &'f [FaultWindow],
    /// Each kind of fault with its shade.
    colours: Vec<(String, RGBColor)>,
}

impl Frame<'_> {
    fn failed(&self, error: &dyn std::fmt::Display) -> String {
        format!("timeline {}: {error}", self.name)
    }

    /// A bucket's middle, in s.
    fn at(&self, bucket: &Bucket) -> f64 {
        bucket.start_s as f64 + self.width_s / 2.0
    }

    fn per_second(&self, count: u64) -> f64 {
        count as f64 / self.width_s
    }
}

/// The drawing itself, `size` pixels wide and high, of buckets `bucket_ms`
/// wide; with `text` false nothing that needs a font is drawn (no labels, no
/// legend). Top down: throughput, latency, the fault lanes; the legend in a
/// strip on the right.
fn draw(
    buckets: &[Bucket],
    bucket_ms: u64,
    faults: &[FaultWindow],
    target: Target<'_>,
    size: (u32, u32),
    text: bool,
) -> Result<(), String> {
    let name = match &target {
        Target::File(path) => path.display().to_string(),
        Target::Pixels(_) => "in memory".to_string(),
    };
    let root = match target {
        Target::File(path) => BitMapBackend::new(path, size),
        Target::Pixels(rgb) => BitMapBackend::with_buffer(rgb, size),
    }
    .into_drawing_area();
    let width_s = bucket_ms as f64 / 1_000.0;
    let end_s = (buckets.len() as f64 * width_s).max(1.0);
    let frame = Frame {
        name,
        text,
        width_s,
        end_s,
        across: if end_s <= SHADE_ACROSS_MAX_S {
            faults
        } else {
            &[]
        },
        colours: colours_by_kind(faults),
    };
    root.fill(&WHITE).map_err(|e| frame.failed(&e))?;
    // The legend has a strip of its own on the right, where it hides no data.
    let (plots, side) = if text {
        root.split_horizontally(size.0.saturating_sub(LEGEND_WIDTH))
    } else {
        root.split_horizontally(size.0)
    };
    // The two charts share what the lanes leave, half each.
    let lanes_height =
        (LANES_FRAME_HEIGHT + LANE_HEIGHT * (frame.colours.len() as u32).max(1)).min(size.1 / 3);
    let chart_height = (size.1 - lanes_height) / 2;
    let (top, rest) = plots.split_vertically(chart_height);
    let (bottom, lanes) = rest.split_vertically(chart_height);
    draw_throughput(&root, &top, buckets, &frame)?;
    draw_latency(&bottom, buckets, &frame)?;
    draw_lanes(&root, &lanes, faults, &frame)?;
    if text {
        draw_legends(&side, chart_height, &frame)?;
    }
    root.present().map_err(|e| frame.failed(&e))
}

/// Writes acknowledged and failed per second, the fault windows shaded
/// behind them, each window's kind written on it where it fits.
fn draw_throughput(
    root: &Area<'_>,
    area: &Area<'_>,
    buckets: &[Bucket],
    frame: &Frame<'_>,
) -> Result<(), String> {
    let width_s = frame.width_s;
    let rates = if width_s > 1.0 {
        format!("writes per second (averaged over {width_s:.0} s)")
    } else {
        "writes per second".to_string()
    };
    let most = buckets
        .iter()
        .map(|b| frame.per_second(b.acked.max(b.failed)))
        .fold(10.0, f64::max);
    let top_y = most * 1.1;
    let mut chart = chart_on(area, &rates, frame.text)
        .build_cartesian_2d(0.0..frame.end_s, 0.0..top_y)
        .map_err(|e| frame.failed(&e))?;
    mesh(&mut chart, "writes per second", frame.text).map_err(|e| frame.failed(&e))?;
    chart
        .draw_series(
            frame
                .across
                .iter()
                .map(|f| shade(f, 0.0, top_y, &frame.colours)),
        )
        .map_err(|e| frame.failed(&e))?;
    for (colour, count) in [
        (ACKED, (|b: &Bucket| b.acked) as fn(&Bucket) -> u64),
        (FAILED, |b: &Bucket| b.failed),
    ] {
        let points: Vec<Option<(f64, f64)>> = buckets
            .iter()
            .map(|b| Some((frame.at(b), frame.per_second(count(b)))))
            .collect();
        chart
            .draw_series(segments(&points, colour.stroke_width(2)))
            .map_err(|e| frame.failed(&e))?;
    }
    if frame.text {
        // Each window's kind on the window itself, where it fits.
        let style = TextStyle::from(("sans-serif", 14).into_font());
        for fault in frame.across {
            let (x0, y0) = chart.backend_coord(&(ms_to_s(fault.start_ms), top_y));
            let (x1, _) = chart.backend_coord(&(ms_to_s(fault.end_ms), top_y));
            let (width, _) = root
                .estimate_text_size(&fault.kind, &style)
                .map_err(|e| frame.failed(&e))?;
            if (width as i32) + 6 <= x1 - x0 {
                root.draw_text(&fault.kind, &style, (x0 + 3, y0 + 4))
                    .map_err(|e| frame.failed(&e))?;
            }
        }
    }
    Ok(())
}

/// The latency of acknowledged writes, log scale from a millisecond to the
/// slowest write: the median and the maximum of each bucket.
fn draw_latency(area: &Area<'_>, buckets: &[Bucket], frame: &Frame<'_>) -> Result<(), String> {
    let slowest = buckets
        .iter()
        .filter_map(|b| b.latency_max_ms)
        .max()
        .unwrap_or(1)
        .max(10) as f64;
    let top_y = slowest * 2.0;
    let mut chart = chart_on(
        area,
        "latency of acknowledged writes (ms, log scale)",
        frame.text,
    )
    .build_cartesian_2d(0.0..frame.end_s, (1.0..top_y).log_scale())
    .map_err(|e| frame.failed(&e))?;
    mesh(&mut chart, "latency (ms)", frame.text).map_err(|e| frame.failed(&e))?;
    chart
        .draw_series(
            frame
                .across
                .iter()
                .map(|f| shade(f, 1.0, top_y, &frame.colours)),
        )
        .map_err(|e| frame.failed(&e))?;
    for (colour, pick) in [
        (
            FAILED,
            (|b: &Bucket| b.latency_max_ms) as fn(&Bucket) -> Option<u64>,
        ),
        (ACKED, |b: &Bucket| b.latency_p50_ms),
    ] {
        // A line through each stretch of buckets that acknowledged writes (a
        // gap where none were), and a dot on every bucket.
        let points: Vec<Option<(f64, f64)>> = buckets
            .iter()
            .map(|b| pick(b).map(|ms| (frame.at(b), (ms as f64).max(1.0))))
            .collect();
        chart
            .draw_series(segments(&points, colour.stroke_width(2)))
            .map_err(|e| frame.failed(&e))?;
        chart
            .draw_series(
                points
                    .iter()
                    .flatten()
                    .map(|&p| Circle::new(p, 2, colour.filled())),
            )
            .map_err(|e| frame.failed(&e))?;
    }
    Ok(())
}

/// One lane per kind of fault, top down in the order the kinds struck, each
/// window a bar in its lane; with text, each lane's kind to its right, in
/// the legend's strip.
fn draw_lanes(
    root: &Area<'_>,
    area: &Area<'_>,
    faults: &[FaultWindow],
    frame: &Frame<'_>,
) -> Result<(), String> {
    let (colours, end_s, text) = (&frame.colours, frame.end_s, frame.text);
    let rows = (colours.len() as f64).max(1.0);
    let mut chart = ChartBuilder::on(area);
    chart.margin(15).margin_top(5);
    if text {
        chart.x_label_area_size(40).y_label_area_size(70);
    }
    let mut chart = chart
        .build_cartesian_2d(0.0..end_s, 0.0..rows)
        .map_err(|e| frame.failed(&e))?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.disable_y_mesh()
            .y_labels(0)
            .x_labels(20)
            .light_line_style(BLACK.mix(0.05));
        if text {
            mesh.x_desc("faults, one lane per kind (time since the run started, s)")
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 15))
                .x_label_formatter(&tick);
        }
        mesh.draw().map_err(|e| frame.failed(&e))?;
    }
    chart
        .draw_series(faults.iter().map(|fault| {
            let row = colours
                .iter()
                .position(|(kind, _)| *kind == fault.kind)
                .unwrap_or(0) as f64;
            let colour = colours.get(row as usize).map_or(FAULT_COLOURS[0], |c| c.1);
            // Row 0 at the top; at least a pixel wide whatever the window.
            let end_s = ms_to_s(fault.end_ms).max(ms_to_s(fault.start_ms) + end_s / 2_000.0);
            Rectangle::new(
                [
                    (ms_to_s(fault.start_ms), rows - row - 0.15),
                    (end_s, rows - row - 0.85),
                ],
                colour.mix(LANE_SHADE).filled(),
            )
        }))
        .map_err(|e| frame.failed(&e))?;
    if text {
        let style =
            TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let (right, _) = chart.backend_coord(&(end_s, 0.0));
        for (row, (kind, _)) in colours.iter().enumerate() {
            let (_, y) = chart.backend_coord(&(end_s, rows - row as f64 - 0.5));
            root.draw_text(kind, &style, (right + 8, y))
                .map_err(|e| frame.failed(&e))?;
        }
    }
    Ok(())
}

/// The legend, in the strip on the right: beside the throughput chart the
/// writes' lines and the faults' shades, beside the latency chart its lines.
fn draw_legends(side: &Area<'_>, chart_height: u32, frame: &Frame<'_>) -> Result<(), String> {
    let (side_top, side_rest) = side.split_vertically(chart_height);
    let (side_middle, _) = side_rest.split_vertically(chart_height);
    let mut keys = vec![
        Key::Heading("writes"),
        Key::Line("acknowledged", ACKED),
        Key::Line("failed or timed out", FAILED),
    ];
    if !frame.colours.is_empty() {
        keys.push(Key::Heading("faults"));
        keys.extend(frame.colours.iter().map(|(kind, c)| Key::Shade(kind, *c)));
    }
    legend(&side_top, &keys).map_err(|e| frame.failed(&e))?;
    let keys = [
        Key::Heading("latency"),
        Key::Line("p50 (median)", ACKED),
        Key::Line("max", FAILED),
    ];
    legend(&side_middle, &keys).map_err(|e| frame.failed(&e))
}

fn ms_to_s(ms: u64) -> f64 {
    ms as f64 / 1_000.0
}

/// Each kind of fault with its shade, in the order the kinds first struck.
fn colours_by_kind(faults: &[FaultWindow]) -> Vec<(String, RGBColor)> {
    let mut kinds: Vec<(String, RGBColor)> = Vec::new();
    for fault in faults {
        if !kinds.iter().any(|(kind, _)| *kind == fault.kind) {
            let colour = FAULT_COLOURS[kinds.len() % FAULT_COLOURS.len()];
            kinds.push((fault.kind.clone(), colour));
        }
    }
    kinds
}

/// A fault's window, shaded over the whole height of a chart in its kind's
/// colour.
fn shade(
    fault: &FaultWindow,
    low: f64,
    high: f64,
    colours: &[(String, RGBColor)],
) -> Rectangle<(f64, f64)> {
    let colour = colours
        .iter()
        .find(|(kind, _)| *kind == fault.kind)
        .map_or(FAULT_COLOURS[0], |(_, colour)| *colour);
    Rectangle::new(
        [
            (ms_to_s(fault.start_ms), low),
            (ms_to_s(fault.end_ms), high),
        ],
        colour.mix(SHADE).filled(),
    )
}

/// A chart on `area`, with room for a caption and labels when there is text.
fn chart_on<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, Shift>,
    caption: &str,
    text: bool,
) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder.margin(15);
    if text {
        builder
            .caption(caption, ("sans-serif", 20))
            .x_label_area_size(45)
            .y_label_area_size(70);
    }
    builder
}

/// The grid, and with text the axes' labels: time in seconds across.
fn mesh<'a, 'b: 'a, Y>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, Y>>,
    y_desc: &str,
    text: bool,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    // At most a tick a second, so that every tick is a whole second.
    let seconds = chart.x_range().end as usize;
    let mut mesh = chart.configure_mesh();
    mesh.x_labels((seconds + 1).clamp(2, 20))
        .light_line_style(BLACK.mix(0.05));
    if text {
        mesh.x_desc("time since the run started (s)")
            .y_desc(y_desc)
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick);
    }
    mesh.draw().map_err(|e| e.to_string())
}

/// A tick's number: whole where it is whole.
fn tick(value: &f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// One line of the legend.
enum Key<'a> {
    Heading(&'a str),
    Line(&'a str, RGBColor),
    Shade(&'a str, RGBColor),
}

/// The legend's lines, from the top of `area` down past the chart's caption.
fn legend(area: &DrawingArea<BitMapBackend<'_>, Shift>, keys: &[Key]) -> Result<(), String> {
    let font = |size| {
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(HPos::Left, VPos::Center))
    };
    let mut y = 60;
    for key in keys {
        let result = match key {
            Key::Heading(name) => {
                y += 8;
                area.draw_text(name, &font(16), (6, y))
            }
            Key::Line(name, colour) => area
                .draw(&PathElement::new(
                    [(10, y), (36, y)],
                    colour.stroke_width(3),
                ))
                .and_then(|()| area.draw_text(name, &font(14), (44, y))),
            Key::Shade(name, colour) => area
                .draw(&Rectangle::new(
                    [(10, y - 7), (36, y + 7)],
                    colour.mix(SHADE).filled(),
                ))
                .and_then(|()| area.draw_text(name, &font(14), (44, y))),
        };
        result.map_err(|e| e.to_string())?;
        y += 22;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(invoked_ms: u64, completed_ms: u64, acked: bool) -> Write {
        Write {
            producer: 0,
            seq: invoked_ms,
            partition: 0,
            invoked_ms,
            completed_ms,
            outcome: if acked {
                Outcome::Acked { offset: 0 }
            } else {
                Outcome::Failed("timed out".to_string())
            },
        }
    }

    fn fault(kind: &str, start_ms: u64, end_ms: u64) -> FaultWindow {
        FaultWindow {
            kind: kind.to_string(),
            target: "node 1".to_string(),
            start_ms,
            end_ms,
        }
    }

    #[test]
    fn an_empty_history_has_no_buckets() {
        assert!(buckets(&[], &[], BUCKET_MS).is_empty());
    }

    #[test]
    fn writes_count_in_the_second_they_completed_in() {
        let writes = [
            write(0, 10, true),
            write(900, 999, true),
            write(950, 1_000, true),
            write(500, 1_500, false),
            write(2_000, 2_999, false),
        ];
        let b = buckets(&writes, &[], BUCKET_MS);
        assert_eq!(b.len(), 3);
        assert_eq!(
            b.iter()
                .map(|b| (b.start_s, b.acked, b.failed))
                .collect::<Vec<_>>(),
            [(0, 2, 0), (1, 1, 1), (2, 0, 1)]
        );
    }

    #[test]
    fn latency_is_of_acknowledged_writes_only() {
        // Second 0: latencies 10, 40, 20, 30 (median the lower middle, 20);
        // the failure's 900 ms is not among them.
        let writes = [
            write(0, 10, true),
            write(0, 40, true),
            write(100, 120, true),
            write(100, 130, true),
            write(50, 950, false),
            write(1_100, 1_105, false),
        ];
        let b = buckets(&writes, &[], BUCKET_MS);
        assert_eq!(b[0].latency_p50_ms, Some(20));
        assert_eq!(b[0].latency_max_ms, Some(40));
        // Second 1 acknowledged nothing: no latency, not zero.
        assert_eq!(b[1].latency_p50_ms, None);
        assert_eq!(b[1].latency_max_ms, None);
    }

    #[test]
    fn an_odd_count_has_its_middle_for_median() {
        let writes = [write(0, 5, true), write(0, 7, true), write(0, 300, true)];
        let b = buckets(&writes, &[], BUCKET_MS);
        assert_eq!(
            (b[0].latency_p50_ms, b[0].latency_max_ms),
            (Some(7), Some(300))
        );
    }

    #[test]
    fn the_timeline_runs_to_the_last_heal_too() {
        let writes = [write(0, 500, true)];
        let b = buckets(&writes, &[fault("kill", 1_000, 4_200)], BUCKET_MS);
        assert_eq!(b.len(), 5);
        assert_eq!(b[4].start_s, 4);
        assert!(b[1..].iter().all(|b| b.acked == 0 && b.failed == 0));
        assert_eq!(buckets(&[], &[fault("pause", 0, 999)], BUCKET_MS).len(), 1);
    }

    #[test]
    fn kinds_keep_one_colour_in_the_order_they_struck() {
        let faults = [
            fault("pause", 0, 1),
            fault("kill", 2, 3),
            fault("pause", 4, 5),
        ];
        let colours = colours_by_kind(&faults);
        assert_eq!(
            colours.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["pause", "kill"]
        );
        assert_ne!(colours[0].1, colours[1].1);
    }

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

    fn small_history() -> (Vec<Write>, Vec<FaultWindow>) {
        let writes = (0..400u64)
            .map(|i| {
                let at = i * 20;
                // An outage from 3 s to 5 s: failures, then slow acknowledgements.
                let outage = (3_000..5_000).contains(&at);
                write(
                    at,
                    at + if outage { 1_500 } else { 4 + i % 7 },
                    !outage || i % 3 == 0,
                )
            })
            .collect();
        let faults = vec![
            fault("isolate-leader", 2_800, 5_000),
            fault("kill", 6_000, 7_500),
        ];
        (writes, faults)
    }

    #[test]
    fn renders_a_png() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("timeline.png");
        let (writes, faults) = small_history();
        render(&writes, &faults, &path).expect("the timeline renders");
        let bytes = std::fs::read(&path).expect("the rendered file");
        assert!(bytes.starts_with(&PNG_SIGNATURE));
    }

    #[test]
    fn renders_a_png_without_text_or_history() {
        // Without a font nothing may ask for one: the picture is drawn bare.
        let dir = tempfile::tempdir().expect("a temporary folder");
        let (writes, faults) = small_history();
        for (name, writes, faults, text) in [
            ("bare.png", &writes[..], &faults[..], false),
            ("empty-bare.png", &[][..], &[][..], false),
            ("empty.png", &[][..], &[][..], font_registered()),
        ] {
            let path = dir.path().join(name);
            let b = buckets(writes, faults, BUCKET_MS);
            draw(&b, BUCKET_MS, faults, Target::File(&path), (400, 250), text)
                .expect("the timeline draws");
            assert!(std::fs::read(&path)
                .expect("the drawn file")
                .starts_with(&PNG_SIGNATURE));
        }
    }

    #[test]
    fn a_long_run_gets_buckets_of_whole_seconds_and_no_more_than_fit() {
        assert_eq!(bucket_ms_for(0), 1_000);
        assert_eq!(bucket_ms_for(45_000), 1_000);
        assert_eq!(bucket_ms_for(599_999), 1_000);
        assert_eq!(bucket_ms_for(600_000), 2_000);
        assert_eq!(bucket_ms_for(3_600_000), 7_000);
        for end_ms in [0, 45_000, 599_999, 600_000, 3_600_000, 36_000_000] {
            let width = bucket_ms_for(end_ms);
            assert_eq!(width % 1_000, 0);
            assert!(
                end_ms / width < BUCKETS_MAX,
                "{end_ms} ms in {width} ms buckets"
            );
        }
    }

    #[test]
    fn wide_buckets_count_every_write_once() {
        let writes: Vec<Write> = (0..100u64)
            .map(|i| write(i * 100, i * 100 + 50, i % 4 != 0))
            .collect();
        let b = buckets(&writes, &[], 3_000);
        assert_eq!(
            b.iter().map(|b| b.start_s).collect::<Vec<_>>(),
            [0, 3, 6, 9]
        );
        assert_eq!(b.iter().map(|b| b.acked).sum::<u64>(), 75);
        assert_eq!(b.iter().map(|b| b.failed).sum::<u64>(), 25);
        assert_eq!((b[0].acked, b[0].failed), (22, 8));
    }

    /// A history whose latency zigzags between 2 ms and 30 s every second,
    /// with gaps: drawn in fewer pixels than it has points, a thick polyline
    /// through it grew spikes hundreds of pixels long (from its sharp turns
    /// and from points that fell on one pixel).
    fn zigzag_history() -> Vec<Write> {
        (0..600u64)
            .filter(|s| s % 37 >= 3)
            .flat_map(|s| {
                let latency = if s % 2 == 0 { 2 } else { 30_000 };
                let at = s * 1_000 + 500;
                [
                    write(at.saturating_sub(latency), at, true),
                    write(at, at + 400, s % 5 == 0),
                ]
            })
            .collect()
    }

    #[test]
    fn lines_stay_inside_their_charts() {
        // Drawn without text, each chart is its area less a 15-pixel margin:
        // no pixel of a line's colour may fall in the margins around the
        // charts' edges (a dot on an edge reaches 2 pixels out, allowed), nor
        // in the fault lanes below them.
        let size = (400, 300);
        let writes = zigzag_history();
        let faults = [fault("kill", 10_000, 20_000)];
        let mut rgb = vec![0u8; (size.0 * size.1 * 3) as usize];
        draw(
            &buckets(&writes, &faults, BUCKET_MS),
            BUCKET_MS,
            &faults,
            Target::Pixels(&mut rgb),
            size,
            false,
        )
        .expect("the timeline draws into pixels");
        let lanes = (LANES_FRAME_HEIGHT + LANE_HEIGHT).min(size.1 / 3);
        let chart = (size.1 - lanes) / 2;
        let line_colours = [ACKED, FAILED].map(|c| [c.0, c.1, c.2]);
        let mut strays = Vec::new();
        for y in 0..size.1 {
            let edge = |top: u32| {
                (top..top + 12).contains(&y) || (top.saturating_sub(12)..top).contains(&y)
            };
            let outside = y < 12 || edge(chart) || y >= 2 * chart - 12;
            for x in 0..size.0 {
                let at = ((y * size.0 + x) * 3) as usize;
                if outside && line_colours.contains(&[rgb[at], rgb[at + 1], rgb[at + 2]]) {
                    strays.push((x, y));
                }
            }
        }
        assert!(
            strays.is_empty(),
            "{} line pixels outside the charts, the first {:?}",
            strays.len(),
            &strays[..strays.len().min(5)]
        );
        // And the lines were drawn at all.
        assert!(rgb
            .chunks(3)
            .any(|p| line_colours.contains(&[p[0], p[1], p[2]])));
    }
}
