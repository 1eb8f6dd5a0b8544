//! Pure helpers of `lab bench`'s timed scenarios: the median and worst of a
//! scenario's runs, the length of a union of time intervals (to split a
//! convergence into pod start, elections and the rest), the longest stretch
//! of samples without a PRIMARY, and the Markdown table each scenario prints.

use std::time::{Duration, Instant};

/// The median and the worst (longest) of several runs' figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The middle figure (the mean of the two middle ones for an even count).
    pub median: Duration,
    /// The longest figure.
    pub worst: Duration,
}

/// The median and worst of `figures`; `None` when there are none.
pub fn summarize(figures: &[Duration]) -> Option<Summary> {
    let mut sorted = figures.to_vec();
    sorted.sort();
    let worst = *sorted.last()?;
    let middle = sorted.len() / 2;
    let median = if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2
    };
    Some(Summary { median, worst })
}

/// The total time covered by `intervals` (`(start, end)`, overlapping or
/// not), counted only within `[from, to]`.
pub fn covered(intervals: &[(Instant, Instant)], from: Instant, to: Instant) -> Duration {
    let mut clipped: Vec<(Instant, Instant)> = intervals
        .iter()
        .map(|&(start, end)| (start.max(from), end.min(to)))
        .filter(|(start, end)| start < end)
        .collect();
    clipped.sort();
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for (start, end) in clipped {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        total += e - s;
    }
    total
}

/// The spans of consecutive samples for which `without` holds, each from its
/// first such sample to the next sample for which it does not (a span still
/// open at the last sample ends there).
pub fn spans(samples: &[(Instant, bool)]) -> Vec<(Instant, Instant)> {
    let mut found = Vec::new();
    let mut open: Option<Instant> = None;
    for &(at, without) in samples {
        match (open, without) {
            (None, true) => open = Some(at),
            (Some(start), false) => {
                found.push((start, at));
                open = None;
            }
            _ => {}
        }
    }
    if let (Some(start), Some(&(last, _))) = (open, samples.last()) {
        found.push((start, last));
    }
    found
}

/// The longest of [`spans`].
pub fn longest_span(samples: &[(Instant, bool)]) -> Duration {
    spans(samples)
        .iter()
        .map(|(start, end)| *end - *start)
        .max()
        .unwrap_or_default()
}

/// Seconds with two decimals (`1.23 s`), or milliseconds below one second
/// (`123 ms`).
pub fn human(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{:.2} s", duration.as_secs_f64())
    }
}

/// One row of a timed scenario's table: what is timed, between which two
/// observations, and every run's figure.
#[derive(Clone, Debug)]
pub struct Row {
    /// What is timed.
    pub what: String,
    /// From which observation to which, and how each is observed.
    pub measured: String,
    /// One figure per run (runs where it could not be measured are left out
    /// and counted in `missing`).
    pub figures: Vec<Duration>,
    /// Runs without a figure.
    pub missing: usize,
    /// A reference to compare the median and worst with, e.g. one election
    /// timeout: printed as ratios.
    pub against: Option<(String, Duration)>,
}

impl Row {
    /// A row without a reference.
    pub fn new(what: &str, measured: &str) -> Row {
        Row {
            what: what.to_string(),
            measured: measured.to_string(),
            figures: Vec::new(),
            missing: 0,
            against: None,
        }
    }

    /// Records a run's figure, or a run where there was none.
    pub fn record(&mut self, figure: Option<Duration>) {
        match figure {
            Some(figure) => self.figures.push(figure),
            None => self.missing += 1,
        }
    }
}

/// A timed scenario's Markdown: a heading, the command that reproduces it,
/// a table (one row per figure: median, worst, every run) and notes.
pub fn table(title: &str, command: &str, rows: &[Row], notes: &[String]) -> String {
    let mut out = format!("### {title}\n\nReproduce: `{command}`\n\n");
    out.push_str("| what | measured | median | worst | runs |\n|---|---|---|---|---|\n");
    for row in rows {
        let (median, worst) = match summarize(&row.figures) {
            Some(summary) => {
                let ratio = |figure: Duration| match &row.against {
                    Some((name, reference)) if !reference.is_zero() => format!(
                        " ({:.2} × {name})",
                        figure.as_secs_f64() / reference.as_secs_f64()
                    ),
                    _ => String::new(),
                };
                (
                    format!("{}{}", human(summary.median), ratio(summary.median)),
                    format!("{}{}", human(summary.worst), ratio(summary.worst)),
                )
            }
            None => ("—".to_string(), "—".to_string()),
        };
        let mut runs: Vec<String> = row.figures.iter().map(|f| human(*f)).collect();
        if row.missing > 0 {
            runs.push(format!("{} without a figure", row.missing));
        }
        out.push_str(&format!(
            "| {} | {} | {median} | {worst} | {} |\n",
            row.what,
            row.measured,
            runs.join(", ")
        ));
    }
    for note in notes {
        out.push_str(&format!("\n{note}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_median_is_the_middle_figure_or_the_mean_of_the_two_and_the_worst_the_longest() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(
            summarize(&[ms(30), ms(10), ms(20)]),
            Some(Summary {
                median: ms(20),
                worst: ms(30)
            })
        );
        assert_eq!(
            summarize(&[ms(40), ms(10), ms(20), ms(30)]),
            Some(Summary {
                median: ms(25),
                worst: ms(40)
            })
        );
    }

    #[test]
    fn covered_time_merges_overlaps_and_clips_to_the_window() {
        let t0 = Instant::now();
        let at = |n: u64| t0 + ms(n);
        let intervals = [
            (at(0), at(100)),
            (at(50), at(150)),
            (at(300), at(400)),
            (at(390), at(395)),
        ];
        assert_eq!(covered(&intervals, at(0), at(1000)), ms(250));
        assert_eq!(covered(&intervals, at(120), at(350)), ms(80));
        assert_eq!(covered(&[], at(0), at(10)), Duration::ZERO);
    }

    #[test]
    fn spans_without_run_from_the_first_such_sample_to_the_next_other_one() {
        let t0 = Instant::now();
        let samples = [
            (t0, false),
            (t0 + ms(10), true),
            (t0 + ms(20), true),
            (t0 + ms(70), false),
            (t0 + ms(80), true),
            (t0 + ms(90), true),
        ];
        assert_eq!(
            spans(&samples),
            vec![(t0 + ms(10), t0 + ms(70)), (t0 + ms(80), t0 + ms(90))]
        );
        assert_eq!(longest_span(&samples), ms(60));
        assert_eq!(longest_span(&samples[..1]), Duration::ZERO);
    }

    #[test]
    fn the_table_gives_median_worst_ratios_and_every_run() {
        let mut row = Row::new("no primary", "sampled");
        row.record(Some(ms(500)));
        row.record(Some(Duration::from_millis(1500)));
        row.record(None);
        row.against = Some(("election timeout".into(), Duration::from_secs(2)));
        let text = table("T", "lab bench", &[row], &["note".to_string()]);
        assert!(text.starts_with("### T\n\nReproduce: `lab bench`\n\n"));
        assert!(
            text.contains(
                "| no primary | sampled | 1.00 s (0.50 × election timeout) | 1.50 s (0.75 × election timeout) | 500 ms, 1.50 s, 1 without a figure |"
            ),
            "{text}"
        );
        assert!(text.ends_with("\nnote\n"));
        let empty = table("T", "c", &[Row::new("x", "y")], &[]);
        assert!(empty.contains("| x | y | — | — |  |"), "{empty}");
    }
}
