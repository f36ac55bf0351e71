//! The AWS adapter against moto behind the gap proxy, without the operator (`make e2e`, side by
//! side), one module per concern, in one test binary. Does IO (moto).

mod facts;
mod faults;
mod sweep;
