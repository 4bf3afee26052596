// Placeholder: the SYCL shim build lands with the foundation work (issue 2).
fn main() {}
