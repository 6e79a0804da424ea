// The seed fit: Dense(1=>16, gelu) -> Dense(16=>1) trained with MSE and Adam(0.01)
// for 300 full-batch steps on y = x^2 - 2x + noise. Writes x, y, yhat as CSV.
// With --model polynomial, the quadratic a x^2 + b x + c itself, fitted by least
// squares (Levenberg-Marquardt), printed with its standard errors.
// One source for both paths: built by g++ it trains on the CPU; built by nvcc
// (polyfit.cu) it trains on the GPU when one is usable (--device auto).
//
//   polyfit [--model network|polynomial] [--device cpu|cuda|auto] [--csv polyfit.csv] [--epochs 300]
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "polyfit_csv.hpp"
#include "polyfit_polynomial.hpp"
#include "seed_fit.hpp"
#if TL_DEVICE_COMPILER
#include "tapeless/cuda.hpp"
#endif

namespace {

constexpr std::size_t max_epochs = 10'000'000;

const char* const usage = "usage: polyfit [--model network|polynomial] [--device cpu|cuda|auto] [--csv FILE] [--epochs N]\n";

const char* const help =
    "Trains Dense(1=>16, gelu) -> Dense(16=>1) with MSE and Adam(0.01) on 128 points of\n"
    "y = x^2 - 2x + noise, full batch, and writes x, y and the fitted yhat as CSV.\n"
    "\n"
    "  --model network|polynomial\n"
    "                          network (the default): the 1-16-1 network above;\n"
    "                          polynomial: a x^2 + b x + c by least squares\n"
    "  --device cpu|cuda|auto  where to train; auto (the default) takes the GPU when one\n"
    "                          is usable, else the CPU, and says why\n"
    "  --csv FILE              where to write the CSV (default polyfit.csv)\n"
    "  --epochs N              training steps, 1 to 10000000 (default 300)\n"
    "  -h, --help              print this and exit\n";

// A mistake on the command line: reported with the usage line, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Digits only: std::stoul would read "-5" as a huge number and "10x" as 10.
std::size_t parse_epochs(const std::string& text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end || value < 1 || value > max_epochs)
    throw usage_error("--epochs takes a whole number from 1 to " + std::to_string(max_epochs) + ", not '" + text +
                      "'");
  return value;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string csv_path = "polyfit.csv";
  std::string device_name = "auto";
  std::string model_name = "network";
  std::size_t epochs = seed_fit::epochs;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string option = argv[i], value;
      if (option == "-h" || option == "--help") {
        std::fputs(usage, stdout);
        std::fputs(help, stdout);
        return 0;
      }
      const bool takes_value = option == "--csv" || option == "--device" || option == "--epochs" || option == "--model";
      if (const auto equals = option.find('='); equals != std::string::npos && option.starts_with("--")) {
        value = option.substr(equals + 1);  // --epochs=300
        option.resize(equals);
        if (option != "--csv" && option != "--device" && option != "--epochs" && option != "--model")
          throw usage_error("unknown option '" + option + "'");
      } else if (!takes_value) {
        throw usage_error("unknown argument '" + option + "'");
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw usage_error(option + " needs a value");
      }
      if (option == "--csv") csv_path = value;
      else if (option == "--device") device_name = value;
      else if (option == "--model") model_name = value;
      else epochs = parse_epochs(value);
    }
    if (device_name != "cpu" && device_name != "cuda" && device_name != "auto")
      throw usage_error("--device takes cpu, cuda or auto, not '" + device_name + "'");
    if (model_name != "network" && model_name != "polynomial")
      throw usage_error("--model takes network or polynomial, not '" + model_name + "'");
  } catch (const usage_error& e) {
    std::fprintf(stderr, "polyfit: %s\n%s", e.what(), usage);
    return 2;
  }

  // The CSV is written at the end by tl::save_csv (atomically, by a rename, and with
  // every digit); what would make that fail is checked before training, without
  // touching the file: a missing directory, or a target that is not a regular file.
  const std::filesystem::path csv_file(csv_path);
  const std::filesystem::path csv_directory = csv_file.has_parent_path() ? csv_file.parent_path() : ".";
  if (!std::filesystem::is_directory(csv_directory) ||
      (std::filesystem::exists(csv_file) && !std::filesystem::is_regular_file(csv_file)))
    throw std::runtime_error("cannot write " + csv_path);

  const auto data = seed_fit::make_data();
  if (model_name == "polynomial") return fit_polynomial(data, device_name, csv_path);
  const auto model = seed_fit::make_model();
  tl::train_state state(model, seed_fit::initial_parameters(), tl::adam{seed_fit::learning_rate});
  tl::fit_result run;
  std::string used = "cpu";
  bool trained = false;
#if TL_DEVICE_COMPILER
  const tl::device dev = device_name == "cpu"    ? tl::cpu_device()
                         : device_name == "cuda" ? tl::cuda_device(0)
                                                 : tl::default_device();
  if (dev.is_cuda()) {
    auto gpu = tl::to_device(state, dev);
    run = tl::fit(gpu, tl::mse, tl::to_device(data.x), tl::to_device(data.y), epochs,
                 {.progress = true, .log_every = 50});  // one launch; progress reported after it
    state.params = gpu.host_params();
    used = dev.name() + " (whole loop in one kernel launch)";
    trained = true;
  } else if (device_name == "auto") {
    used = "cpu (--device auto: no usable GPU: " + tl::cuda_unavailable_reason() + ")";
  }
#else
  if (device_name == "cuda") throw std::runtime_error("this polyfit was built by g++ without CUDA; build with nvcc");
  if (device_name == "auto") used = "cpu (--device auto: this polyfit was built by g++, without CUDA)";
#endif
  if (!trained) run = tl::fit(state, tl::mse, data.x, data.y, epochs, {.progress = true, .log_every = 50});
  const tl::matrix yhat = tl::apply(model, state.params, data.x);
  const float final_loss = tl::value_and_grad(tl::mse, model, state.params, data.x, data.y).loss;

  std::printf("device: %s\n", used.c_str());
  std::printf("final loss (mse): %.6f\n", final_loss);
  std::printf("training time: %.3f ms for %zu steps (%.2f us/step)\n", run.seconds * 1e3, epochs,
              run.seconds * 1e6 / double(epochs));

  seed_fit::save_fit_csv(csv_path, data, yhat);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "polyfit: %s\n", e.what());
  return 1;
}
