// Always-on invariant checks: a failed check is a bug in this library, never a user error
// (user errors are Status values). It prints the condition and location, then aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define BITNET_CHECK(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: internal check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
