#include "tapeless/tapeless.hpp"
auto model = tl::chain(tl::dense<1, 4>(tl::gelu), 42);
