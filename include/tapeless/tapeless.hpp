// tapeless: compile-time reverse-mode AD and small neural networks, CPU path.
// This header never includes CUDA, Thrust or CUB; builds with g++ alone.
#pragma once

#include "tapeless/core/config.hpp"
#include "tapeless/core/dual.hpp"
#include "tapeless/core/errors.hpp"
#include "tapeless/core/functions.hpp"
#include "tapeless/core/math.hpp"
#include "tapeless/expr/autodiff.hpp"
#include "tapeless/expr/expression.hpp"
#include "tapeless/nn/chain.hpp"
#include "tapeless/nn/dense.hpp"
#include "tapeless/nn/losses.hpp"
#include "tapeless/nn/matrix.hpp"
#include "tapeless/nn/optimizers.hpp"
#include "tapeless/nn/parameters.hpp"
#include "tapeless/nn/rng.hpp"
#include "tapeless/cpu/batch.hpp"
#include "tapeless/cpu/train.hpp"
