//! roxe's driver ABI (`roxe-uapi`) to and from bytes.
//!
//! Every field is placed at the offset the shared definition gives it
//! (`offset_of!`), so this program follows the structs the module and the
//! provider are built from, and it can still write any bytes it likes.

use core::mem::{offset_of, size_of};
use roxe_uapi::{
    Cqe, CreateCqResp, CreateQpResp, CreateRssQpCmd, CreateSrqResp, ModifySrqCmd, RecvWqe,
    RingHeader, RingInfo, SendWqe, Sge,
};

fn get<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    b[off..off + N].try_into().expect("field inside its struct")
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(get(b, off))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(get(b, off))
}

/// Offset of the producer index in a ring.
pub const PRODUCER: usize = offset_of!(RingHeader, producer);
/// Offset of the consumer index in a ring.
pub const CONSUMER: usize = offset_of!(RingHeader, consumer);

/// Parses the driver part of a `CREATE_CQ`/`RESIZE_CQ` response.
pub fn create_cq_resp(b: &[u8]) -> CreateCqResp {
    CreateCqResp {
        mmap_offset: u64_at(b, offset_of!(CreateCqResp, mmap_offset)),
        mmap_size: u64_at(b, offset_of!(CreateCqResp, mmap_size)),
        num_slots: u32_at(b, offset_of!(CreateCqResp, num_slots)),
        slot_size: u32_at(b, offset_of!(CreateCqResp, slot_size)),
    }
}

/// Parses a `RingInfo` (in a response, or where `MODIFY_SRQ` wrote it).
pub fn ring_info(b: &[u8]) -> RingInfo {
    RingInfo {
        mmap_offset: u64_at(b, offset_of!(RingInfo, mmap_offset)),
        mmap_size: u64_at(b, offset_of!(RingInfo, mmap_size)),
        num_slots: u32_at(b, offset_of!(RingInfo, num_slots)),
        slot_size: u32_at(b, offset_of!(RingInfo, slot_size)),
    }
}

/// Parses the driver part of a `CREATE_QP` response.
pub fn create_qp_resp(b: &[u8]) -> CreateQpResp {
    CreateQpResp {
        sq: ring_info(&b[offset_of!(CreateQpResp, sq)..]),
        rq: ring_info(&b[offset_of!(CreateQpResp, rq)..]),
    }
}

/// Parses the driver part of a `CREATE_SRQ` response.
pub fn create_srq_resp(b: &[u8]) -> CreateSrqResp {
    CreateSrqResp {
        rq: ring_info(&b[offset_of!(CreateSrqResp, rq)..]),
        srq_num: u32_at(b, offset_of!(CreateSrqResp, srq_num)),
        _reserved: u32_at(b, offset_of!(CreateSrqResp, _reserved)),
    }
}

/// The bytes of `MODIFY_SRQ`'s driver input.
pub fn modify_srq_cmd(c: &ModifySrqCmd) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<ModifySrqCmd>()];
    put(
        &mut b,
        offset_of!(ModifySrqCmd, ring_info_addr),
        &c.ring_info_addr.to_ne_bytes(),
    );
    b
}

/// Parses a CQE.
pub fn cqe(b: &[u8]) -> Cqe {
    Cqe {
        wr_id: u64_at(b, offset_of!(Cqe, wr_id)),
        status: u32_at(b, offset_of!(Cqe, status)),
        opcode: u32_at(b, offset_of!(Cqe, opcode)),
        vendor_err: u32_at(b, offset_of!(Cqe, vendor_err)),
        byte_len: u32_at(b, offset_of!(Cqe, byte_len)),
        imm_data: u32_at(b, offset_of!(Cqe, imm_data)),
        qp_num: u32_at(b, offset_of!(Cqe, qp_num)),
        src_qp: u32_at(b, offset_of!(Cqe, src_qp)),
        wc_flags: u32_at(b, offset_of!(Cqe, wc_flags)),
        pkey_index: u16::from_ne_bytes(get(b, offset_of!(Cqe, pkey_index))),
        slid: u16::from_ne_bytes(get(b, offset_of!(Cqe, slid))),
        sl: b[offset_of!(Cqe, sl)],
        dlid_path_bits: b[offset_of!(Cqe, dlid_path_bits)],
        port_num: b[offset_of!(Cqe, port_num)],
        network_hdr_type: b[offset_of!(Cqe, network_hdr_type)],
        _reserved: [0, 1, 2, 3].map(|i| u32_at(b, offset_of!(Cqe, _reserved) + 4 * i)),
    }
}

/// The bytes of a send WQE's fixed part.
pub fn send_wqe(w: &SendWqe) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<SendWqe>()];
    put(&mut b, offset_of!(SendWqe, wr_id), &w.wr_id.to_ne_bytes());
    put(&mut b, offset_of!(SendWqe, opcode), &w.opcode.to_ne_bytes());
    put(
        &mut b,
        offset_of!(SendWqe, send_flags),
        &w.send_flags.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, imm_data),
        &w.imm_data.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, num_sge),
        &w.num_sge.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, inline_len),
        &w.inline_len.to_ne_bytes(),
    );
    put(&mut b, offset_of!(SendWqe, rkey), &w.rkey.to_ne_bytes());
    put(
        &mut b,
        offset_of!(SendWqe, remote_addr),
        &w.remote_addr.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, compare_add),
        &w.compare_add.to_ne_bytes(),
    );
    put(&mut b, offset_of!(SendWqe, swap), &w.swap.to_ne_bytes());
    put(&mut b, offset_of!(SendWqe, ah_num), &w.ah_num.to_ne_bytes());
    put(
        &mut b,
        offset_of!(SendWqe, remote_qpn),
        &w.remote_qpn.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, remote_qkey),
        &w.remote_qkey.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(SendWqe, _reserved),
        &w._reserved.to_ne_bytes(),
    );
    b
}

