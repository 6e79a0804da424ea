#include "tapeless/tapeless.hpp"
auto model = tl::chain(tl::dense<1, 4>([](int x) { return x * 2; }), tl::dense<4, 1>());
