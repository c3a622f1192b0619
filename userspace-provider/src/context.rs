// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The provider's context object.

use crate::abi::verbs;

/// A roxe context: libibverbs' `verbs_context` followed by roxe's own state.
///
/// `_verbs_init_and_alloc_context` allocates it zero-filled with `calloc` and
/// initialises `verbs`; `free_context` tears `verbs` down and frees it.
///
/// # Invariants
///
/// An all-zero `Context` outside `verbs` is a valid value, because that is
/// what `calloc` hands over. Fields added later must keep this or be
/// initialised in `alloc_context` before the context is returned.
#[repr(C)]
pub struct Context {
    /// libibverbs' part.
    pub verbs: verbs::Context,
}
