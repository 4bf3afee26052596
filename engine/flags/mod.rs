//! Every environment variable the engine reads, declared once (`table::FLAGS`): its values, its
//! default, whether it changes results bitwise, its help, and what it applies to (weight
//! formats, an architecture, the hardware). One parsing convention (`env`). The engine process's
//! `hello` (server/flags.rs), the toggles pane, `docs/flags.md`'s table and `strata flags` all
//! come from this table; a flag that names hardware or a model this engine does not have says
//! so (`Flag::applies`) instead of pretending to act.

pub mod doc;
pub mod env;
pub mod table;

pub use table::FLAGS;

/// A switch's or a value's type and default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `1` on, `0` off, unset or empty the default (`env::switch`).
    Switch { default: bool },
    /// Free text for the flag's own parser; `values` says what it takes, `default` what unset
    /// means.
    Value {
        values: &'static str,
        default: &'static str,
    },
}

/// What a flag does to the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bitwise {
    /// Every logit the same bits either way (a test says which).
    Yes,
    /// Other results, within the bound or effect said.
    No(&'static str),
    /// Touches no result: where the work runs or what is cached.
    NoResult,
}

/// Which part of the engine reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Selects a kernel family.
    Kernel,
    /// A fusion of the model layer's planner (engine/model/plan/).
    Plan,
    /// How the weights are loaded.
    Load,
    /// The host thread or the SYCL runtime.
    Runtime,
    /// Where setup put things (paths).
    Setup,
}

/// The hardware a flag needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hardware {
    Any,
    /// The OpenCL CPU device.
    CpuDevice,
    /// The OpenCL CPU device on a CPU with AVX-512 VNNI or AVX2 (engine/kernels/vnni.rs).
    CpuIntDot,
}

/// What a flag applies to: a model storing one of `formats` (empty: any), of architecture
/// `arch` (None: any), on `hardware`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    pub formats: &'static [&'static str],
    /// The `general.architecture` names it acts on, '|' between them (None: any).
    pub arch: Option<&'static str>,
    pub hardware: Hardware,
}

impl Needs {
    pub const ANY: Needs = Needs {
        formats: &[],
        arch: None,
        hardware: Hardware::Any,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag {
    pub name: &'static str,
    pub kind: Kind,
    pub bitwise: Bitwise,
    pub scope: Scope,
    pub needs: Needs,
    /// Reported in the engine's `hello` and offered by the toggles pane (the opt-in kernel
    /// variants a user A/Bs); the rest are measurement and setup knobs.
    pub toggle: bool,
    /// One line.
    pub help: &'static str,
}

/// What is known about the model and the device when judging a flag (None: not known yet).
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// `general.architecture`.
    pub arch: Option<&'a str>,
    /// The ggml type names the model's tensors are stored in.
    pub formats: Option<&'a [String]>,
    /// Whether the engine runs on the OpenCL CPU device.
    pub cpu_device: Option<bool>,
}

impl Flag {
    /// Ok(()) if the flag can act on this model and device, else why not. Unknown facts are
    /// taken to fit; an architecture this engine does not run never does.
    pub fn applies(&self, f: &Facts) -> Result<(), String> {
        if let Some(archs) = self.needs.arch {
            // ('|' between the architectures a flag acts on)
            let words = archs.replace('|', " or ");
            if archs
                .split('|')
                .all(|a| crate::gguf::Arch::from_name(a).is_none())
            {
                return Err(format!(
                    "acts on {words} models, which this engine does not run yet"
                ));
            }
            if f.arch.is_some_and(|a| !archs.split('|').any(|x| x == a)) {
                return Err(format!("acts on {words} models only"));
            }
        }
        if let Some(types) = f.formats {
            let wanted = self.needs.formats;
            if !wanted.is_empty() && !types.iter().any(|t| wanted.contains(&t.as_str())) {
                return Err(format!("model stores none of {}", wanted.join("/")));
            }
        }
        match (self.needs.hardware, f.cpu_device) {
            (Hardware::CpuDevice | Hardware::CpuIntDot, Some(false)) => {
                Err("acts on the OpenCL CPU device only".into())
            }
            _ => Ok(()),
        }
    }

    /// The switch's value under the convention (`env::switch`); a value flag: whether it is set.
    pub fn on(&self) -> bool {
        match self.kind {
            Kind::Switch { default } => env::switch(self.name, default),
            Kind::Value { .. } => env::value(self.name).is_some(),
        }
    }

    /// The value flag's text, None when unset or empty.
    pub fn value(&self) -> Option<String> {
        env::value(self.name)
    }
}

/// The flag called `name`.
pub fn get(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

/// The flag called `name`, which the engine's code names as a constant of this table.
pub fn flag(name: &str) -> &'static Flag {
    // (every caller passes a name from table.rs; `tests::every_read_is_declared` checks the
    // engine's sources name no other)
    get(name).unwrap_or_else(|| panic!("{name} is not declared in engine/flags/table.rs"))
}

/// The switch `name` (declared in the table) under the convention.
pub fn on(name: &str) -> bool {
    flag(name).on()
}

/// The flags the toggles pane offers and `hello` reports.
pub fn toggles() -> impl Iterator<Item = &'static Flag> {
    FLAGS.iter().filter(|f| f.toggle)
}

#[cfg(test)]
mod tests;
