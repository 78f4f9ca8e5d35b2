//! klog's flags, which upstream's programs add with `klog.InitFlags` (Go flag names
//! with underscores; `-v`/`--v` for the verbosity). `--v` sets the log level here
//! (0–3 info, 4–5 debug, 6 and up trace); the others are accepted and do nothing, as
//! this controller always logs to stderr.

use super::parse_go_bool;

/// klog's command-line flags (klog/v2 `InitFlags`).
#[derive(clap::Args, Debug, Clone)]
pub struct KlogFlags {
    /// number for the log level verbosity
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub v: u32,
    /// comma-separated list of pattern=N settings for file-filtered logging
    #[arg(long = "vmodule", default_value = "")]
    pub vmodule: String,
    /// If non-empty, write log files in this directory (no effect when -logtostderr=true)
    #[arg(long = "log_dir", default_value = "")]
    pub log_dir: String,
    /// If non-empty, use this log file (no effect when -logtostderr=true)
    #[arg(long = "log_file", default_value = "")]
    pub log_file: String,
    /// Defines the maximum size a log file can grow to (no effect when -logtostderr=true). Unit is megabytes.
    #[arg(long = "log_file_max_size", default_value_t = 1800)]
    pub log_file_max_size: u64,
    /// log to standard error instead of files
    #[arg(long = "logtostderr", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = parse_go_bool)]
    pub logtostderr: bool,
    /// log to standard error as well as files (no effect when -logtostderr=true)
    #[arg(long = "alsologtostderr", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub alsologtostderr: bool,
    /// If true, adds the file directory to the header of the log messages
    #[arg(long = "add_dir_header", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub add_dir_header: bool,
    /// If true, avoid header prefixes in the log messages
    #[arg(long = "skip_headers", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub skip_headers: bool,
    /// If true, only write logs to their native severity level (vs also writing to each lower severity level; no effect when -logtostderr=true)
    #[arg(long = "one_output", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub one_output: bool,
    /// If true, avoid headers when opening log files (no effect when -logtostderr=true)
    #[arg(long = "skip_log_headers", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub skip_log_headers: bool,
    /// logs at or above this threshold go to stderr when writing to files and stderr (no effect when -logtostderr=true or -alsologtostderr=true)
    #[arg(long = "stderrthreshold", default_value = "2")]
    pub stderrthreshold: String,
    /// when logging hits line file:N, emit a stack trace
    #[arg(long = "log_backtrace_at", default_value = ":0")]
    pub log_backtrace_at: String,
}

impl KlogFlags {
    /// The tracing filter of `--v`.
    pub fn filter(&self) -> &'static str {
        match self.v {
            0..=3 => "info",
            4..=5 => "debug",
            _ => "trace",
        }
    }
}
