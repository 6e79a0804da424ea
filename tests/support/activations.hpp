// The one list of activations that the CPU and GPU gradient tests both run:
// X(TestName, activation object).
#pragma once

#define TL_FOR_EACH_ACTIVATION(X)      \
  X(Identity, tl::identity)            \
  X(Tanh, tl::tanh)                    \
  X(Sigmoid, tl::sigmoid)              \
  X(Softplus, tl::softplus)            \
  X(Relu, tl::relu)                    \
  X(LeakyRelu, tl::leaky_relu_fn(0.1)) \
  X(Elu, tl::elu)                      \
  X(Gelu, tl::gelu)                    \
  X(GeluErf, tl::gelu_erf)             \
  X(Silu, tl::silu)                    \
  X(Sin, tl::sin)                      \
  X(Square, tl::square)
