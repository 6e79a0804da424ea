#include "tapeless/tapeless.hpp"
auto model = tl::chain(tl::dense<1, 4>(), tl::skip(tl::dense<4, 5>()), tl::dense<4, 1>());
