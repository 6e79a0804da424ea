// Where fit()'s whole loop in one block stops paying: models small enough for the
// per-thread kernels (P + 1 <= 256), each at batches around the bounds, trained with
// one launch (.one_launch = true, with TAPELESS_GPU_ONE_LAUNCH=always set here so that
// fit takes it past the bounds too) and with the per-step kernels replayed in graphs
// (.one_launch = false), side by side; medians of `repetitions` fits of 1000 steps.
// The last column says which the automatic choice takes (detail::one_block_fits).
//   build-gpu/bench/one_launch_gpu [repetitions]
#include <cstdio>
#include <cstdlib>  // setenv (POSIX)

#include "fit_timing.hpp"
#include "tapeless/cuda.hpp"

namespace {

template <class Model>
void sweep(const char* name, const Model& model, int repetitions) {
  constexpr std::size_t P = Model::parameter_count;
  for (const std::size_t batch : {128, 256, 512, 768, 1000, 1500, 2048, 3000, 4096}) {
    tl::rng gen(7);
    tl::matrix x(Model::inputs, batch), y(Model::outputs, batch);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = gen.symmetric<float>();
    for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] = 0.5f * gen.symmetric<float>();
    const auto dx = tl::to_device(x), dy = tl::to_device(y);
    const tl::cuda_train_state initial(model, tl::init(model, gen), tl::adam{1e-3f});
    auto s = initial;
    const std::size_t steps = 1000;
    const auto one = bench::time_fits(s, initial, tl::mse, dx, dy, steps, repetitions, {.one_launch = true});
    const auto graphs = bench::time_fits(s, initial, tl::mse, dx, dy, steps, repetitions, {.one_launch = false});
    const std::size_t work = batch * (P + 1);
    std::printf("%-12s P %4zu batch %5zu work %7zu  one_launch %8.2f us  per_step %8.2f us  ratio %5.2f  auto %s\n",
                name, P, batch, work, one.median_us_per_step, graphs.median_us_per_step,
                one.median_us_per_step / graphs.median_us_per_step,
                tl::detail::one_block_fits<Model>(batch) ? "one_launch" : "per_step");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 5;
  setenv("TAPELESS_GPU_ONE_LAUNCH", "always", 1);  // before the first fit, which reads it
  tl::cuda_device(0);
  std::printf("# one launch against per-step graphs, µs a step (one_block_work %zu, one_block_square_work %zu): %s %d\n",
              tl::detail::one_block_work, tl::detail::one_block_square_work, argv[0], repetitions);
  sweep("1-16-1 gelu", tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()), repetitions);
  sweep("2-16-1", tl::chain(tl::dense<2, 16>(tl::tanh), tl::dense<16, 1>()), repetitions);
  sweep("1-32-1", tl::chain(tl::dense<1, 32>(tl::tanh), tl::dense<32, 1>()), repetitions);
  sweep("2-32-1", tl::chain(tl::dense<2, 32>(tl::tanh), tl::dense<32, 1>()), repetitions);
  sweep("1-8-8-8-1", tl::chain(tl::dense<1, 8>(tl::tanh), tl::dense<8, 8>(tl::tanh), tl::dense<8, 8>(tl::tanh), tl::dense<8, 1>()), repetitions);
  sweep("1-64-1", tl::chain(tl::dense<1, 64>(tl::tanh), tl::dense<64, 1>()), repetitions);
  sweep("2-48-2", tl::chain(tl::dense<2, 48>(tl::tanh), tl::dense<48, 2>()), repetitions);
}
