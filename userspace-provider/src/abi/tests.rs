// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Layout tests: every structure in `abi` against the C headers.
//!
//! The expected numbers were printed by a C program that applied `sizeof`,
//! `_Alignof` and `offsetof` (x86_64, gcc 12) to `<infiniband/verbs.h>` and
//! `<rdma/ib_user_verbs.h>` as installed by Debian's libibverbs-dev 44.0-2 and
//! linux-libc-dev, and to the `driver.h` and `kern-abi.h` definitions of
//! rdma-core `v44.0` (`struct verbs_sysfs_dev`, `verbs_device_ops`,
//! `verbs_device`, `verbs_match_ent`, `verbs_context_ops`, `verbs_mr`,
//! `verbs_cq`, and the `kern-abi.h` command wrappers built by `DECLARE_CMD` /
//! `DECLARE_CMD_EX`: `ibv_get_context`, `ibv_query_port`, `ibv_alloc_pd`,
//! `ibv_reg_mr`, `ibv_rereg_mr`, `ibv_create_cq`, `ibv_resize_cq`, `ex_hdr`,
//! `ibv_create_cq_ex`). The private ones were also worked out by hand. The
//! QP, SRQ, MW and work-request structures (`ibv_qp_layouts`,
//! `verbs_qp_layouts`, `uverbs_qp_layouts`) were printed the same way,
//! with `struct verbs_qp` and the `kern-abi.h` wrappers `ibv_create_qp`,
//! `ibv_modify_qp`, `ibv_query_qp`, `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq` and `ibv_alloc_mw` restated from rdma-core `v44.0`. The
//! `driver` responses were checked against C structs of the same shape as
//! `DECLARE_DRV_CMD` builds. The XRC structures (`xrc_layouts`) were printed
//! the same way: `ibv_xrcd`, `ibv_xrcd_init_attr`, `ibv_tm_cap`,
//! `ibv_srq_init_attr_ex`, `ibv_qp_open_attr` and the uverbs `open_xrcd`,
//! `create_xsrq` and `open_qp` structures from the installed headers,
//! `struct verbs_xrcd`, `struct verbs_srq` and the `kern-abi.h` wrappers
//! `ibv_open_xrcd`, `ibv_create_xsrq` and `ibv_open_qp` restated from
//! rdma-core `v44.0`. The flow steering structures (`flow_layouts`:
//! `ibv_flow`, `ibv_flow_attr`) and the raw packet QP type
//! (`raw_packet_constants`) were printed the same way from the installed
//! `<infiniband/verbs.h>`, and so were the receive work queue, indirection
//! table and RSS structures (`wq_layouts`). A test reports every mismatch
//! of its group, not only the first.

use core::mem::{align_of, offset_of, size_of};

use super::{driver, ibv, uverbs, verbs};

/// Records a mismatch between the Rust layout and the C one.
fn check(errs: &mut Vec<String>, ty: &str, what: &str, rust: usize, c: usize) {
    if rust != c {
        errs.push(format!("{ty}: {what} is {rust} in Rust, {c} in C"));
    }
}

/// Checks size, alignment and the offsets of the listed fields of a type.
macro_rules! assert_layout {
    ($errs:ident, $t:ty, size $size:literal, align $align:literal {
        $($($field:ident).+ : $off:literal,)*
    }) => {{
        check(&mut $errs, stringify!($t), "size", size_of::<$t>(), $size);
        check(&mut $errs, stringify!($t), "align", align_of::<$t>(), $align);
        $(
            check(
                &mut $errs,
                stringify!($t),
                stringify!($($field).+),
                offset_of!($t, $($field).+),
                $off,
            );
        )*
    }};
}

