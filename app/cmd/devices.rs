//! `strata devices`: every SYCL platform and device, optionally the CPU device split into
//! sub-devices (each usable by the engine as its own "card"), and a kernel build timing.

use anyhow::{Context as _, Result};
use serde::Serialize;
use std::io::{self, Write};
use std::time::Instant;
use strata::sycl::{self, DeviceInfo, DeviceType};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also partition the CPU device into N >= 2 sub-devices (partition_equally) and list them
    /// (0 or 1: no split, the device whole, as `run --split-cpu 1`).
    #[arg(long, value_name = "N")]
    split_cpu: Option<u32>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Build every kernel module of sycl/kernels/ on the default device and print the time
    /// (cold: empty caches; warm: a second run loads the kernel binary cache's device binaries).
    /// Each is then built once more from source, bypassing both the in-process map and the binary
    /// cache: what a start pays without `~/.cache/strata/kernel-cache` (STRATA_KERNEL_CACHE=0).
    #[arg(long)]
    build_kernels: bool,
}

#[derive(Serialize)]
struct PlatformOut {
    name: String,
    vendor: String,
    version: String,
    backend: String,
    devices: Vec<DeviceInfo>,
}

#[derive(Serialize)]
struct BuildOut {
    device: String,
    /// (source, first build seconds, rebuild seconds).
    modules: Vec<(String, f64, f64)>,
    total_seconds: f64,
    cache_dir: Option<String>,
}

#[derive(Serialize)]
struct Out {
    runtime_root: String,
    platforms: Vec<PlatformOut>,
    cpu_split: Option<Vec<DeviceInfo>>,
    /// The form `STRATA_VNNI=1` runs in on the default device ("avx512-vnni", "avx2"), or why
    /// it cannot run there (engine/kernels/vnni.rs).
    int_dot: String,
    kernel_build: Option<BuildOut>,
}

pub fn run(args: Args) -> Result<()> {
    sycl::runtime::init();
    let t0 = Instant::now();
    let platforms = sycl::platforms().context("enumerating SYCL platforms")?;
    let mut out = Out {
        runtime_root: sycl::runtime::BUILT_ROOT.to_string(),
        platforms: Vec::new(),
        cpu_split: None,
        int_dot: String::new(),
        kernel_build: None,
    };
    for p in &platforms {
        out.platforms.push(PlatformOut {
            name: p.info.name.clone(),
            vendor: p.info.vendor.clone(),
            version: p.info.version.clone(),
            backend: p.info.backend.clone(),
            devices: p
                .devices
                .iter()
                .map(|d| d.info())
                .collect::<Result<_, _>>()?,
        });
    }
    if out.platforms.iter().all(|p| p.devices.is_empty()) {
        anyhow::bail!(sycl::runtime::no_device_message("device"));
    }
    if let Some(n) = args.split_cpu.filter(|&n| n >= 2) {
        let cpu = sycl::cpu_device()?;
        let subs = cpu
            .split(n)
            .with_context(|| format!("--split-cpu {n}: splitting the CPU device into {n}"))?;
        out.cpu_split = Some(subs.iter().map(|d| d.info()).collect::<Result<_, _>>()?);
    }
    let dev = sycl::default_device()?;
    let ctx = sycl::Context::new(std::slice::from_ref(&dev))?;
    // x86 assembly, in the ISA this CPU has: the CPU device's only (engine/kernels/vnni.rs)
    let vnni_isa = strata::kernels::vnni::isa(&ctx);
    out.int_dot = match &vnni_isa {
        Ok(isa) => isa.label().to_string(),
        Err(why) => format!("cannot run: {why}"),
    };
    if args.build_kernels {
        let t = Instant::now();
        let mut modules = Vec::new();
        for src in sycl::kernels::ALL {
            let mut opts: Vec<&str> = Vec::new();
            if src.name == sycl::kernels::MMVQ_VNNI.name {
                match vnni_isa {
                    Ok(isa) => opts.extend(isa.option()),
                    Err(_) => continue,
                }
            }
            let m = ctx.module(src, &opts)?;
            // `module` loaded the stored device binary, or built from source and stored it
            // (docs/sycl.md, "Kernel binary cache"); this source build, bypassing the in-process
            // map and that cache, shows what a start pays without it.
            let again = ctx.build(src.name, src.text, &opts)?;
            modules.push((
                src.name.to_string(),
                m.build_time().as_secs_f64(),
                again.build_time().as_secs_f64(),
            ));
        }
        out.kernel_build = Some(BuildOut {
            device: dev.info()?.name,
            modules,
            total_seconds: t.elapsed().as_secs_f64(),
            cache_dir: std::env::var("SYCL_CACHE_DIR").ok(),
        });
    }
    let mut w = super::common::stdout();
    if args.json {
        writeln!(w, "{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(());
    }
    writeln!(w, "SYCL runtime: {}", out.runtime_root)?;
    for (pi, p) in out.platforms.iter().enumerate() {
        writeln!(
            w,
            "platform {pi}: {} [{}] ({}, {})",
            p.name, p.backend, p.vendor, p.version
        )?;
        for (di, d) in p.devices.iter().enumerate() {
            print_device(&mut w, &format!("  device {pi}.{di}"), d)?;
        }
    }
    if let Some(n @ (0 | 1)) = args.split_cpu {
        writeln!(
            w,
            "CPU device not split (--split-cpu {n}: the device whole)"
        )?;
    }
    if let Some(subs) = &out.cpu_split {
        writeln!(w, "CPU split into {} sub-devices:", subs.len())?;
        for (i, d) in subs.iter().enumerate() {
            print_device(&mut w, &format!("  card {i}"), d)?;
        }
    }
    writeln!(w, "STRATA_VNNI integer-dot products: {}", out.int_dot)?;
    if let Some(b) = &out.kernel_build {
        writeln!(w, "kernel modules built on {}:", b.device)?;
        for (name, first, again) in &b.modules {
            writeln!(
                w,
                "  {name:<16} {first:>8.3} s (from source again {again:.3} s)"
            )?;
        }
        writeln!(
            w,
            "  total {:.3} s (cache dir {})",
            b.total_seconds,
            b.cache_dir.as_deref().unwrap_or("-")
        )?;
    }
    eprintln!("({:.2} s)", t0.elapsed().as_secs_f64());
    Ok(())
}

fn mib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn print_device(w: &mut impl Write, label: &str, d: &DeviceInfo) -> io::Result<()> {
    let ty = match d.device_type {
        DeviceType::Cpu => "cpu",
        DeviceType::Gpu => "gpu",
        DeviceType::Accelerator => "accelerator",
        DeviceType::Other => "other",
    };
    writeln!(
        w,
        "{label}: {} [{} {ty}{}]",
        d.name,
        d.backend,
        if d.is_sub_device { ", sub-device" } else { "" }
    )?;
    writeln!(
        w,
        "      compute units {}, global mem {}, local mem {}, max alloc {}, max work-group {}",
        d.compute_units,
        mib(d.global_mem),
        mib(d.local_mem),
        mib(d.max_alloc),
        d.max_work_group
    )?;
    writeln!(
        w,
        "      sub-group sizes {:?}, float vector width {}, fp16 {}, fp64 {}, graphs {}, driver {}",
        d.sub_group_sizes,
        d.native_vector_width_float,
        yes(d.fp16),
        yes(d.fp64),
        d.graphs,
        d.driver_version
    )
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
