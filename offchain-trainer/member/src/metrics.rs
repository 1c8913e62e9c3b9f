//! JSON-lines metrics: one [`TrainerEvent`] per line to stdout and, optionally, to a file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::event::TrainerEvent;
use crate::prometheus::Exporter;

/// Writes each [`TrainerEvent`] as one JSON line to stdout and to an optional file, and feeds
/// an optional Prometheus [`Exporter`]. Clones share the file: a pool member's training
/// thread and its duty worker write whole lines to one `metrics.jsonl`.
#[derive(Clone)]
pub struct Metrics {
    file: Option<Arc<Mutex<BufWriter<File>>>>,
    exporter: Option<Exporter>,
}

impl Metrics {
    /// Metrics to stdout and `path` (truncated).
    pub fn with_file(path: &Path) -> Result<Self> {
        Ok(Self {
            file: Some(Arc::new(Mutex::new(BufWriter::new(File::create(path)?)))),
            exporter: None,
        })
    }

    /// Metrics to stdout and appended to `path` (a resumed trainer keeps its history).
    pub fn appending(path: &Path) -> Result<Self> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Some(Arc::new(Mutex::new(BufWriter::new(f)))),
            exporter: None,
        })
    }

    /// Also updates `exporter` from every event.
    pub fn with_exporter(self, exporter: Option<Exporter>) -> Self {
        Self { exporter, ..self }
    }

    /// Emits one event: feeds the exporter, then writes its JSON line.
    ///
    /// # Errors
    /// A line that cannot be serialised or written to the file.
    pub fn emit(&self, event: &TrainerEvent) -> Result<()> {
        if let Some(e) = &self.exporter {
            e.observe(event);
        }
        let line = event.to_line()?;
        println!("{line}");
        if let Some(f) = &self.file {
            // A writer that panicked mid-line left at most a partial line: keep writing.
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            writeln!(f, "{line}")?;
            f.flush()?;
        }
        Ok(())
    }
}
