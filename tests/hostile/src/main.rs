//! roxe-hostile: plays hostile user space against roxe.
//!
//! It talks to `/dev/infiniband/uverbsN` directly with the uverbs `write()`
//! commands (no libibverbs, no libroxe), maps the shared rings and attacks
//! them: garbage in rings, impossible indices, malformed work requests,
//! bad verbs arguments and mmap abuse. Every check prints a `PASS:` or
//! `FAIL:` line; the exit status is 1 if any check failed.
//!
//! ```text
//! roxe-hostile --dev /dev/infiniband/uverbs0 [--seed N] [--iterations N] all|SCENARIO...
//! ```

mod abi;
mod errno;
mod report;
mod ring;
mod rng;
mod scenario;
mod sys;
mod uverbs;

use report::Report;
use rng::Rng;
use scenario::{Ctx, Fail, Opts};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A scenario: its name on the command line, what it does, and its code.
struct Scenario {
    name: &'static str,
    about: &'static str,
    run: fn(&mut Ctx<'_>) -> Result<(), Fail>,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "cq-garbage",
        about: "random bytes over a whole CQ mapping with an impossible consumer index, then flushes into it; CQ overflow",
        run: scenario::cq_garbage::run,
    },
    Scenario {
        name: "sq-producer",
        about: "an SQ producer index out of range on the doorbell; a full SQ at the boundary",
        run: scenario::sq_producer::run,
    },
    Scenario {
        name: "bad-wqe",
        about: "malformed send WQEs: unknown opcodes, huge num_sge and inline_len, opcodes the QP type forbids",
        run: scenario::bad_wqe::run,
    },
    Scenario {
        name: "random-wqe",
        about: "random bytes in SQ slots with a valid producer, on a fresh QP each iteration",
        run: scenario::random_wqe::run,
    },
    Scenario {
        name: "rq-garbage",
        about: "random bytes in the RQ with valid and invalid producers, flushed by ERR or discarded by RESET",
        run: scenario::rq_garbage::run,
    },
    Scenario {
        name: "srq-resize",
        about: "SRQ resize with bad RingInfo addresses, an impossible producer and garbage receives; the old ring afterwards",
        run: scenario::srq_resize::run,
    },
    Scenario {
        name: "flush",
        about: "RDMA FLUSH WQEs: MRs with and without the flush rights, ranges outside the MR, bad rkeys, bad types and levels, UC",
        run: scenario::flush::run,
    },
    Scenario {
        name: "read-hog",
        about: "reads that are never answered hold the device's read credits; another QP's read must still complete",
        run: scenario::read_hog::run,
    },
    Scenario {
        name: "bad-args",
        about: "verbs commands with bad arguments and unexpected driver input",
        run: scenario::bad_args::run,
    },
    Scenario {
        name: "mmap",
        about: "mmap with unknown offsets, wrong lengths, private mappings, after destroy, across contexts; remaps and resizes",
        run: scenario::mmap::run,
    },
    Scenario {
        name: "notify",
        about: "REQ_NOTIFY_CQ and completion channels: one event per arm, solicited arms, a corrupted CQ",
        run: scenario::notify::run,
    },
    Scenario {
        name: "big-flush",
        about: "the largest SQ and RQ, full, through the doorbell and ERR into an overflowing CQ",
        run: scenario::big_flush::run,
    },
    Scenario {
        name: "mr-rereg",
        about: "REREG_MR adding write rights to pages pinned read-only (a 0444 file), and a window with write rights over them",
        run: scenario::mr_rereg::run,
    },
    Scenario {
        name: "mw-bound",
        about: "DEREG_MR and REREG_MR of an MR with a memory window bound to it (EINVAL, as rxe)",
        run: scenario::mw_bound::run,
    },
    Scenario {
        name: "ah-scope",
        about: "UD sends through another ucontext's and another PD's AH number",
        run: scenario::ah_scope::run,
    },
    Scenario {
        name: "qp-fault",
        about: "CREATE_QP failing after its QP number was taken (roxe's fail_qp_table knob); hostile.sh checks nothing leaked",
        run: scenario::qp_fault::run,
    },
    Scenario {
        name: "cq-srq-fault",
        about: "CREATE_CQ and CREATE_SRQ failing after their budget unit was taken (roxe's fail_cq_init and fail_srq_init knobs); hostile.sh checks nothing leaked",
        run: scenario::cq_srq_fault::run,
    },
    Scenario {
        name: "memcg",
        about: "CQ, SRQ and QP rings larger than a 32 MiB memory cgroup allows fail with ENOMEM inside it and succeed outside (needs cgroup v2 with memory)",
        run: scenario::memcg::run,
    },
    Scenario {
        name: "rss",
        about: "receive WQs, indirection tables and RSS QPs (extended commands): bad sizes, states, tables and hash configurations; objects in use; garbage in a WQ ring",
        run: scenario::rss::run,
    },
    Scenario {
        name: "teardown",
        about: "closing the device file with every object live and the rings still mapped",
        run: scenario::teardown::run,
    },
];

/// Scenarios that need a peer in another guest (`--peer-dir`); `all` leaves
/// them out.
const PEER_SCENARIOS: &[Scenario] = &[Scenario {
    name: "flush-peer",
    about: "RDMA FLUSH as the requester to a peer's QPs and MRs (tests/guest/flush-peer.py); needs --peer-dir",
    run: scenario::flush_peer::run,
}];

