// SPDX-License-Identifier: GPL-2.0

//! Flow steering rules (`struct ib_flow`, `ibv_create_flow`): which frames
//! a raw packet QP receives.
//!
//! The core turns the user's specs into `union ib_flow_spec`s laid end to
//! end after a `struct ib_flow_attr`; this file reads them into a
//! [`Rule`] (`rust/proto`'s, which the host tests match frames against)
//! and refuses what roxe does not match on.

use super::device::Driver;
use super::qp::Qp;
use super::udata::UData;
use crate::bindings;
use crate::proto::flow::{EthFilter, Ipv4Filter, Ipv6Filter, L4Proto, PortFilter, Rule};
use kernel::alloc::KBox;
use kernel::error::{code::*, Error, Result};
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of a flow, implemented by the driver's per-flow state, whose
/// drop stops the steering (in process context: it may sleep).
#[vtable]
pub(crate) trait FlowOps<T: Driver>: Send + Sync + Sized {
    /// Steers the frames `rule` matches to `qp`. `dont_trap`: the user
    /// asked that the frames go on to the stack too
    /// (`IB_FLOW_ATTR_FLAGS_DONT_TRAP`).
    fn create(qp: &Qp<T>, rule: &Rule, dont_trap: bool) -> Result<Self>;
}

/// A flow of driver `T`: allocated by [`create_cb`], freed by
/// [`destroy_cb`].
///
/// # Invariants
///
/// `ib` is first, so the core's `ib_flow` pointer is this value's; `data`
/// is initialised while the `KBox` lives.
#[repr(C)]
pub(crate) struct Flow<T: Driver> {
    ib: Opaque<bindings::ib_flow>,
    data: T::Flow,
}

/// `IB_FLOW_ATTR_FLAGS_DONT_TRAP`: the frame goes on to the stack too,
/// which is what a copy does anyway.
const DONT_TRAP: u32 = bindings::ib_flow_flags_IB_FLOW_ATTR_FLAGS_DONT_TRAP;

/// Reads one spec of type `S` at `p` if its `size` is `S`'s.
///
/// # Safety
///
/// `p` is readable for `size` bytes.
unsafe fn spec<S>(p: *const u8, size: usize) -> Result<S> {
    if size != core::mem::size_of::<S>() {
        return Err(EINVAL);
    }
    // SAFETY: Readable for `size` bytes (the contract), which is `S`'s
    // size; specs are plain data, and may be unaligned.
    Ok(unsafe { core::ptr::read_unaligned(p.cast::<S>()) })
}

fn eth(f: &bindings::ib_flow_eth_filter) -> EthFilter {
    EthFilter {
        dst_mac: f.dst_mac,
        src_mac: f.src_mac,
        ether_type: u16::from_be(f.ether_type),
    }
}

fn ipv4(f: &bindings::ib_flow_ipv4_filter) -> Ipv4Filter {
    Ipv4Filter {
        src: f.src_ip.to_ne_bytes(),
        dst: f.dst_ip.to_ne_bytes(),
        proto: f.proto,
        tos: f.tos,
        ttl: f.ttl,
    }
}

fn ipv6(f: &bindings::ib_flow_ipv6_filter) -> Ipv6Filter {
    Ipv6Filter {
        src: f.src_ip,
        dst: f.dst_ip,
        flow_label: u32::from_be(f.flow_label),
        next_hdr: f.next_hdr,
        traffic_class: f.traffic_class,
        hop_limit: f.hop_limit,
    }
}

fn ports(f: &bindings::ib_flow_tcp_udp_filter) -> PortFilter {
    PortFilter {
        src: u16::from_be(f.src_port),
        dst: u16::from_be(f.dst_port),
    }
}

