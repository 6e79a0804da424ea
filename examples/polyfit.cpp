// The seed fit: Dense(1=>16, gelu) -> Dense(16=>1) trained with MSE and Adam(0.01)
// for 300 full-batch steps on y = x^2 - 2x + noise. Writes x, y, yhat as CSV.
//
//   polyfit [--csv polyfit.csv] [--epochs 300]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "seed_fit.hpp"

int main(int argc, char** argv) try {
  std::string csv_path = "polyfit.csv";
  std::size_t epochs = seed_fit::epochs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (arg == "--epochs" && i + 1 < argc) epochs = std::stoul(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--csv FILE] [--epochs N]\n", argv[0]);
      return 2;
    }
  }

  const auto data = seed_fit::make_data();
  const auto model = seed_fit::make_model();
  tl::train_state state(model, seed_fit::initial_parameters(), tl::adam{seed_fit::learning_rate});

  const tl::fit_result run = tl::fit(state, tl::mse, data.x, data.y, epochs, {.progress = true, .log_every = 50});
  const tl::matrix yhat = tl::apply(model, state.params, data.x);
  const float final_loss = tl::value_and_grad(tl::mse, model, state.params, data.x, data.y).loss;

  std::printf("device: cpu\n");
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
