// libFuzzer entry for one target, chosen at compile time (RAILYARD_FUZZ_TARGET is the function's name).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  railyard::fuzz::RAILYARD_FUZZ_TARGET(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
