// tl::device_buffer, the device memory every GPU state, batch and workspace holds:
// its values survive each operation as documented, copies are independent, and a
// failed allocation throws tl::cuda_error and leaves the buffer as it was.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

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
  EXPECT_EQ(d.capacity(), 64u);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.capacity(), 0u);
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

// A mini-batch loop's last, smaller batch shrinks its buffers and the next epoch grows
// them back: within the capacity that allocates nothing, keeps the address (which a
// captured graph holds) and zeros what grows back, as thrust's device_vector did.
TEST(DeviceBuffer, ShrinkingAndGrowingBackKeepTheMemory) {
  tl::device_buffer<float> v(iota(256, 1.0f));
  const float* memory = v.data();
  v.resize(100);
  EXPECT_EQ(v.size(), 100u);
  EXPECT_EQ(v.capacity(), 256u);
  const tl::device_buffer<float> copied(v);  // a copy holds the values, not the spare room
  EXPECT_EQ(copied.size(), 100u);
  EXPECT_EQ(copied.capacity(), 100u);
  v.resize(256);
  EXPECT_EQ(v.data(), memory);
  std::vector<float> expected = iota(100, 1.0f);
  expected.resize(256, 0.0f);
  EXPECT_EQ(v.to_host(), expected);
  const std::vector<float> shorter = iota(50, -9.0f);
  v.assign(shorter.data(), shorter.size());  // in place
  EXPECT_EQ(v.data(), memory);
  EXPECT_EQ(v.to_host(), shorter);
  tl::device_buffer<float> same(iota(256, 7.0f));
  v = same;  // a copy that fits: in place too
  EXPECT_EQ(v.data(), memory);
  EXPECT_EQ(v.to_host(), same.to_host());
  v = v;  // (self-assignment changes nothing)
  EXPECT_EQ(v.to_host(), same.to_host());
  v.resize(257);  // past the capacity: new memory, the values kept
  EXPECT_EQ(v.size(), 257u);
  EXPECT_EQ(v.capacity(), 257u);
  std::vector<float> grown = same.to_host();
  grown.push_back(0.0f);
  EXPECT_EQ(v.to_host(), grown);
}

// Growing, copying and assigning many times gives every byte back: the device's free
// memory returns to where it was (a first version's resize leaked its whole new size
// on every call).
TEST(DeviceBuffer, NothingLeaks) {
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  std::size_t free_before = 0, free_after = 0, total = 0;
  TL_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  {
    constexpr std::size_t step = std::size_t(8) << 20;  // 32 MiB of floats
    tl::device_buffer<float> v;
    for (std::size_t k = 1; k <= 8; ++k) {
      v.resize(k * step);
      tl::device_buffer<float> copy = v;
      v = tl::device_buffer<float>(k * step + 1);
      copy.assign(v.data(), v.size());
    }
  }
  TL_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT_LE(free_before, free_after + (std::size_t(8) << 20)) << "free before " << free_before << ", after " << free_after;
}

// The element types the library keeps on the device zero and fill alike.
TEST(DeviceBuffer, EveryElementTypeZerosAndFills) {
  tl::device_buffer<__nv_bfloat16> low(5);
  for (const __nv_bfloat16 v : low.to_host()) EXPECT_EQ(__bfloat162float(v), 0.0f);
  low.fill(__float2bfloat16(1.5f));
  for (const __nv_bfloat16 v : low.to_host()) EXPECT_EQ(__bfloat162float(v), 1.5f);
  tl::device_buffer<unsigned char> bytes(1000);
  EXPECT_EQ(bytes.to_host(), std::vector<unsigned char>(1000, 0));
  bytes.fill(0xab);
  EXPECT_EQ(bytes.to_host(), std::vector<unsigned char>(1000, 0xab));
  tl::device_buffer<std::size_t> indices(std::vector<std::size_t>{3, 1, 4});
  indices.resize(5);
  EXPECT_EQ(indices.to_host(), (std::vector<std::size_t>{3, 1, 4, 0, 0}));
}

__global__ void copy_kernel(const float* in, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

// A write returns only when it is done: a kernel on a non-blocking stream (the
// library's own streams are) launched right after it reads the written values.
TEST(DeviceBuffer, WritesAreDoneBeforeTheyReturn) {
  cudaStream_t stream;
  TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr std::size_t n = std::size_t(1) << 24;
  tl::device_buffer<float> in(n), out(n);
  in.fill(2.5f);
  copy_kernel<<<1024, 256, 0, stream>>>(in.data(), out.data(), n);
  TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(out.to_host(), std::vector<float>(n, 2.5f));
  const std::vector<float> host = iota(n, 0.0f);
  in.assign(host.data(), n);
  copy_kernel<<<1024, 256, 0, stream>>>(in.data(), out.data(), n);
  TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(out.to_host(), host);
  TL_CUDA_CHECK(cudaStreamDestroy(stream));
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
