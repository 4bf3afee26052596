//! Argument checks shared by the float-kernel launchers: sizes become the kernels' `int`s, and
//! every buffer must hold the elements a launch will touch (a short buffer is an error naming the
//! kernel and argument, never an out-of-bounds device access).

use crate::sycl::{DeviceBuffer, Result, SyclError};

/// `v` as a kernel `int`, or an error naming the kernel and the argument.
pub fn int(op: &'static str, what: &str, v: usize) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| SyclError::invalid(op, format!("{what} = {v} does not fit a 32-bit int")))
}

/// Checks that `buf` holds at least `need` elements.
pub fn holds<T: Copy>(
    op: &'static str,
    what: &str,
    buf: &DeviceBuffer<T>,
    need: usize,
) -> Result<()> {
    if buf.len() < need {
        return Err(SyclError::invalid(
            op,
            format!(
                "{what} holds {} elements, the launch needs {need}",
                buf.len()
            ),
        ));
    }
    Ok(())
}

/// `a * b` (and more), or an error when the product overflows.
pub fn prod(op: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        acc.checked_mul(d)
            .ok_or_else(|| SyclError::invalid(op, format!("shape {dims:?} overflows")))
    })
}

/// Smallest multiple of `m` that is >= `n`.
pub fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

/// An error unless `cond`.
pub fn ensure(op: &'static str, cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(SyclError::invalid(op, msg()))
    }
}
