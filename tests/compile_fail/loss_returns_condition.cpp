#include "tapeless/tapeless.hpp"
auto loss = tl::elementwise_loss([](auto yhat, auto y) { return yhat > y; });
