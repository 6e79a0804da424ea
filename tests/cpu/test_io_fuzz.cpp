// Seeded mutations of valid safetensors, .npy and CSV files fed to the loaders: whatever
// the bytes, a loader either returns a consistent result or throws tl::io_error /
// tl::shape_error; any other exception, a crash or (under the sanitizers) any memory or
// undefined-behaviour error fails. Outcome counts are printed per format.
// TAPELESS_FUZZ_SEED=n picks another seed; the default keeps CI reproducible.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../support/io_files.hpp"
#include "tapeless/io.hpp"

namespace {

std::uint64_t fuzz_seed() {
  const char* text = std::getenv("TAPELESS_FUZZ_SEED");
  return text ? std::strtoull(text, nullptr, 10) : 20261203;
}

struct outcomes {
  std::size_t accepted = 0, io_errors = 0, shape_errors = 0, reported = 0;
};

// Writes `bytes` to `file`, runs `load`, and files the outcome; `what` names the mutation.
void feed(const std::filesystem::path& file, const std::string& bytes, const std::string& what,
          const std::function<void()>& load, outcomes& counts) {
  // A new file each time: truncating one in place makes ext4 flush it on close (slow).
  std::filesystem::remove(file);
  tl_test::write_bytes(file, bytes);
  try {
    load();
    ++counts.accepted;
  } catch (const tl::io_error&) {
    ++counts.io_errors;
  } catch (const tl::shape_error&) {
    ++counts.shape_errors;
  } catch (const std::exception& e) {
    if (counts.reported++ < 10) ADD_FAILURE() << what << ": not a tapeless exception: " << typeid(e).name() << ": " << e.what();
  } catch (...) {
    if (counts.reported++ < 10) ADD_FAILURE() << what << ": a non-std exception";
  }
}

// The byte-level mutations every format gets.
void byte_mutations(const std::string& valid, std::mt19937_64& rng, std::string_view alphabet, int random_cases,
                    const std::function<void(const std::string&, const std::string&)>& run) {
  for (std::size_t length = 0; length < valid.size(); ++length) run(valid.substr(0, length), "truncated to " + std::to_string(length));
  for (std::size_t bit = 0; bit < valid.size() * 8; ++bit) {
    std::string m = valid;
    m[bit / 8] = char(m[bit / 8] ^ (1 << (bit % 8)));
    run(m, "bit " + std::to_string(bit) + " flipped");
  }
  std::uniform_int_distribution<std::size_t> position(0, valid.size() - 1);
  for (int i = 0; i < random_cases; ++i) {
    std::string m = valid;
    const int kind = i % 4, count = 1 + int(rng() % 4);
    for (int k = 0; k < count; ++k) {
      const std::size_t at = position(rng) % (m.size() + 1);
      const char byte = rng() % 2 ? alphabet[rng() % alphabet.size()] : char(rng());
      if (kind == 0 || kind == 1) {
        if (at < m.size()) m[at] = byte;  // overwrite
      } else if (kind == 2) {
        m.insert(at, 1 + rng() % 3, byte);  // insert
      } else if (at < m.size()) {
        m.erase(at, 1 + rng() % 8);  // delete a range
      }
    }
    run(m, "random edit " + std::to_string(i));
  }
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

void report(const char* format, const outcomes& counts) {
  std::cout << "[ fuzz     ] " << format << ": " << counts.accepted << " accepted, " << counts.io_errors
            << " rejected (io_error), " << counts.shape_errors << " rejected (shape_error), "
            << counts.accepted + counts.io_errors + counts.shape_errors + counts.reported << " cases" << std::endl;
  EXPECT_EQ(counts.reported, 0u);
}

TEST(IoFuzz, Safetensors) {
  tl_test::scratch_directory dir;
  std::mt19937_64 rng(fuzz_seed());
  const std::vector<float> w{1, -2, 3.5f, 0, 1e-3f, 7};
  const std::vector<double> b{0.5, -0.25, 1e300}, s{2}, empty;
  const std::int64_t steps[2] = {7, -1};
  const std::uint16_t half[3] = {0x3f80, 0xc000, 0x7fc0};  // BF16 1, -2, NaN
  tl::save_safetensors(dir / "valid.safetensors",
                       std::vector<tl::tensor_view>{{"w", w, {2, 3}},
                                                    {"b", b, {3}},
                                                    {"s", s, {}},
                                                    {"e", empty, {1, 0}},
                                                    {"n", tl::dtype::i64, {2}, std::as_bytes(std::span(steps))},
                                                    {"h", tl::dtype::bf16, {3}, std::as_bytes(std::span(half))}},
                       {{"k", "v\u00e9"}});
  const std::string valid = tl_test::read_bytes(dir / "valid.safetensors");
  std::uint64_t header_length;
  std::memcpy(&header_length, valid.data(), 8);
  const std::string header = valid.substr(8, header_length), data = valid.substr(8 + header_length);
  outcomes counts;
  const auto file = dir / "m.safetensors";
  const auto load = [&] {
    const tl::safetensors_file f = tl::load_safetensors(file);
    std::size_t covered = 0;
    for (const std::string& name : f.names()) {
      const tl::stored_tensor& t = f.at(name);
      covered += t.bytes.size();
      ASSERT_EQ(t.elements() * tl::dtype_size(t.type), t.bytes.size());
      if (tl::detail::widens_exactly_into<float>(t.type)) (void)f.values<float>(name, t.shape, tl::non_finite_values::allow);
      if (tl::detail::widens_exactly_into<double>(t.type)) (void)f.values<double>(name, t.shape, tl::non_finite_values::allow);
    }
    std::uint64_t length;
    std::memcpy(&length, tl_test::read_bytes(file).data(), 8);
    ASSERT_EQ(covered, tl_test::read_bytes(file).size() - 8 - length);  // the tensors tile the data exactly
    if (f.contains("w")) (void)f.values<float>("w", {2, 3});  // may throw: dtype, shape, NaN
  };
  const auto run = [&](const std::string& bytes, const std::string& what) { feed(file, bytes, what, load, counts); };
  const auto with_header = [&](const std::string& h, const std::string& d) { return tl_test::le64(h.size()) + h + d; };

  byte_mutations(valid, rng, "{}[]\":,0123456789 \\uFeIBUC", 15000, run);
  for (const std::uint64_t length : {std::uint64_t{0}, std::uint64_t{1}, header_length - 1, header_length + 1,
                                     header_length + 8, std::uint64_t(valid.size()), std::uint64_t{100'000'001},
                                     std::uint64_t{1} << 32, std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    run(tl_test::le64(length) + valid.substr(8), "header length " + std::to_string(length));
  }
  // Structural edits of the JSON: members duplicated, removed, renamed, shapes multiplied.
  const std::string members[] = {R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})",
                                 R"("b":{"dtype":"F64","shape":[3],"data_offsets":[24,48]})",
                                 R"("s":{"dtype":"F64","shape":[],"data_offsets":[48,56]})",
                                 R"("e":{"dtype":"F64","shape":[1,0],"data_offsets":[56,56]})",
                                 R"("__metadata__":{"k":"v\u00e9"})"};
  for (std::size_t i = 0; i < 5; ++i) {
    for (std::size_t j = 0; j < 5; ++j) {
      std::string removed = "{", duplicated = "{";
      for (std::size_t k = 0; k < 5; ++k) {
        if (k != i) removed += (removed.size() > 1 ? "," : "") + members[k];
        duplicated += (k ? "," : "") + members[k] + (k == i ? "," + members[j] : "");
      }
      run(with_header(removed + "}", data), "member " + std::to_string(i) + " removed");
      run(with_header(duplicated + "}", data), "member " + std::to_string(j) + " duplicated after " + std::to_string(i));
    }
  }
  for (const std::string factor : {"0", "2", "1000", "4294967296", "4611686018427387904", "18446744073709551615"}) {
    run(with_header(replace_all(header, "[2,3]", "[2," + factor + "]"), data), "shape times " + factor);
    run(with_header(replace_all(header, "[3]", "[" + factor + "]"), data), "shape set to " + factor);
    run(with_header(replace_all(header, "[1,0]", "[" + factor + "," + factor + "]"), data), "empty shape grown");
    run(with_header(replace_all(header, "[0,24]", "[0," + factor + "]"), data), "offset " + factor);
  }
  report("safetensors", counts);
  EXPECT_GT(counts.accepted, 0u);
}

TEST(IoFuzz, Npy) {
  tl_test::scratch_directory dir;
  std::mt19937_64 rng(fuzz_seed() + 1);
  tl::save_npy(dir / "valid.npy", tl::matrix(3, 2, std::vector<float>{1, 2, 3, 4, 5, 6}), tl::npy_layout::samples_by_features);
  const std::string valid = tl_test::read_bytes(dir / "valid.npy");
  outcomes counts;
  const auto file = dir / "m.npy";
  const auto load = [&] {
    (void)tl::load_npy<double>(file, tl::npy_layout::features_by_samples, tl::non_finite_values::allow);
    (void)tl::load_npy<float>(file, tl::npy_layout::samples_by_features);
  };
  const auto run = [&](const std::string& bytes, const std::string& what) { feed(file, bytes, what, load, counts); };
  byte_mutations(valid, rng, "{}()'\":, 0123456789<>f8TrueFals\n", 15000, run);
  for (const unsigned length : {0u, 1u, 117u, 119u, 255u, 65535u}) {
    std::string m = valid;
    m[8] = char(length & 0xff), m[9] = char(length >> 8);
    run(m, "header length " + std::to_string(length));
  }
  const std::string payload = valid.substr(128);
  const auto header_with = [&](const std::string& dict, int major) {
    std::string h = dict + std::string(8, ' ') + "\n";
    std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += char((h.size() >> (8 * i)) & 0xff);
    return out + h;
  };
  const std::string keys[] = {"'descr': '<f4'", "'fortran_order': False", "'shape': (2, 3)"};
  for (int major = 1; major <= 4; ++major) {
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 3; ++j) {
        std::string removed = "{", duplicated = "{";
        for (std::size_t k = 0; k < 3; ++k) {
          if (k != i) removed += keys[k] + ", ";
          duplicated += keys[k] + ", " + (k == i ? keys[j] + ", " : "");
        }
        run(header_with(removed + "}", major) + payload, "key removed");
        run(header_with(duplicated + "}", major) + payload, "key duplicated");
      }
    }
    for (const std::string shape : {"(2, 3)", "(6,)", "(3, 2)", "(0, 3)", "(2000000000, 3000000000)",
                                    "(18446744073709551615, 2)", "(4294967296, 4294967296)", "(1, 2, 3)", "()"}) {
      run(header_with("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", major) + payload, shape);
    }
  }
  report("npy", counts);
  EXPECT_GT(counts.accepted, 0u);
}

