// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Device attribute post-processing.

use core::ffi::c_char;

/// Formats the kernel's raw 64-bit firmware version into `fw_ver`.
///
/// The kernel reports `ib_device_attr.fw_ver` as a number; libibverbs leaves
/// `ibv_device_attr.fw_ver` empty. roxe uses rdma-core's rxe convention:
/// bits 47..32, 31..16 and 15..0 are major, minor and sub-minor, printed as
/// `major.minor.sub_minor`. The result is always NUL-terminated.
pub fn format_fw_ver(raw: u64, fw_ver: &mut [c_char; 64]) {
    let text = format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    );
    fw_ver.fill(0);
    // At most 17 bytes ("65535.65535.65535"); the last byte stays NUL anyway.
    for (dst, &src) in fw_ver[..63].iter_mut().zip(text.as_bytes()) {
        // CAST: ASCII digits and dots fit c_char whatever its signedness.
        *dst = src as c_char;
    }
}

#[cfg(test)]
mod tests {
    use super::format_fw_ver;
    use core::ffi::{CStr, c_char};

    fn formatted(raw: u64) -> String {
        let mut buf: [c_char; 64] = [0x55; 64];
        format_fw_ver(raw, &mut buf);
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        CStr::from_bytes_until_nul(&bytes)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from("<not NUL-terminated>"))
    }

    #[test]
    fn splits_the_three_16_bit_fields() {
        assert_eq!(formatted(0), "0.0.0");
        assert_eq!(formatted((1 << 32) | (2 << 16) | 3), "1.2.3");
        assert_eq!(formatted(0x0000_ffff_ffff_ffff), "65535.65535.65535");
    }

    #[test]
    fn ignores_the_top_16_bits() {
        assert_eq!(formatted(0xabcd_0001_0002_0003), "1.2.3");
    }

    #[test]
    fn clears_the_old_contents() {
        let mut buf: [c_char; 64] = [0x41; 64];
        format_fw_ver(0, &mut buf);
        assert!(buf[5..].iter().all(|&c| c == 0));
    }
}
