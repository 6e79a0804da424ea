// Arrays for one group of samples (the CPU's K-sample lane groups: inputs, outputs,
// saved values, deltas): on the stack while small, else from this thread's scratch
// stack on the heap. A wide model's group overflowed a thread's stack: dense<200000, 1>
// takes 12.8 MB of inputs for 16 float samples, and a thread has 8 MB by default.
// The scratch stack hands out memory and takes it back in last-in-first-out order, as
// the call stack does (a group_array lives in one scope), so a pass nested in another
// on the same thread (tl::apply inside a loss) takes memory above its caller's; its
// blocks are kept for the next group and the next step, so a step allocates nothing
// after its first. Device code (K = 1: a thread a sample) keeps every array on its own
// stack, whatever its size, as it always did.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "tapeless/core/config.hpp"

namespace tl::detail {

// Larger arrays go to the scratch stack. The bound is per array: a chain's backward
// keeps one delta array a layer in one frame (it is inlined), so a chain of some 120
// layers 1024 wide forced onto the lane pass (whose choice takes the blocked pass for
// such chains) could still reach a thread's 8 MB.
inline constexpr std::size_t stack_array_bytes = std::size_t(64) << 10;

class scratch_stack {
 public:
  static scratch_stack& of_this_thread() {
    thread_local scratch_stack stack;
    return stack;
  }

  struct mark {
    std::size_t block, used;
  };
  // `bytes` (a multiple of 64 is taken) 64-byte aligned; `where` is what to give back.
  void* take(std::size_t bytes, mark& where) {
    bytes = (bytes + 63) / 64 * 64;
    if (blocks_.empty()) grow(0, bytes);
    if (blocks_[current_].capacity - blocks_[current_].used < bytes) {
      if (blocks_[current_].used == 0) {
        // An empty block too small: replaced by a larger one in place. (Moving past it
        // would leave it unused for good, give_back returning to the block before:
        // after an apply sized the first block for a group's inputs, a step's lane sums
        // skipped it and a wide model held 1.5x its memory.)
        grow(current_, bytes);
      } else {
        // Every block after the current one is empty (last in, first out): take the
        // next, made large enough.
        if (current_ + 1 == blocks_.size() || blocks_[current_ + 1].capacity < bytes) grow(current_ + 1, bytes);
        ++current_;
      }
    }
    block& b = blocks_[current_];
    where = {current_, b.used};
    void* p = b.data.get() + b.used;
    b.used += bytes;
    return p;
  }
  void give_back(const mark& where) {
    blocks_[where.block].used = where.used;
    current_ = where.block;
  }
  std::size_t block_count() const { return blocks_.size(); }  // (tests)

 private:
  struct aligned_delete {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct block {
    std::unique_ptr<unsigned char[], aligned_delete> data;
    std::size_t capacity = 0, used = 0;
  };
  // Block `at` (empty or absent) becomes a new one of at least `bytes`.
  void grow(std::size_t at, std::size_t bytes) {
    const std::size_t capacity = std::max(bytes, std::size_t(1) << 20);
    block b{std::unique_ptr<unsigned char[], aligned_delete>(
                static_cast<unsigned char*>(::operator new[](capacity, std::align_val_t{64}))),
            capacity, 0};
    if (at == blocks_.size()) blocks_.push_back(std::move(b));
    else blocks_[at] = std::move(b);
  }
  std::vector<block> blocks_;
  std::size_t current_ = 0;
};

// N values of T for a group of K samples: an array on the stack when K = 1 (device
// code, single samples) or when it takes at most stack_array_bytes, else from the
// thread's scratch stack for the array's lifetime. Uninitialized, as an array is.
template <class T, std::size_t N, std::size_t K, bool OnStack = (K == 1 || N * sizeof(T) <= stack_array_bytes)>
struct group_array {
  alignas(64) T values[N];
  TL_HD T* data() { return values; }
  TL_HD const T* data() const { return values; }
};
template <class T, std::size_t N, std::size_t K>
struct group_array<T, N, K, false> {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T> &&
                    alignof(T) <= 64,
                "tapeless: group_array holds plain values (the scratch stack neither constructs nor destroys)");
  // (Host code only: the branch keeps nvcc from asking for a device version.) The
  // placement new begins the array's lifetime in reused memory; for plain values it
  // writes nothing.
  TL_HD group_array() {
#if !TL_ON_DEVICE
    values = std::launder(::new (scratch_stack::of_this_thread().take(N * sizeof(T), where)) T[N]);
#endif
  }
  TL_HD ~group_array() {
#if !TL_ON_DEVICE
    scratch_stack::of_this_thread().give_back(where);
#endif
  }
  group_array(const group_array&) = delete;
  group_array& operator=(const group_array&) = delete;
  TL_HD T* data() { return values; }
  TL_HD const T* data() const { return values; }

 private:
  T* values = nullptr;
  scratch_stack::mark where{};
};

}  // namespace tl::detail
