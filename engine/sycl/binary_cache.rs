//! Strata's kernel binary cache: the device binaries of built modules, so that a warm start loads
//! them without the SYCL compiler (docs/sycl.md, "Kernel binary cache").
//!
//! The runtime's own persistent cache (`SYCL_CACHE_DIR`) still runs the compiler's front end on
//! every start: it preprocesses the source to find its cache key and reads the IR back, ~170 ms
//! a module (62% of a warm SmolLM2 load). This cache keys an entry by everything that changes
//! the binary and stores what the shim's `strata_module_export` returns (the backend's binary
//! per device + the kernels' names in it); `strata_module_load` turns it back into a module in
//! ~1-3 ms.
//!
//! One entry per (source text, options, devices, runtime): `<dir>/<source>-<hash>.bin`, written
//! to a temporary file and renamed into place (readers never see half an entry; two processes
//! storing the same entry both leave a whole one). An entry holds its full key and a checksum:
//! a truncated or damaged entry is reported (one stderr line) and rebuilt from source by
//! `Context::module`; a key that differs (a hash collision, another format) is a plain miss.

use super::context::Context;
use super::device::DeviceType;
use super::ffi;
use super::kernels::KernelSource;
use std::ffi::CStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bumped when the entry layout or the key's contents change (old entries become misses).
const FORMAT: u32 = 1;
const MAGIC: &[u8; 8] = b"STRATAKC";
/// magic, format, key length, payload length, checksum
const HEADER: usize = 8 + 4 + 4 + 8 + 8;

/// Set to `0` to turn the cache off (every module is built from source, as before it existed).
pub const ENV_OFF: &str = "STRATA_KERNEL_CACHE";
/// The cache's directory instead of `<user cache>/strata/kernel-cache`.
pub const ENV_DIR: &str = "STRATA_KERNEL_CACHE_DIR";

/// A directory of kernel binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryCache {
    dir: PathBuf,
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The payload of a whole entry for this key.
    Hit(Vec<u8>),
    /// No entry for this key (or one of another format or key).
    Miss,
    /// An entry that cannot be used: why.
    Corrupt(String),
}

/// A cache key: its full text (stored in the entry and compared on read) and the entry's file.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) text: String,
    pub(crate) file: String,
}

impl BinaryCache {
    /// A cache in `dir` (created on the first store).
    pub fn at(dir: impl Into<PathBuf>) -> BinaryCache {
        BinaryCache { dir: dir.into() }
    }

    /// The process's cache: `STRATA_KERNEL_CACHE_DIR`, else `<user cache>/strata/kernel-cache`;
    /// None when `STRATA_KERNEL_CACHE=0` or there is no user cache directory. Read once.
    pub fn process() -> Option<&'static BinaryCache> {
        static CACHE: OnceLock<Option<BinaryCache>> = OnceLock::new();
        CACHE
            .get_or_init(|| {
                // both declared in the flag registry (engine/flags/table.rs), read under its
                // one convention
                if !crate::flags::on(ENV_OFF) {
                    return None;
                }
                if let Some(d) = crate::flags::flag(ENV_DIR).value() {
                    return Some(BinaryCache::at(d));
                }
                directories::ProjectDirs::from("", "", "strata")
                    .map(|d| BinaryCache::at(d.cache_dir().join("kernel-cache")))
            })
            .as_ref()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file of `key`.
    pub(crate) fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(&key.file)
    }

    /// The key of (`source`, `options`) built for `ctx`'s devices.
    pub(crate) fn key(ctx: &Context, source: &KernelSource, options: &[&str]) -> Key {
        let mut text = format!(
            "strata kernel binary cache {FORMAT}\nsource {} {} bytes {:016x}\n",
            source.name,
            source.text.len(),
            hash64(source.text.as_bytes(), SEED_A)
        );
        for o in options {
            text.push_str("option ");
            text.push_str(o);
            text.push('\n');
        }
        text.push_str(runtime_identity());
        text.push_str(&ctx.identity());
        text.push_str(env_identity());
        let file = format!(
            "{}-{:016x}{:016x}.bin",
            sanitize(source.name),
            hash64(text.as_bytes(), SEED_A),
            hash64(text.as_bytes(), SEED_B)
        );
        Key { text, file }
    }

    /// Reads the entry of `key`.
    pub(crate) fn read(&self, key: &Key) -> Lookup {
        // no file, no directory, no access: a miss; the store after the build says what is
        // wrong with the directory if it cannot write either (once a process)
        let Ok(bytes) = std::fs::read(self.path(key)) else {
            return Lookup::Miss;
        };
        parse_entry(&bytes, &key.text)
    }

    /// Stores `payload` under `key`: a temporary file renamed into place.
    pub(crate) fn write(&self, key: &Key, payload: &[u8]) -> std::io::Result<()> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            key.file,
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let res = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&entry_bytes(&key.text, payload))?;
            // the data before the name: a crash leaves the old entry or the whole new one
            f.sync_data()?;
            std::fs::rename(&tmp, self.path(key))
        })();
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res
    }
}

