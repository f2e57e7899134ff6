//! Checked conversions of the raw pointers that arrive through the C ABI.
use std::ffi::{c_char, CStr};

use crate::status::{FfiError, FfiResult, Status};

/// A byte slice from (ptr, len); a NULL pointer is allowed only with len 0.
///
/// # Safety
/// `ptr` must point to `len` readable bytes that stay valid for the returned lifetime.
pub unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> FfiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL buffer with a length"));
    }
    // SAFETY: non-NULL and, by the caller's contract, `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A slice of `len` values from (ptr, len); a NULL pointer is allowed only with len 0.
///
/// # Safety
/// `ptr` must point to `len` readable values that stay valid for the returned lifetime.
pub unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> FfiResult<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL array with a length"));
    }
    // SAFETY: non-NULL and, by the caller's contract, `len` readable values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A UTF-8 string from a NUL-terminated C string.
///
/// # Safety
/// `ptr` must be NULL or a valid NUL-terminated string.
pub unsafe fn str<'a>(ptr: *const c_char) -> FfiResult<&'a str> {
    if ptr.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL string"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str()
        .map_err(|_| FfiError::new(Status::Invalid, "name is not UTF-8"))
}

/// A mutable reference from a handle pointer.
///
/// # Safety
/// `ptr` must be NULL or a live handle of type T made by this crate, not aliased.
pub unsafe fn handle<'a, T>(ptr: *mut T) -> FfiResult<&'a mut T> {
    // SAFETY: by the caller's contract the pointer is NULL or a live, unaliased handle.
    unsafe { ptr.as_mut() }.ok_or_else(|| FfiError::new(Status::Invalid, "NULL handle"))
}

/// Writes through an out-pointer.
///
/// # Safety
/// `ptr` must be NULL or valid for a write of T.
pub unsafe fn write_out<T>(ptr: *mut T, value: T) -> FfiResult<()> {
    if ptr.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL out-pointer"));
    }
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { ptr.write(value) };
    Ok(())
}
