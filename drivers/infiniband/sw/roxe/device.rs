// SPDX-License-Identifier: GPL-2.0

//! The roxe driver type and a device's state: the budgets, key, AH, QP and
//! SRQ tables, counters and multicast groups that every object and the
//! data path reach through `Device<Roxe>::data()`. The verbs themselves,
//! and device creation, are in `verbs.rs`; this module depends on none of
//! the object modules.

use crate::keys;
use crate::limits::{Budget, MAX_AH, MAX_CQ, MAX_MR, MAX_MW, MAX_PD, MAX_QP, MAX_SRQ, MAX_XRCD};
use crate::net::{NetDevice, Rtnl};
use crate::rdma::device::ParentDevice;
use crate::rdma::srq::SrqRef;
use crate::table::{QpIndex, Table};
use core::sync::atomic::AtomicBool;
use kernel::prelude::*;
use kernel::types::ARef;

/// The roxe driver.
pub(crate) struct Roxe;

/// Per-device state.
#[pin_data(PinnedDrop)]
pub(crate) struct RoxeDev {
    node_guid: [u8; 8],
    pub(crate) pds: Budget,
    pub(crate) cqs: Budget,
    pub(crate) mrs: Budget,
    /// Live MR indices, each with its key's random tag.
    #[pin]
    pub(crate) mr_table: keys::KeyTable,
    pub(crate) ahs: Budget,
    /// Live AHs by number.
    #[pin]
    pub(crate) ah_table: crate::tx::AhTable,
    pub(crate) qps: Budget,
    /// Live QPs by table index (QPN = index + 15).
    #[pin]
    pub(crate) qp_table: Table<()>,
    /// QPs by number, for the receive path.
    #[pin]
    pub(crate) qp_index: QpIndex<Roxe>,
    /// Packet counters.
    pub(crate) counters: crate::counters::Counters,
    /// Read-response packets this device's requesters may await.
    pub(crate) read_credits: crate::limits::Credits,
    /// Whether the GSI QP (QP1) exists.
    pub(crate) gsi_taken: AtomicBool,
    pub(crate) srqs: Budget,
    /// Live SRQs by number (the entry is filled once the SRQ is
    /// initialised): XRC packets name the SRQ they are for.
    #[pin]
    pub(crate) srq_table: Table<Option<SrqRef<Roxe>>>,
    pub(crate) xrcds: Budget,
    /// The id the next SRQ gets: SRQ numbers are reused, ids never.
    pub(crate) srq_uids: core::sync::atomic::AtomicU64,
    pub(crate) wqs: Budget,
    /// Live receive WQs by number.
    #[pin]
    pub(crate) wq_table: Table<()>,
    pub(crate) ind_tables: Budget,
    /// The number the next indirection table gets (24 bits, wrapping: it
    /// only names the table to the user).
    pub(crate) ind_table_nums: core::sync::atomic::AtomicU32,
    /// Raw packet QPs' flows and the tap that feeds them.
    #[pin]
    pub(crate) raw: crate::flows::RawFlows<Roxe>,
    pub(crate) mws: Budget,
    /// Multicast groups and their QPs.
    #[pin]
    pub(crate) mcast: crate::mcast::Groups,
    /// `/sys/devices/roxe-if<ifindex>`, the device's parent in sysfs, with a
    /// `net/<ifname>` link to the netdev.
    parent: Option<ParentDevice>,
    /// The netdev, held until the device's data goes.
    ndev: ARef<NetDevice>,
    /// Whether this device attached its netdev to its namespace's RoCEv2
    /// sockets ([`crate::net::udp::attach`]); it detaches when it goes.
    attached: AtomicBool,
}

