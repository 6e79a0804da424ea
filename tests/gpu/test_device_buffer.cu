// tl::device_buffer, the device memory every GPU state, batch and workspace holds:
// its values survive each operation as documented, copies are independent, and a
// failed allocation throws tl::cuda_error and leaves the buffer as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tapeless/cuda/device_buffer.hpp"

namespace {

std::vector<float> iota(std::size_t n, float from) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from + 0.5f * float(i);
  return v;
}

TEST(DeviceBuffer, ConstructorsHoldWhatTheyWereGiven) {
  EXPECT_TRUE(tl::device_buffer<float>().empty());
  EXPECT_EQ(tl::device_buffer<double>(5).to_host(), std::vector<double>(5, 0.0));  // zeros
  EXPECT_EQ(tl::device_buffer<long>(3, -1L).to_host(), std::vector<long>(3, -1L));
  EXPECT_EQ(tl::device_buffer<std::uint64_t>(2, ~0ull).to_host(), std::vector<std::uint64_t>(2, ~0ull));
  const std::vector<float> host = iota(1000, -3.0f);
  const tl::device_buffer<float> from_host(host);
  EXPECT_EQ(from_host.size(), host.size());
  EXPECT_EQ(from_host.to_host(), host);
  // From device memory: values [10, 20) of another buffer.
  const tl::device_buffer<float> from_device(from_host.data() + 10, 10);
  EXPECT_EQ(from_device.to_host(), std::vector<float>(host.begin() + 10, host.begin() + 20));
}

TEST(DeviceBuffer, CopiesAreIndependentAndMovesEmptyTheSource) {
  tl::device_buffer<float> a(iota(64, 1.0f));
  tl::device_buffer<float> b = a;
  b.set(3, 99.0f);
  EXPECT_EQ(a.get(3), 2.5f);
  EXPECT_EQ(b.get(3), 99.0f);
  tl::device_buffer<float> c(iota(7, 0.0f));
  c = a;  // a copy over a buffer of another size
  EXPECT_EQ(c.to_host(), a.to_host());
  EXPECT_NE(c.data(), a.data());
  const float* memory = a.data();
  tl::device_buffer<float> d = std::move(a);
  EXPECT_EQ(d.data(), memory);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  c = std::move(d);
  EXPECT_EQ(c.data(), memory);
}

TEST(DeviceBuffer, ResizeKeepsTheValuesAndZerosNewOnes) {
  const std::vector<float> host = iota(100, 2.0f);
  tl::device_buffer<float> v(host);
  v.resize(150);
  std::vector<float> expected = host;
  expected.resize(150, 0.0f);
  EXPECT_EQ(v.to_host(), expected);
  v.resize(40);
  EXPECT_EQ(v.to_host(), std::vector<float>(host.begin(), host.begin() + 40));
  v.resize(0);
  EXPECT_TRUE(v.empty());
  v.resize(3);
  EXPECT_EQ(v.to_host(), std::vector<float>(3, 0.0f));
}

TEST(DeviceBuffer, AssignFillAndPartialCopies) {
  tl::device_buffer<double> v(4);
  const std::vector<double> longer = {1.5, -2.5, 3.5, 4.5, 5.5, 6.5};
  v.assign(longer.data(), longer.size());
  EXPECT_EQ(v.to_host(), longer);
  const std::vector<double> same_size = {9, 8, 7, 6, 5, 4};
  const double* memory = v.data();
  v.assign(same_size.data(), same_size.size());
  EXPECT_EQ(v.data(), memory);  // same size: written in place
  EXPECT_EQ(v.to_host(), same_size);
  std::vector<double> middle(3);
  v.copy_to(middle.data(), 2, 3);
  EXPECT_EQ(middle, (std::vector<double>{7, 6, 5}));
  v.fill(0.25);
  EXPECT_EQ(v.to_host(), std::vector<double>(6, 0.25));
  tl::device_buffer<float> large(1 << 21);  // past the fill kernel's grid: the grid-stride loop
  large.fill(-1.0f);
  EXPECT_EQ(large.to_host(), std::vector<float>(1 << 21, -1.0f));
}

TEST(DeviceBuffer, OutOfRangeReadsAndWritesThrowAndNameTheRange) {
  tl::device_buffer<float> v(iota(8, 0.0f));
  std::vector<float> out(8);
  try {
    v.copy_to(out.data(), 5, 4);
    ADD_FAILURE() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("[5, 9) of 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)v.get(8), std::out_of_range);
  EXPECT_THROW(v.set(8, 1.0f), std::out_of_range);
  EXPECT_EQ(v.to_host(), iota(8, 0.0f));
}

TEST(DeviceBuffer, FailedAllocationThrowsAndLeavesTheBufferAsItWas) {
  const std::vector<float> host = iota(33, 1.0f);
  tl::device_buffer<float> v(host);
  const float* memory = v.data();
  try {
    v.resize(std::size_t(1) << 50);  // 4 PiB
    ADD_FAILURE() << "expected tl::cuda_error";
  } catch (const tl::cuda_error& e) {
    EXPECT_EQ(e.code, cudaErrorMemoryAllocation);
    EXPECT_NE(std::string(e.what()).find("cudaMalloc of 4503599627370496 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(v.data(), memory);
  EXPECT_EQ(v.to_host(), host);
  EXPECT_THROW(tl::device_buffer<double>(std::size_t(-1) / 4), tl::cuda_error);  // more bytes than a size_t
  // Not sticky: the next call succeeds.
  tl::device_buffer<float> after(host);
  EXPECT_EQ(after.to_host(), host);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
