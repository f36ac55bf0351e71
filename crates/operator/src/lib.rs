//! The operator shell. Does IO.
#![forbid(unsafe_code)]
