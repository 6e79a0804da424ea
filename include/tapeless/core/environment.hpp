// Switches read from the environment (TAPELESS_CPU_PASS, TAPELESS_GPU_ONE_LAUNCH): the
// parse and the check each caller's read-once flag shares.
#pragma once

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tl::detail {

// Unset or empty: off. `on`: on. `off`, where the switch names one: off too. Anything
// else is a typo that would silently run or time the wrong path: std::invalid_argument
// naming the variable, its values and what it holds.
inline bool environment_switch(const char* name, const char* on, const char* off = nullptr) {
  const char* env = std::getenv(name);
  if (!env || !*env) return false;
  if (std::strcmp(env, on) == 0) return true;
  if (off && std::strcmp(env, off) == 0) return false;
  throw std::invalid_argument(std::string("tapeless: ") + name + " must be " + on + (off ? std::string(" or ") + off : "") +
                              " (or unset), got '" + env + "'");
}

}  // namespace tl::detail