/// An entry: header, key text, payload.
fn entry_bytes(key: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + key.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(key.as_bytes(), payload).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(payload);
    out
}

fn parse_entry(bytes: &[u8], key: &str) -> Lookup {
    if bytes.len() < HEADER {
        return Lookup::Corrupt(format!(
            "truncated ({} bytes, no whole header)",
            bytes.len()
        ));
    }
    if &bytes[..8] != MAGIC {
        return Lookup::Corrupt("not a Strata kernel cache entry (bad magic)".into());
    }
    // the slices below have the stated lengths: HEADER bytes exist
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    if u32_at(8) != FORMAT {
        // another Strata's layout: not damage, just not ours to read
        return Lookup::Miss;
    }
    let key_len = u32_at(12) as usize;
    let payload_len = u64_at(16);
    let sum = u64_at(24);
    let want = (HEADER as u64)
        .saturating_add(key_len as u64)
        .saturating_add(payload_len);
    if bytes.len() as u64 != want {
        return Lookup::Corrupt(format!(
            "{} bytes where the header promises {want} (truncated or appended to)",
            bytes.len()
        ));
    }
    let stored_key = &bytes[HEADER..HEADER + key_len];
    let payload = &bytes[HEADER + key_len..];
    if checksum(stored_key, payload) != sum {
        return Lookup::Corrupt("checksum mismatch (damaged)".into());
    }
    if stored_key != key.as_bytes() {
        return Lookup::Miss;
    }
    Lookup::Hit(payload.to_vec())
}

const SEED_A: u64 = 0xcbf2_9ce4_8422_2325;
const SEED_B: u64 = 0x9e37_79b9_7f4a_7c15;

/// A 64-bit hash of `data` (FNV-1a over 8-byte words, then a final avalanche): file names and
/// the damage check. Stable across builds and platforms of the same byte order (the cache's key
/// holds the machine anyway); not for adversaries.
pub(crate) fn hash64(data: &[u8], seed: u64) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(PRIME);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        // chunks_exact(8) yields 8-byte slices
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(PRIME);
        h ^= h >> 29;
    }
    for &b in words.remainder() {
        h = (h ^ b as u64).wrapping_mul(PRIME);
    }
    // splitmix64's finaliser: every input bit reaches every output bit
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn checksum(key: &[u8], payload: &[u8]) -> u64 {
    hash64(payload, hash64(key, SEED_B))
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The SYCL runtime this process runs: the shim's header version, the root it was linked
/// against and the sizes of the compiler and device libraries (a reinstall of another build
/// changes them; their dates change on every unpack, so they are left out).
fn runtime_identity() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        // SAFETY: the shim returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(ffi::strata_runtime_version()) }
            .to_string_lossy()
            .into_owned();
        let root = super::runtime::root();
        let mut s = format!("runtime {version} at {}\n", root.display());
        for lib in ["libsycl.so", "libsycl-jit.so", "libintelocl.so"] {
            let size = std::fs::metadata(root.join("lib").join(lib)).map_or(0, |m| m.len());
            s.push_str(&format!("lib {lib} {size} bytes\n"));
        }
        s
    })
}

