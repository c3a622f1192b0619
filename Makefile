# roxe: RoCEv2 RDMA over any Ethernet netdev, in Rust.
#
#   make setup      install packages and tools, build the test kernel (cached)
#   make            build roxe.ko and libroxe
#   make demo       boot a guest, create roxe0 and show it with ibv_devinfo
#   make test       setup, builds, host tests, VM tests; a table at the end
#   make bench      benchmark roxe against rxe, siw and TCP on two guests
#                   on the production-config bench kernel: 5 interleaved
#                   rounds and a profile round, about 45 min (plus a
#                   12-min kernel build the first time); ROXE_BENCH_TINY=1:
#                   one round on the test kernel, about 3.5 min (see
#                   Documentation/bench.md)
#   make kdir       print the test kernel's build directory
#
# See README.md.

SHELL := /bin/bash
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
RUSTC ?= /usr/bin/rustc
BINDGEN ?= /opt/roxe/tools/bin/bindgen
# The module is built through clippy-driver (kbuild's CLIPPY=1), with the
# kernel's lint set and warnings as errors: `make module` fails on a clippy
# warning. CLIPPY=0 builds with plain rustc.
CLIPPY ?= 1
CLIPPY_DRIVER ?= /usr/bin/clippy-driver
PROVIDER_SO := $(ROOT)/userspace-provider/target/release/libroxe.so

.PHONY: all setup kdir module provider hostile host-test vm-test test demo bench install clean

all: module provider

setup:
	@$(ROOT)/scripts/setup

kdir:
	@$(ROOT)/scripts/kernel --path

# The kernel build is looked up (and built if missing) on every call, so a
# fresh machine needs nothing but `make setup` first.
# tests/kmod holds test-only kernel verbs consumers (C) that guest scripts
# load; they build with the module, so every VM test finds them.
# scripts/frame-check fails the build on a stack frame over 3.5 KiB.
BUILD_MODULE = KDIR=$$($(ROOT)/scripts/kernel) && \
	$(MAKE) -C "$$KDIR" M=$(ROOT) RUSTC=$(RUSTC) BINDGEN=$(BINDGEN) \
		CLIPPY=$(CLIPPY) CLIPPY_DRIVER=$(CLIPPY_DRIVER) modules && \
	$(ROOT)/scripts/frame-check $(ROOT)/roxe.ko && \
	$(MAKE) -C "$$KDIR" M=$(ROOT)/tests/kmod modules
BUILD_PROVIDER = cargo build --release --locked --manifest-path $(ROOT)/userspace-provider/Cargo.toml

module: setup
	@$(BUILD_MODULE)

provider: setup
	$(BUILD_PROVIDER)

# The hostile user-space test program (tests/hostile), run inside guests.
hostile: setup
	cargo build --release --locked --manifest-path $(ROOT)/tests/hostile/Cargo.toml

host-test: setup
	$(ROOT)/tests/host-tests

vm-test: module provider hostile
	$(ROOT)/tests/vm-tests

# Setup, builds, host tests and VM tests, with a table of every step's time
# and verdict at the end (tests/run-all).
test:
	@$(ROOT)/tests/run-all

# The module (one rustc process) and libroxe (cargo) build side by side.
demo: setup
	@$(BUILD_PROVIDER) & p=$$!; ( $(BUILD_MODULE) ); m=$$?; wait $$p && [ $$m = 0 ]
	$(ROOT)/scripts/vm $(ROOT)/tests/guest/demo.sh

# rxe, siw and roxe measured against each other and TCP on two guests
# (Documentation/bench.md); results in bench-results/. On the bench kernel
# (the default), scripts/bench --build builds that kernel and a roxe.ko for
# it under $ROXE_CACHE, leaving the repository's roxe.ko to the test kernel;
# with ROXE_BENCH_KERNEL=test (or ROXE_BENCH_TINY=1) it runs `make module`.
bench: provider
	$(ROOT)/scripts/bench --build

# Installs libroxe for the host's libibverbs. roxe.ko is built for the test
# kernel; scripts/vm puts it into each guest's module tree.
install: module provider
	$(MAKE) -C $(ROOT)/userspace-provider install

clean:
	-KDIR=$$($(ROOT)/scripts/kernel --path) && [ -d "$$KDIR" ] && $(MAKE) -C "$$KDIR" M=$(ROOT) clean
	-KDIR=$$($(ROOT)/scripts/kernel --path) && [ -d "$$KDIR" ] && $(MAKE) -C "$$KDIR" M=$(ROOT)/tests/kmod clean
	rm -f $(ROOT)/rust/bindings_generated.rs
	-cargo clean --manifest-path $(ROOT)/userspace-provider/Cargo.toml
	-cargo clean --manifest-path $(ROOT)/rust/proto/Cargo.toml
