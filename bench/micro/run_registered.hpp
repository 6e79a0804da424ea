// The end of every microbenchmark's main: the command that reproduces the run and what
// it measures go into the report's context, then Google Benchmark runs what was
// registered (arguments it does not know are an error, exit 1).
#pragma once

#include <benchmark/benchmark.h>

#include <string>

namespace bench {

inline int run_registered(int argc, char** argv, const std::string& what) {
  std::string command;  // before Initialize, which removes the arguments it reads
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  benchmark::AddCustomContext("command", command);
  benchmark::AddCustomContext("what", what);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace bench
