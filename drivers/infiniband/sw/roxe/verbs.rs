// SPDX-License-Identifier: GPL-2.0

//! The verbs: roxe's `Driver` implementation and its objects' ops traits,
//! which hand each verb to the module of its object, and device creation through `rdma link add`
//! ([`Link`]), with the device's attributes.

use crate::ah::{self, RoxeAh};
use crate::cq::{self, RoxeCq};
use crate::device::{Roxe, RoxeDev};
use crate::limits::{
    MAX_AH, MAX_CQ, MAX_CQE, MAX_MR, MAX_MR_SIZE, MAX_MW, MAX_PD, MAX_QP, MAX_QP_RD_ATOM,
    MAX_QP_WR, MAX_RES_RD_ATOM, MAX_SRQ, MAX_SRQ_SGE, MAX_SRQ_WR, PORT,
};
use crate::mr::{self, RoxeMr};
use crate::mw::{self, RoxeMw};
use crate::net::NetDevice;
use crate::pd::{self, RoxePd};
use crate::proto::mtu::IbMtu;
use crate::proto::wr::MAX_SGE;
use crate::qp::{self, RoxeQp};
use crate::rdma::ah::{AhAttr, AhOps};
use crate::rdma::attr::{
    DeviceAttr, PhysState, PortAttr, PortImmutable, PortState, MGMT_MAD_SIZE, PORT_CM_SUP,
};
use crate::rdma::attr::{
    OdpCaps, ODP_ATOMIC, ODP_ATOMIC_WRITE, ODP_FLUSH, ODP_READ, ODP_RECV, ODP_SEND, ODP_SRQ_RECV,
    ODP_SUPPORT, ODP_SUPPORT_IMPLICIT, ODP_WRITE,
};
use crate::rdma::cq::{Cq, CqInit, CqOps, Notify, Wc};
use crate::rdma::device::{
    Device, DeviceInfo, Driver, NewDevice, ParentDevice, DRIVER_ID_UNKNOWN, MAD_LEN,
};
use crate::rdma::link::LinkOps;
use crate::rdma::mr::{Advice, AdviseSge, DmaBufMrArgs, Mr, MrInfo, MrOps, Rereg, UserMrArgs};
use crate::rdma::mw::{MwOps, MwType};
use crate::rdma::pd::{Pd, PdOps};
use crate::rdma::qp::{NewQp, Qp, QpAttr, QpCap, QpInit, QpOps, QpTimer, ResAttrs, Sge};
use crate::rdma::srq::{Srq, SrqAttr, SrqModify, SrqOps};
use crate::rdma::sysfs::Buffer;
use crate::rdma::udata::UData;
use crate::rdma::xrcd::XrcdId;
use crate::srq::{self, RoxeSrq};
use crate::uapi;
use core::fmt::Write;
use kernel::c_str;
use kernel::error::code::{EEXIST, EINVAL, ENODEV, ENOSPC, EPERM};
use kernel::prelude::*;
use kernel::str::CStr;

/// Entries in the port's GID table (the RDMA core fills them from the
/// netdev's IP addresses).
const GID_TABLE_LEN: u32 = 1024;

/// Largest message a port accepts, the same as rxe.
const PORT_MAX_MSG_SIZE: u32 = 0x80_0000;

/// The vendor id rxe also uses for a software device with no OUI.
const VENDOR_ID: u32 = 0xFF_FFFF;

/// The default full-membership P_Key, the only entry of the table.
const DEFAULT_PKEY: u16 = 0xFFFF;

/// The attribute libroxe looks for; its name is part of the shared ABI.
const ABI_ATTR: &CStr = match CStr::from_bytes_with_nul(uapi::ABI_VERSION_ATTR.to_bytes_with_nul())
{
    Ok(name) => name,
    Err(_) => panic!("the ABI attribute name is not a C string"),
};

