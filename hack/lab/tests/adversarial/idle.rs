//! What an idle instance costs: each operator's CPU time (read from `/proc`)
//! and passes (counted in its log) over a minute at rest, once the set is
//! Ready everywhere and FedState's status has settled.

use std::time::{Duration, Instant};

use super::{phase, ready};
use crate::harness::*;
use lab::lab::Lab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_instance_costs_each_operator_under_one_percent_of_a_core() {
    let started = Instant::now();
    scenario(60, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("idle", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "idle", "a=2,b=2,c=1").await?;
        phase(started, "idle: a=2,b=2,c=1 everywhere");
        control_plane
            .settled("default", "idle", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        let hz = clock_ticks_per_second()? as f64;
        let pids = (0..lab.clusters().len())
            .map(|i| {
                lab.operator_pid(i)
                    .ok_or(format!("operator {i} is not running"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        let before = pids
            .iter()
            .map(|pid| cpu_ticks(*pid))
            .collect::<Result<Vec<u64>, String>>()?;
        let passes_before = (0..pids.len())
            .map(|i| passes(lab, i))
            .collect::<Result<Vec<usize>, String>>()?;
        let window = Instant::now();
        // The measurement window: an idle instance, FedState's passes every 15 s.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let after = pids
            .iter()
            .map(|pid| cpu_ticks(*pid))
            .collect::<Result<Vec<u64>, String>>()?;
        let passes_after = (0..pids.len())
            .map(|i| passes(lab, i))
            .collect::<Result<Vec<usize>, String>>()?;
        let elapsed = window.elapsed().as_secs_f64();
        let mut figures = Vec::new();
        let mut over = Vec::new();
        for (index, cluster) in lab.clusters().iter().enumerate() {
            let seconds = after[index].saturating_sub(before[index]) as f64 / hz;
            let share = seconds / elapsed * 100.0;
            let per_minute =
                passes_after[index].saturating_sub(passes_before[index]) as f64 * 60.0 / elapsed;
            let figure = format!(
                "operator {}: {seconds:.2} s CPU in {elapsed:.1} s = {share:.2} % of a core, \
                 {per_minute:.1} passes a minute",
                cluster.name
            );
            // At rest a pass comes every 30 s (the in-sync requeue): two or
            // three fall in a 60 s window. A status write that triggered
            // another pass would double that.
            if share >= 1.0 || per_minute > 3.5 {
                over.push(figure.clone());
            }
            figures.push(figure);
        }
        eprintln!("idle cost: {}", figures.join("; "));
        if !over.is_empty() {
            return Err(format!(
                "an idle operator costs 1 % of a core or more, or passes more than 3 times a \
                 minute: {over:?}"
            ));
        }
        Ok(())
    })
    .await;
}

/// How many passes operator `index` has logged (one "planned" line each; the
/// roll stage logs its step as "roll step").
fn passes(lab: &Lab, index: usize) -> Result<usize, String> {
    let log = std::fs::read_to_string(lab.operator_log(index)).map_err(fail("operator log"))?;
    Ok(log
        .lines()
        .filter(|line| line.contains(" planned "))
        .count())
}

/// CPU time (user + system, in clock ticks) of process `pid` so far.
fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(fail("/proc stat"))?;
    // The fields after the command name: the first is field 3 (state);
    // utime is field 14, stime field 15 (proc(5)).
    let (_, fields) = stat
        .rsplit_once(')')
        .ok_or("no command name in /proc stat")?;
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or(format!("no field {n} in /proc/{pid}/stat"))
    };
    Ok(field(14)? + field(15)?)
}

fn clock_ticks_per_second() -> Result<u64, String> {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .map_err(fail("getconf CLK_TCK"))?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(fail("getconf CLK_TCK"))
}
