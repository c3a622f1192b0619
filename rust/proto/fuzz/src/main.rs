// SPDX-License-Identifier: GPL-2.0

//! `fuzz-parse`: runs the roxe-proto mutation fuzzer.
//!
//! ```text
//! cargo run --release --locked --manifest-path rust/proto/fuzz/Cargo.toml
//! ROXE_FUZZ_ITERS=1000000 ROXE_FUZZ_SEED=42 cargo run --release ...
//! ```
//!
//! `ROXE_FUZZ_ITERS` (default 200000) sets the number of iterations and
//! `ROXE_FUZZ_SEED` (default 0x726f7865) the seed; a failure names both,
//! so it can be replayed. Exits non-zero on the first failure.

use std::process::ExitCode;
use std::time::Instant;

use roxe_proto::headers::ParseError;

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.map_err(|e| format!("{name}={s}: {e}"))
        }
    }
}

fn main() -> ExitCode {
    let (iters, seed) = match (
        env_u64("ROXE_FUZZ_ITERS", 200_000),
        env_u64("ROXE_FUZZ_SEED", 0x726f_7865),
    ) {
        (Ok(i), Ok(s)) => (i, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("fuzz-parse: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Failures are reported below, with the input; the default hook would
    // print the message a second time.
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    match roxe_proto_fuzz::run(seed, iters) {
        Ok(stats) => {
            println!(
                "fuzz-parse: seed {seed:#x}, {} iterations in {:.2?}",
                stats.iterations,
                start.elapsed()
            );
            println!("  accepted after mutation: {}", stats.ok);
            for e in ParseError::ALL {
                println!("  {:<20} {}", e.name(), stats.errors[e.index()]);
            }
            println!("  ICRC bit flips checked: {}", stats.icrc_flips);
            println!("fuzz-parse: ok, no panics");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!(
                "fuzz-parse: FAILED at iteration {} (seed {seed:#x}): {}",
                f.iteration, f.message
            );
            let hex: Vec<String> = f.input.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("  input ({} bytes): {}", f.input.len(), hex.join(""));
            ExitCode::FAILURE
        }
    }
}
