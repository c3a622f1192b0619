// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `#[repr(C)]` declarations of the libibverbs provider ABI.
//!
//! libibverbs exports its provider interface under the symbol version
//! `IBVERBS_PRIVATE_34`, and Debian installs no header for it, so roxe declares
//! the structures it uses here. They were checked against rdma-core tag
//! `v44.0` (commit `91392a91eb41affee3bd75dc7d03eb86b4854aea`, the version of
//! Debian bookworm's rdma-core 44.0-2):
//!
//! - [`ibv`]: public `libibverbs/verbs.h` (identical to the installed
//!   `/usr/include/infiniband/verbs.h`), plus the two command wrappers of the
//!   private `libibverbs/kern-abi.h` that roxe passes to libibverbs.
//! - [`verbs`]: private `libibverbs/driver.h`, plus `struct verbs_context`
//!   from `verbs.h`.
//! - [`uverbs`]: the kernel's `rdma/ib_user_verbs.h` (rdma-core's
//!   `kernel-headers/`, same layout as Linux 6.12's uapi header).
//! - [`driver`]: roxe's responses, the `uverbs` core response followed by
//!   the `roxe_uapi` driver part.
//!
//! Field names follow C, except where C uses a Rust keyword (`priv`, `match`)
//! or a non-snake-case name; those carry a trailing underscore or are lower
//! cased. The tests in `tests.rs` assert the size, alignment and every field
//! offset of each structure against numbers taken from the C headers.
//!
//! Only the layout of pointers the provider never calls matters; such
//! function pointers have the type [`OpaqueFn`].

// The sizes below (`pthread_mutex_t`, `dev_t`, `struct timespec`, pointer
// widths) were checked for x86_64 glibc only.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
compile_error!("roxe's libibverbs ABI declarations are checked for x86_64-linux-gnu only");

pub mod driver;
pub mod ibv;
pub mod uverbs;
pub mod verbs;

#[cfg(test)]
mod tests;

/// A C function pointer that roxe neither sets nor calls.
///
/// Only its size and alignment matter: it stands in for the fully typed
/// pointer in C, which is ABI-compatible with any nullable function pointer.
pub type OpaqueFn = Option<unsafe extern "C" fn()>;
