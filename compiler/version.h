// dskc version string (from CMake's project version).
#pragma once
namespace dskc {
inline constexpr const char* kDskcVersion = DSKC_VERSION;
}
