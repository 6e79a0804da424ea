#include "tapeless/tapeless.hpp"
auto g = tl::value_and_grad([](auto x, auto y) { return x * y; }, std::array{1, 2});
