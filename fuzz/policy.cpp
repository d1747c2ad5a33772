// Fuzz target: the policy parser (--policy, DUET_POLICY, duet_engine_create's policy text).
// Property: a policy that parses prints a text that parses to a policy printing the same text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "duet/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = duet::parse_policy(text, {}, "fuzz");
  if (!p.ok()) return 0;
  const std::string once = p->str();
  auto again = duet::parse_policy(once, {}, "fuzz");
  if (!again.ok()) {
    std::fprintf(stderr, "a printed policy does not parse: '%s': %s\n", once.c_str(),
                 again.status().message().c_str());
    std::abort();
  }
  if (again->str() != once) {
    std::fprintf(stderr, "policy text -> policy -> text differs: '%s' then '%s'\n", once.c_str(),
                 again->str().c_str());
    std::abort();
  }
  return 0;
}
