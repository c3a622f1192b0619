# Shared settings for roxe's scripts. Source it; do not run it.
ROXE_CACHE=${ROXE_CACHE:-/var/cache/roxe}
ROXE_TOOLS=${ROXE_TOOLS:-/opt/roxe/tools}
ROXE_VENV=${ROXE_VENV:-/opt/roxe/venv}
# Debian's rustc-web, which matches rust-web-src; the rustup shim that may
# sit earlier on PATH has no rust-src and cannot build kernel Rust.
ROXE_RUSTC=${ROXE_RUSTC:-/usr/bin/rustc}
ROXE_BINDGEN=${ROXE_BINDGEN:-$ROXE_TOOLS/bin/bindgen}
ROXE_VNG=${ROXE_VNG:-$ROXE_VENV/bin/vng}

log() { echo "[roxe] $*" >&2; }
die() { echo "roxe: error: $*" >&2; exit 1; }
