// Per-step time on the CPU of models of one hidden layer, In -> W -> Out, through the
// lane pass and through the blocked pass side by side: the measurement behind
// cpu/pass_choice.hpp's lanes_max_one_hidden_weights (192: models up to it take the
// lane pass by type, those past it the blocked pass). The last column names the pass the
// type takes; the ratio is lanes / blocked.
//   build/bench/one_hidden_layer_step [--batches 1e3,1e4] [--reps 5]
#include "pass_ab.hpp"

int main(int argc, char** argv) {
  using bench::pass_ab::time_model;
  const auto o = bench::pass_ab::parse(argc, argv, "one_hidden_layer_step");
  // Up to 192 weights (In W + W Out): thin products.
  time_model(o, "1-32-1 tanh (64)", tl::chain(tl::dense<1, 32>(tl::tanh), tl::dense<32, 1>()));
  time_model(o, "1-96-1 tanh (192)", tl::chain(tl::dense<1, 96>(tl::tanh), tl::dense<96, 1>()));
  time_model(o, "2-32-1 tanh (96)", tl::chain(tl::dense<2, 32>(tl::tanh), tl::dense<32, 1>()));
  time_model(o, "2-64-1 gelu (192)", tl::chain(tl::dense<2, 64>(tl::gelu), tl::dense<64, 1>()));
  time_model(o, "2-64-1 relu (192)", tl::chain(tl::dense<2, 64>(tl::relu), tl::dense<64, 1>()));
  time_model(o, "3-32-1 tanh (128)", tl::chain(tl::dense<3, 32>(tl::tanh), tl::dense<32, 1>()));
  time_model(o, "2-48-2 tanh (192)", tl::chain(tl::dense<2, 48>(tl::tanh), tl::dense<48, 2>()));
  // Past it: about even, then faster blocked.
  time_model(o, "2-96-1 tanh (288)", tl::chain(tl::dense<2, 96>(tl::tanh), tl::dense<96, 1>()));
  time_model(o, "3-64-1 tanh (256)", tl::chain(tl::dense<3, 64>(tl::tanh), tl::dense<64, 1>()));
  time_model(o, "4-64-3 tanh (448)", tl::chain(tl::dense<4, 64>(tl::tanh), tl::dense<64, 3>()));
  time_model(o, "16-64-1 tanh (1088)", tl::chain(tl::dense<16, 64>(tl::tanh), tl::dense<64, 1>()));
  // Thin ends, wider: faster on lanes on the AMD Zen 5 machine up to 2-256-1 (0.61-0.87x),
  // 3x slower at 2-512-1, whose lane sums (P x 16 floats) outgrow the L1; not measured on
  // Intel yet (docs/performance.md, 2026-12-07/08 night), so the rule stays at 192.
  time_model(o, "2-128-1 tanh (384)", tl::chain(tl::dense<2, 128>(tl::tanh), tl::dense<128, 1>()));
  time_model(o, "3-128-1 tanh (512)", tl::chain(tl::dense<3, 128>(tl::tanh), tl::dense<128, 1>()));
  time_model(o, "2-256-1 tanh (768)", tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 1>()));
  time_model(o, "2-512-1 tanh (1536)", tl::chain(tl::dense<2, 512>(tl::tanh), tl::dense<512, 1>()));
}