// The core destroys every object of a device before its data goes, and
// each object gives back what it took: anything still accounted now was
// leaked by roxe. `tests/guest/hostile.sh` looks for this line. (A plain
// comment: `#[pinned_drop]` wants `impl` as the item's first token.)
#[pinned_drop]
impl PinnedDrop for RoxeDev {
    fn drop(self: Pin<&mut Self>) {
        let left = [
            ("PDs", self.pds.in_use()),
            ("CQs", self.cqs.in_use()),
            ("MRs", self.mrs.in_use()),
            ("AHs", self.ahs.in_use()),
            ("QPs", self.qps.in_use()),
            ("SRQs", self.srqs.in_use()),
            ("XRCDs", self.xrcds.in_use()),
            ("MWs", self.mws.in_use()),
            ("WQs", self.wqs.in_use()),
            ("WQ indirection tables", self.ind_tables.in_use()),
            (
                "GSI QPs",
                u32::from(self.gsi_taken.load(core::sync::atomic::Ordering::Acquire)),
            ),
        ];
        for (what, n) in left {
            if n != 0 {
                pr_err!(
                    "device data dropped with {} {} still accounted: leaked by roxe\n",
                    n,
                    what
                );
            }
        }
        // Every flow is gone with the device's QPs, and with it the tap;
        // this only makes sure.
        self.raw.stop();
        // A fault still queued may hold the last reference to one of this
        // device's MRs, whose memory names the device: it runs now.
        crate::rdma::odp::flush();
        // The last device of a namespace closes its sockets. A netdev that
        // left the namespace (or is leaving it) was detached by the
        // notifier already, and this does nothing.
        if self.attached.load(core::sync::atomic::Ordering::Acquire) {
            let rtnl = Rtnl::lock();
            crate::net::udp::detach(&self.ndev, &rtnl);
        }
    }
}

impl RoxeDev {
    /// A device's state with nothing in use yet, for the device with node
    /// GUID `node_guid` under the sysfs parent `parent`.
    pub(crate) fn new(
        node_guid: [u8; 8],
        parent: Option<ParentDevice>,
        ndev: &NetDevice,
    ) -> impl PinInit<Self, Error> {
        let ndev = ARef::from(ndev);
        try_pin_init!(RoxeDev {
            node_guid,
            pds: Budget::new(MAX_PD),
            cqs: Budget::new(MAX_CQ),
            mrs: Budget::new(MAX_MR),
            // MWs take their rkeys from the same table.
            mr_table <- Table::new(MAX_MR + MAX_MW),
            ahs: Budget::new(MAX_AH),
            ah_table <- Table::new(MAX_AH),
            qps: Budget::new(MAX_QP),
            qp_table <- Table::new(MAX_QP),
            qp_index <- QpIndex::new(),
            counters: crate::counters::Counters::new(),
            read_credits: crate::limits::Credits::new(crate::limits::READ_CREDITS),
            gsi_taken: AtomicBool::new(false),
            srqs: Budget::new(MAX_SRQ),
            srq_table <- Table::new(MAX_SRQ),
            xrcds: Budget::new(MAX_XRCD),
            srq_uids: core::sync::atomic::AtomicU64::new(1),
            wqs: Budget::new(crate::limits::MAX_WQ),
            wq_table <- Table::new(crate::limits::MAX_WQ),
            ind_tables: Budget::new(crate::limits::MAX_IND_TABLES),
            ind_table_nums: core::sync::atomic::AtomicU32::new(1),
            raw <- crate::flows::RawFlows::new(),
            mws: Budget::new(MAX_MW),
            mcast <- crate::mcast::Groups::new(),
            parent,
            ndev,
            attached: AtomicBool::new(false),
        }? Error)
    }

    /// Attaches the device's netdev to the RoCEv2 sockets of its network
    /// namespace, opening them if it is the first there.
    pub(crate) fn attach_sockets(&self) -> Result {
        let rtnl = Rtnl::lock();
        crate::net::udp::attach(&self.ndev, &rtnl)?;
        self.attached
            .store(true, core::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// The node GUID (the netdev's EUI-64).
    pub(crate) fn node_guid(&self) -> [u8; 8] {
        self.node_guid
    }

    /// The device's sysfs parent, if it could be made.
    pub(crate) fn parent(&self) -> Option<&ParentDevice> {
        self.parent.as_ref()
    }
}