/// The rule a flow attribute describes. `EOPNOTSUPP` for what roxe does
/// not steer by (another attribute type than `NORMAL`, VLAN tags, IPv4
/// flags, inner headers, tunnels, actions), `EINVAL` for a malformed list.
///
/// # Safety
///
/// `attr` is a valid `ib_flow_attr` whose `size` bytes (the header and
/// its specs) are readable.
unsafe fn rule_of(attr: *const bindings::ib_flow_attr) -> Result<Rule> {
    // SAFETY: Per the contract.
    let a = unsafe { &*attr };
    if a.type_ != bindings::ib_flow_attr_type_IB_FLOW_ATTR_NORMAL || a.flags & !DONT_TRAP != 0 {
        return Err(super::errno::eopnotsupp());
    }
    let total = usize::from(a.size);
    let head = core::mem::offset_of!(bindings::ib_flow_attr, flows);
    let mut off = head;
    let mut rule = Rule::new();
    let bad = |_| EINVAL;
    for _ in 0..a.num_of_specs {
        // The common header of a spec: its type and size.
        let hdr = core::mem::size_of::<u32>() + core::mem::size_of::<u16>();
        if off + hdr > total {
            return Err(EINVAL);
        }
        // SAFETY: `off + hdr <= size`, inside the readable attribute.
        let p = unsafe { attr.cast::<u8>().add(off) };
        // SAFETY: As above; unaligned reads of plain integers.
        let (ty, size) = unsafe {
            (
                core::ptr::read_unaligned(p.cast::<u32>()),
                usize::from(core::ptr::read_unaligned(p.add(4).cast::<u16>())),
            )
        };
        if size < hdr || off + size > total {
            return Err(EINVAL);
        }
        match ty {
            bindings::ib_flow_spec_type_IB_FLOW_SPEC_ETH => {
                // SAFETY: `size` bytes at `p` are inside the attribute.
                let s: bindings::ib_flow_spec_eth = unsafe { spec(p, size)? };
                if s.mask.vlan_tag != 0 {
                    return Err(super::errno::eopnotsupp());
                }
                rule.add_eth(eth(&s.val), eth(&s.mask)).map_err(bad)?;
            }
            bindings::ib_flow_spec_type_IB_FLOW_SPEC_IPV4 => {
                // SAFETY: As above.
                let s: bindings::ib_flow_spec_ipv4 = unsafe { spec(p, size)? };
                if s.mask.flags != 0 {
                    return Err(super::errno::eopnotsupp());
                }
                rule.add_ipv4(ipv4(&s.val), ipv4(&s.mask)).map_err(bad)?;
            }
            bindings::ib_flow_spec_type_IB_FLOW_SPEC_IPV6 => {
                // SAFETY: As above.
                let s: bindings::ib_flow_spec_ipv6 = unsafe { spec(p, size)? };
                rule.add_ipv6(ipv6(&s.val), ipv6(&s.mask)).map_err(bad)?;
            }
            bindings::ib_flow_spec_type_IB_FLOW_SPEC_TCP
            | bindings::ib_flow_spec_type_IB_FLOW_SPEC_UDP => {
                // SAFETY: As above.
                let s: bindings::ib_flow_spec_tcp_udp = unsafe { spec(p, size)? };
                let proto = if ty == bindings::ib_flow_spec_type_IB_FLOW_SPEC_TCP {
                    L4Proto::Tcp
                } else {
                    L4Proto::Udp
                };
                rule.add_l4(proto, ports(&s.val), ports(&s.mask))
                    .map_err(bad)?;
            }
            _ => return Err(super::errno::eopnotsupp()),
        }
        off += size;
    }
    Ok(rule)
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for `ib_uverbs_ex_create_flow`: `qp` is an initialised QP of this driver the core
/// holds, `attr` a valid flow attribute with its specs.
pub(super) unsafe extern "C" fn create_cb<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_flow_attr,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_flow {
    let made = (|| -> Result<*mut bindings::ib_flow> {
        // SAFETY: NULL or the call's valid udata.
        if let Some(u) = unsafe { UData::from_raw(udata) } {
            u.expect_no_input()?;
        }
        // SAFETY: Per the function's contract.
        let rule = unsafe { rule_of(attr)? };
        // SAFETY: As above.
        let dont_trap = unsafe { (*attr).flags } & DONT_TRAP != 0;
        // SAFETY: An initialised QP of this driver, held by the core.
        let q = unsafe { &*qp.cast::<Qp<T>>() };
        let data = <T::Flow as FlowOps<T>>::create(q, &rule, dont_trap)?;
        // On failure `data` is dropped, which undoes its steering.
        let flow = KBox::new(
            Flow::<T> {
                ib: Opaque::uninit(),
                data,
            },
            kernel::alloc::flags::GFP_KERNEL,
        )?;
        // INVARIANT: `ib` is the first field; the core fills it in.
        Ok(KBox::into_raw(flow).cast::<bindings::ib_flow>())
    })();
    match made {
        Ok(p) => p,
        Err(e) => err_ptr(e),
    }
}

fn err_ptr<P>(e: Error) -> *mut P {
    // CAST: `ERR_PTR`: a small negative errno stored in a pointer.
    e.to_errno() as isize as *mut P
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, once for a flow [`create_cb`] returned.
pub(super) unsafe extern "C" fn destroy_cb<T: Driver>(flow: *mut bindings::ib_flow) -> i32 {
    // Dropping the driver's state stops the steering.
    // SAFETY: `create_cb` made `flow` from a `KBox<Flow<T>>` (its first
    // field), and the core gives it back once.
    drop(unsafe { KBox::from_raw(flow.cast::<Flow<T>>()) });
    0
}
