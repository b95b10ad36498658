// Per-rank tables a step uses between its votes (message sizes and offsets,
// the messages to merge, split's piece and range tables, 1-bit's scales),
// owned by the compressor and reserved before the agreement (local work), so
// that nothing allocates after it: assign() and resize() within capacity
// never do (algo/agree.h's rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <vector>

#include "base/checked_size.h"
#include "dct/dct.h"
#include "kernels/message_args.h"

namespace dct {

struct RankArrays {
  std::vector<size_t> sizes, offsets, recvBytes, recvOffsets, formBytes, formOffsets;  // P each
  std::vector<uint64_t> theirs, forms;                         // 2P each
  std::vector<uint64_t> table;                                 // 2P x P: split's piece sizes gathered whole
  std::vector<PackedMessage> messages;                         // P
  std::vector<unsigned char> bytes;                            // 8P

  // Room for `ranks`; `table` too where the step gathers the whole table.
  dctResult_t reserve(int ranks, bool wholeTable = false) noexcept {
    const size_t P = static_cast<size_t>(ranks);
    try {
      for (auto* v : {&sizes, &offsets, &recvBytes, &recvOffsets, &formBytes, &formOffsets}) v->reserve(P);
      theirs.reserve(2 * P);
      forms.reserve(2 * P);
      messages.reserve(P);
      bytes.reserve(8 * P);
      size_t cells = 0;
      if (wholeTable && !checkedMul(2 * P, P, cells)) return dctOutOfMemory;
      if (wholeTable) table.reserve(cells);
    } catch (const std::bad_alloc&) {
      return dctOutOfMemory;
    } catch (const std::length_error&) {
      return dctOutOfMemory;
    }
    return dctSuccess;
  }
};

}  // namespace dct
