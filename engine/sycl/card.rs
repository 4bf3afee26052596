//! A "card": one device with its context and in-order queue, the unit the engine places work on.
//! A real GPU is one card; the CPU device can be split into several (`Card::split_cpu`).

use super::context::{Context, Queue};
use super::device::{cpu_device, default_device, Device};
use super::error::Result;
use super::kernels::KernelSource;
use super::module::{Kernel, Module};
use std::sync::Arc;

#[derive(Clone)]
pub struct Card {
    pub device: Device,
    pub context: Context,
    pub queue: Queue,
}

impl Card {
    /// The default device (a Level Zero GPU if present, else the CPU device), own context.
    pub fn default_card() -> Result<Card> {
        Card::on(default_device()?, false)
    }

    /// The CPU device, own context.
    pub fn cpu() -> Result<Card> {
        Card::on(cpu_device()?, false)
    }

    /// `device` with a fresh context and in-order queue (profiling on request).
    pub fn on(device: Device, profiling: bool) -> Result<Card> {
        let context = Context::new(std::slice::from_ref(&device))?;
        let queue = if profiling {
            context.profiling_queue(&device)?
        } else {
            context.queue(&device)?
        };
        Ok(Card {
            device,
            context,
            queue,
        })
    }

    /// The CPU device split into `n` sub-device cards sharing one context (so one module build
    /// serves all; copies between them go through `copy_across`).
    pub fn split_cpu(n: u32) -> Result<Vec<Card>> {
        let subs = cpu_device()?.split(n)?;
        let context = Context::new(&subs)?;
        subs.into_iter()
            .map(|device| {
                Ok(Card {
                    queue: context.queue(&device)?,
                    context: context.clone(),
                    device,
                })
            })
            .collect()
    }

    /// The cached module for (`source`, `options`) in this card's context.
    pub fn module(&self, source: &KernelSource, options: &[&str]) -> Result<Arc<Module>> {
        self.context.module(source, options)
    }

    /// Shortcut: one kernel of a cached module.
    pub fn kernel(&self, source: &KernelSource, options: &[&str], name: &str) -> Result<Kernel> {
        self.module(source, options)?.kernel(name)
    }
}
