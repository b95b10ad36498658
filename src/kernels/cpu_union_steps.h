// The union of a few packed messages' entries stepped together, for
// mergePackedCoo's CPU twin (cpu_merge_coo.cc): each step takes the lowest
// index from every cursor that has it, by arithmetic, not by a branch
// (which of independent selections comes next is a coin toss: a branchy
// two-way walk and the summing windows paid 10-14 ns an entry for two
// messages, this 5-6). A step's work grows with the messages: at four it
// is no faster than the windows, so more than kMaxStepped go there.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu_context.h"
#include "kernels/packed_cursor.h"

namespace dct {

constexpr int kMaxStepped = 3;

// A value as addInto adds it: -0 + v is v, in T.
template <typename T, typename V>
inline T widened(V v) {
  T w = T(-0.0);
  addInto(w, v);
  return w;
}

// v where keep, else -0 (which adds nothing), by a mask: the compiler turns
// a ?: on floats back into a branch.
template <typename T>
inline T orNegativeZero(T v, bool keep) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U mask = U(0) - U(keep);
  return std::bit_cast<T>((std::bit_cast<U>(v) & mask) | (std::bit_cast<U>(T(-0.0)) & ~mask));
}

// Where a chunk's union goes (the steps here and cpu_merge_coo.cc's
// windows): put(index, sum) scales the sum and writes the entry whether
// kept or not (the slot is below the next chunk's start: at most one entry
// out per entry in), keeping it by the count. Passed by
// value into the walks so that its fields live in registers: through
// references, every store to the output could alias them.
template <typename T, typename I>
struct CooOut {
  I* idx;
  T* val;
  size_t at;
  uint64_t indexBase;
  T factor, tau;

  void put(uint64_t i, T sum) {
    sum *= factor;  // exact where factor is 1
    idx[at] = static_cast<I>(indexBase + i);
    val[at] = sum;
    at += !(std::fabs(sum) < tau);  // NaN stays: !(NaN < tau)
  }
};

// Up to kMaxStepped messages' entries below `end` in index order, one
// entry for each index of their union. A step moves each cursor at most
// one entry, so as many steps as the fewest decoded entries stay inside
// every cursor's run (topUp keeps that a group or more). The sum is +0 +
// each message's value in rank order, the -0 a missing one adds changing
// nothing: the bits mergePacked's additions make. When a cursor reaches
// `end` the rest go on without it, in the same order. Returns the
// output's count.
template <typename T, typename V, typename I>
size_t unionOfAny(PackedCursor<V, I>** c, int count, uint64_t end, CooOut<T, I> out);

template <int P, typename T, typename V, typename I>
size_t unionOf(PackedCursor<V, I>** c, uint64_t end, CooOut<T, I> out) {
  if constexpr (P == 1) {
    c[0]->visitBelow(end, [&](uint64_t i, V v) { out.put(i, T(0) + widened<T>(v)); });
    return out.at;
  } else {
    for (;;) {
      size_t steps = SIZE_MAX;
      const I* __restrict idx[P];
      const V* __restrict val[P];
      for (int r = 0; r < P; r++) {
        c[r]->topUp();
        steps = std::min(steps, c[r]->runBelow(end));
        idx[r] = c[r]->runIndices();
        val[r] = c[r]->runValues();
      }
      if (steps == 0) break;
      size_t x[P] = {};
      for (size_t s = 0; s < steps; s++) {
        I head[P];
        for (int r = 0; r < P; r++) head[r] = idx[r][x[r]];
        I lowest = head[0];
        for (int r = 1; r < P; r++) lowest = std::min(lowest, head[r]);
        T sum = T(0);
        for (int r = 0; r < P; r++) {
          const bool take = head[r] == lowest;
          sum = sum + orNegativeZero(widened<T>(val[r][x[r]]), take);
          x[r] += take;
        }
        out.put(lowest, sum);
      }
      for (int r = 0; r < P; r++) c[r]->skip(x[r]);
    }
    // A cursor at `end`: the others, in order.
    PackedCursor<V, I>* rest[P];
    int live = 0;
    for (int r = 0; r < P; r++)
      if (c[r]->runBelow(end) != 0) rest[live++] = c[r];
    return unionOfAny(rest, live, end, out);
  }
}

template <typename T, typename V, typename I>
size_t unionOfAny(PackedCursor<V, I>** c, int count, uint64_t end, CooOut<T, I> out) {
  switch (count) {
    case 1: return unionOf<1>(c, end, out);
    case 2: return unionOf<2>(c, end, out);
    case 3: return unionOf<3>(c, end, out);
    default: return out.at;  // none left
  }
  static_assert(kMaxStepped == 3, "a case for each count stepped");
}

}  // namespace dct
