// The seed fit: Dense(1=>16, gelu) -> Dense(16=>1) trained with MSE and Adam(0.01)
// for 300 full-batch steps on y = x^2 - 2x + noise. Writes x, y, yhat as CSV.
// One source for both paths: built by g++ it trains on the CPU; built by nvcc
// (polyfit.cu) it trains on the GPU when one is usable (--device auto).
//
//   polyfit [--device cpu|cuda|auto] [--csv polyfit.csv] [--epochs 300]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "seed_fit.hpp"
#if TL_DEVICE_COMPILER
#include "tapeless/cuda.hpp"
#endif

int main(int argc, char** argv) try {
  std::string csv_path = "polyfit.csv";
  std::string device_name = "auto";
  std::size_t epochs = seed_fit::epochs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (arg == "--device" && i + 1 < argc) device_name = argv[++i];
    else if (arg == "--epochs" && i + 1 < argc) epochs = std::stoul(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--device cpu|cuda|auto] [--csv FILE] [--epochs N]\n", argv[0]);
      return 2;
    }
  }

  const auto data = seed_fit::make_data();
  const auto model = seed_fit::make_model();
  tl::train_state state(model, seed_fit::initial_parameters(), tl::adam{seed_fit::learning_rate});
  tl::fit_result run;
  std::string used = "cpu";
  if (device_name != "cpu" && device_name != "cuda" && device_name != "auto")
    throw std::invalid_argument("--device must be cpu, cuda or auto, not " + device_name);
#if TL_DEVICE_COMPILER
  const tl::device dev = device_name == "cpu"    ? tl::cpu_device()
                         : device_name == "cuda" ? tl::cuda_device(0)
                                                 : tl::default_device();
  if (dev.is_cuda()) {
    auto gpu = tl::to_device(state, dev);
    run = tl::fit(gpu, tl::mse, tl::to_device(data.x), tl::to_device(data.y), epochs);  // one launch
    state.params = gpu.host_params();
    used = dev.name() + " (whole loop in one kernel launch)";
  }
#else
  if (device_name == "cuda") throw std::runtime_error("this polyfit was built by g++ without CUDA; build with nvcc");
#endif
  if (used == "cpu") run = tl::fit(state, tl::mse, data.x, data.y, epochs, {.progress = true, .log_every = 50});
  const tl::matrix yhat = tl::apply(model, state.params, data.x);
  const float final_loss = tl::value_and_grad(tl::mse, model, state.params, data.x, data.y).loss;

  std::printf("device: %s\n", used.c_str());
  std::printf("final loss (mse): %.6f\n", final_loss);
  std::printf("training time: %.3f ms for %zu steps (%.2f us/step)\n", run.seconds * 1e3, epochs,
              run.seconds * 1e6 / double(epochs));

  std::ofstream csv(csv_path);
  if (!csv) throw std::runtime_error("polyfit: cannot write " + csv_path);
  csv << "x,y,yhat\n";
  for (std::size_t s = 0; s < data.x.batch(); ++s) csv << data.x(0, s) << ',' << data.y(0, s) << ',' << yhat(0, s) << '\n';
  std::printf("wrote %s\n", csv_path.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "polyfit: %s\n", e.what());
  return 1;
}
