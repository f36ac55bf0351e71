//! The functional core: pure checks from observed facts to a KarpenterHealth status. No IO.
#![forbid(unsafe_code)]

pub mod facts;