/// The bytes of an RSS QP's driver input (`CreateRssQpCmd`).
pub fn create_rss_qp_cmd(c: &CreateRssQpCmd) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<CreateRssQpCmd>()];
    put(
        &mut b,
        offset_of!(CreateRssQpCmd, hash_fields),
        &c.hash_fields.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(CreateRssQpCmd, hash_function),
        &[c.hash_function],
    );
    put(&mut b, offset_of!(CreateRssQpCmd, key_len), &[c.key_len]);
    put(&mut b, offset_of!(CreateRssQpCmd, _reserved), &c._reserved);
    put(&mut b, offset_of!(CreateRssQpCmd, key), &c.key);
    b
}

/// The bytes of a scatter/gather element, as it follows a WQE's fixed part.
pub fn sge(s: &Sge) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<Sge>()];
    put(&mut b, offset_of!(Sge, addr), &s.addr.to_ne_bytes());
    put(&mut b, offset_of!(Sge, length), &s.length.to_ne_bytes());
    put(&mut b, offset_of!(Sge, lkey), &s.lkey.to_ne_bytes());
    b
}

/// The `wr_id` of whatever bytes sit in a send slot.
pub fn send_wr_id(slot: &[u8]) -> u64 {
    u64_at(slot, offset_of!(SendWqe, wr_id))
}

/// The bytes of a receive WQE's fixed part.
pub fn recv_wqe(w: &RecvWqe) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<RecvWqe>()];
    put(&mut b, offset_of!(RecvWqe, wr_id), &w.wr_id.to_ne_bytes());
    put(
        &mut b,
        offset_of!(RecvWqe, num_sge),
        &w.num_sge.to_ne_bytes(),
    );
    put(
        &mut b,
        offset_of!(RecvWqe, _reserved),
        &w._reserved.to_ne_bytes(),
    );
    b
}

/// The `wr_id` of whatever bytes sit in a receive slot.
pub fn recv_wr_id(slot: &[u8]) -> u64 {
    u64_at(slot, offset_of!(RecvWqe, wr_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_wqe_round_trips_its_id() {
        let w = SendWqe {
            wr_id: 0x1122_3344_5566_7788,
            opcode: 9,
            ..SendWqe::default()
        };
        let b = send_wqe(&w);
        assert_eq!(b.len(), 72);
        assert_eq!(send_wr_id(&b), w.wr_id);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 9);
    }

    #[test]
    fn sge_fields_go_to_their_offsets() {
        let b = sge(&Sge {
            addr: 0x1122_3344_5566_7788,
            length: 200,
            lkey: 0xabcd,
        });
        assert_eq!(b.len(), 16);
        assert_eq!(u64_at(&b, 0), 0x1122_3344_5566_7788);
        assert_eq!((u32_at(&b, 8), u32_at(&b, 12)), (200, 0xabcd));
    }

    #[test]
    fn flush_operands_go_to_their_offsets() {
        let w = SendWqe {
            compare_add: 0x1234,
            swap: 0x0102,
            ..SendWqe::default()
        };
        let b = send_wqe(&w);
        assert_eq!((u64_at(&b, 40), u64_at(&b, 48)), (0x1234, 0x0102));
    }

    #[test]
    fn srq_structs_come_from_their_offsets() {
        let mut b = vec![0u8; size_of::<CreateSrqResp>()];
        put(&mut b, 0, &0x1000u64.to_ne_bytes());
        put(&mut b, 8, &0x3000u64.to_ne_bytes());
        put(&mut b, 16, &16u32.to_ne_bytes());
        put(&mut b, 20, &64u32.to_ne_bytes());
        put(&mut b, 24, &5u32.to_ne_bytes());
        let r = create_srq_resp(&b);
        assert_eq!(
            r.rq,
            RingInfo {
                mmap_offset: 0x1000,
                mmap_size: 0x3000,
                num_slots: 16,
                slot_size: 64
            }
        );
        assert_eq!(r.srq_num, 5);
        let c = modify_srq_cmd(&ModifySrqCmd {
            ring_info_addr: 0x1122_3344_5566_7788,
        });
        assert_eq!(c, 0x1122_3344_5566_7788u64.to_ne_bytes());
    }

    #[test]
    fn rss_cmd_fields_go_to_their_offsets() {
        let mut key = [0u8; roxe_uapi::RSS_KEY_MAX];
        key[0] = 0x6d;
        key[39] = 0xfa;
        let b = create_rss_qp_cmd(&CreateRssQpCmd {
            hash_fields: 0x8000_0003,
            hash_function: 1,
            key_len: 40,
            _reserved: [0, 0, 0, 0, 0, 9],
            key,
        });
        assert_eq!(b.len(), 56);
        assert_eq!(u64_at(&b, 0), 0x8000_0003);
        assert_eq!((b[8], b[9], b[15]), (1, 40, 9));
        assert_eq!((b[16], b[55]), (0x6d, 0xfa));
    }

    #[test]
    fn cqe_fields_come_from_their_offsets() {
        let mut b = vec![0u8; 64];
        put(&mut b, 0, &7u64.to_ne_bytes());
        put(&mut b, 8, &5u32.to_ne_bytes());
        put(&mut b, 28, &0x11u32.to_ne_bytes());
        let c = cqe(&b);
        assert_eq!((c.wr_id, c.status, c.qp_num), (7, 5, 0x11));
    }
}