/// Public `verbs.h` structures and the `kern-abi.h` wrappers.
#[test]
fn ibv_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, ibv::DeviceOpsCompat, size 16, align 8 {
        _dummy1: 0,
        _dummy2: 8,
    });
    assert_layout!(errs, ibv::Device, size 664, align 8 {
        _ops: 0,
        node_type: 16,
        transport_type: 20,
        name: 24,
        dev_name: 88,
        dev_path: 152,
        ibdev_path: 408,
    });
    assert_layout!(errs, ibv::ContextOps, size 256, align 8 {
        _compat_query_device: 0,
        _compat_query_port: 8,
        _compat_alloc_pd: 16,
        _compat_dealloc_pd: 24,
        _compat_reg_mr: 32,
        _compat_rereg_mr: 40,
        _compat_dereg_mr: 48,
        alloc_mw: 56,
        bind_mw: 64,
        dealloc_mw: 72,
        _compat_create_cq: 80,
        poll_cq: 88,
        req_notify_cq: 96,
        _compat_cq_event: 104,
        _compat_resize_cq: 112,
        _compat_destroy_cq: 120,
        _compat_create_srq: 128,
        _compat_modify_srq: 136,
        _compat_query_srq: 144,
        _compat_destroy_srq: 152,
        post_srq_recv: 160,
        _compat_create_qp: 168,
        _compat_query_qp: 176,
        _compat_modify_qp: 184,
        _compat_destroy_qp: 192,
        post_send: 200,
        post_recv: 208,
        _compat_create_ah: 216,
        _compat_destroy_ah: 224,
        _compat_attach_mcast: 232,
        _compat_detach_mcast: 240,
        _compat_async_event: 248,
    });
    assert_layout!(errs, ibv::Context, size 328, align 8 {
        device: 0,
        ops: 8,
        cmd_fd: 264,
        async_fd: 268,
        num_comp_vectors: 272,
        mutex: 280,
        abi_compat: 320,
    });
    assert_layout!(errs, ibv::PthreadMutex, size 40, align 8 {
    });
    assert_layout!(errs, ibv::DeviceAttr, size 232, align 8 {
        fw_ver: 0,
        node_guid: 64,
        sys_image_guid: 72,
        max_mr_size: 80,
        page_size_cap: 88,
        vendor_id: 96,
        vendor_part_id: 100,
        hw_ver: 104,
        max_qp: 108,
        max_qp_wr: 112,
        device_cap_flags: 116,
        max_sge: 120,
        max_sge_rd: 124,
        max_cq: 128,
        max_cqe: 132,
        max_mr: 136,
        max_pd: 140,
        max_qp_rd_atom: 144,
        max_ee_rd_atom: 148,
        max_res_rd_atom: 152,
        max_qp_init_rd_atom: 156,
        max_ee_init_rd_atom: 160,
        atomic_cap: 164,
        max_ee: 168,
        max_rdd: 172,
        max_mw: 176,
        max_raw_ipv6_qp: 180,
        max_raw_ethy_qp: 184,
        max_mcast_grp: 188,
        max_mcast_qp_attach: 192,
        max_total_mcast_qp_attach: 196,
        max_ah: 200,
        max_fmr: 204,
        max_map_per_fmr: 208,
        max_srq: 212,
        max_srq_wr: 216,
        max_srq_sge: 220,
        max_pkeys: 224,
        local_ca_ack_delay: 226,
        phys_port_cnt: 227,
    });
    assert_layout!(errs, ibv::OdpCaps, size 24, align 8 {
        general_caps: 0,
        per_transport_caps: 8,
        per_transport_caps.rc_odp_caps: 8,
        per_transport_caps.uc_odp_caps: 12,
        per_transport_caps.ud_odp_caps: 16,
    });
    assert_layout!(errs, ibv::OdpPerTransportCaps, size 12, align 4 {
    });
    assert_layout!(errs, ibv::TsoCaps, size 8, align 4 {
        max_tso: 0,
        supported_qpts: 4,
    });
    assert_layout!(errs, ibv::RssCaps, size 32, align 8 {
        supported_qpts: 0,
        max_rwq_indirection_tables: 4,
        max_rwq_indirection_table_size: 8,
        rx_hash_fields_mask: 16,
        rx_hash_function: 24,
    });
    assert_layout!(errs, ibv::PacketPacingCaps, size 12, align 4 {
        qp_rate_limit_min: 0,
        qp_rate_limit_max: 4,
        supported_qpts: 8,
    });
    assert_layout!(errs, ibv::TmCaps, size 20, align 4 {
        max_rndv_hdr_size: 0,
        max_num_tags: 4,
        flags: 8,
        max_ops: 12,
        max_sge: 16,
    });
    assert_layout!(errs, ibv::CqModerationCaps, size 4, align 2 {
        max_cq_count: 0,
        max_cq_period: 2,
    });
    assert_layout!(errs, ibv::PciAtomicCaps, size 6, align 2 {
        fetch_add: 0,
        swap: 2,
        compare_swap: 4,
    });
    assert_layout!(errs, ibv::DeviceAttrEx, size 400, align 8 {
        orig_attr: 0,
        comp_mask: 232,
        odp_caps: 240,
        completion_timestamp_mask: 264,
        hca_core_clock: 272,
        device_cap_flags_ex: 280,
        tso_caps: 288,
        rss_caps: 296,
        max_wq_type_rq: 328,
        packet_pacing_caps: 332,
        raw_packet_caps: 344,
        tm_caps: 348,
        cq_mod_caps: 368,
        max_dm_size: 376,
        pci_atomic_caps: 384,
        xrc_odp_caps: 392,
        phys_port_cnt_ex: 396,
    });
    assert_layout!(errs, ibv::PortAttr, size 52, align 4 {
        state: 0,
        max_mtu: 4,
        active_mtu: 8,
        gid_tbl_len: 12,
        port_cap_flags: 16,
        max_msg_sz: 20,
        bad_pkey_cntr: 24,
        qkey_viol_cntr: 28,
        pkey_tbl_len: 32,
        lid: 34,
        sm_lid: 36,
        lmc: 38,
        max_vl_num: 39,
        sm_sl: 40,
        subnet_timeout: 41,
        init_type_reply: 42,
        active_width: 43,
        active_speed: 44,
        phys_state: 45,
        link_layer: 46,
        flags: 47,
        port_cap_flags2: 48,
    });
    assert_layout!(errs, ibv::QueryDeviceExInput, size 4, align 4 {
        comp_mask: 0,
    });
    assert_layout!(errs, ibv::GetContext, size 16, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::QueryPort, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::PthreadCond, size 48, align 8 {
    });
    assert_layout!(errs, ibv::Pd, size 16, align 8 {
        context: 0,
        handle: 8,
    });
    assert_layout!(errs, ibv::ParentDomainInitAttr, size 48, align 8 {
        pd: 0,
        td: 8,
        comp_mask: 16,
        alloc: 24,
        free: 32,
        pd_context: 40,
    });
    assert_layout!(errs, ibv::Mr, size 48, align 8 {
        context: 0,
        pd: 8,
        addr: 16,
        length: 24,
        handle: 32,
        lkey: 36,
        rkey: 40,
    });
    assert_layout!(errs, ibv::CompChannel, size 16, align 8 {
        context: 0,
        fd: 8,
        refcnt: 12,
    });
    assert_layout!(errs, ibv::Gid, size 16, align 8 {
        raw: 0,
    });
    assert_layout!(errs, ibv::GlobalRoute, size 24, align 8 {
        dgid: 0,
        flow_label: 16,
        sgid_index: 20,
        hop_limit: 21,
        traffic_class: 22,
    });
    assert_layout!(errs, ibv::AhAttr, size 32, align 8 {
        grh: 0,
        dlid: 24,
        sl: 26,
        src_path_bits: 27,
        static_rate: 28,
        is_global: 29,
        port_num: 30,
    });
    assert_layout!(errs, ibv::Cq, size 128, align 8 {
        context: 0,
        channel: 8,
        cq_context: 16,
        handle: 24,
        cqe: 28,
        mutex: 32,
        cond: 72,
        comp_events_completed: 120,
        async_events_completed: 124,
    });
    assert_layout!(errs, ibv::PollCqAttr, size 4, align 4 {
        comp_mask: 0,
    });
    assert_layout!(errs, ibv::CqEx, size 288, align 8 {
        context: 0,
        channel: 8,
        cq_context: 16,
        handle: 24,
        cqe: 28,
        mutex: 32,
        cond: 72,
        comp_events_completed: 120,
        async_events_completed: 124,
        comp_mask: 128,
        status: 132,
        wr_id: 136,
        start_poll: 144,
        next_poll: 152,
        end_poll: 160,
        read_opcode: 168,
        read_vendor_err: 176,
        read_byte_len: 184,
        read_imm_data: 192,
        read_qp_num: 200,
        read_src_qp: 208,
        read_wc_flags: 216,
        read_slid: 224,
        read_sl: 232,
        read_dlid_path_bits: 240,
        read_completion_ts: 248,
        read_cvlan: 256,
        read_flow_tag: 264,
        read_tm_info: 272,
        read_completion_wallclock_ns: 280,
    });
    assert_layout!(errs, ibv::CqInitAttrEx, size 56, align 8 {
        cqe: 0,
        cq_context: 8,
        channel: 16,
        comp_vector: 24,
        wc_flags: 32,
        comp_mask: 40,
        flags: 44,
        parent_domain: 48,
    });
    assert_layout!(errs, ibv::Wc, size 48, align 8 {
        wr_id: 0,
        status: 8,
        opcode: 12,
        vendor_err: 16,
        byte_len: 20,
        imm_data: 24,
        qp_num: 28,
        src_qp: 32,
        wc_flags: 36,
        pkey_index: 40,
        slid: 42,
        sl: 44,
        dlid_path_bits: 45,
    });
    assert_layout!(errs, ibv::Ah, size 24, align 8 {
        context: 0,
        pd: 8,
        handle: 16,
    });
    assert_layout!(errs, ibv::AllocPd, size 16, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::RegMr, size 48, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::ReregMr, size 56, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::CreateCq, size 40, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::ResizeCq, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::ExHdr, size 24, align 8 {
        hdr: 0,
        ex_hdr: 8,
    });
    assert_layout!(errs, ibv::CreateCqEx, size 56, align 8 {
        hdr: 0,
        core_payload: 24,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// Private `driver.h` structures and `struct verbs_context`.
#[test]
fn verbs_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, verbs::Context, size 648, align 8 {
        query_port: 0,
        advise_mr: 8,
        alloc_null_mr: 16,
        read_counters: 24,
        attach_counters_point_flow: 32,
        create_counters: 40,
        destroy_counters: 48,
        reg_dm_mr: 56,
        alloc_dm: 64,
        free_dm: 72,
        modify_flow_action_esp: 80,
        destroy_flow_action: 88,
        create_flow_action_esp: 96,
        modify_qp_rate_limit: 104,
        alloc_parent_domain: 112,
        dealloc_td: 120,
        alloc_td: 128,
        modify_cq: 136,
        post_srq_ops: 144,
        destroy_rwq_ind_table: 152,
        create_rwq_ind_table: 160,
        destroy_wq: 168,
        modify_wq: 176,
        create_wq: 184,
        query_rt_values: 192,
        create_cq_ex: 200,
        priv_: 208,
        query_device_ex: 216,
        ibv_destroy_flow: 224,
        abi_placeholder2: 232,
        ibv_create_flow: 240,
        abi_placeholder1: 248,
        open_qp: 256,
        create_qp_ex: 264,
        get_srq_num: 272,
        create_srq_ex: 280,
        open_xrcd: 288,
        close_xrcd: 296,
        _abi_placeholder3: 304,
        sz: 312,
        context: 320,
    });
    assert_layout!(errs, verbs::ListNode, size 16, align 8 {
        next: 0,
        prev: 8,
    });
    assert_layout!(errs, verbs::MatchEnt, size 24, align 8 {
        driver_data: 0,
        u: 8,
        vendor: 16,
        device: 18,
        kind: 20,
    });
    assert_layout!(errs, verbs::SysfsDev, size 992, align 8 {
        entry: 0,
        provider_data: 16,
        match_: 24,
        flags: 32,
        sysfs_name: 36,
        sysfs_cdev: 104,
        ibdev_name: 112,
        ibdev_path: 176,
        modalias: 432,
        node_guid: 944,
        driver_id: 952,
        node_type: 956,
        ibdev_idx: 960,
        num_ports: 964,
        abi_ver: 968,
        time_created: 976,
    });
    assert_layout!(errs, verbs::DeviceOps, size 72, align 8 {
        name: 0,
        match_min_abi_version: 8,
        match_max_abi_version: 12,
        match_table: 16,
        static_providers: 24,
        match_device: 32,
        alloc_context: 40,
        import_context: 48,
        alloc_device: 56,
        uninit_device: 64,
    });
    assert_layout!(errs, verbs::Device, size 712, align 8 {
        device: 0,
        ops: 664,
        refcount: 672,
        entry: 680,
        sysfs: 696,
        core_support: 704,
    });
    assert_layout!(errs, verbs::ContextOps, size 608, align 8 {
        advise_mr: 0,
        free_context: 312,
        query_device_ex: 464,
        query_port: 480,
        unimport_pd: 600,
        alloc_dm: 8,
        alloc_mw: 16,
        alloc_null_mr: 24,
        alloc_parent_domain: 32,
        alloc_pd: 40,
        alloc_td: 48,
        async_event: 56,
        attach_counters_point_flow: 64,
        attach_mcast: 72,
        bind_mw: 80,
        close_xrcd: 88,
        cq_event: 96,
        create_ah: 104,
        create_counters: 112,
        create_cq: 120,
        create_cq_ex: 128,
        create_flow: 136,
        create_flow_action_esp: 144,
        create_qp: 152,
        create_qp_ex: 160,
        create_rwq_ind_table: 168,
        create_srq: 176,
        create_srq_ex: 184,
        create_wq: 192,
        dealloc_mw: 200,
        dealloc_pd: 208,
        dealloc_td: 216,
        dereg_mr: 224,
        destroy_ah: 232,
        destroy_counters: 240,
        destroy_cq: 248,
        destroy_flow: 256,
        destroy_flow_action: 264,
        destroy_qp: 272,
        destroy_rwq_ind_table: 280,
        destroy_srq: 288,
        destroy_wq: 296,
        detach_mcast: 304,
        free_dm: 320,
        get_srq_num: 328,
        import_dm: 336,
        import_mr: 344,
        import_pd: 352,
        modify_cq: 360,
        modify_flow_action_esp: 368,
        modify_qp: 376,
        modify_qp_rate_limit: 384,
        modify_srq: 392,
        modify_wq: 400,
        open_qp: 408,
        open_xrcd: 416,
        poll_cq: 424,
        post_recv: 432,
        post_send: 440,
        post_srq_ops: 448,
        post_srq_recv: 456,
        query_ece: 472,
        query_qp: 488,
        query_qp_data_in_order: 496,
        query_rt_values: 504,
        query_srq: 512,
        read_counters: 520,
        reg_dm_mr: 528,
        reg_dmabuf_mr: 536,
        reg_mr: 544,
        req_notify_cq: 552,
        rereg_mr: 560,
        resize_cq: 568,
        set_ece: 576,
        unimport_dm: 584,
        unimport_mr: 592,
    });
    assert_layout!(errs, verbs::Mr, size 56, align 8 {
        ibv_mr: 0,
        mr_type: 48,
        access: 52,
    });
    assert_layout!(errs, verbs::Cq, size 288, align 8 {
        cq: 0,
        cq_ex: 0,
    });
    assert_layout!(errs, verbs::Timespec, size 16, align 8 {
    });
    assert_layout!(errs, verbs::MatchEntU, size 8, align 8 {
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// Kernel `ib_user_verbs.h` structures.
#[test]
fn uverbs_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, uverbs::CmdHdr, size 8, align 4 {
        command: 0,
        in_words: 4,
        out_words: 6,
    });
    assert_layout!(errs, uverbs::GetContext, size 8, align 8 {
        response: 0,
    });
    assert_layout!(errs, uverbs::GetContextResp, size 8, align 8 {
        async_fd: 0,
        num_comp_vectors: 4,
    });
    assert_layout!(errs, uverbs::QueryPort, size 16, align 8 {
        response: 0,
        port_num: 8,
        reserved: 9,
    });
    assert_layout!(errs, uverbs::QueryDeviceResp, size 176, align 8 {
        fw_ver: 0,
        node_guid: 8,
        sys_image_guid: 16,
        max_mr_size: 24,
        page_size_cap: 32,
        vendor_id: 40,
        vendor_part_id: 44,
        hw_ver: 48,
        max_qp: 52,
        max_qp_wr: 56,
        device_cap_flags: 60,
        max_sge: 64,
        max_sge_rd: 68,
        max_cq: 72,
        max_cqe: 76,
        max_mr: 80,
        max_pd: 84,
        max_qp_rd_atom: 88,
        max_ee_rd_atom: 92,
        max_res_rd_atom: 96,
        max_qp_init_rd_atom: 100,
        max_ee_init_rd_atom: 104,
        atomic_cap: 108,
        max_ee: 112,
        max_rdd: 116,
        max_mw: 120,
        max_raw_ipv6_qp: 124,
        max_raw_ethy_qp: 128,
        max_mcast_grp: 132,
        max_mcast_qp_attach: 136,
        max_total_mcast_qp_attach: 140,
        max_ah: 144,
        max_fmr: 148,
        max_map_per_fmr: 152,
        max_srq: 156,
        max_srq_wr: 160,
        max_srq_sge: 164,
        max_pkeys: 168,
        local_ca_ack_delay: 170,
        phys_port_cnt: 171,
        reserved: 172,
    });
    assert_layout!(errs, uverbs::OdpCaps, size 24, align 8 {
        general_caps: 0,
        per_transport_caps: 8,
        reserved: 20,
        per_transport_caps.rc_odp_caps: 8,
        per_transport_caps.uc_odp_caps: 12,
        per_transport_caps.ud_odp_caps: 16,
    });
    assert_layout!(errs, uverbs::RssCaps, size 16, align 4 {
        supported_qpts: 0,
        max_rwq_indirection_tables: 4,
        max_rwq_indirection_table_size: 8,
        reserved: 12,
    });
    assert_layout!(errs, uverbs::TmCaps, size 24, align 4 {
        max_rndv_hdr_size: 0,
        max_num_tags: 4,
        flags: 8,
        max_ops: 12,
        max_sge: 16,
        reserved: 20,
    });
    assert_layout!(errs, uverbs::CqModerationCaps, size 8, align 4 {
        max_cq_moderation_count: 0,
        max_cq_moderation_period: 2,
        reserved: 4,
    });
    assert_layout!(errs, uverbs::ExQueryDeviceResp, size 304, align 8 {
        base: 0,
        comp_mask: 176,
        response_length: 180,
        odp_caps: 184,
        timestamp_mask: 208,
        hca_core_clock: 216,
        device_cap_flags_ex: 224,
        rss_caps: 232,
        max_wq_type_rq: 248,
        raw_packet_caps: 252,
        tm_caps: 256,
        cq_moderation_caps: 280,
        max_dm_size: 288,
        xrc_odp_caps: 296,
        reserved: 300,
    });
    assert_layout!(errs, uverbs::OdpPerTransportCaps, size 12, align 4 {
    });
    assert_layout!(errs, uverbs::ExCmdHdr, size 16, align 8 {
        response: 0,
        provider_in_words: 8,
        provider_out_words: 10,
        cmd_hdr_reserved: 12,
    });
    assert_layout!(errs, uverbs::AllocPd, size 8, align 8 {
        response: 0,
    });
    assert_layout!(errs, uverbs::AllocPdResp, size 4, align 4 {
        pd_handle: 0,
    });
    assert_layout!(errs, uverbs::RegMr, size 40, align 8 {
        response: 0,
        start: 8,
        length: 16,
        hca_va: 24,
        pd_handle: 32,
        access_flags: 36,
    });
    assert_layout!(errs, uverbs::RegMrResp, size 12, align 4 {
        mr_handle: 0,
        lkey: 4,
        rkey: 8,
    });
    assert_layout!(errs, uverbs::ReregMr, size 48, align 8 {
        response: 0,
        mr_handle: 8,
        flags: 12,
        start: 16,
        length: 24,
        hca_va: 32,
        pd_handle: 40,
        access_flags: 44,
    });
    assert_layout!(errs, uverbs::ReregMrResp, size 8, align 8 {
        lkey: 0,
        rkey: 4,
    });
    assert_layout!(errs, uverbs::CreateCq, size 32, align 8 {
        response: 0,
        user_handle: 8,
        cqe: 16,
        comp_vector: 20,
        comp_channel: 24,
        reserved: 28,
    });
    assert_layout!(errs, uverbs::CreateCqResp, size 8, align 8 {
        cq_handle: 0,
        cqe: 4,
    });
    assert_layout!(errs, uverbs::ExCreateCq, size 32, align 8 {
        user_handle: 0,
        cqe: 8,
        comp_vector: 12,
        comp_channel: 16,
        comp_mask: 20,
        flags: 24,
        reserved: 28,
    });
    assert_layout!(errs, uverbs::ExCreateCqResp, size 16, align 8 {
        base: 0,
        comp_mask: 8,
        response_length: 12,
    });
    assert_layout!(errs, uverbs::ResizeCq, size 16, align 8 {
        response: 0,
        cq_handle: 8,
        cqe: 12,
    });
    assert_layout!(errs, uverbs::ResizeCqResp, size 8, align 8 {
        cqe: 0,
        reserved: 4,
    });
    assert_layout!(errs, uverbs::CreateAhResp, size 4, align 4 {
        ah_handle: 0,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// The `verbs.h` structures of QPs, SRQs, MWs and work requests, and their
/// `kern-abi.h` command wrappers.
#[test]
fn ibv_qp_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, ibv::Qp, size 160, align 8 {
        context: 0,
        qp_context: 8,
        pd: 16,
        send_cq: 24,
        recv_cq: 32,
        srq: 40,
        handle: 48,
        qp_num: 52,
        state: 56,
        qp_type: 60,
        mutex: 64,
        cond: 104,
        events_completed: 152,
    });
    assert_layout!(errs, ibv::PthreadCond, size 48, align 8 {
    });
    assert_layout!(errs, ibv::QpEx, size 352, align 8 {
        qp_base: 0,
        comp_mask: 160,
        wr_id: 168,
        wr_flags: 176,
        wr_atomic_cmp_swp: 184,
        wr_atomic_fetch_add: 192,
        wr_bind_mw: 200,
        wr_local_inv: 208,
        wr_rdma_read: 216,
        wr_rdma_write: 224,
        wr_rdma_write_imm: 232,
        wr_send: 240,
        wr_send_imm: 248,
        wr_send_inv: 256,
        wr_send_tso: 264,
        wr_set_ud_addr: 272,
        wr_set_xrc_srqn: 280,
        wr_set_inline_data: 288,
        wr_set_inline_data_list: 296,
        wr_set_sge: 304,
        wr_set_sge_list: 312,
        wr_start: 320,
        wr_complete: 328,
        wr_abort: 336,
        wr_atomic_write: 344,
    });
    assert_layout!(errs, ibv::DataBuf, size 16, align 8 {
        addr: 0,
        length: 8,
    });
    assert_layout!(errs, ibv::QpCap, size 20, align 4 {
        max_send_wr: 0,
        max_recv_wr: 4,
        max_send_sge: 8,
        max_recv_sge: 12,
        max_inline_data: 16,
    });
    assert_layout!(errs, ibv::QpInitAttr, size 64, align 8 {
        qp_context: 0,
        send_cq: 8,
        recv_cq: 16,
        srq: 24,
        cap: 32,
        qp_type: 52,
        sq_sig_all: 56,
    });
    assert_layout!(errs, ibv::RxHashConf, size 24, align 8 {
        rx_hash_function: 0,
        rx_hash_key_len: 1,
        rx_hash_key: 8,
        rx_hash_fields_mask: 16,
    });
    assert_layout!(errs, ibv::QpInitAttrEx, size 136, align 8 {
        qp_context: 0,
        send_cq: 8,
        recv_cq: 16,
        srq: 24,
        cap: 32,
        qp_type: 52,
        sq_sig_all: 56,
        comp_mask: 60,
        pd: 64,
        xrcd: 72,
        create_flags: 80,
        max_tso_header: 84,
        rwq_ind_tbl: 88,
        rx_hash_conf: 96,
        source_qpn: 120,
        send_ops_flags: 128,
    });
    assert_layout!(errs, ibv::QpAttr, size 144, align 8 {
        qp_state: 0,
        cur_qp_state: 4,
        path_mtu: 8,
        path_mig_state: 12,
        qkey: 16,
        rq_psn: 20,
        sq_psn: 24,
        dest_qp_num: 28,
        qp_access_flags: 32,
        cap: 36,
        ah_attr: 56,
        alt_ah_attr: 88,
        pkey_index: 120,
        alt_pkey_index: 122,
        en_sqd_async_notify: 124,
        sq_draining: 125,
        max_rd_atomic: 126,
        max_dest_rd_atomic: 127,
        min_rnr_timer: 128,
        port_num: 129,
        timeout: 130,
        retry_cnt: 131,
        rnr_retry: 132,
        alt_port_num: 133,
        alt_timeout: 134,
        rate_limit: 136,
    });
    assert_layout!(errs, ibv::Srq, size 128, align 8 {
        context: 0,
        srq_context: 8,
        pd: 16,
        handle: 24,
        mutex: 32,
        cond: 72,
        events_completed: 120,
    });
    assert_layout!(errs, ibv::SrqAttr, size 12, align 4 {
        max_wr: 0,
        max_sge: 4,
        srq_limit: 8,
    });
    assert_layout!(errs, ibv::SrqInitAttr, size 24, align 8 {
        srq_context: 0,
        attr: 8,
    });
    assert_layout!(errs, ibv::Mw, size 32, align 8 {
        context: 0,
        pd: 8,
        rkey: 16,
        handle: 20,
        type_: 24,
    });
    assert_layout!(errs, ibv::MwBindInfo, size 32, align 8 {
        mr: 0,
        addr: 8,
        length: 16,
        mw_access_flags: 24,
    });
    assert_layout!(errs, ibv::MwBind, size 48, align 8 {
        wr_id: 0,
        send_flags: 8,
        bind_info: 16,
        bind_info.mr: 16,
        bind_info.mw_access_flags: 40,
    });
    assert_layout!(errs, ibv::Sge, size 16, align 8 {
        addr: 0,
        length: 8,
        lkey: 12,
    });
    assert_layout!(errs, ibv::SendWr, size 128, align 8 {
        wr_id: 0,
        next: 8,
        sg_list: 16,
        num_sge: 24,
        opcode: 28,
        send_flags: 32,
        imm_data: 36,
        wr: 40,
        wr.rdma.remote_addr: 40,
        wr.rdma.rkey: 48,
        wr.atomic.remote_addr: 40,
        wr.atomic.compare_add: 48,
        wr.atomic.swap: 56,
        wr.atomic.rkey: 64,
        wr.ud.ah: 40,
        wr.ud.remote_qpn: 48,
        wr.ud.remote_qkey: 52,
        remote_srqn: 72,
        extra: 80,
        extra.bind_mw.mw: 80,
        extra.bind_mw.rkey: 88,
        extra.bind_mw.bind_info: 96,
        extra.tso.hdr: 80,
        extra.tso.hdr_sz: 88,
        extra.tso.mss: 90,
    });
    assert_layout!(errs, ibv::SendWrWr, size 32, align 8 {
    });
    assert_layout!(errs, ibv::SendWrExtra, size 48, align 8 {
    });
    assert_layout!(errs, ibv::RecvWr, size 32, align 8 {
        wr_id: 0,
        next: 8,
        sg_list: 16,
        num_sge: 24,
    });
    assert_layout!(errs, ibv::CreateQp, size 64, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::ModifyQp, size 120, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::QueryQp, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::CreateSrq, size 40, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::ModifySrq, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::QuerySrq, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::AllocMw, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// `struct verbs_qp` from `driver.h`.
#[test]
fn verbs_qp_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, verbs::Qp, size 368, align 8 {
        qp: 0,
        qp.qp: 0,
        qp.qp_ex: 0,
        comp_mask: 352,
        xrcd: 360,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// The `ib_user_verbs.h` structures of QPs, SRQs and MWs.
#[test]
fn uverbs_qp_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, uverbs::CreateQp, size 56, align 8 {
        response: 0,
        user_handle: 8,
        pd_handle: 16,
        send_cq_handle: 20,
        recv_cq_handle: 24,
        srq_handle: 28,
        max_send_wr: 32,
        max_recv_wr: 36,
        max_send_sge: 40,
        max_recv_sge: 44,
        max_inline_data: 48,
        sq_sig_all: 52,
        qp_type: 53,
        is_srq: 54,
        reserved: 55,
    });
    assert_layout!(errs, uverbs::CreateQpResp, size 32, align 4 {
        qp_handle: 0,
        qpn: 4,
        max_send_wr: 8,
        max_recv_wr: 12,
        max_send_sge: 16,
        max_recv_sge: 20,
        max_inline_data: 24,
        reserved: 28,
    });
    assert_layout!(errs, uverbs::QpDest, size 32, align 4 {
        dgid: 0,
        flow_label: 16,
        dlid: 20,
        reserved: 22,
        sgid_index: 24,
        hop_limit: 25,
        traffic_class: 26,
        sl: 27,
        src_path_bits: 28,
        static_rate: 29,
        is_global: 30,
        port_num: 31,
    });
    assert_layout!(errs, uverbs::ModifyQp, size 112, align 8 {
        dest: 0,
        alt_dest: 32,
        qp_handle: 64,
        attr_mask: 68,
        qkey: 72,
        rq_psn: 76,
        sq_psn: 80,
        dest_qp_num: 84,
        qp_access_flags: 88,
        pkey_index: 92,
        alt_pkey_index: 94,
        qp_state: 96,
        cur_qp_state: 97,
        path_mtu: 98,
        path_mig_state: 99,
        en_sqd_async_notify: 100,
        max_rd_atomic: 101,
        max_dest_rd_atomic: 102,
        min_rnr_timer: 103,
        port_num: 104,
        timeout: 105,
        retry_cnt: 106,
        rnr_retry: 107,
        alt_port_num: 108,
        alt_timeout: 109,
        reserved: 110,
    });
    assert_layout!(errs, uverbs::QueryQp, size 16, align 8 {
        response: 0,
        qp_handle: 8,
        attr_mask: 12,
    });
    assert_layout!(errs, uverbs::CreateSrq, size 32, align 8 {
        response: 0,
        user_handle: 8,
        pd_handle: 16,
        max_wr: 20,
        max_sge: 24,
        srq_limit: 28,
    });
    assert_layout!(errs, uverbs::CreateSrqResp, size 16, align 4 {
        srq_handle: 0,
        max_wr: 4,
        max_sge: 8,
        srqn: 12,
    });
    assert_layout!(errs, uverbs::ModifySrq, size 16, align 8 {
        srq_handle: 0,
        attr_mask: 4,
        max_wr: 8,
        srq_limit: 12,
    });
    assert_layout!(errs, uverbs::QuerySrq, size 16, align 8 {
        response: 0,
        srq_handle: 8,
        reserved: 12,
    });
    assert_layout!(errs, uverbs::AllocMw, size 16, align 8 {
        response: 0,
        pd_handle: 8,
        mw_type: 12,
        reserved: 13,
    });
    assert_layout!(errs, uverbs::AllocMwResp, size 8, align 8 {
        mw_handle: 0,
        rkey: 4,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// XRC domains, extended (XRC) SRQs and opened QPs: the `verbs.h`,
/// `driver.h`, `kern-abi.h` and `ib_user_verbs.h` structures.
#[test]
fn xrc_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, ibv::Xrcd, size 8, align 8 {
        context: 0,
    });
    assert_layout!(errs, ibv::XrcdInitAttr, size 12, align 4 {
        comp_mask: 0,
        fd: 4,
        oflags: 8,
    });
    assert_layout!(errs, verbs::Xrcd, size 16, align 8 {
        xrcd: 0,
        xrcd.context: 0,
        comp_mask: 8,
        handle: 12,
    });
    assert_layout!(errs, ibv::TmCap, size 8, align 4 {
        max_num_tags: 0,
        max_ops: 4,
    });
    assert_layout!(errs, ibv::SrqInitAttrEx, size 64, align 8 {
        srq_context: 0,
        attr: 8,
        attr.max_wr: 8,
        attr.max_sge: 12,
        attr.srq_limit: 16,
        comp_mask: 20,
        srq_type: 24,
        pd: 32,
        xrcd: 40,
        cq: 48,
        tm_cap: 56,
    });
    assert_layout!(errs, verbs::Srq, size 160, align 8 {
        srq: 0,
        srq.context: 0,
        srq.handle: 24,
        srq_type: 128,
        xrcd: 136,
        cq: 144,
        srq_num: 152,
    });
    assert_layout!(errs, ibv::QpOpenAttr, size 32, align 8 {
        comp_mask: 0,
        qp_num: 4,
        xrcd: 8,
        qp_context: 16,
        qp_type: 24,
    });
    assert_layout!(errs, uverbs::OpenXrcd, size 16, align 8 {
        response: 0,
        fd: 8,
        oflags: 12,
    });
    assert_layout!(errs, uverbs::OpenXrcdResp, size 4, align 4 {
        xrcd_handle: 0,
    });
    assert_layout!(errs, uverbs::CreateXsrq, size 48, align 8 {
        response: 0,
        user_handle: 8,
        srq_type: 16,
        pd_handle: 20,
        max_wr: 24,
        max_sge: 28,
        srq_limit: 32,
        max_num_tags: 36,
        xrcd_handle: 40,
        cq_handle: 44,
    });
    assert_layout!(errs, uverbs::OpenQp, size 32, align 8 {
        response: 0,
        user_handle: 8,
        pd_handle: 16,
        qpn: 20,
        qp_type: 24,
        reserved: 25,
    });
    assert_layout!(errs, ibv::OpenXrcd, size 24, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::CreateXsrq, size 56, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert_layout!(errs, ibv::OpenQp, size 40, align 8 {
        hdr: 0,
        core_payload: 8,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// Flow steering: the public `verbs.h` structures a provider allocates
/// (`ibv_flow`) and receives (`ibv_flow_attr`, the header of a rule).
#[test]
fn flow_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, ibv::Flow, size 24, align 8 {
        comp_mask: 0,
        context: 8,
        handle: 16,
    });
    assert_layout!(errs, ibv::FlowAttr, size 20, align 4 {
        comp_mask: 0,
        type_: 4,
        size: 8,
        priority: 10,
        num_of_specs: 12,
        port: 13,
        flags: 16,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// Receive work queues, indirection tables and RSS QPs (`wq_layouts`),
/// as a C program printed them from `<infiniband/verbs.h>` and
/// `<rdma/ib_user_verbs.h>` (libibverbs-dev 44.0-2), with the `kern-abi.h`
/// wrappers `ibv_create_wq`, `ibv_modify_wq` and `ibv_create_qp_ex`
/// (`DECLARE_CMD_EX`: `struct ex_hdr`, then the kernel's struct) restated
/// from rdma-core `v44.0`.
#[test]
fn wq_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, ibv::Wq, size 152, align 8 {
        context: 0,
        wq_context: 8,
        pd: 16,
        cq: 24,
        wq_num: 32,
        handle: 36,
        state: 40,
        wq_type: 44,
        post_recv: 48,
        mutex: 56,
        cond: 96,
        events_completed: 144,
        comp_mask: 148,
    });
    assert_layout!(errs, ibv::WqInitAttr, size 48, align 8 {
        wq_context: 0,
        wq_type: 8,
        max_wr: 12,
        max_sge: 16,
        pd: 24,
        cq: 32,
        comp_mask: 40,
        create_flags: 44,
    });
    assert_layout!(errs, ibv::WqAttr, size 20, align 4 {
        attr_mask: 0,
        wq_state: 4,
        curr_wq_state: 8,
        flags: 12,
        flags_mask: 16,
    });
    assert_layout!(errs, ibv::RwqIndTable, size 24, align 8 {
        context: 0,
        ind_tbl_handle: 8,
        ind_tbl_num: 12,
        comp_mask: 16,
    });
    assert_layout!(errs, ibv::RwqIndTableInitAttr, size 24, align 8 {
        log_ind_tbl_size: 0,
        ind_tbl: 8,
        comp_mask: 16,
    });
    assert_layout!(errs, uverbs::ExCreateWq, size 40, align 8 {
        comp_mask: 0,
        wq_type: 4,
        user_handle: 8,
        pd_handle: 16,
        cq_handle: 20,
        max_wr: 24,
        max_sge: 28,
        create_flags: 32,
        reserved: 36,
    });
    assert_layout!(errs, uverbs::ExCreateWqResp, size 24, align 4 {
        comp_mask: 0,
        response_length: 4,
        wq_handle: 8,
        max_wr: 12,
        max_sge: 16,
        wqn: 20,
    });
    assert_layout!(errs, uverbs::ExModifyWq, size 24, align 4 {
        attr_mask: 0,
        wq_handle: 4,
        wq_state: 8,
        curr_wq_state: 12,
        flags: 16,
        flags_mask: 20,
    });
    assert_layout!(errs, uverbs::ExCreateRwqIndTableResp, size 16, align 4 {
        comp_mask: 0,
        response_length: 4,
        ind_tbl_handle: 8,
        ind_tbl_num: 12,
    });
    assert_layout!(errs, uverbs::ExCreateQp, size 64, align 8 {
        user_handle: 0,
        pd_handle: 8,
        max_inline_data: 40,
        sq_sig_all: 44,
        qp_type: 45,
        is_srq: 46,
        reserved: 47,
        comp_mask: 48,
        create_flags: 52,
        rwq_ind_tbl_handle: 56,
        source_qpn: 60,
    });
    assert_layout!(errs, uverbs::ExCreateQpResp, size 40, align 4 {
        base: 0,
        comp_mask: 32,
        response_length: 36,
    });
    assert_layout!(errs, ibv::CreateWq, size 64, align 8 {
        hdr: 0,
        core_payload: 24,
    });
    assert_layout!(errs, ibv::ModifyWq, size 48, align 8 {
        hdr: 0,
        core_payload: 24,
    });
    assert_layout!(errs, ibv::CreateQpEx, size 88, align 8 {
        hdr: 0,
        core_payload: 24,
    });
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// The WQ, indirection table and RSS enum values, as a C program printed
/// them from `<infiniband/verbs.h>` and `<rdma/ib_user_verbs.h>`
/// (libibverbs-dev 44.0-2).
#[test]
fn wq_constants() {
    assert_eq!(ibv::WQT_RQ, 0);
    assert_eq!((ibv::WQS_RESET, ibv::WQS_RDY, ibv::WQS_ERR), (0, 1, 2));
    let attr = [
        ibv::WQ_ATTR_STATE,
        ibv::WQ_ATTR_CURR_STATE,
        ibv::WQ_ATTR_FLAGS,
        ibv::WQ_ATTR_RESERVED,
    ];
    assert_eq!(attr, [1, 2, 4, 8]);
    let init = (ibv::WQ_INIT_ATTR_FLAGS, ibv::WQ_INIT_ATTR_RESERVED);
    assert_eq!(init, (1, 2));
    assert_eq!(ibv::CREATE_IND_TABLE_RESERVED, 1);
    assert_eq!(uverbs::MAX_LOG_IND_TBL_SIZE, 13);
    assert_eq!(ibv::RX_HASH_FUNC_TOEPLITZ, 1);
    let fields = [
        ibv::RX_HASH_SRC_IPV4,
        ibv::RX_HASH_DST_IPV4,
        ibv::RX_HASH_SRC_IPV6,
        ibv::RX_HASH_DST_IPV6,
        ibv::RX_HASH_SRC_PORT_TCP,
        ibv::RX_HASH_DST_PORT_TCP,
        ibv::RX_HASH_SRC_PORT_UDP,
        ibv::RX_HASH_DST_PORT_UDP,
        ibv::RX_HASH_IPSEC_SPI,
        ibv::RX_HASH_INNER,
    ];
    assert_eq!(fields, [1, 2, 4, 8, 16, 32, 64, 128, 256, 1 << 31]);
    let mask = (ibv::QP_INIT_ATTR_IND_TABLE, ibv::QP_INIT_ATTR_RX_HASH);
    assert_eq!(mask, (16, 32));
}

/// The raw packet QP type, as a C program printed it from
/// `<infiniband/verbs.h>` (libibverbs-dev 44.0-2).
#[test]
fn raw_packet_constants() {
    assert_eq!(ibv::QPT_RAW_PACKET, 8);
    assert_eq!((ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD), (2, 3, 4));
}

/// roxe's responses: core response, then the `roxe_uapi` part right after
/// it, with no padding in between (the kernel finds the driver part at
/// exactly `size_of` the core response).
#[test]
fn driver_layouts() {
    let mut errs = Vec::new();
    assert_layout!(errs, driver::CreateCqResp, size 32, align 8 {
        ibv_resp: 0,
        drv: 8,
    });
    assert_layout!(errs, driver::CreateCqExResp, size 40, align 8 {
        ibv_resp: 0,
        drv: 16,
    });
    assert_layout!(errs, driver::ResizeCqResp, size 32, align 8 {
        ibv_resp: 0,
        drv: 8,
    });
    assert_layout!(errs, driver::CreateAhResp, size 12, align 4 {
        ibv_resp: 0,
        drv: 4,
    });
    check(
        &mut errs,
        "driver::CreateCqResp",
        "driver part",
        size_of::<driver::CreateCqResp>() - size_of::<uverbs::CreateCqResp>(),
        size_of::<roxe_uapi::CreateCqResp>(),
    );
    check(
        &mut errs,
        "driver::CreateCqExResp",
        "driver part",
        size_of::<driver::CreateCqExResp>() - size_of::<uverbs::ExCreateCqResp>(),
        size_of::<roxe_uapi::CreateCqResp>(),
    );
    check(
        &mut errs,
        "driver::ResizeCqResp",
        "driver part",
        size_of::<driver::ResizeCqResp>() - size_of::<uverbs::ResizeCqResp>(),
        size_of::<roxe_uapi::CreateCqResp>(),
    );
    assert_layout!(errs, driver::CreateQpResp, size 80, align 8 {
        ibv_resp: 0,
        drv: 32,
    });
    assert_layout!(errs, driver::CreateSrqResp, size 48, align 8 {
        ibv_resp: 0,
        drv: 16,
    });
    assert_layout!(errs, driver::ModifySrq, size 32, align 8 {
        ibv_cmd: 0,
        drv: 24,
    });
    assert_layout!(errs, driver::CreateQpExResp, size 88, align 8 {
        ibv_resp: 0,
        drv: 40,
    });
    assert_layout!(errs, driver::CreateWqResp, size 48, align 8 {
        ibv_resp: 0,
        drv: 24,
    });
    assert_layout!(errs, driver::CreateRssQp, size 144, align 8 {
        ibv_cmd: 0,
        drv: 88,
    });
    check(
        &mut errs,
        "driver::CreateQpExResp",
        "driver part",
        size_of::<driver::CreateQpExResp>() - size_of::<uverbs::ExCreateQpResp>(),
        size_of::<roxe_uapi::CreateQpResp>(),
    );
    check(
        &mut errs,
        "driver::CreateWqResp",
        "driver part",
        size_of::<driver::CreateWqResp>() - size_of::<uverbs::ExCreateWqResp>(),
        size_of::<roxe_uapi::CreateWqResp>(),
    );
    check(
        &mut errs,
        "driver::CreateRssQp",
        "driver part",
        size_of::<driver::CreateRssQp>() - size_of::<ibv::CreateQpEx>(),
        size_of::<roxe_uapi::CreateRssQpCmd>(),
    );
    check(
        &mut errs,
        "driver::CreateQpResp",
        "driver part",
        size_of::<driver::CreateQpResp>() - size_of::<uverbs::CreateQpResp>(),
        size_of::<roxe_uapi::CreateQpResp>(),
    );
    check(
        &mut errs,
        "driver::CreateSrqResp",
        "driver part",
        size_of::<driver::CreateSrqResp>() - size_of::<uverbs::CreateSrqResp>(),
        size_of::<roxe_uapi::CreateSrqResp>(),
    );
    check(
        &mut errs,
        "driver::CreateAhResp",
        "driver part",
        size_of::<driver::CreateAhResp>() - size_of::<uverbs::CreateAhResp>(),
        size_of::<roxe_uapi::CreateAhResp>(),
    );
    assert!(errs.is_empty(), "layout mismatches:\n{}", errs.join("\n"));
}

/// The enum values the bind and `ibv_wr_*` paths use, as a C program
/// printed them from `<infiniband/verbs.h>` (libibverbs-dev 44.0-2), and
/// `enum verbs_qp_mask` from rdma-core `v44.0`'s `driver.h`.
#[test]
fn ibv_constants() {
    let ops = [
        ibv::QP_EX_WITH_RDMA_WRITE,
        ibv::QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        ibv::QP_EX_WITH_SEND,
        ibv::QP_EX_WITH_SEND_WITH_IMM,
        ibv::QP_EX_WITH_RDMA_READ,
        ibv::QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        ibv::QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        ibv::QP_EX_WITH_LOCAL_INV,
        ibv::QP_EX_WITH_BIND_MW,
        ibv::QP_EX_WITH_SEND_WITH_INV,
        ibv::QP_EX_WITH_TSO,
        ibv::QP_EX_WITH_ATOMIC_WRITE,
    ];
    assert_eq!(ops, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]);
    assert_eq!((ibv::SEND_SIGNALED, ibv::SEND_INLINE), (2, 8));
    let access = [
        ibv::ACCESS_LOCAL_WRITE,
        ibv::ACCESS_REMOTE_WRITE,
        ibv::ACCESS_REMOTE_READ,
        ibv::ACCESS_ZERO_BASED,
    ];
    assert_eq!(access, [1, 2, 4, 32]);
    assert_eq!((ibv::MW_TYPE_1, ibv::MW_TYPE_2), (1, 2));
    assert_eq!(
        (ibv::WR_LOCAL_INV, ibv::WR_BIND_MW, ibv::WR_SEND_WITH_INV),
        (7, 8, 9)
    );
    assert_eq!(ibv::QP_INIT_ATTR_SEND_OPS_FLAGS, 64);
    assert_eq!((verbs::QP_XRCD, verbs::QP_EX), (1, 2));
}

/// The XRC enum values, as a C program printed them from
/// `<infiniband/verbs.h>` (libibverbs-dev 44.0-2), and
/// `enum verbs_xrcd_mask` from rdma-core `v44.0`'s `driver.h`.
#[test]
fn xrc_constants() {
    assert_eq!((ibv::QPT_XRC_SEND, ibv::QPT_XRC_RECV), (9, 10));
    assert_eq!((ibv::SRQT_BASIC, ibv::SRQT_XRC, ibv::SRQT_TM), (0, 1, 2));
    let srq_mask = [
        ibv::SRQ_INIT_ATTR_TYPE,
        ibv::SRQ_INIT_ATTR_PD,
        ibv::SRQ_INIT_ATTR_XRCD,
        ibv::SRQ_INIT_ATTR_CQ,
        ibv::SRQ_INIT_ATTR_TM,
    ];
    assert_eq!(srq_mask, [1, 2, 4, 8, 16]);
    let open_mask = [
        ibv::QP_OPEN_ATTR_NUM,
        ibv::QP_OPEN_ATTR_XRCD,
        ibv::QP_OPEN_ATTR_CONTEXT,
        ibv::QP_OPEN_ATTR_TYPE,
    ];
    assert_eq!(open_mask, [1, 2, 4, 8]);
    assert_eq!((ibv::XRCD_INIT_ATTR_FD, ibv::XRCD_INIT_ATTR_OFLAGS), (1, 2));
    assert_eq!(ibv::QP_INIT_ATTR_XRCD, 2);
    assert_eq!(verbs::XRCD_HANDLE, 1);
}

/// The flag values libroxe shares with the kernel module (`roxe_uapi`'s
/// `send_flags` and `wc_flags`, `roxe_proto::access`), as
/// `<infiniband/verbs.h>` (libibverbs-dev 44.0-2) defines them. A changed
/// value in the shared crates would change the ABI under every provider.
#[test]
fn shared_flag_values_match_libibverbs() {
    use roxe_proto::access;
    use roxe_uapi::{send_flags, wc_flags};
    let send = [
        send_flags::FENCE,
        send_flags::SIGNALED,
        send_flags::SOLICITED,
        send_flags::INLINE,
        send_flags::IP_CSUM,
    ];
    assert_eq!(send, [1, 2, 4, 8, 16]);
    let wc = [
        wc_flags::GRH,
        wc_flags::WITH_IMM,
        wc_flags::IP_CSUM_OK,
        wc_flags::WITH_INV,
    ];
    assert_eq!(wc, [1, 2, 4, 8]);
    let rights = [
        access::LOCAL_WRITE,
        access::REMOTE_WRITE,
        access::REMOTE_READ,
        access::REMOTE_ATOMIC,
        access::MW_BIND,
        access::ZERO_BASED,
        access::ON_DEMAND,
        access::HUGETLB,
        access::RELAXED_ORDERING,
    ];
    assert_eq!(rights, [1, 2, 4, 8, 16, 32, 64, 128, 1 << 20]);
}