/// The capability flags roxe can stand behind today.
const DEVICE_CAPS: u64 = crate::rdma::attr::CAP_PORT_ACTIVE_EVENT
    | crate::rdma::attr::CAP_SYS_IMAGE_GUID
    | crate::rdma::attr::CAP_MEM_MGT_EXTENSIONS
    | crate::rdma::attr::CAP_MEM_WINDOW
    | crate::rdma::attr::CAP_MEM_WINDOW_TYPE_2B
    | crate::rdma::attr::CAP_ATOMIC_WRITE
    | crate::rdma::attr::CAP_RC_RNR_NAK_GEN
    | crate::rdma::attr::CAP_SRQ_RESIZE
    | crate::rdma::attr::CAP_FLUSH_GLOBAL
    | crate::rdma::attr::CAP_XRC;

#[vtable]
impl Driver for Roxe {
    type Data = RoxeDev;
    type Flow = crate::raw::RoxeFlow;
    type Wq = crate::wq::RoxeWq;
    type IndTable = crate::wq::RoxeIndTable;

    // The kernel's `enum rdma_driver_id` has no roxe entry. libroxe matches
    // devices by the `roxe_abi_version` attribute instead.
    const DRIVER_ID: crate::rdma::device::DriverId = DRIVER_ID_UNKNOWN;
    const UVERBS_ABI_VER: u32 = uapi::UVERBS_ABI_VERSION;
    const ATTRS: &'static [&'static CStr] = &[c_str!("parent"), ABI_ATTR];
    const HW_COUNTERS: &'static [&'static CStr] = &crate::counters::NAMES;

    fn hw_counters(dev: &Device<Self>, out: &mut [u64]) {
        dev.data().counters.read(out);
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        mad: &[u8; MAD_LEN],
        out: &mut [u8; MAD_LEN],
    ) -> bool {
        // One port: any other number is refused by the agent (PortSelect).
        let port = u8::try_from(port).unwrap_or(0);
        crate::proto::pma::process(mad, port, &dev.data().counters, out)
    }

    fn alloc_xrcd(dev: &Device<Self>, udata: Option<&UData<'_>>) -> Result {
        if let Some(u) = udata {
            u.expect_no_input()?;
        }
        dev.data().xrcds.take()
    }

    fn dealloc_xrcd(dev: &Device<Self>) {
        dev.data().xrcds.give_back();
    }

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        // Only what exists today is advertised: resources that are not
        // implemented yet keep a limit of zero.
        Ok(DeviceAttr {
            sys_image_guid: dev.data().node_guid(),
            vendor_id: VENDOR_ID,
            max_pd: MAX_PD,
            max_cq: MAX_CQ,
            max_cqe: MAX_CQE,
            max_mr: MAX_MR,
            max_ah: MAX_AH,
            max_qp: MAX_QP,
            max_qp_wr: MAX_QP_WR,
            max_send_sge: MAX_SGE,
            max_recv_sge: MAX_SGE,
            max_sge_rd: MAX_SGE,
            max_qp_rd_atom: MAX_QP_RD_ATOM,
            max_qp_init_rd_atom: MAX_QP_RD_ATOM,
            max_res_rd_atom: MAX_RES_RD_ATOM,
            // Port state changes are reported; the system image GUID is set.
            device_cap_flags: DEVICE_CAPS,
            max_srq: MAX_SRQ,
            max_mw: MAX_MW,
            max_fast_reg_page_list_len: mr::MAX_FAST_PAGES,
            max_mcast_grp: crate::mcast::MAX_GROUPS,
            // CAST: 56.
            max_mcast_qp_attach: crate::mcast::MAX_QP_ATTACH as u32,
            max_total_mcast_qp_attach: crate::mcast::MAX_TOTAL_ATTACH,
            max_srq_wr: MAX_SRQ_WR,
            max_srq_sge: MAX_SRQ_SGE,
            max_wq_type_rq: crate::limits::MAX_WQ,
            max_rwq_indirection_tables: crate::limits::MAX_IND_TABLES,
            max_rwq_indirection_table_size: 1 << crate::limits::MAX_IND_TABLE_LOG,
            max_mr_size: MAX_MR_SIZE,
            page_size_cap: kernel::page::PAGE_SIZE as u64,
            max_pkeys: 1,
            allow_user_unregister: true,
            // Remote atomics run under the device's key-table lock.
            atomic_hca: true,
            // ODP MRs serve every RC operation, and UD sends. (A UD receive
            // into one that misses loses the datagram, so it is not
            // offered; UC would lose its message.)
            odp: OdpCaps {
                general: ODP_SUPPORT | ODP_SUPPORT_IMPLICIT,
                rc: ODP_SEND
                    | ODP_RECV
                    | ODP_WRITE
                    | ODP_READ
                    | ODP_ATOMIC
                    | ODP_SRQ_RECV
                    | ODP_FLUSH
                    | ODP_ATOMIC_WRITE,
                uc: 0,
                ud: ODP_SEND | ODP_RECV | ODP_SRQ_RECV,
                // XRC is RC on the wire, receiving through SRQs only.
                xrc: ODP_SEND | ODP_WRITE | ODP_READ | ODP_ATOMIC | ODP_SRQ_RECV,
            },
            ..DeviceAttr::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        if port != PORT {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        let up = ndev.is_up();
        let (active_speed, active_width) = dev.eth_speed(port)?;
        let active_mtu = IbMtu::for_netdev_mtu(ndev.mtu()).unwrap_or(IbMtu::Mtu256);
        Ok(PortAttr {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            phys_state: if up {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            max_mtu: IbMtu::MAX.to_enum(),
            active_mtu: active_mtu.to_enum(),
            phys_mtu: ndev.mtu(),
            gid_tbl_len: GID_TABLE_LEN,
            pkey_tbl_len: 1,
            port_cap_flags: PORT_CM_SUP,
            max_msg_sz: PORT_MAX_MSG_SIZE,
            max_vl_num: 1,
            active_speed,
            active_width,
        })
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: 1,
            gid_tbl_len: GID_TABLE_LEN,
            roce_v2: true,
            max_mad_size: MGMT_MAD_SIZE,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != PORT || index != 0 {
            return Err(EINVAL);
        }
        Ok(DEFAULT_PKEY)
    }

    fn show_attr(dev: &Device<Self>, index: usize, out: &mut Buffer<'_>) -> Result {
        match index {
            0 => {
                let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
                writeln!(out, "{}", ndev.name()).map_err(|_| ENOSPC)
            }
            1 => writeln!(out, "{}", uapi::UVERBS_ABI_VERSION).map_err(|_| ENOSPC),
            _ => Err(EINVAL),
        }
    }

    type Pd = RoxePd;
    type Cq = RoxeCq;
    type Mr = RoxeMr;
    type Ah = RoxeAh;
    type Qp = RoxeQp;
    type Srq = RoxeSrq;
    type Mw = RoxeMw;
}

#[vtable]
impl PdOps<Roxe> for RoxePd {
    fn alloc(dev: &Device<Roxe>, udata: Option<&UData<'_>>) -> Result<Self> {
        pd::alloc(dev, udata)
    }

    fn dealloc(dev: &Device<Roxe>, pd: Self) {
        pd::dealloc(dev, pd)
    }
}

#[vtable]
impl CqOps<Roxe> for RoxeCq {
    fn create(
        dev: &Device<Roxe>,
        init: &CqInit,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        cq::create(dev, init, udata)
    }

    fn destroy(cq: &Cq<Roxe>) {
        cq::destroy(cq)
    }

    fn resize(cq: &Cq<Roxe>, cqe: u32, udata: Option<&UData<'_>>) -> Result<u32> {
        cq::resize(cq, cqe, udata)
    }

    fn req_notify(cq: &Cq<Roxe>, kind: Notify) -> Result<bool> {
        cq::req_notify(cq, kind)
    }

    fn poll(c: &Cq<Roxe>) -> Option<Wc<Roxe>> {
        cq::pop(c)
    }
}

#[vtable]
impl MrOps<Roxe> for RoxeMr {
    fn get_dma(pd: &Pd<Roxe>, access: u32) -> Result<(Self, MrInfo)> {
        mr::get_dma(pd, access)
    }

    fn reg_user(
        pd: &Pd<Roxe>,
        args: &UserMrArgs,
        udata: Option<&UData<'_>>,
    ) -> Result<(Self, MrInfo)> {
        mr::reg_user(pd, args, udata)
    }

    fn reg_dmabuf(pd: &Pd<Roxe>, args: &DmaBufMrArgs) -> Result<(Self, MrInfo)> {
        mr::reg_dmabuf(pd, args)
    }

    fn rereg_user(
        m: &Mr<Roxe>,
        what: Rereg,
        args: &UserMrArgs,
        pd: &Pd<Roxe>,
        udata: Option<&UData<'_>>,
    ) -> Result<Option<(Self, MrInfo)>> {
        mr::rereg(m, what, args, pd, udata)
    }

    fn alloc(pd: &Pd<Roxe>, max_num_sg: u32) -> Result<(Self, MrInfo)> {
        mr::alloc_fast(pd, max_num_sg)
    }

    fn map_begin(m: &Mr<Roxe>, page_size: u32) -> Result {
        mr::map_begin(m.data(), page_size)
    }

    fn map_page(m: &Mr<Roxe>, addr: u64) -> Result {
        mr::map_page(m.data(), addr)
    }

    fn map_end(m: &Mr<Roxe>, iova: u64) {
        mr::map_end(m.data(), iova)
    }

    fn dereg(mr: &Mr<Roxe>) -> Result {
        mr::dereg(mr)
    }

    fn advise(pd: &Pd<Roxe>, advice: Advice, flush: bool, sges: &[AdviseSge]) -> Result {
        mr::advise(pd, advice, flush, sges)
    }
}

#[vtable]
impl AhOps<Roxe> for RoxeAh {
    fn create(
        dev: &Device<Roxe>,
        pd: &Pd<Roxe>,
        attr: &AhAttr,
        sleepable: bool,
        udata: Option<&UData<'_>>,
    ) -> Result<Self> {
        ah::create(dev, pd, attr, sleepable, udata)
    }

    fn destroy(dev: &Device<Roxe>, a: Self) {
        ah::destroy(dev, a)
    }
}

#[vtable]
impl QpOps<Roxe> for RoxeQp {
    fn create(
        qp: &NewQp<'_, Roxe>,
        init: &QpInit,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self>, QpCap, u32)> {
        qp::create(qp, init, udata)
    }

    fn modify(q: &Qp<Roxe>, attr: &QpAttr, mask: u32, udata: Option<&UData<'_>>) -> Result {
        qp::modify(q, attr, mask, udata)
    }

    fn query(q: &Qp<Roxe>) -> Result<(QpAttr, bool)> {
        qp::query(q)
    }

    fn publish(q: &Qp<Roxe>) -> Result {
        q.device().data().qp_index.insert(q)
    }

    fn unpublish(q: &Qp<Roxe>) {
        q.device().data().qp_index.remove(q.qp_num());
    }

    fn destroy(q: &Qp<Roxe>) {
        q.device().data().mcast.detach_all(q.qp_num());
        qp::destroy(q)
    }

    fn attach_mcast(q: &Qp<Roxe>, gid: &[u8; 16]) -> Result {
        q.device().data().mcast.attach(gid, q.qp_num())
    }

    fn detach_mcast(q: &Qp<Roxe>, gid: &[u8; 16]) -> Result {
        q.device().data().mcast.detach(gid, q.qp_num())
    }

    fn fill_res(q: &Qp<Roxe>, out: &mut ResAttrs<'_>) -> Result {
        crate::qp::cc::fill_res(q, out)
    }

    fn post_send_user(q: &Qp<Roxe>) -> Result {
        qp::doorbell(q)
    }

    fn post_send(q: &Qp<Roxe>, wr: &crate::rdma::qp::SendWr<'_, Roxe>) -> Result {
        qp::post_kernel_send(q, wr)
    }

    fn post_recv(q: &Qp<Roxe>, wr_id: u64, sges: &[Sge]) -> Result {
        qp::post_kernel_recv(q, wr_id, sges)
    }

    fn qp_timer(&self) -> Option<&QpTimer<Roxe>> {
        Some(&self.timer)
    }

    fn timer(q: &Qp<Roxe>) {
        crate::qp::comp::on_timer(q)
    }
}

#[vtable]
impl SrqOps<Roxe> for RoxeSrq {
    fn create(
        dev: &Device<Roxe>,
        attr: &SrqAttr,
        _xrcd: Option<XrcdId>,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, SrqAttr, u32)> {
        // An XRC SRQ is a basic one that XRC packets find by number; the
        // abstraction keeps its domain.
        srq::create(dev, attr, udata)
    }

    fn publish(s: &Srq<Roxe>) {
        srq::publish(s)
    }

    fn modify(s: &Srq<Roxe>, attr: &SrqAttr, what: SrqModify, udata: Option<&UData<'_>>) -> Result {
        srq::modify(s, attr, what, udata)
    }

    fn query(s: &Srq<Roxe>) -> Result<SrqAttr> {
        srq::query(s)
    }

    fn destroy(s: &Srq<Roxe>) {
        srq::destroy(s)
    }

    fn post_recv(s: &Srq<Roxe>, wr_id: u64, sges: &[Sge]) -> Result {
        srq::post_kernel_recv(s, wr_id, sges)
    }
}

#[vtable]
impl MwOps<Roxe> for RoxeMw {
    fn alloc(
        dev: &Device<Roxe>,
        pd: &Pd<Roxe>,
        t: MwType,
        udata: Option<&UData<'_>>,
    ) -> Result<(Self, u32)> {
        mw::alloc(dev, pd, t, udata)
    }

    fn dealloc(dev: &Device<Roxe>, m: Self) {
        mw::dealloc(dev, m)
    }
}

/// `rdma link add NAME type roxe netdev DEV`.
pub(crate) struct Link;

impl LinkOps for Link {
    const TYPE: &'static CStr = c_str!("roxe");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        if ndev.is_vlan() {
            pr_err!(
                "{}: create roxe on the real device under the VLAN instead\n",
                ndev.name()
            );
            return Err(EPERM);
        }
        if let Some(existing) = Device::<Roxe>::get_by_netdev(ndev) {
            pr_err!(
                "{} already has roxe device {}\n",
                ndev.name(),
                existing.name()
            );
            return Err(EEXIST);
        }
        let node_guid = ndev.eui64();
        let info = DeviceInfo {
            node_desc: c_str!("roxe"),
            node_guid,
            phys_port_cnt: 1,
            num_comp_vectors: 1,
        };
        let parent = match ParentDevice::new(&crate::THIS_MODULE, ndev) {
            Ok(p) => Some(p),
            Err(e) => {
                pr_warn!(
                    "{}: no sysfs parent device with net/{} ({:?})\n",
                    name,
                    ndev.name(),
                    e
                );
                None
            }
        };
        let mut new = NewDevice::<Roxe>::new(
            &crate::THIS_MODULE,
            &info,
            RoxeDev::new(node_guid, parent, ndev),
        )?;
        if let Some(p) = new.data().parent() {
            new.set_parent(p);
        }
        // The RoCEv2 sockets of the netdev's namespace (opened with its
        // first device). If this fails, dropping `new` detaches again.
        new.data().attach_sockets().inspect_err(|e| {
            if e.to_errno() == -(kernel::bindings::EADDRINUSE as i32) {
                pr_err!(
                    "{}: UDP port {} is taken in {}'s network namespace: is rdma_rxe using it? Only one RoCEv2 driver can serve a namespace\n",
                    name,
                    crate::proto::udp::ROCE_V2_PORT,
                    ndev.name()
                );
            } else {
                pr_err!(
                    "{}: cannot open UDP port {} for {} ({:?})\n",
                    name,
                    crate::proto::udp::ROCE_V2_PORT,
                    ndev.name(),
                    e
                );
            }
        })?;
        new.set_netdev(ndev, PORT)?;
        new.register(name)?;
        pr_info!(
            "{}: added on {} (ifindex {})\n",
            name,
            ndev.name(),
            ndev.ifindex()
        );
        Ok(())
    }
}
