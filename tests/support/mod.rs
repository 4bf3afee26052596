// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

pub mod fs;
pub mod matrix;
pub mod model;
