//! Logs go to `<state dir>/strata.log.YYYY-MM-DD` (tracing + tracing-appender); the terminal is the
//! TUI's, so nothing is printed. `STRATA_LOG=debug|info|warn|error` sets the level.

use std::path::PathBuf;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::filter::LevelFilter;

pub fn log_dir() -> PathBuf {
    directories::ProjectDirs::from("", "", "strata")
        .map(|d| {
            d.state_dir()
                .map_or_else(|| d.data_local_dir().join("logs"), |s| s.to_path_buf())
        })
        .unwrap_or_else(|| std::env::temp_dir().join("strata-logs"))
}

/// Starts logging; keep the guard alive until exit so buffered lines are written.
pub fn init() -> anyhow::Result<(WorkerGuard, PathBuf)> {
    let dir = log_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("creating log directory {}: {e}", dir.display()))?;
    let appender = tracing_appender::rolling::daily(&dir, "strata.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let level = match std::env::var("STRATA_LOG").as_deref() {
        Ok("trace") => LevelFilter::TRACE,
        Ok("debug") => LevelFilter::DEBUG,
        Ok("warn") => LevelFilter::WARN,
        Ok("error") => LevelFilter::ERROR,
        _ => LevelFilter::INFO,
    };
    // A second init (tests) keeps the first subscriber; that is fine.
    let _ = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_max_level(level)
        .try_init();
    Ok((guard, dir))
}
