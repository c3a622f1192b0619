// SPDX-License-Identifier: GPL-2.0

//! Network devices and their event notifier.

pub(crate) mod device;
pub(crate) mod notifier;

pub(crate) use device::NetDevice;
