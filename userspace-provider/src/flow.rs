// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Flow steering rules (`ibv_create_flow`): what libroxe checks before a
//! rule goes to the kernel.
//!
//! A rule steers the frames that match it to a QP. libibverbs'
//! `ibv_cmd_create_flow` turns the `struct ibv_flow_spec_*` that follow
//! the `ibv_flow_attr` into the kernel's specifications, refusing a type it
//! does not know; the kernel then judges the rule, its QP and the
//! caller's privileges. roxe sends no driver data with it, so all that is
//! left here is the part of the header that neither of them reads.

use crate::errno::Errno;

/// Checks the `comp_mask` of an `ibv_flow_attr`. No bits are defined
/// (rdma-core reserves the field "for future extendibility"), and
/// `ibv_cmd_create_flow` does not pass it on, so any bit would be dropped
/// silently: it fails with `EOPNOTSUPP` instead.
pub fn check_attr(comp_mask: u32) -> Result<(), Errno> {
    if comp_mask != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_comp_mask_is_accepted() {
        assert_eq!(check_attr(0), Ok(()));
        for bit in 0..32 {
            assert_eq!(check_attr(1 << bit), Err(Errno::EOPNOTSUPP), "bit {bit}");
        }
        assert_eq!(check_attr(u32::MAX), Err(Errno::EOPNOTSUPP));
    }
}
