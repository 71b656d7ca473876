//! `snowline demo`: the main job.
use anyhow::Result;
use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> Result<()> {
    anyhow::bail!("demo is not wired yet")
}