/// Environment variables that change what the compilers produce.
fn env_identity() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut vars: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
            .filter(|(k, _)| {
                ["SYCL_PROGRAM_", "CL_CONFIG_", "IGC_"]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .collect();
        vars.sort();
        vars.iter().map(|(k, v)| format!("env {k}={v}\n")).collect()
    })
}

/// The CPU's feature flags (the OpenCL CPU device compiles for the host's ISA; two machines
/// with one model name can differ, e.g. a VM without AVX-512).
pub(crate) fn cpu_flags() -> &'static str {
    static FLAGS: OnceLock<String> = OnceLock::new();
    FLAGS.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("flags"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_default()
    })
}

impl Context {
    /// What identifies this context's devices to the binary cache (computed once).
    pub(crate) fn identity(&self) -> String {
        self.0
            .identity
            .get_or_init(|| {
                let mut s = String::new();
                for (i, d) in self.devices().iter().enumerate() {
                    match d.info() {
                        Ok(info) => {
                            s.push_str(&format!(
                                "device {i}: {} | {} | {} | {} | driver {} | {} | {:?} | {} CUs | sub {} | vec {}\n",
                                info.backend,
                                info.platform,
                                info.name,
                                info.vendor,
                                info.driver_version,
                                info.version,
                                info.device_type,
                                info.compute_units,
                                info.is_sub_device,
                                info.native_vector_width_float,
                            ));
                            if info.device_type == DeviceType::Cpu {
                                s.push_str(&format!(
                                    "cpu flags {:016x}\n",
                                    hash64(cpu_flags().as_bytes(), SEED_A)
                                ));
                            }
                        }
                        // no facts: a key no other context shares, so nothing is reused
                        Err(e) => s.push_str(&format!("device {i}: unknown ({e}) {}\n", self.id())),
                    }
                }
                s
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> Key {
        Key {
            text: text.into(),
            file: "x.bin".into(),
        }
    }

    #[test]
    fn an_entry_reads_back_and_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BinaryCache::at(dir.path().join("sub"));
        let k = key("source a\noption -DX\n");
        assert!(matches!(cache.read(&k), Lookup::Miss));
        cache.write(&k, b"payload bytes").unwrap();
        match cache.read(&k) {
            Lookup::Hit(p) => assert_eq!(p, b"payload bytes"),
            other => panic!("{other:?}"),
        }
        // no temporary file left behind
        let names: Vec<_> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["x.bin"]);
        // another key under the same file name: a miss, not damage
        assert!(matches!(cache.read(&key("source b\n")), Lookup::Miss));

        let path = cache.path(&k);
        let whole = std::fs::read(&path).unwrap();
        let corrupt = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            match cache.read(&k) {
                Lookup::Corrupt(why) => why,
                other => panic!("{other:?}"),
            }
        };
        assert!(corrupt(&whole[..whole.len() - 3]).contains("truncated"));
        assert!(corrupt(&whole[..10]).contains("no whole header"));
        let mut flipped = whole.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(corrupt(&flipped).contains("checksum"));
        assert!(corrupt(b"garbage garbage garbage garbage garbage").contains("magic"));
        // another format: a miss
        let mut other = whole.clone();
        other[8] = 99;
        std::fs::write(&path, &other).unwrap();
        assert!(matches!(cache.read(&k), Lookup::Miss));
    }

    const PINNED: u64 = 1459868854745210629;

    #[test]
    fn hash_spreads_and_is_stable() {
        assert_ne!(hash64(b"", SEED_A), hash64(b"\0", SEED_A));
        assert_ne!(
            hash64(b"-DCFG_FMT_Q4_0", SEED_A),
            hash64(b"-DCFG_FMT_Q4_1", SEED_A)
        );
        assert_ne!(hash64(b"abc", SEED_A), hash64(b"abc", SEED_B));
        // pinned: entries written by one build are found by the next (a changed hash would
        // orphan every entry; bump FORMAT with it)
        assert_eq!(hash64(b"strata", SEED_A), PINNED);
        assert_eq!(sanitize("mmvq_tiled/x"), "mmvq_tiled-x");
    }
}
