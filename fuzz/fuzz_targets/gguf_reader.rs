//! Arbitrary bytes into the GGUF reader; on success, walk everything a caller could touch
//! (every metadata value and its rendering, typed accessors, hyper-parameters, every tensor's
//! data view). Any panic, overflow, or out-of-bounds access is a finding.
//!
//! The target compiles `engine/gguf/` as a module of its own instead of depending on the
//! `strata` crate, so the fuzz build does not build the SYCL shim under the sanitizers; the
//! gguf module only refers to itself (`super::`), which keeps this possible.
#![no_main]

#[path = "../../engine/gguf/mod.rs"]
#[allow(dead_code, unused_imports)]
mod gguf;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(g) = gguf::Gguf::from_bytes(data.to_vec()) else {
        return;
    };
    let mut sink = 0usize;
    for (k, v) in g.metadata() {
        sink += k.len() + v.to_string().len() + v.type_name().len();
        let _ = g.get_u32(k);
        let _ = g.get_f32(k);
        let _ = g.get_str_array(k);
        let _ = g.get_i64(k);
    }
    for t in g.tensors() {
        let bytes = g
            .tensor_data(t)
            .expect("validated tensors have data in the file");
        assert_eq!(bytes.len() as u64, t.n_bytes);
        sink += t.n_rows() as usize + t.row_bytes() as usize;
    }
    if let Ok(h) = gguf::HParams::from_gguf(&g) {
        sink += h.block_count as usize;
    }
    std::hint::black_box(sink);
});
