// A cursor over one packed message (index_packing.h): its entries in
// ascending index order, a decoded group of kPackGroup indices at a time
// (two where topped up). The CPU merges (cpu_merge.cc, cpu_merge_coo.cc)
// walk one per message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_context.h"
#include "kernels/cpu_fixed_width.h"
#include "kernels/index_packing.h"
#include "kernels/message_args.h"

namespace dct {

template <typename V, typename I>
class PackedCursor {
 public:
  PackedCursor(const PackedMessage& m, uint64_t n)
      : layout_(m.nnz, sizeof(I)), s_(const_cast<void*>(m.indices), layout_),
        values_(static_cast<const V*>(m.values)), nnz_(m.nnz), n_(n) {}

  // Positions the cursor on the first entry at or after `begin`.
  void seek(uint64_t begin) {
    if (nnz_ == 0) return;
    const I* bases = s_.bases;
    const I* after = std::upper_bound(bases, bases + layout_.groups, static_cast<I>(begin));
    group_ = after == bases ? 0 : static_cast<size_t>(after - bases) - 1;
    decode();
    while (!done() && index_[pos_] < begin) advance();
  }

  bool done() const { return group_ >= layout_.groups; }
  // The entry under the cursor (not done()): its index, and its place in
  // the message.
  uint64_t index() const { return index_[pos_]; }
  size_t position() const { return done() ? nnz_ : base_ + pos_; }

  // Calls visit(index, value) for every entry below `end`, in order, and
  // leaves the cursor on the first entry at or past it: a group's run at a
  // time, bounded once per group instead of tested entry by entry.
  template <typename Visit>
  void visitBelow(uint64_t end, Visit&& visit) {
    while (!done()) {
      const size_t left = count_ - pos_, run = runBelow(end);
      const I* indices = runIndices();
      const V* values = runValues();
      for (size_t j = 0; j < run; j++) visit(static_cast<uint64_t>(indices[j]), values[j]);
      skip(run);
      if (run < left) return;  // at `end`, inside this group
    }
  }

  // Decodes the next group behind the entries left when fewer than a
  // group's are: a walk that steps several cursors together by the fewest
  // any has decoded then takes a group's steps at a time, not fewer and
  // fewer as one nears its group's end.
  void topUp() {
    const size_t left = count_ - pos_;
    if (done() || left >= packing::kPackGroup || group_ + 1 >= layout_.groups) return;
    std::copy(index_ + pos_, index_ + count_, index_);
    base_ += pos_;
    group_++;
    count_ = left + packing::groupSize(nnz_, group_);
    pos_ = 0;
    packing::unpackGroup<I>(s_, group_, nnz_, n_, index_ + left);
  }

  // The decoded entries from the cursor on that are below `end`: how many
  // (0 when done or at `end`), their indices and values. skip(k) steps
  // past k of them (at most that many), decoding the next group when the
  // decoded ones are used up.
  size_t runBelow(uint64_t end) const {
    if (done()) return 0;
    if (index_[count_ - 1] < end) return count_ - pos_;
    return static_cast<size_t>(std::lower_bound(index_ + pos_, index_ + count_, end) - (index_ + pos_));
  }
  const I* runIndices() const { return index_ + pos_; }
  const V* runValues() const { return values_ + base_ + pos_; }
  void skip(size_t k) {
    pos_ += k;
    if (pos_ < count_) return;
    group_++;
    decode();
  }

  // Adds every entry below `end` into block (block[0] holds index `base`).
  template <typename T>
  void addBelow(uint64_t end, T* block, uint64_t base) {
    visitBelow(end, [&](uint64_t i, V v) { addInto(block[i - base], v); });
  }

 private:
  void advance() { skip(1); }

  void decode() {
    if (done()) return;
    count_ = packing::groupSize(nnz_, group_);
    base_ = group_ * packing::kPackGroup;
    pos_ = 0;
    // Checked before any merge (cpuValidPackedList): decodes whole.
    packing::unpackGroup<I>(s_, group_, nnz_, n_, index_);
  }

  packing::Layout layout_;
  packing::Sections<I> s_;
  const V* values_;
  size_t nnz_;
  uint64_t n_;
  // index_[0, count_) decoded, index_[0] the message's entry base_, the
  // last of them in group_.
  size_t group_ = 0, pos_ = 0, count_ = 0, base_ = 0;
  I index_[2 * packing::kPackGroup];
};

// Room for any cursor (the widest index; V is only a pointer's type).
constexpr size_t kCursorBytes = sizeof(PackedCursor<double, uint64_t>);

}  // namespace dct
