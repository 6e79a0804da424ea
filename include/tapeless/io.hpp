// tapeless file formats, CPU only: safetensors (checkpoints), .npy and CSV (data sets).
// Separate from tapeless.hpp so code that trains without files does not pay for
// <filesystem> and the parsers.
#pragma once

#include "tapeless/io/checkpoint.hpp"
#include "tapeless/io/csv.hpp"
#include "tapeless/io/npy.hpp"
#include "tapeless/io/safetensors.hpp"