fn usage() -> String {
    let mut s = String::from(
        "usage: roxe-hostile --dev /dev/infiniband/uverbsN [--ibdev NAME] [--gid-index N] [--peer-dir DIR] [--seed N] [--iterations N] all|SCENARIO...\n\nscenarios:\n",
    );
    for sc in SCENARIOS.iter().chain(PEER_SCENARIOS) {
        s += &format!("  {:<12} {}\n", sc.name, sc.about);
    }
    s
}

/// Parses a GID as sysfs prints it (`fe80:0000:...`, eight groups).
fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<u16> = s
        .trim()
        .split(':')
        .map(|g| u16::from_str_radix(g, 16).ok())
        .collect::<Option<_>>()?;
    if groups.len() != 8 {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        gid[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
    }
    Some(gid)
}

/// The first RoCE v2 GID of port 1, preferring index 0, or the one at
/// `index`.
fn find_gid(ibdev: &str, index: Option<u8>) -> Result<(u8, [u8; 16]), String> {
    let port = Path::new("/sys/class/infiniband")
        .join(ibdev)
        .join("ports/1");
    let range = match index {
        Some(i) => i..=i,
        None => 0..=15,
    };
    for i in range {
        let Ok(gid) = std::fs::read_to_string(port.join(format!("gids/{i}"))) else {
            continue;
        };
        let ty =
            std::fs::read_to_string(port.join(format!("gid_attrs/types/{i}"))).unwrap_or_default();
        match parse_gid(&gid) {
            Some(g) if g != [0; 16] && ty.trim() == "RoCE v2" => return Ok((i, g)),
            _ => {}
        }
    }
    Err(format!("no RoCE v2 GID in {}", port.display()))
}

/// Why the program cannot start.
enum Start {
    /// `--help`.
    Help,
    /// A bad command line.
    Usage(String),
    /// The device is not usable.
    Device(String),
}

fn parse_args() -> Result<(Opts, Vec<&'static Scenario>), Start> {
    let mut dev = None;
    let mut ibdev = None;
    let mut seed = 1u64;
    let mut iterations = 40u32;
    let mut gid_index = None;
    let mut peer_dir = None;
    let mut chosen: Vec<&'static Scenario> = Vec::new();
    let mut args = std::env::args().skip(1);
    // Bounded by the argument list.
    while let Some(a) = args.next() {
        let usage = |m: String| Start::Usage(m);
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| usage(format!("{name} needs a value")))
        };
        match a.as_str() {
            "--dev" => dev = Some(PathBuf::from(value("--dev")?)),
            "--ibdev" => ibdev = Some(value("--ibdev")?),
            "--gid-index" => {
                gid_index = Some(
                    value("--gid-index")?
                        .parse()
                        .map_err(|e| usage(format!("--gid-index: {e}")))?,
                )
            }
            "--peer-dir" => peer_dir = Some(PathBuf::from(value("--peer-dir")?)),
            "--seed" => {
                seed = value("--seed")?
                    .parse()
                    .map_err(|e| usage(format!("--seed: {e}")))?
            }
            "--iterations" => {
                iterations = value("--iterations")?
                    .parse()
                    .map_err(|e| usage(format!("--iterations: {e}")))?;
                if !(1..=100_000).contains(&iterations) {
                    return Err(usage("--iterations must be 1..=100000".into()));
                }
            }
            "-h" | "--help" => return Err(Start::Help),
            "all" => chosen.extend(SCENARIOS.iter()),
            name => match SCENARIOS
                .iter()
                .chain(PEER_SCENARIOS)
                .find(|s| s.name == name)
            {
                Some(s) => chosen.push(s),
                None => return Err(usage(format!("unknown scenario or option '{name}'"))),
            },
        }
    }
    let dev = dev.ok_or_else(|| Start::Usage("--dev is required".into()))?;
    if chosen.is_empty() {
        return Err(Start::Usage("name at least one scenario, or all".into()));
    }
    let ibdev = match ibdev {
        Some(n) => n,
        None => {
            let base = dev
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| Start::Usage("--dev has no file name".into()))?;
            let p = Path::new("/sys/class/infiniband_verbs")
                .join(base)
                .join("ibdev");
            std::fs::read_to_string(&p)
                .map_err(|e| Start::Device(format!("{}: {e} (give --ibdev)", p.display())))?
                .trim()
                .to_string()
        }
    };
    let (sgid_index, gid) = find_gid(&ibdev, gid_index).map_err(Start::Device)?;
    Ok((
        Opts {
            dev,
            ibdev,
            seed,
            iterations,
            gid,
            sgid_index,
            peer_dir,
        },
        chosen,
    ))
}

fn main() -> ExitCode {
    let (opts, chosen) = match parse_args() {
        Ok(v) => v,
        Err(Start::Help) => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Err(Start::Usage(e)) => {
            eprint!("roxe-hostile: {e}\n{}", usage());
            return ExitCode::from(2);
        }
        Err(Start::Device(e)) => {
            eprintln!("roxe-hostile: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "roxe-hostile: {} ({}), seed {}, {} iterations, GID index {}",
        opts.dev.display(),
        opts.ibdev,
        opts.seed,
        opts.iterations,
        opts.sgid_index
    );
    let mut report = Report::default();
    for sc in chosen {
        report.begin(sc.name);
        // Each scenario draws from its own stream, derived from the seed
        // and its name, so that it replays alone exactly as within `all`.
        let name_hash = sc.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let rng = Rng::new(opts.seed ^ name_hash);
        let mut ctx = Ctx {
            opts: &opts,
            r: &mut report,
            rng,
        };
        if let Err(e) = (sc.run)(&mut ctx) {
            report.fail(format!("stopped: {e}"));
        }
    }
    println!(
        "roxe-hostile: {} passed, {} failed",
        report.passed, report.failed
    );
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
