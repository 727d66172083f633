// The HAL's names for the probe results (defined in the public API, include/bitnet/devices.h):
// filled by each backend's probe function; read by selection, `bitnet devices` and receipts.
#pragma once

#include "bitnet/devices.h"

namespace bitnet::hal {

using DeviceInfo = DeviceDescription;
using BackendProbe = BackendDescription;

}  // namespace bitnet::hal