TEST(IoFuzz, Csv) {
  tl_test::scratch_directory dir;
  std::mt19937_64 rng(fuzz_seed() + 2);
  const std::string valid = "id,\"x,1\",x2,y\r\n1,0.5,-1e-3,2\r\n2,+3,4.25,\"5\"\r\n3,1e10,0,-0\r\n";
  outcomes counts;
  const auto file = dir / "d.csv";
  const auto load = [&] {
    (void)tl::load_csv<double>(file, {.non_finite = tl::non_finite_values::allow});
    (void)tl::load_csv<float>(file);
    (void)tl::load_csv_xy<float>(file, {"x,1", "x2"}, {"y"});
  };
  const auto run = [&](const std::string& bytes, const std::string& what) { feed(file, bytes, what, load, counts); };
  byte_mutations(valid, rng, ",\"\r\n.e-+0123456789naif x", 15000, run);
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < valid.size();) {
    const std::size_t end = valid.find('\n', at) + 1;
    lines.push_back(valid.substr(at, end - at));
    at = end;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (std::size_t j = 0; j < lines.size(); ++j) {
      std::string removed, duplicated;
      for (std::size_t k = 0; k < lines.size(); ++k) {
        if (k != i) removed += lines[k];
        duplicated += lines[k] + (k == i ? lines[j] : "");
      }
      run(removed, "line removed");
      run(duplicated, "line duplicated");
      run(replace_all(valid, lines[i].substr(0, 2), lines[j].substr(0, 3)), "fields spliced");
    }
  }
  report("csv", counts);
  EXPECT_GT(counts.accepted, 0u);
}

}  // namespace
