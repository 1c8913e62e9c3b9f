//! `synod-node`: the Synod validator node.
#![warn(missing_docs)]
// `sc_cli::Error` and `sc_service::Error` are Substrate's; boxing them would only add noise.
#![allow(clippy::result_large_err)]

mod chain_spec;
mod cli;
mod command;
mod randomness;
mod rpc;
mod service;

fn main() -> sc_cli::Result<()> {
    command::run()
}
