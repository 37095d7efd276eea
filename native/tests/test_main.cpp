// C++ unit tests for the native core (run with ctest). Plain asserts with messages; no framework needed.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "space.hpp"

using namespace syno;

static int failures = 0;
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                        \
        }                                                                      \
    } while (0)

int main() {
    std::printf("ok\n");
    return failures ? 1 : 0;
}
