// Per-step time on the CPU of models with other layers than dense ones (layer_norm,
// skip), through the lane pass and through the blocked pass (cpu/blocked_stages.hpp),
// side by side, with a dense chain of the same widths for scale: one full-batch
// value_and_grad of MSE, median over repetitions, the passes alternating.
//   build/bench/other_layers_step [--batches 1e3,1e4] [--reps 5]
#include "pass_ab.hpp"

int main(int argc, char** argv) {
  using bench::pass_ab::time_model;
  const auto o = bench::pass_ab::parse(argc, argv, "other_layers_step");
  time_model(o, "2-32-skip(32)-norm-1 gelu", tl::chain(tl::dense<2, 32>(tl::gelu), tl::skip(tl::dense<32, 32>(tl::gelu)),
                                                        tl::layer_norm<32>(), tl::dense<32, 1>()));
  time_model(o, "2-128-skip(128,128)-norm-1 silu",
             tl::chain(tl::dense<2, 128>(tl::silu), tl::skip(tl::dense<128, 128>(tl::silu), tl::dense<128, 128>()),
                       tl::layer_norm<128>(), tl::dense<128, 1>()));
  time_model(o, "2-256-norm-256-1 tanh", tl::chain(tl::dense<2, 256>(tl::tanh), tl::layer_norm<256>(),
                                                    tl::dense<256, 256>(tl::tanh), tl::dense<256, 1>()));
  time_model(o, "2-256-skip(256)-1 tanh",
             tl::chain(tl::dense<2, 256>(tl::tanh), tl::skip(tl::dense<256, 256>(tl::tanh)), tl::dense<256, 1>()));
  time_model(o, "2-256-256-1 tanh (dense)",
             tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 256>(tl::tanh), tl::dense<256, 1>()));
}
