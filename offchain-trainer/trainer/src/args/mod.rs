//! The command line: each subcommand's flags (clap) and their conversion into the typed
//! configuration the libraries run ([`synod_member::config`], the benchmarks', the
//! dashboard's). Nothing below `main` reads a flag.

pub mod bench;
pub mod chain;
pub mod dashboard;
pub mod recipe;
pub mod run;
pub mod train;
